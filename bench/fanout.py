"""Fan-out phase benchmark on PostgreSQL: what following the lab costs each tick.

Times `fanout_phase` alone (as the tick runs it, in a transaction) on a generated lab: with no
open fan-out suite, with open ones that have nothing to do, and with hosts joining.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

from bench import dbload
from bench.cli import print_result
from bench.labgen import CAPS, add_shape_arguments, generate, shape_from


def _timed_phase() -> dict[str, float]:
    from django.db import connection, transaction
    from django.test.utils import CaptureQueriesContext
    from django.utils import timezone

    from jobs.scheduling.fanout import fanout_phase

    connection.queries_log.clear()
    with CaptureQueriesContext(connection) as queries, transaction.atomic():
        start = time.perf_counter()
        result = fanout_phase(now=timezone.now())
        ms = (time.perf_counter() - start) * 1000
    import os

    if os.environ.get("BENCH_FANOUT_SQL"):  # the slowest statements, to see where time goes
        for q in sorted(queries.captured_queries, key=lambda q: -float(q["time"]))[:4]:
            print(f"    {float(q['time']) * 1000:.1f} ms  {q['sql'][:1500]}", file=sys.stderr)
    return {"ms": ms, "queries": len(queries.captured_queries), "added": result.added}


def _case(runs: list[dict[str, float]]) -> dict[str, object]:
    times = [r["ms"] for r in runs]
    return {
        "min_ms": round(min(times), 1),
        "median_ms": round(statistics.median(times), 1),
        "queries": sorted({int(r["queries"]) for r in runs}),
        "added": [int(r["added"]) for r in runs],
    }


def main() -> None:
    """Load a generated lab, open fan-out suites over its peripherals, time the phase."""
    parser = argparse.ArgumentParser(description=main.__doc__)
    add_shape_arguments(parser)
    parser.add_argument("--repeats", type=int, default=5, help="timed phases per case")
    parser.add_argument("--joining", type=int, default=100, help="hosts that join per repeat")
    parser.add_argument("--db", default="bench_fanout", help="database to (re)create: bench_*")
    parser.add_argument("--json", action="store_true", help="print one JSON line")
    args = parser.parse_args()

    lab = generate(shape_from(args))
    print(f"fan-out benchmark: {lab.describe()}", file=sys.stderr)
    dbload.setup_django(args.db)
    try:
        from django.conf import settings
        from django.db import connection
        from django.utils import timezone

        from hosts import services as host_services
        from jobs import services

        with dbload.timed("load"):
            dbload.load(lab, now=timezone.now())
        cases: dict[str, object] = {}
        cases["no_open_fanout"] = _case([_timed_phase() for _ in range(args.repeats)])
        settings.MAX_JOBS_PER_SUITE = args.hosts  # a fan-out over a common label is large
        # Five fan-outs, one per peripheral (from half the lab down to 8% of it), all open:
        # their jobs stay queued because no tick runs here.
        fanned = 0
        for cap, _share in CAPS:
            suite = services.suite_submit(
                owner="bench", name=f"on every {cap}", fanout_labels=[cap], fanout_name=cap
            )
            fanned += suite.jobs.count()
        with connection.cursor() as cursor:  # as autovacuum would within a minute
            cursor.execute("ANALYZE jobs_job")
        # Each phase reads everything and finds nothing to do (a tick runs it only after a
        # write; with nothing written it is skipped, at no cost).
        cases["five_open_nothing_to_do"] = _case([_timed_phase() for _ in range(args.repeats)])
        joins = []
        for r in range(args.repeats):
            for i in range(args.joining):
                host_services.host_create(hostname=f"join{r}-{i}.lab", labels=["bt"], by="bench")
            joins.append(_timed_phase())
        cases[f"five_open_{args.joining}_hosts_join"] = _case(joins)
    finally:
        from django.db import connections

        connections.close_all()
        dbload.drop_database(args.db)
    print_result(
        {**lab.describe(), "fanout_jobs": fanned, "cases": cases},
        as_json=args.json,
        width=40,
    )


if __name__ == "__main__":
    main()
