"""Serve the UI with the scheduler cluster and one real runner per worker; Ctrl-C stops all.

So does closing the terminal (SIGHUP), and the processes it started end when it dies, however
it dies: nothing is left holding the port or the database.
"""

from __future__ import annotations

import contextlib
import logging
import os
import random
import select
import shlex
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandParser
from django.utils import timezone

from jobs import demo, selectors
from jobs.choices import JobStatus
from jobs.management.stopping import StopRequest, die_with_parent
from jobs.models import Job

FEED_EVERY = 2.0  # seconds between top-ups of the demo queue
LOG_TAIL_LINES = 20  # of a process's log, shown when it exits


def wait_for_port(addr: str, *, timeout: float) -> bool:
    """Wait until something accepts connections at ADDR (host:port); False on timeout."""
    host, _, port = addr.rpartition(":")
    host = host.strip("[]") or "127.0.0.1"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with socket.create_connection((host, int(port)), timeout=0.5):
                return True
        except OSError:
            time.sleep(0.2)
    return False


def site_url(addr: str) -> str:
    """The URL this machine reaches the web server at, given runserver's ADDR (host:port)."""
    host, _, port = addr.rpartition(":")
    if not host:
        host, port = "127.0.0.1", addr
    if host in ("0.0.0.0", ""):  # listening on every interface: talk to it on loopback
        host = "127.0.0.1"
    elif host in ("[::]", "::"):
        host = "[::1]"
    return f"http://{host}:{port}/"


def api_url(addr: str) -> str:
    """The URL runners reach the web server at, given runserver's ADDR (host:port)."""
    return f"{site_url(addr)}api/"


def shown_path(path: Path) -> Path:
    """The path relative to the working directory when it is under it, else absolute."""
    try:
        return path.resolve().relative_to(Path.cwd())
    except ValueError:
        return path.resolve()


def banner(addr: str, log_dir: Path) -> str:
    """Where the demo runs, how to log in, and where its processes' logs go."""
    url = site_url(addr)
    users = " or ".join(
        f"{name} / {password} ({'lab staff' if staff else 'tester'})"
        for name, (password, staff) in demo.DEMO_USERS.items()
    )
    return (
        f"\n  schedsite is running at {url}\n"
        f"  log in as {users}\n"
        f"  API docs: {url}api/docs/\n"
        f"  logs of the web server, the scheduler and the runners: {shown_path(log_dir)}/\n"
        f"  Enter shows this again (or kill -USR1 {os.getpid()}); Ctrl-C stops everything"
    )


def lab_status() -> str:
    """One line on what the lab is doing, so a quiet terminal still shows it is alive."""
    counts = selectors.dashboard_counts(now=timezone.now())
    # The dashboard counts no finished jobs (a read that grows with the history); a demo lab's
    # is small.
    passed = Job.objects.filter(status=JobStatus.PASSED).count()
    return (
        f"  lab now: {counts['hosts_total']} hosts, {counts['hosts_leased']} leased, "
        f"{counts['hosts_needs_repair']} in repair; {counts['jobs_queued']} jobs queued, "
        f"{counts['jobs_running']} running, {passed} passed"
    )


def log_tail(path: Path, lines: int = LOG_TAIL_LINES) -> str:
    """The last lines of a log file, indented, for a message about its process."""
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return ""
    return "".join(f"    {line}\n" for line in text.splitlines()[-lines:])


class Command(BaseCommand):
    help = (
        "Run the web server, a django-q2 cluster and a `run_worker` runner per worker (running "
        "a simulated test, verify and repair), and keep the demo queue topped up."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--addr", default="127.0.0.1:8000", help="where the web UI listens")
        parser.add_argument(
            "--no-runners", action="store_true", help="start the web server and the scheduler only"
        )
        parser.add_argument(
            "--log-dir",
            type=Path,
            default=settings.BASE_DIR / "build" / "demo-logs",
            help="where each process's output goes (one file each), so the terminal stays quiet",
        )
        parser.add_argument(
            "--keep-queued",
            type=int,
            default=demo.KEEP_QUEUED,
            help="submit a new suite when fewer runnable jobs than this are queued",
        )

    def handle(self, *args: object, **options: object) -> None:  # noqa: C901, PLR0915
        # One script that starts, watches and stops the demo processes; to split by process.
        manage = [sys.executable, "manage.py"]
        addr = str(options["addr"])
        # The feeder's submissions ask for ticks from this process: keep django-q's line per
        # enqueued task out of the terminal too (its warnings still show).
        logging.getLogger("django-q").setLevel(logging.WARNING)
        log_dir = Path(options["log_dir"])  # type: ignore[arg-type]
        log_dir.mkdir(parents=True, exist_ok=True)
        logs: dict[str, Path] = {}
        procs: dict[str, subprocess.Popen] = {}
        commands: dict[str, tuple[list[str], dict[str, str]]] = {
            "web": ([*manage, "runserver", addr, "--noreload"], {}),
            "scheduler": ([*manage, "qcluster"], {}),
        }
        if not options["no_runners"]:
            for worker, token in demo.ensure_runners().items():
                cmd = [*manage, "run_worker", "--worker", worker, "--api", api_url(addr)]
                cmd += ["--poll", "1", "--concurrency", "16", "--grace", "2"]
                cmd += ["--host-broken-exit-code", str(demo.SIMULATED_BROKEN_EXIT)]
                cmd += ["--verify-cmd", shlex.join(demo.SIMULATED_VERIFY)]
                cmd += ["--repair-cmd", shlex.join(demo.SIMULATED_REPAIR)]
                cmd += ["--provision-cmd", shlex.join(demo.SIMULATED_PROVISION_CMD)]
                cmd += ["--", *demo.SIMULATED_TEST]
                # The token travels in the environment, not on the command line (`ps`).
                commands[f"runner {worker}"] = (cmd, {"SCHEDSITE_TOKEN": token})
        stopping = StopRequest()
        # Each child gets SIGTERM should this process die without stopping them (SIGKILL).
        armed = die_with_parent()
        show_banner = True  # once everything has started, and again on request
        banners = 0

        def ask_banner(*_: object) -> None:
            nonlocal show_banner
            show_banner = True

        signal.signal(signal.SIGUSR1, ask_banner)
        interactive = sys.stdin.isatty()
        rng = random.Random()
        next_feed = time.monotonic() + FEED_EVERY
        try:
            for name, (cmd, extra_env) in commands.items():
                if stopping.requested:
                    break
                if name.startswith("runner") and "web" in procs:
                    # Runners talk to the web server; starting them before it listens only
                    # fills their logs with connection-refused retries.
                    wait_for_port(addr, timeout=30)
                # Each process writes to its own file: the runners' requests alone make several
                # access-log lines a second, which would bury the banner within seconds.
                logs[name] = log_dir / f"{name.replace(' ', '-')}.log"
                with logs[name].open("wb") as out:
                    # Own sessions: Ctrl-C reaches only us, and each child gets one SIGTERM.
                    procs[name] = subprocess.Popen(
                        cmd,
                        env={**os.environ, **extra_env},
                        stdin=subprocess.DEVNULL,
                        stdout=out,
                        stderr=subprocess.STDOUT,
                        start_new_session=True,
                        preexec_fn=armed,  # noqa: PLW1509 - no threads here yet
                    )
            if "web" in procs and not stopping.requested:
                wait_for_port(addr, timeout=30)
            while not stopping.requested:
                for name, proc in procs.items():
                    if proc.poll() is not None and not stopping.requested:
                        self.stderr.write(
                            f"{name} exited with {proc.returncode}; stopping everything. "
                            f"The end of {shown_path(logs[name])}:\n"
                            f"{log_tail(logs[name])}"
                        )
                        stopping.request()
                if show_banner and not stopping.requested:
                    show_banner = False
                    self.stdout.write(self.style.SUCCESS(banner(addr, log_dir)))
                    banners += 1
                    try:
                        # Not on the first banner: at startup the lab has not moved yet.
                        if banners > 1:
                            self.stdout.write(lab_status())
                    except Exception as exc:  # noqa: BLE001 — a busy SQLite must not end the demo
                        self.stderr.write(f"lab status unavailable: {exc}")
                if not options["no_runners"] and time.monotonic() >= next_feed:
                    next_feed = time.monotonic() + FEED_EVERY
                    try:
                        demo.feed_step(rng=rng, keep_queued=int(options["keep_queued"]))
                    except Exception as exc:  # noqa: BLE001 — a busy SQLite must not end the demo
                        self.stderr.write(f"demo feed skipped: {exc}")
                if interactive:
                    # Enter asks for the banner again; the wait doubles as the loop's pause.
                    readable, _, _ = select.select([sys.stdin], [], [], 0.5)
                    if readable:
                        sys.stdin.readline()
                        show_banner = True
                else:
                    time.sleep(0.5)
        finally:
            # After SIGHUP the terminal is gone: a write to it fails, and must not stop the stop.
            with contextlib.suppress(OSError):
                self.stdout.write("  stopping the runners, the scheduler and the web server…")
            # Runners first, while the web server still answers: they abort what they hold.
            runners = [p for name, p in procs.items() if name.startswith("runner")]
            others = [p for name, p in procs.items() if not name.startswith("runner")]
            for group in (runners, others):
                for proc in group:
                    if proc.poll() is None:
                        proc.send_signal(signal.SIGTERM)  # once: repeats can deadlock qcluster
                deadline = time.monotonic() + 20
                for proc in group:
                    try:
                        proc.wait(timeout=max(0.1, deadline - time.monotonic()))
                    except subprocess.TimeoutExpired:
                        proc.kill()
