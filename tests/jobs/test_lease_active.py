"""Which leases are active: one rule (jobs.querysets.ACTIVE_LEASE), asked five ways."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from hosts.models import Host
from jobs.choices import JobStatus, ReleaseReason
from jobs.filtersets import LeaseFilterSet
from jobs.models import Job, Lease
from jobs.querysets import ACTIVE_LEASE_SQL

pytestmark = pytest.mark.django_db

# (a job's lease or a manual reservation, released?, expires in seconds) -> active?
CASES = {
    "a job's lease, held": (("job", False, 3600), True),
    "a job's lease, past its expiry but not yet released": (("job", False, -60), True),
    "a job's lease, released": (("job", True, 3600), False),
    "a reservation, held": (("reservation", False, 3600), True),
    "a reservation, past its expiry but not yet released": (("reservation", False, -60), True),
    "a reservation, ended": (("reservation", True, 3600), False),
}


@pytest.mark.parametrize(("case", "expected"), CASES.values(), ids=CASES.keys())
def test_every_reader_of_the_lease_active_rule_gives_the_same_answer(case, expected):
    kind, released, expires_in = case
    now = timezone.now()
    host = Host.objects.create(hostname="dut1")
    job = Job.objects.create(name="t1", status=JobStatus.LEASED) if kind == "job" else None
    lease = Lease.objects.create(
        host=host,
        job=job,
        expires_at=now + timedelta(seconds=expires_in),
        released_at=now if released else None,
        release_reason=ReleaseReason.RELEASED if released else "",
    )

    # The Python predicate, on a row as read.
    assert Lease.objects.get(pk=lease.pk).active is expected
    # The queryset and its complement.
    assert Lease.objects.active().filter(pk=lease.pk).exists() is expected
    assert Lease.objects.released().filter(pk=lease.pk).exists() is not expected
    # The raw-SQL fragment (the runners' bulk heartbeat).
    with connection.cursor() as cursor:
        table = Lease._meta.db_table
        cursor.execute(f"SELECT id FROM {table} WHERE id = %s AND {ACTIVE_LEASE_SQL}", [lease.pk])
        assert (cursor.fetchone() is not None) is expected
    # The API's and the leases page's `?active=` filter.
    for value, wanted in (("true", expected), ("false", not expected)):
        rows = LeaseFilterSet({"active": value}, queryset=Lease.objects.all()).qs
        assert rows.filter(pk=lease.pk).exists() is wanted, value
