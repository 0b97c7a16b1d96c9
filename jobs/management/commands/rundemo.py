"""Serve the UI with the scheduler cluster and one real runner per worker; Ctrl-C stops all."""

from __future__ import annotations

import os
import random
import signal
import socket
import subprocess
import sys
import time

from django.core.management.base import BaseCommand, CommandParser

from jobs import demo

FEED_EVERY = 2.0  # seconds between top-ups of the demo queue


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


def api_url(addr: str) -> str:
    """The URL runners reach the web server at, given runserver's ADDR (host:port)."""
    host, _, port = addr.rpartition(":")
    if not host:
        host, port = "127.0.0.1", addr
    if host in ("0.0.0.0", ""):  # listening on every interface: talk to it on loopback
        host = "127.0.0.1"
    elif host in ("[::]", "::"):
        host = "[::1]"
    return f"http://{host}:{port}/api/"


class Command(BaseCommand):
    help = (
        "Run the web server, a django-q2 cluster and a `run_worker` runner per worker (running "
        "a simulated test), and keep the demo queue topped up."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--addr", default="127.0.0.1:8000")
        parser.add_argument("--no-runners", action="store_true")
        parser.add_argument(
            "--keep-queued",
            type=int,
            default=demo.KEEP_QUEUED,
            help="submit a new suite when fewer runnable jobs than this are queued",
        )

    def handle(self, *args: object, **options: object) -> None:
        manage = [sys.executable, "manage.py"]
        addr = str(options["addr"])
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
                cmd += ["--", *demo.SIMULATED_TEST]
                # The token travels in the environment, not on the command line (`ps`).
                commands[f"runner {worker}"] = (cmd, {"SCHEDSITE_TOKEN": token})
        for name, (cmd, extra_env) in commands.items():
            if name.startswith("runner") and "web" in procs:
                # Runners talk to the web server; starting them before it listens only fills
                # the terminal with connection-refused retries.
                wait_for_port(addr, timeout=30)
            # Own sessions: Ctrl-C reaches only us, and each child gets exactly one SIGTERM.
            procs[name] = subprocess.Popen(
                cmd, env={**os.environ, **extra_env}, start_new_session=True
            )
        self.stdout.write(
            self.style.SUCCESS(
                f"\n  schedsite is running at http://{addr}/\n"
                f"  log in as admin / admin (lab staff) or alice / alice (tester)\n"
                f"  API docs: http://{addr}/api/docs/   Ctrl-C stops everything\n"
            )
        )
        stopping = False

        def stop(*_: object) -> None:
            nonlocal stopping
            stopping = True

        signal.signal(signal.SIGINT, stop)
        signal.signal(signal.SIGTERM, stop)
        rng = random.Random()
        next_feed = time.monotonic() + FEED_EVERY
        try:
            while not stopping:
                for name, proc in procs.items():
                    if proc.poll() is not None:
                        self.stderr.write(f"{name} exited with {proc.returncode}; stopping")
                        stopping = True
                if not options["no_runners"] and time.monotonic() >= next_feed:
                    next_feed = time.monotonic() + FEED_EVERY
                    try:
                        demo.feed_step(rng=rng, keep_queued=int(options["keep_queued"]))
                    except Exception as exc:  # noqa: BLE001 — a busy SQLite must not end the demo
                        self.stderr.write(f"demo feed skipped: {exc}")
                time.sleep(0.5)
        finally:
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
