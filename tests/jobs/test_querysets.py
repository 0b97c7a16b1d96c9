"""Active leases, queued and unfinished jobs: each asked of the database one way."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from hosts.models import Host
from jobs.choices import JobStatus, ReleaseReason
from jobs.models import Job, Lease

pytestmark = pytest.mark.django_db


def test_active_leases_are_the_unreleased_ones_reservations_included():
    now = timezone.now()
    later = now + timedelta(hours=1)
    dut1, dut2, dut3 = (Host.objects.create(hostname=f"dut{i}") for i in (1, 2, 3))
    job = Job.objects.create(name="t1", status=JobStatus.RUNNING)
    running = Lease.objects.create(host=dut1, job=job, expires_at=later)
    reservation = Lease.objects.create(host=dut2, expires_at=later)
    Lease.objects.create(
        host=dut3, expires_at=later, released_at=now, release_reason=ReleaseReason.RELEASED
    )

    assert set(Lease.objects.active()) == {running, reservation}
    # The rule follows the relations too: a host's or a job's leases.
    assert list(dut3.leases.active()) == []
    assert list(job.leases.active()) == [running]


STATUSES = {
    JobStatus.QUEUED: (True, True),
    JobStatus.LEASED: (False, True),
    JobStatus.RUNNING: (False, True),
    JobStatus.PASSED: (False, False),
    JobStatus.FAILED: (False, False),
    JobStatus.ABORTED: (False, False),
    JobStatus.ERROR: (False, False),
    JobStatus.EXPIRED: (False, False),
    JobStatus.SKIPPED: (False, False),
}


def test_queued_and_unfinished_jobs_by_status():
    assert set(STATUSES) == set(JobStatus.values), "a new status needs a row here"
    for status in STATUSES:
        Job.objects.create(name=status, status=status)

    queued = set(Job.objects.queued().values_list("name", flat=True))
    unfinished = set(Job.objects.unfinished().values_list("name", flat=True))
    assert queued == {status for status, (q, _u) in STATUSES.items() if q}
    assert unfinished == {status for status, (_q, u) in STATUSES.items() if u}
