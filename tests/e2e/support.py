"""Shared pieces of the end-to-end tests: child processes, a script's API client, polling."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import quote

import requests
from django.conf import settings as django_settings
from django.db import connection
from rest_framework.authtoken.models import Token

MANAGE = [sys.executable, str(Path(django_settings.BASE_DIR) / "manage.py")]
# The two ways to start the runner: Django's command, and the package alone.
RUN_WORKER = [*MANAGE, "run_worker"]
PYTHON_M_RUNNER = [sys.executable, "-m", "runner"]


def wait_for(
    what: str,
    check: Callable[[], object],
    timeout: float = 30.0,
    details: Callable[[], str] | None = None,
) -> Any:
    """Poll until check() is truthy, or fail after the deadline saying what never happened.

    `details` adds what helps to see why (the children's logs) to the failure message.
    """
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.1)
    message = f"timed out after {timeout:.0f} s waiting for {what}"
    raise AssertionError(f"{message}\n{details()}" if details else message)


def subprocess_database_url() -> str:
    """The test database (pytest-django's, one per xdist worker) as a URL for child processes."""
    db = connection.settings_dict
    auth = quote(db["USER"] or "postgres") + (f":{quote(db['PASSWORD'])}" if db["PASSWORD"] else "")
    return f"postgres://{auth}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"


def token_for(user: object) -> str:
    """The user's API token, made if needed."""
    return Token.objects.get_or_create(user=user)[0].key


class Process:
    """A child process with its output in a file, stopped by its own id at teardown."""

    def __init__(self, name: str, cmd: list[str], env: dict[str, str], log_dir: Path) -> None:
        self.name = name
        self.log = log_dir / f"{name}.log"
        self.proc = subprocess.Popen(
            cmd,
            env={**os.environ, **env},
            stdout=self.log.open("wb"),
            stderr=subprocess.STDOUT,
            cwd=django_settings.BASE_DIR,
            start_new_session=True,
        )

    def output(self) -> str:
        return self.log.read_text(errors="replace")[-3000:]

    def descendants(self) -> list[int]:
        """Process ids of everything this process started (read from /proc)."""
        found, todo = [], [self.proc.pid]
        while todo:
            pid = todo.pop()
            for task in Path(f"/proc/{pid}/task").glob("*"):
                children = (task / "children").read_text().split()
                found += [int(c) for c in children]
                todo += [int(c) for c in children]
        return found

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)


class Children:
    """One test's child processes: the cluster and runners, sharing the test's settings."""

    def __init__(self, log_dir: Path) -> None:
        self.log_dir = log_dir
        self.processes: list[Process] = []
        # The same SECRET_KEY: django-q2 signs the tasks the live server enqueues for the cluster.
        self.env: dict[str, str] = {"SECRET_KEY": django_settings.SECRET_KEY}

    def share(self, settings: Any, **values: object) -> None:  # noqa: ANN401
        """Set these settings for the live server (pytest's `settings`) and every child alike."""
        for name, value in values.items():
            setattr(settings, name, value)
            self.env[name] = str(value)

    def start(self, name: str, cmd: list[str], env: dict[str, str] | None = None) -> Process:
        process = Process(name, cmd, {**self.env, **(env or {})}, self.log_dir)
        self.processes.append(process)
        return process

    def start_cluster(self) -> Process:
        """A real django-q2 cluster on the test database: it runs the ticks the server asks for."""
        env = {"DATABASE_URL": subprocess_database_url(), "Q_WORKERS": "1"}
        env.pop("REDIS_URL", None)
        return self.start("qcluster", [*MANAGE, "qcluster"], env)

    def start_runner(
        self,
        *,
        worker: str,
        api: str,
        token: str,
        command: Sequence[str],
        options: Sequence[str] = (),
        launcher: Sequence[str] = RUN_WORKER,
    ) -> Process:
        """The reference runner for a worker, polling fast, running `command` for its tests."""
        cmd = [*launcher, "--worker", worker, "--api", api, "--poll", "0.2", *options]
        cmd += ["--", *command]
        # No database for the runner: a database URL that cannot work proves it needs none.
        env = {
            "SCHEDSITE_TOKEN": token,
            "DATABASE_URL": "postgres://nobody@127.0.0.1:1/no_database",
        }
        return self.start("runner", cmd, env)

    def logs(self) -> str:
        return "\n".join(f"--- {p.name}\n{p.output()}" for p in self.processes)

    def stop(self) -> None:
        for process in self.processes:
            process.stop()


class Api:
    """A script's view of the live server: token auth, JSON."""

    def __init__(self, base: str, token: str) -> None:
        self.base = base
        self.session = requests.Session()
        self.session.headers["Authorization"] = f"Token {token}"

    def get(self, path: str) -> dict:
        response = self.session.get(self.base + path, timeout=10)
        assert response.status_code == 200, response.text
        return response.json()

    def post(self, path: str, body: dict | None = None, expect: int = 200) -> dict:
        response = self.session.post(self.base + path, json=body, timeout=30)
        assert response.status_code == expect, response.text
        return response.json()
