"""schedsite is the kernel the apps build on: it imports neither app, save to wire their URLs.

Read from the source with `ast`, so an import hidden inside a function counts too.
"""

from __future__ import annotations

import ast
from pathlib import Path

SCHEDSITE = Path(__file__).resolve().parent.parent / "schedsite"
APPS = ("hosts", "jobs", "notifications")

# The project's wiring: the URL configurations name the apps' views (the one conventional
# upward import). Settings name the apps by string only.
WIRING = {"urls.py", "ui_urls.py", "api_urls.py"}


def app_imports(path: Path) -> list[str]:
    """The modules of the apps that a file imports, anywhere in it."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and not node.level:
            names = [node.module or ""]
        else:
            continue
        found += [name for name in names if name.split(".")[0] in APPS]
    return found


def test_the_kernel_imports_no_app_outside_the_url_wiring():
    offenders = {
        str(path.relative_to(SCHEDSITE)): imports
        for path in sorted(SCHEDSITE.rglob("*.py"))
        if path.name not in WIRING or path.parent != SCHEDSITE
        if (imports := app_imports(path))
    }
    assert offenders == {}
