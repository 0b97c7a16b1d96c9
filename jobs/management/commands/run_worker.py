"""Run the reference runner for one worker: `run_worker --worker W --api URL --token T -- CMD`."""

from __future__ import annotations

from argparse import ArgumentParser

from django.core.management.base import BaseCommand, CommandError

import runner


class Command(BaseCommand):
    help = (
        "Run COMMAND once for every test leased to the worker's hosts (--verify-cmd and "
        "--repair-cmd for maintenance jobs), over the REST API only (no database access): "
        "heartbeat, start, complete passed/failed by exit status."
    )
    # The runner runs on lab servers without the database: no checks that could touch it.
    requires_system_checks: list[str] = []
    requires_migrations_checks = False

    def add_arguments(self, parser: ArgumentParser) -> None:
        runner.add_arguments(parser)

    def handle(self, *args: object, **options: object) -> None:
        try:
            status = runner.run_from_options(options)
        except SystemExit as exc:
            raise CommandError(str(exc)) from exc
        if status:
            raise CommandError(f"runner stopped with status {status}", returncode=status)
