"""The planner is a pure function over plain data: importing it loads no Django."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _modules_loaded_by(code: str) -> list[str]:
    # A fresh interpreter: in this one pytest-django (or another test) may have loaded Django.
    out = subprocess.run(
        [sys.executable, "-c", code + "\nimport sys\nprint('\\n'.join(sorted(sys.modules)))"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    return out.stdout.split()


def test_importing_the_planner_loads_no_django_module() -> None:
    loaded = _modules_loaded_by("import jobs.scheduling.planner")
    assert "jobs.scheduling.planner" in loaded
    assert [m for m in loaded if m == "django" or m.startswith("django.")] == []


def test_planning_loads_no_django_module() -> None:
    code = (
        "from datetime import datetime\n"
        "from jobs.scheduling.planner import HostState, JobState, plan\n"
        "h = HostState(id=1, hostname='h1', labels=frozenset({'board:x'}))\n"
        "j = JobState(id=1, name='t', suite_id=None, priority=40,"
        " submitted_at=datetime(2024, 1, 1), labels=frozenset({'board:x'}))\n"
        "assert plan(hosts=[h], jobs=[j], suites=[]).assignments\n"
    )
    loaded = _modules_loaded_by(code)
    assert [m for m in loaded if m == "django" or m.startswith("django.")] == []
