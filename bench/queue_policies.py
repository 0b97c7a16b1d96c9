"""What one queue page costs under each scheduler policy (in-process, PostgreSQL).

Under the default `fifo` without aging the queue pages read one page from an index; under a
size or aging policy they order the whole queue with the planner's functions
(docs/performance.md#the-queue-pages). This times what a queue view reads — the selection,
one page of 50 rows, their places and the count — at several queue lengths.

    python -m bench.queue_policies --jobs 1000,10000,100000 --repeats 5
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

from bench import dbload
from bench.cli import print_result
from bench.labgen import LabShape, generate

POLICIES = {
    "fifo": {"ordering": "fifo", "aging_minutes": 0},
    "aging": {"ordering": "fifo", "aging_minutes": 5},
    "dynsize": {"ordering": "dynsize", "aging_minutes": 0},
}


def _page_ms() -> float:
    from jobs.scheduling import queue

    start = time.perf_counter()
    selection = queue.queue_select()
    ids = selection.ids[0:50]
    queue.queue_jobs(ids)
    selection.positions(ids)
    selection.ids.count()
    return (time.perf_counter() - start) * 1000


def main() -> None:
    """Load queues of each length, time a queue page under each policy."""
    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument(
        "--jobs", default="1000,10000,100000", help="queue lengths, comma-separated"
    )
    parser.add_argument("--hosts", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--db", default="bench_queue_policies", help="database to (re)create")
    parser.add_argument("--json", action="store_true", help="print one JSON line")
    args = parser.parse_args()

    dbload.setup_django(args.db)
    result: dict[str, object] = {"cores": os.cpu_count()}
    try:
        from django.core.management import call_command
        from django.utils import timezone

        from jobs.models import SchedulerSettings

        for n in (int(x) for x in args.jobs.split(",")):
            call_command("flush", interactive=False, verbosity=0)
            dbload.load(generate(LabShape(args.hosts, n, 50, 50, seed=1)), now=timezone.now())
            for name, fields in POLICIES.items():
                SchedulerSettings.objects.update_or_create(pk=1, defaults=fields)
                times = [_page_ms() for _ in range(args.repeats)]
                result[f"{n}_{name}"] = {
                    "min_ms": round(min(times), 1),
                    "median_ms": round(statistics.median(times), 1),
                }
                print(f"  {n} queued, {name}: {result[f'{n}_{name}']}", file=sys.stderr)
    finally:
        from django.db import connections

        connections.close_all()
        dbload.drop_database(args.db)
    print_result(result, as_json=args.json, width=20)


if __name__ == "__main__":
    main()
