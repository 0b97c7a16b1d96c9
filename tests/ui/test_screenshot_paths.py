"""Browser tests save screenshots only into pytest's temporary folders; docs/ keeps its own.

`screenshot()` (tests/ui/browser/conftest.py) writes into the session's temporary folder, or
into SCHEDSITE_SCREENSHOTS when `make screenshots` sets it to refresh docs/screenshots/.
"""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CONFTEST = ROOT / "tests" / "ui" / "browser" / "conftest.py"


def refresh_script():  # noqa: ANN201
    spec = importlib.util.spec_from_file_location(
        "refresh", ROOT / "scripts/refresh_screenshots.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def fixed_writes(path: Path) -> list[str]:
    """`page.screenshot(path=…)` outside the helper, and any string naming a /tmp path."""
    tree = ast.parse(path.read_text(), filename=str(path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and str(node.value).startswith("/tmp"):
            found.append(f"{node.lineno}: {node.value}")
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "screenshot"
            and any(kw.arg == "path" for kw in node.keywords)
            and path != CONFTEST
        ):
            found.append(f"{node.lineno}: screenshot(path=…)")
    return found


def test_no_test_writes_to_a_fixed_path():
    found = {
        str(path.relative_to(ROOT)): lines
        for path in sorted((ROOT / "tests").rglob("*.py"))
        if path != Path(__file__) and (lines := fixed_writes(path))
    }
    assert found == {}, "save through screenshot(), or into tmp_path"


def test_every_screenshot_in_docs_is_taken_by_a_browser_test():
    shown = refresh_script().SHOWN
    assert set(shown) == {p.name for p in (ROOT / "docs" / "screenshots").glob("*.png")}
    sources = "".join(p.read_text() for p in (ROOT / "tests/ui/browser").glob("test_*.py"))
    for doc, shot in shown.items():
        # A DEBUG variant is named in an f-string: "…-debug{int(debug)}", "…-{'debug' if …}".
        if shot.endswith("-debug0"):
            named = f'"{shot.removesuffix("0")}{{'
        elif shot.endswith("-prod"):
            named = f'"{shot.removesuffix("prod")}{{'
        else:
            named = f'"{shot}"'
        assert named in sources, f"{doc}: no browser test takes {shot}"
