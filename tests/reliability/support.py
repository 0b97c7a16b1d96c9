"""Helpers for the reliability tests: real manage.py processes against the live test database."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import TypeVar
from urllib.parse import quote

import pytest
from django.db import connection
from django.utils import timezone
from django_q.models import Schedule

from tests import factories as f

ROOT = Path(__file__).resolve().parents[2]
REDIS_URL = os.environ.get("RELIABILITY_REDIS_URL", "redis://127.0.0.1:6379/5")
T = TypeVar("T")


def wait_until(
    check: Callable[[], T],
    *,
    timeout: float,
    what: str | Callable[[], str],
    interval: float = 0.1,
) -> T:
    """Poll `check` until it returns something truthy; fail naming `what` at the deadline."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            # `what` may be a callable, so that process logs are read at the deadline, not before.
            text = what() if callable(what) else what
            pytest.fail(f"timed out after {timeout:.0f} s waiting for {text}")
        time.sleep(interval)


def live_database_url(application_name: str) -> str:
    """A DATABASE_URL for the live test database, so a subprocess sees what the test wrote."""
    s = connection.settings_dict
    # pytest-django has renamed NAME to the test database (test_<name>, _gw<n> under xdist).
    auth = quote(s["USER"] or "", safe="")
    if s.get("PASSWORD"):
        auth += ":" + quote(s["PASSWORD"], safe="")
    host = f"{s['HOST'] or '127.0.0.1'}:{s['PORT'] or 5432}"
    return f"postgres://{auth}@{host}/{s['NAME']}?application_name={quote(application_name)}"


def subprocess_env(**overrides: str) -> dict[str, str]:
    """This process's environment (SECRET_KEY included: clusters must verify signed tasks)."""
    env = dict(os.environ)
    for name in (
        "Q_SYNC",
        "REDIS_URL",
        "Q_NAME",
        "SCHEDSITE_FAULT_POINT",
        "SCHEDSITE_FAULT_FILE",
        "DJANGO_ALLOW_ASYNC_UNSAFE",  # set by browser tests in the same xdist worker
    ):
        env.pop(name, None)
    env.update({"DJANGO_SETTINGS_MODULE": "schedsite.settings", "PYTHONUNBUFFERED": "1"})
    env.update(overrides)
    return env


def other_sessions(columns: str, where: str = "", *params: object) -> list[tuple]:
    """`SELECT columns` over the other sessions on the test database (and `AND where`)."""
    sql = f"SELECT {columns} FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()"
    with connection.cursor() as cursor:
        cursor.execute(sql + where, [connection.settings_dict["NAME"], *params])
        return cursor.fetchall()


def backends(*, application_name: str | None = None) -> list[int]:
    """PIDs of the other sessions on the test database (optionally one application's)."""
    if application_name is None:
        rows = other_sessions("pid")
    else:
        rows = other_sessions("pid", " AND application_name LIKE %s", application_name)
    return [row[0] for row in rows]


def activity() -> str:
    """The other sessions on the test database and what they wait for (for failure messages)."""
    columns = "pid, application_name, state, wait_event_type, wait_event, left(query, 120)"
    return "\n".join(" | ".join(str(v) for v in row) for row in other_sessions(columns))


def terminate_backends() -> int:
    """Cut every other session on the test database (ours only): a database outage, locally."""
    return other_sessions("count(pg_terminate_backend(pid))")[0][0]


@contextmanager
def database_down() -> Iterator[int]:
    """Take the test database down: cut every other session and refuse new ones until exit."""
    import psycopg
    from psycopg import sql

    s = connection.settings_dict
    name = sql.Identifier(s["NAME"])
    # ALTER DATABASE … ALLOW_CONNECTIONS must come from another database; this process keeps
    # its own session (it plays the web app, whose writes the outage must not lose).
    with psycopg.connect(
        host=s["HOST"] or "127.0.0.1",
        port=s["PORT"] or 5432,
        user=s["USER"],
        password=s.get("PASSWORD") or None,
        dbname="postgres",
        autocommit=True,
    ) as admin:
        admin.execute(sql.SQL("ALTER DATABASE {} ALLOW_CONNECTIONS false").format(name))
        try:
            yield terminate_backends()
        finally:
            admin.execute(sql.SQL("ALTER DATABASE {} ALLOW_CONNECTIONS true").format(name))


@dataclass
class Proc:
    """A manage.py process started by a test, with its log file."""

    name: str
    popen: subprocess.Popen
    log: Path
    stopped: bool = field(default=False)

    @property
    def pid(self) -> int:
        return self.popen.pid

    def output(self, tail: int = 8000) -> str:
        text = self.log.read_text(errors="replace") if self.log.exists() else ""
        return text[-tail:]

    def stop(self, timeout: float = 20) -> None:
        """One SIGTERM to the main process (repeated signals can deadlock qcluster), then wait."""
        if self.stopped:
            return
        self.stopped = True
        try:
            if self.popen.poll() is None:
                self.popen.send_signal(signal.SIGTERM)
                with contextlib.suppress(subprocess.TimeoutExpired):
                    self.popen.wait(timeout)
        finally:
            # Whatever happened, leave none of its processes (qcluster's children) behind: they
            # share the session we started it in, and would hold test-database connections.
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.popen.pid, signal.SIGKILL)
            if self.popen.poll() is None:
                self.popen.wait(5)


@pytest.fixture
def processes(tmp_path: Path) -> Iterator[Callable[..., Proc]]:
    """Start manage.py commands; every one is stopped at teardown, even when the test fails."""
    started: list[Proc] = []

    def start(name: str, *args: str, env: dict[str, str]) -> Proc:
        log = tmp_path / f"{name}.log"
        with log.open("wb") as out:
            popen = subprocess.Popen(
                [sys.executable, str(ROOT / "manage.py"), *args],
                cwd=ROOT,
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # its own process group, so teardown can reap it whole
            )
        proc = Proc(name=name, popen=popen, log=log)
        started.append(proc)
        return proc

    try:
        yield start
    finally:
        for proc in reversed(started):
            proc.stop()


@dataclass(frozen=True)
class RedisQueue:
    """A django-q2 queue on Redis that only this test uses."""

    url: str
    name: str


@pytest.fixture
def redis_queue(monkeypatch: pytest.MonkeyPatch) -> Iterator[RedisQueue]:
    """Point this process's django-q2 at a fresh Redis queue, the way REDIS_URL does in settings."""
    import redis
    from django_q.conf import Conf

    client = redis.Redis.from_url(REDIS_URL, socket_connect_timeout=2)
    try:
        client.ping()
    except redis.RedisError as exc:
        pytest.skip(f"NEEDS REDIS at {REDIS_URL}: {exc}")
    # A name per test run: other engineers' runs share this Redis database.
    queue = RedisQueue(url=REDIS_URL, name=f"reltest-{os.getpid()}-{uuid.uuid4().hex[:8]}")
    # Conf is read once at import; patch it so that request_tick() in this process enqueues to
    # the same Redis list the qcluster subprocesses (REDIS_URL, Q_NAME) read from.
    monkeypatch.setattr(Conf, "ORM", None)
    monkeypatch.setattr(Conf, "REDIS", queue.url)
    monkeypatch.setattr(Conf, "PREFIX", queue.name)
    monkeypatch.setattr(Conf, "CLUSTER_NAME", queue.name)
    monkeypatch.setattr(Conf, "Q_STAT", f"django_q:{queue.name}:cluster")
    try:
        yield queue
    finally:
        keys = list(client.scan_iter(match=f"django_q:{queue.name}:*"))
        if keys:
            client.delete(*keys)
        client.close()


def cluster_env(*, app: str, queue: RedisQueue | None, **extra: str) -> dict[str, str]:
    """Environment for a qcluster on the test database, with Redis as broker when given."""
    env = subprocess_env(DATABASE_URL=live_database_url(app), Q_WORKERS="2", **extra)
    if queue is not None:
        env.update(REDIS_URL=queue.url, Q_NAME=queue.name)
    return env


def cluster_lab(request: pytest.FixtureRequest, broker: str, hostnames: list[str]) -> tuple:
    """A lab for qcluster tests: the queue and the process starter, and w1 with the hosts.

    The queue is Redis's (None for the ORM broker); only ticks that events ask for run.
    """
    # The queue first, so that teardown stops the clusters before it removes the queue.
    queue = request.getfixturevalue("redis_queue") if broker == "redis" else None
    processes = request.getfixturevalue("processes")
    # Only the ticks that events ask for may rescue the lab here, not the safety-net schedule.
    Schedule.objects.filter(func="jobs.tasks.tick").update(
        next_run=timezone.now() + timedelta(days=1)
    )
    w1 = f.worker("w1")
    for hostname in hostnames:
        f.host(hostname, ["board:x"], worker=w1)
    return queue, processes
