"""The runner runs on lab servers with no database: it imports only the standard library and
`requests`, never Django or the scheduler's apps, and starts as `python -m runner`."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import runner

RUNNER_DIR = Path(runner.__file__).parent


def test_the_runner_loads_nothing_beyond_the_standard_library_and_requests():
    # A fresh interpreter: what importing the runner adds on top of `requests` itself.
    code = (
        "import json, sys, requests\n"
        "before = set(sys.modules)\n"
        "import runner, runner.cli, runner.client, runner.worker, runner.schedsite_cli\n"
        "print(json.dumps(sorted(set(sys.modules) - before)))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    added = {name.split(".")[0] for name in json.loads(done.stdout)}
    assert added - set(sys.stdlib_module_names) == {"runner"}


def test_the_runner_imports_at_module_level_from_the_standard_library_and_requests_only():
    for path in sorted(RUNNER_DIR.glob("*.py")):
        tree = ast.parse(path.read_text(), filename=str(path))
        top_level = set(tree.body)
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                roots = {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom):
                roots = {(node.module or "").split(".")[0]}
            else:
                continue
            where = f"{path.name}:{node.lineno}"
            assert node in top_level, f"{where}: an import inside a function"
            allowed = set(sys.stdlib_module_names) | {"__future__", "requests", "runner"}
            assert roots <= allowed, f"{where}: imports {sorted(roots - allowed)}"


def test_python_dash_m_runner_starts_the_runner():
    done = subprocess.run(
        [sys.executable, "-m", "runner", "--help"], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("usage: python -m runner")
    assert "--worker WORKER" in done.stdout and "--host-broken-exit-code" in done.stdout
    assert "--verify-cmd CMD" in done.stdout and "--repair-cmd CMD" in done.stdout
