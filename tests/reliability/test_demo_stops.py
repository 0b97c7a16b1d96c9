"""`make run` leaves nothing behind: closing its terminal (SIGHUP) stops every process it started
as Ctrl-C does, and when the demo process itself dies (SIGKILL) its children end too."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.reliability.support import ROOT, subprocess_env, wait_until

pytestmark = [pytest.mark.slow, pytest.mark.skipif(sys.platform != "linux", reason="reads /proc")]

BANNER = "schedsite is running at"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def port_free(port: int) -> bool:
    """True when a new server could listen on the port (as runserver does: SO_REUSEADDR)."""
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def stat(pid: int) -> tuple[str, int] | None:
    """(state, parent pid) of a process, or None when it is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text.rpartition(")")[2].split()
    return fields[0], int(fields[1])


def alive(pid: int) -> bool:
    found = stat(pid)
    return found is not None and found[0] != "Z"  # an orphan's zombie may wait for a reaper


def started_with(marker: str) -> set[int]:
    """Every live process whose environment holds `marker` (the test's database path): all the
    demo started, and what they started in turn, wherever they were reparented to."""
    found = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or not alive(int(entry.name)):
            continue
        with contextlib.suppress(OSError):
            if marker.encode() in (entry / "environ").read_bytes():
                found.add(int(entry.name))
    return found


def descendants(root: int) -> set[int]:
    """Every live process under `root`: its children, theirs (qcluster's workers), and so on."""
    parents = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and (found := stat(int(entry.name))) and found[0] != "Z":
            parents[int(entry.name)] = found[1]
    found_pids: set[int] = set()
    frontier = {root}
    while frontier:
        frontier = {pid for pid, parent in parents.items() if parent in frontier} - found_pids
        found_pids |= frontier
    return found_pids


@pytest.fixture(scope="module")
def demo_database(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A migrated and seeded SQLite demo database, made once and copied for each test."""
    path = tmp_path_factory.mktemp("demo-db") / "demo.sqlite3"
    env = subprocess_env(DATABASE_URL=f"sqlite:///{path}", DEBUG="1")
    for command in (["migrate", "--noinput"], ["seed_demo"]):
        subprocess.run(
            [sys.executable, str(ROOT / "manage.py"), *command],
            cwd=ROOT,
            env=env,
            check=True,
            capture_output=True,
            timeout=300,
        )
    return path


@pytest.fixture
def rundemo(
    demo_database: Path, tmp_path: Path
) -> Iterator[tuple[subprocess.Popen, int, Path, str]]:
    """`manage.py rundemo` on a free loopback port; nothing it started survives the test."""
    database = tmp_path / "demo.sqlite3"
    shutil.copy(demo_database, database)
    port = free_port()
    env = subprocess_env(DATABASE_URL=f"sqlite:///{database}", DEBUG="1")
    output = tmp_path / "rundemo.log"
    args = ["rundemo", "--addr", f"127.0.0.1:{port}", "--log-dir", str(tmp_path / "logs")]
    with output.open("wb") as out:
        popen = subprocess.Popen(
            [sys.executable, str(ROOT / "manage.py"), *args],
            cwd=ROOT,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    scheduler_log = tmp_path / "logs" / "scheduler.log"
    try:
        wait_until(
            lambda: BANNER in output.read_text(errors="replace"),
            timeout=90,
            what=lambda: f"the banner\n{output.read_text(errors='replace')}",
        )
        # The cluster's workers are up too (the sentinel says "running" once they are).
        wait_until(
            lambda: "running." in scheduler_log.read_text(errors="replace"),
            timeout=30,
            what=lambda: f"the cluster\n{scheduler_log.read_text(errors='replace')}",
        )
        # And the runners are at work: a job is running when the signal comes.
        runner_logs = tmp_path / "logs"
        wait_until(
            lambda: any(
                "started on" in log.read_text(errors="replace")
                for log in runner_logs.glob("runner-*.log")
            ),
            timeout=30,
            what="a runner to start a job",
        )
        yield popen, port, output, str(database)
    finally:
        # Whatever the test found, leave nothing running.
        for pid in {*started_with(str(database)), *descendants(popen.pid), popen.pid}:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            popen.wait(5)


@pytest.mark.parametrize(
    "signum",
    [signal.SIGHUP, signal.SIGKILL],
    ids=["closing-the-terminal", "the-demo-dying"],
)
def test_the_demo_leaves_no_process_and_no_port_behind(rundemo, signum: int) -> None:
    popen, port, output, database = rundemo
    # The web server, the scheduler cluster with its sentinel and workers, and the runners.
    children = started_with(database) - {popen.pid}
    assert len(children) >= 6, children
    assert not port_free(port)

    os.kill(popen.pid, signum)

    def left(*programs: str) -> list[str]:
        found = []
        for pid in started_with(database) - {popen.pid}:
            with contextlib.suppress(OSError):
                command = Path(f"/proc/{pid}/cmdline").read_text().replace("\0", " ")
                if not programs or any(p in command for p in programs):
                    found.append(f"{pid} {stat(pid)} {command}")
        return found

    def what() -> str:
        return (
            f"the demo's processes to end and the port to be free: left {left()}, "
            f"port free {port_free(port)}\n{output.read_text(errors='replace')[-3000:]}"
        )

    if signum == signal.SIGKILL:
        # Within seconds the port is free, the web server and the scheduler cluster are gone.
        wait_until(
            lambda: port_free(port) and not left("runserver", "qcluster"), timeout=5, what=what
        )
    # The runners stop as on SIGTERM. After SIGHUP the demo stops them first, while the web
    # server still answers them, then the rest. After SIGKILL the web server is gone with them,
    # and they give up on it once their retries are spent (some 15 s), killing their jobs.
    wait_until(lambda: not left() and port_free(port), timeout=45, what=what)
    popen.wait(10)
    if signum == signal.SIGHUP:  # stopped as Ctrl-C stops it
        assert "stopping the runners, the scheduler and the web server" in output.read_text()
