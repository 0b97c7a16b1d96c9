"""Serve the UI with the scheduler cluster and simulated runners; Ctrl-C stops them all."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from django.core.management.base import BaseCommand, CommandParser


class Command(BaseCommand):
    help = "Run the web server, a django-q2 cluster and the simulated runners together."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--addr", default="127.0.0.1:8000")
        parser.add_argument("--no-runners", action="store_true")

    def handle(self, *args: object, **options: object) -> None:
        manage = [sys.executable, "manage.py"]
        procs: dict[str, subprocess.Popen] = {}
        env = dict(os.environ)
        commands = {
            "web": [*manage, "runserver", str(options["addr"]), "--noreload"],
            "scheduler": [*manage, "qcluster"],
        }
        if not options["no_runners"]:
            commands["runners"] = [*manage, "simulate_runners"]
        for name, cmd in commands.items():
            # Own sessions: Ctrl-C reaches only us, and each child gets exactly one SIGTERM.
            procs[name] = subprocess.Popen(cmd, env=env, start_new_session=True)
        self.stdout.write(
            self.style.SUCCESS(
                f"\n  schedsite is running at http://{options['addr']}/\n"
                f"  log in as admin / admin (lab staff) or alice / alice (tester)\n"
                f"  API docs: http://{options['addr']}/api/docs/   Ctrl-C stops everything\n"
            )
        )
        stopping = False

        def stop(*_: object) -> None:
            nonlocal stopping
            stopping = True

        signal.signal(signal.SIGINT, stop)
        signal.signal(signal.SIGTERM, stop)
        try:
            while not stopping:
                for name, proc in procs.items():
                    if proc.poll() is not None:
                        self.stderr.write(f"{name} exited with {proc.returncode}; stopping")
                        stopping = True
                time.sleep(0.5)
        finally:
            for proc in procs.values():
                if proc.poll() is None:
                    proc.send_signal(signal.SIGTERM)  # one SIGTERM: repeats can deadlock qcluster
            deadline = time.monotonic() + 20
            for proc in procs.values():
                try:
                    proc.wait(timeout=max(0.1, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    proc.kill()
