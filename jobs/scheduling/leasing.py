"""Writing many leases at once: the tick's planned leases and its maintenance leases."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta

from django.conf import settings
from django.db import connection

from jobs.models import Lease
from schedsite.pgarrays import bigint_array


def _columns(model: type, *names: str) -> str:
    return ", ".join(connection.ops.quote_name(model._meta.get_field(n).column) for n in names)


def insert_leases(pairs: Iterable[tuple[int, int]], *, now: datetime) -> dict[int, int]:
    """Create one lease per (host id, job id); return host id -> lease id."""
    pairs = list(pairs)
    expires = now + timedelta(seconds=settings.LEASE_TTL)
    if connection.vendor != "postgresql":
        leases = Lease.objects.bulk_create(
            [
                Lease(
                    host_id=host_id,
                    job_id=job_id,
                    reason="scheduled",
                    acquired_at=now,
                    expires_at=expires,
                )
                for host_id, job_id in pairs
            ]
        )
        return {lease.host_id: lease.pk for lease in leases if lease.pk is not None}
    # One INSERT ... SELECT FROM unnest(arrays): bulk_create spends about a second of a cold
    # tick building and binding 10,000 rows x 7 parameters; two arrays bind in microseconds.
    # The partial unique constraints still guard every row.
    table = connection.ops.quote_name(Lease._meta.db_table)
    columns = _columns(
        Lease, "host", "job", "reason", "acquired_at", "expires_at", "release_reason", "released_by"
    )
    sql = (
        f"INSERT INTO {table} ({columns}) "
        "SELECT h, j, 'scheduled', %s, %s, '', '' "
        "FROM unnest(%s::bigint[], %s::bigint[]) AS u(h, j) "
        f"RETURNING {_columns(Lease, 'host', 'id')}"
    )
    with connection.cursor() as cursor:
        hosts, jobs = bigint_array(h for h, _ in pairs), bigint_array(j for _, j in pairs)
        cursor.execute(sql, [now, expires, hosts, jobs])
        return dict(cursor.fetchall())
