"""Fixtures of the command-line client's tests: a live server, a lab, and `schedsite` to run."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.conf import settings as django_settings

from tests import factories as f
from tests.e2e.conftest import _live_server_closes_its_connections  # noqa: F401
from tests.e2e.support import Api, token_for

# The client as a user runs it, in a process of its own: `python -m` runs the same main() as
# the `schedsite` console script (tests/cli/test_packaging.py checks the script names it).
SCHEDSITE = [sys.executable, "-m", "runner.schedsite_cli"]


class Cli:
    """`schedsite` against the live server, with a config file of the test's own."""

    def __init__(self, url: str, home: Path) -> None:
        self.url = url
        self.home = home
        self.config = home / "config.json"
        self.started: list[subprocess.Popen] = []

    def env(self, token: str | None, **extra: str) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("SCHEDSITE_")}
        env.update(HOME=str(self.home), SCHEDSITE_CONFIG=str(self.config))
        env["SCHEDSITE_API"] = f"{self.url}/api/"
        if token:
            env["SCHEDSITE_TOKEN"] = token
        env.update(extra)
        return env

    def __call__(
        self, *args: str, token: str | None = None, stdin: str | None = None, **env: str
    ) -> subprocess.CompletedProcess:
        return subprocess.run(
            [*SCHEDSITE, *args],
            env=self.env(token, **env),
            input=stdin,
            capture_output=True,
            text=True,
            timeout=60,
            cwd=django_settings.BASE_DIR,
            check=False,
        )

    def start(self, *args: str, token: str) -> subprocess.Popen:
        """The client running in the background (a --wait), stopped at teardown by its id.

        It starts with Ctrl-C's default meaning, as from a terminal: an ignored SIGINT is kept
        across exec, and a test run started in the background of a script (`make test &`, as
        a CI job may be) has it ignored from the start — then the client never gets
        KeyboardInterrupt and a Ctrl-C test waits for nothing. A handler set in this process
        is not kept across exec, so one is set for the moment of the start."""
        previous = signal.getsignal(signal.SIGINT)
        if previous is signal.SIG_IGN:
            signal.signal(signal.SIGINT, signal.default_int_handler)
        try:
            process = subprocess.Popen(
                [*SCHEDSITE, *args],
                env=self.env(token),
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                cwd=django_settings.BASE_DIR,
            )
        finally:
            if previous is signal.SIG_IGN:
                signal.signal(signal.SIGINT, previous)
        self.started.append(process)
        return process

    def stop(self) -> None:
        for process in self.started:
            if process.poll() is None:
                process.kill()
                process.wait(10)


@pytest.fixture
def cli(live_server, tmp_path: Path) -> Iterator[Cli]:  # noqa: ANN001
    started = Cli(live_server.url, tmp_path)
    yield started
    started.stop()


@pytest.fixture
def lab(live_server, sam, alice) -> dict:  # noqa: ANN001
    """Worker w1 (online) with a.lab and b.lab (board:x) and c.lab (board:y); the tokens."""
    w1 = f.worker("w1")
    for hostname, labels in [
        ("a.lab", ["board:x"]),
        ("b.lab", ["board:x"]),
        ("c.lab", ["board:y"]),
    ]:
        f.host(hostname, labels, worker=w1)
    staff_token = token_for(sam)
    return {
        "sam": staff_token,
        "alice": token_for(alice),
        "staff": Api(f"{live_server.url}/api/", staff_token),
    }


def run_leased_jobs(staff: Api, results: dict[str, str]) -> list[int]:
    """What a runner would do, through the API: tick, then start and complete each leased job
    with the result its name is given in `results` (and its name as its output)."""
    staff.post("workers/w1/heartbeat/")  # the worker is online: its hosts get leases
    staff.post("scheduler/tick/")
    done = []
    for job in staff.get("jobs/?status=leased")["results"]:
        staff.post(f"jobs/{job['id']}/start/", {})
        message = f"output of {job['name']}\nlast line of {job['name']}"
        body = {"result": results[job["name"]], "message": message, "host_ok": True}
        staff.post(f"jobs/{job['id']}/complete/", body)
        done.append(job["id"])
    return done
