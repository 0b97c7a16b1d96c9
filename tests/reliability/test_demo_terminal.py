"""`make run` keeps its terminal for the banner: the processes' chatter goes to log files."""

from __future__ import annotations

import os
import signal
import socket
from pathlib import Path

import pytest

from jobs import demo
from jobs.choices import JobStatus
from jobs.models import Job
from tests.reliability.support import live_database_url, subprocess_env, wait_until

pytestmark = [pytest.mark.postgres, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

APP = "reltest-demo-terminal"
BANNER = "schedsite is running at"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def text(path: Path) -> str:
    return path.read_text(errors="replace") if path.exists() else ""


def test_the_demo_terminal_shows_the_banner_again_and_no_request_lines(
    processes, tmp_path: Path
) -> None:
    demo.seed()
    addr = f"127.0.0.1:{free_port()}"
    logs = tmp_path / "demo-logs"
    env = subprocess_env(DATABASE_URL=live_database_url(APP), DEBUG="1")
    rundemo = processes("rundemo", "rundemo", "--addr", addr, "--log-dir", str(logs), env=env)

    def terminal() -> str:
        return (
            f"--- the terminal:\n{rundemo.output()}\n--- web.log:\n{text(logs / 'web.log')[-2000:]}"
        )

    wait_until(
        lambda: BANNER in rundemo.output(), timeout=60, what=lambda: f"the banner\n{terminal()}"
    )
    # The runners are at work: they poll for leases, and start and finish jobs.
    wait_until(
        lambda: Job.objects.filter(status__in=[JobStatus.PASSED, JobStatus.FAILED]).exists(),
        timeout=60,
        what=lambda: f"a job to finish\n{terminal()}",
    )
    os.kill(rundemo.pid, signal.SIGUSR1)  # what pressing Enter does, for a terminal-less test
    wait_until(
        lambda: rundemo.output().count(BANNER) == 2,
        timeout=10,
        what=lambda: f"the banner again\n{terminal()}",
    )

    shown = rundemo.output()
    assert f"{BANNER} http://{addr}/" in shown
    assert "admin / admin (lab staff)" in shown
    assert "alice / alice (tester)" in shown
    assert str(logs) in shown  # where the rest went
    # The runners' requests and the scheduler's ticks are all in the logs, none in the terminal.
    assert '"GET /api/workers/worker-1/leases/ HTTP/1.1" 200' in text(logs / "web.log")
    assert "HTTP/1.1" not in shown
    assert "schedsite.runner" not in shown
    assert "django-q" not in shown
    runners = "".join(text(log) for log in logs.glob("runner-worker-*.log"))
    assert "started on" in runners
