"""Simulated runners for the demo: start leased jobs (tests, verifies, repairs), end them."""

from __future__ import annotations

import random
import time

from django.core.management.base import BaseCommand, CommandParser

from jobs import demo
from jobs.management.stopping import StopRequest


class Command(BaseCommand):
    help = "Play every worker's runner in-process so the demo queue moves (demo only)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--interval", type=float, default=1.0)
        parser.add_argument(
            "--keep-queued",
            type=int,
            default=demo.KEEP_QUEUED,
            help="submit a new suite when fewer runnable jobs than this are queued",
        )
        parser.add_argument("--seed", type=int, default=None)

    def handle(self, *args: object, **options: object) -> None:
        rng = random.Random(options["seed"])
        stopping = StopRequest()
        while not stopping.requested:
            demo.simulate_step(rng=rng, keep_queued=int(options["keep_queued"]))
            time.sleep(float(options["interval"]))
