"""The reliability lists at lab scale: 10,000 hosts and 30 days of breaks, repairs and runs.

Writes a month of history with bulk inserts (status events, repair jobs, test jobs and their
leases) into a throwaway PostgreSQL database, then times stats.selectors' two lists and counts
their queries. `python -m bench.stats --hosts 10000` (docs/performance.md#statistics).
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from datetime import timedelta

from bench import dbload


def build(hosts: int, runs_per_host: int, seed: int) -> None:
    """A lab whose every host ran tests for 30 days and a tenth of them broke now and then."""
    from django.utils import timezone

    from hosts.choices import EventKind, HostStatus
    from hosts.models import Host, HostEvent
    from jobs.choices import JobKind, JobStatus, ReleaseReason
    from jobs.models import Job, Lease, Suite

    rng = random.Random(seed)
    now = timezone.now()
    month = timedelta(days=30)
    with dbload.timed("hosts"):
        Host.objects.bulk_create(
            Host(hostname=f"dut{i:05}", created_at=now - 2 * month) for i in range(hosts)
        )
    ids = list(Host.objects.order_by("pk").values_list("pk", flat=True))
    suites = Suite.objects.bulk_create(
        Suite(name=f"nightly-{d}", build=f"R{100 + d}") for d in range(30)
    )
    events, repairs = [], []
    with dbload.timed("breaks and repairs"):
        for pk in ids:
            if rng.random() >= 0.1:
                continue
            for _ in range(rng.randint(1, 4)):
                at = now - month * rng.random()
                back = at + timedelta(minutes=rng.randint(5, 300))
                for old, new, when in (
                    (HostStatus.READY, HostStatus.NEEDS_REPAIR, at),
                    (HostStatus.NEEDS_REPAIR, HostStatus.REPAIRING, at + timedelta(minutes=1)),
                    (HostStatus.REPAIRING, HostStatus.READY, back),
                ):
                    events.append(
                        HostEvent(
                            host_id=pk, kind=EventKind.STATUS, actor="scheduler",
                            old_status=old, new_status=new, created_at=when,
                        )
                    )  # fmt: skip
                repairs.append(
                    Job(
                        kind=JobKind.REPAIR, name="repair", host_id=pk, priority=100,
                        status=JobStatus.PASSED, created_at=at, finished_at=back,
                    )
                )  # fmt: skip
        HostEvent.objects.bulk_create(events, batch_size=5000)
        Job.objects.bulk_create(repairs, batch_size=5000)
    with dbload.timed(f"{hosts * runs_per_host} test jobs and leases"):
        for start in range(0, len(ids), 500):
            jobs = []
            for pk in ids[start : start + 500]:
                for _ in range(runs_per_host):
                    at = now - month * rng.random()
                    jobs.append(
                        Job(
                            suite=rng.choice(suites), name=f"test-{rng.randrange(300)}",
                            status=rng.choice((JobStatus.PASSED,) * 9 + (JobStatus.FAILED,)),
                            attempts=1, created_at=at, finished_at=at + timedelta(minutes=5),
                        )
                    )  # fmt: skip
                    jobs[-1]._host = pk
            Job.objects.bulk_create(jobs)
            Lease.objects.bulk_create(
                Lease(
                    host_id=job._host, job=job, attempt=1, acquired_at=job.created_at,
                    expires_at=job.finished_at, released_at=job.finished_at,
                    release_reason=ReleaseReason.COMPLETED,
                )
                for job in jobs
            )  # fmt: skip
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
    print(f"  {len(events)} status events, {len(repairs)} repairs")


def time_lists(rounds: int) -> dict[str, dict[str, float]]:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext
    from django.utils import timezone

    from stats import selectors
    from stats.ranges import time_range

    results = {}
    for name, read, span in (
        ("hosts 30d", selectors.hosts_reliability, "30d"),
        ("hosts 24h", selectors.hosts_reliability, "24h"),
        ("tests 7d", selectors.tests_reliability, "7d"),
        ("tests 30d", selectors.tests_reliability, "30d"),
    ):
        times = []
        for _ in range(rounds):
            window = time_range(span, now=timezone.now(), default=span)
            with CaptureQueriesContext(connection) as queries:
                started = time.perf_counter()
                rows = read(window)
                times.append((time.perf_counter() - started) * 1000)
        for query in queries.captured_queries:
            print(f"    {name}: {float(query['time']) * 1000:.0f} ms  {query['sql'][:90]}")
        results[name] = {
            "rows": len(rows),
            "queries": len(queries),
            "p50_ms": statistics.median(times),
            "max_ms": max(times),
        }
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--hosts", type=int, default=10_000)
    parser.add_argument("--runs-per-host", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--db", default="bench_stats")
    parser.add_argument("--keep", action="store_true", help="keep the database (and reuse it)")
    args = parser.parse_args()
    from django.db import connection

    fresh = not args.keep or not _exists(args.db)
    dbload.setup_django(args.db, fresh=fresh)
    if fresh:
        build(args.hosts, args.runs_per_host, args.seed)
    connection.force_debug_cursor = True
    print("| list | rows | queries | p50 ms | max ms |\n|---|---|---|---|---|")
    for name, r in time_lists(args.rounds).items():
        print(f"| {name} | {r['rows']} | {r['queries']} | {r['p50_ms']:.0f} | {r['max_ms']:.0f} |")
    if not args.keep:
        dbload.drop_database(args.db)


def _exists(name: str) -> bool:
    import psycopg

    with psycopg.connect(dbload.database_url("postgres")) as conn:
        found = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone()
    return found is not None


if __name__ == "__main__":
    main()
