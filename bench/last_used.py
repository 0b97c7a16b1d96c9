"""What `host_choice: spread` reads each tick: when every host's last lease ended.

Loads 10,000 hosts and a lease history (released leases, `--history` per host on average),
then times the snapshot's read (`snapshot.hosts_last_used`) against the grouped MAX over the
whole history it replaced. min / median of `--repeats`.

    python -m bench.last_used --hosts 10000 --history 100 --repeats 5
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

from bench import dbload
from bench.cli import print_result
from bench.labgen import LabShape, generate


def _timed(read: object, repeats: int) -> dict[str, float]:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        read()  # type: ignore[operator]
        times.append((time.perf_counter() - start) * 1000)
    return {"min_ms": round(min(times), 1), "median_ms": round(statistics.median(times), 1)}


def main() -> None:
    """Time the per-host last-release read against a grouped MAX over the history."""
    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("--hosts", type=int, default=10_000)
    parser.add_argument("--history", type=int, default=100, help="released leases per host")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--db", default="bench_last_used")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    dbload.setup_django(args.db)
    try:
        from django.db import connection
        from django.db.models import Max
        from django.utils import timezone

        from jobs.models import Lease
        from jobs.scheduling import snapshot

        dbload.load(generate(LabShape(args.hosts, 10, 5, 20, seed=1)), now=timezone.now())
        with connection.cursor() as cursor:
            cursor.execute(
                "INSERT INTO jobs_lease (host_id, reason, acquired_at, expires_at, released_at, "
                "release_reason, released_by, host_failed) "
                "SELECT h.id, '', t, t, t, 'released', 'bench', false FROM hosts_host h "
                "CROSS JOIN generate_series(1, %s) g, "
                "LATERAL (SELECT now() - make_interval(mins => g) t) x",
                [args.history],
            )
            cursor.execute("ANALYZE jobs_lease")

        def grouped() -> dict:
            rows = (
                Lease.objects.filter(released_at__isnull=False)
                .order_by()
                .values("host_id")
                .annotate(last=Max("released_at"))
                .values_list("host_id", "last")
            )
            return dict(rows)

        assert grouped() == snapshot.hosts_last_used()
        result = {
            "cores": os.cpu_count(),
            "hosts": args.hosts,
            "released_leases": args.hosts * args.history,
            "per_host_probe": _timed(snapshot.hosts_last_used, args.repeats),
            "grouped_max": _timed(grouped, args.repeats),
        }
    finally:
        from django.db import connections

        connections.close_all()
        dbload.drop_database(args.db)
    print_result(result, as_json=args.json, width=16)


if __name__ == "__main__":
    main()
