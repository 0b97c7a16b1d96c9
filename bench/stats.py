"""The reliability lists at lab scale: 10,000 hosts and 30 days of breaks, repairs and runs;
and the lab history's rollup at 10,000 hosts and 100,000 queued jobs.

Writes a month of history with bulk inserts (status events, repair jobs, test jobs and their
leases) into a throwaway PostgreSQL database, then times stats.selectors' two lists and counts
their queries. `python -m bench.stats --hosts 10000` (docs/performance.md#statistics).

`python -m bench.stats --rollup --hosts 10000 --queued 100000 [--json]` instead labels the hosts
(60 boards, 10 pools), leases 60 % of them, queues the jobs, then times one minute's rollup
(stats.rollup.minute_rows and its write), an hour made of 60 minute rows, and the history's
reads (docs/performance.md#lab-history).
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
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


def build_rollup(hosts: int, queued: int, seed: int) -> None:
    """Labelled hosts, 60 % of them leased, a long queue, and a minute's finished jobs."""
    from django.utils import timezone

    from hosts.models import Host, Label
    from jobs.choices import JobStatus, ReleaseReason
    from jobs.models import Job, Lease, encode_labels

    rng = random.Random(seed)
    now = timezone.now()
    boards = [f"board:b{i:02}" for i in range(60)]
    pools = [f"pool:p{i}" for i in range(10)]
    with dbload.timed(f"{hosts} labelled hosts"):
        Host.objects.bulk_create(Host(hostname=f"dut{i:05}") for i in range(hosts))
        Label.objects.bulk_create(Label(name=name) for name in boards + pools + ["cam:yes"])
        label_ids = dict(Label.objects.values_list("name", "pk"))
        ids = list(Host.objects.order_by("pk").values_list("pk", flat=True))
        through = Host.labels.through
        pairs = []
        for n, pk in enumerate(ids):
            pairs.append(through(host_id=pk, label_id=label_ids[boards[n % 60]]))
            pairs.append(through(host_id=pk, label_id=label_ids[pools[n % 10]]))
        through.objects.bulk_create(pairs, batch_size=5000)
    with dbload.timed(f"{queued} queued jobs, {int(hosts * 0.6)} leases"):
        jobs = []
        for _ in range(queued):
            labels = [rng.choice(boards)] + ([rng.choice(pools)] if rng.random() < 0.5 else [])
            jobs.append(
                Job(
                    name=f"test-{rng.randrange(300)}", label_key=encode_labels(labels),
                    priority=rng.choice((20, 40, 60, 70)),
                    created_at=now - timedelta(seconds=rng.randrange(86400)),
                )
            )  # fmt: skip
        Job.objects.bulk_create(jobs, batch_size=5000)
        running = Job.objects.bulk_create(
            Job(name="running", status=JobStatus.RUNNING, label_key=encode_labels([boards[0]]),
                created_at=now - timedelta(seconds=rng.randrange(600)), attempts=1)
            for _ in range(int(hosts * 0.6))
        )  # fmt: skip
        Lease.objects.bulk_create(
            Lease(host_id=pk, job=job, attempt=1, expires_at=now + timedelta(hours=1),
                  acquired_at=now - timedelta(seconds=rng.randrange(120)))
            for pk, job in zip(ids, running, strict=False)
        )  # fmt: skip
        done = Job.objects.bulk_create(
            Job(name="done", status=rng.choice((JobStatus.PASSED, JobStatus.FAILED)),
                label_key=encode_labels([rng.choice(boards)]), attempts=1,
                created_at=now - timedelta(minutes=10), finished_at=now - timedelta(seconds=30))
            for _ in range(200)
        )  # fmt: skip
        Lease.objects.bulk_create(
            Lease(host_id=ids[-1 - n], job=job, attempt=1, expires_at=job.finished_at,
                  released_at=job.finished_at, release_reason=ReleaseReason.COMPLETED)
            for n, job in enumerate(done)
        )  # fmt: skip
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")


def time_rollup(rounds: int) -> dict[str, dict[str, float]]:
    """One minute's rollup, an hour from its minutes, and the history's reads, each timed."""
    from django.db import connection, transaction
    from django.test.utils import CaptureQueriesContext
    from django.utils import timezone

    from stats import history
    from stats.models import LabHour, LabMinute
    from stats.ranges import time_range
    from stats.rollup import floor_hour, floor_minute, hour_rows, lab_rollup, minute_rows

    now = timezone.now()
    bucket = floor_minute(now) - timedelta(minutes=1)
    # A day of minute rows and a month of hour rows, copies of this minute's, for the reads.
    template = minute_rows(bucket=bucket)
    for m in range(1, 24 * 60):
        LabMinute.objects.bulk_create(
            LabMinute(**{**_fields(row), "bucket": bucket - timedelta(minutes=m)})
            for row in template
        )
    hour = floor_hour(now) - timedelta(hours=1)
    minutes = [
        LabMinute(**{**_fields(row), "bucket": hour + timedelta(minutes=m)})
        for m in range(60)
        for row in template
    ]
    for h in range(1, 30 * 24):
        LabHour.objects.bulk_create(
            hour_rows(minutes[: len(template)], bucket=hour - timedelta(hours=h))
        )

    def rollup_once(*, hour_done: bool) -> float:
        """lab_rollup's time for the minute, rolled back after so each round writes it
        afresh; hour_done: the last hour is made already (an ordinary minute)."""
        with transaction.atomic():
            if hour_done:
                LabHour.objects.bulk_create(hour_rows(minutes[: len(template)], bucket=hour))
            started = time.perf_counter()
            lab_rollup(now=now)
            elapsed = (time.perf_counter() - started) * 1000
            transaction.set_rollback(True)
        return elapsed

    steps = {
        "minute rows (read)": lambda: minute_rows(bucket=bucket),
        "an hour from 60 minutes": lambda: hour_rows(minutes, bucket=hour),
        "history 24h, lab": lambda: history.lab_series(
            window=time_range("24h", now=now, default="24h"), label=""
        ),
        "history 30d, a board": lambda: history.lab_series(
            window=time_range("30d", now=now, default="30d"), label="board:b07"
        ),
    }
    results = {}
    for name, hour_done in (
        ("lab_rollup, a minute", True),
        ("lab_rollup, a minute and its hour", False),
    ):
        times = [rollup_once(hour_done=hour_done) for _ in range(rounds)]
        results[name] = {
            "rows": len(template),
            "queries": 0,
            "p50_ms": statistics.median(times),
            "min_ms": min(times),
            "max_ms": max(times),
        }
        with CaptureQueriesContext(connection) as queries:
            rollup_once(hour_done=hour_done)
        results[name]["queries"] = len(queries) - hour_done  # less the hour rows' insert
    for name, step in steps.items():
        times = []
        for _ in range(rounds):
            with CaptureQueriesContext(connection) as queries:
                started = time.perf_counter()
                out = step()
                times.append((time.perf_counter() - started) * 1000)
        if name == "minute rows (read)":
            for query in sorted(queries.captured_queries, key=lambda q: -float(q["time"]))[:5]:
                print(
                    f"    {float(query['time']) * 1000:.0f} ms  {query['sql'][:100]}",
                    file=sys.stderr,
                )
        results[name] = {
            "rows": len(out) if isinstance(out, list) else len(template),
            "queries": len(queries),
            "p50_ms": statistics.median(times),
            "min_ms": min(times),
            "max_ms": max(times),
        }
    return results


def _fields(row: object) -> dict:
    return {
        field.name: getattr(row, field.name)
        for field in row._meta.concrete_fields  # type: ignore[attr-defined]
        if field.name != "id"
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--hosts", type=int, default=10_000)
    parser.add_argument("--runs-per-host", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--db", default="bench_stats")
    parser.add_argument("--keep", action="store_true", help="keep the database (and reuse it)")
    parser.add_argument("--rollup", action="store_true", help="time the lab history's rollup")
    parser.add_argument("--queued", type=int, default=100_000)
    parser.add_argument("--json", action="store_true", help="print one JSON line")
    args = parser.parse_args()
    from django.db import connection

    if args.rollup:
        dbload.setup_django(args.db, fresh=True)
        build_rollup(args.hosts, args.queued, args.seed)
        results = time_rollup(args.rounds)
        if args.json:
            print(json.dumps({"hosts": args.hosts, "queued": args.queued, "steps": results}))
        else:
            print("| step | rows | queries | min ms | p50 ms | max ms |\n|---|---|---|---|---|---|")
            for name, r in results.items():
                print(
                    f"| {name} | {r['rows']} | {r['queries']} | {r['min_ms']:.0f} "
                    f"| {r['p50_ms']:.0f} | {r['max_ms']:.0f} |"
                )
        dbload.drop_database(args.db)
        return

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
