"""Run one scheduler tick now and print its summary."""

from __future__ import annotations

import json

from django.core.management.base import BaseCommand, CommandParser

from jobs.scheduling.tick import scheduler_tick


class Command(BaseCommand):
    help = "Run one scheduler tick now; --json prints the leases it made."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--json", action="store_true")

    def handle(self, *args: object, **options: object) -> None:
        summary = scheduler_tick(trigger="manage.py tick")
        if options["json"]:
            out = {
                "leases": [
                    {key: lease[key] for key in ("job", "suite", "host", "kind")}
                    for lease in summary.leases
                ],
                "expired": summary.expired,
                "duration_ms": round(summary.duration_ms),
            }
            self.stdout.write(json.dumps(out))
            return
        self.stdout.write(
            f"tick {summary.tick_id}: {len(summary.leases)} leased, {summary.expired} expired, "
            f"{summary.timed_out} timed out, {summary.jobs_considered} jobs considered, "
            f"{summary.hosts_free} hosts free, {summary.duration_ms:.1f} ms"
        )
        for lease in summary.leases:
            suite = f" ({lease['suite']})" if lease["suite"] else ""
            self.stdout.write(f"  {lease['job']}{suite} → {lease['host']}")
