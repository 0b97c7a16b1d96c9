"""schedsite is the kernel the apps build on: it imports no app (their URLs are wired in web/).

Read from the source with `ast`, so an import hidden inside a function counts too.
"""

from __future__ import annotations

import ast
from pathlib import Path

SCHEDSITE = Path(__file__).resolve().parent.parent / "schedsite"
APPS = ("hosts", "jobs", "notifications", "web")

# Settings name the apps by string only; the URL configurations that name their views are in
# web/, the floor above every app.


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


def test_the_kernel_imports_no_app():
    offenders = {
        str(path.relative_to(SCHEDSITE)): imports
        for path in sorted(SCHEDSITE.rglob("*.py"))
        if (imports := app_imports(path))
    }
    assert offenders == {}
