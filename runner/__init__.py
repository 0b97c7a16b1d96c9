"""The reference runner: runs a worker's leased jobs, speaking only the REST API.

It runs on lab servers with no database, as `python -m runner` or through
`manage.py run_worker`, so it imports only the standard library and `requests` — never
Django or the scheduler's apps (`tests/runner/test_imports.py` holds it to that).
"""

from __future__ import annotations

from runner.cli import add_arguments, main, run_from_options
from runner.client import Api, ApiError, ApiUnavailable
from runner.worker import JobRun, Runner, RunnerConfig

__all__ = [
    "Api",
    "ApiError",
    "ApiUnavailable",
    "JobRun",
    "Runner",
    "RunnerConfig",
    "add_arguments",
    "main",
    "run_from_options",
]
