"""Labs whose hosts broke and whose tests passed and failed, for the statistics tests."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from hosts.models import Host, Worker
from jobs.choices import JobKind, JobStatus
from jobs.models import Job, Lease
from tests import factories as f
from tests.factories import run, tick


def host_of(job: Job) -> str:
    return Lease.objects.active().get(job=job).host.hostname


def repair_of(hostname: str) -> Job:
    """The host's repair job that is leased now."""
    return Job.objects.get(kind=JobKind.REPAIR, host__hostname=hostname, status=JobStatus.LEASED)


@pytest.fixture
def broken_twice(db, settings):  # noqa: ANN001, ANN201
    """h1 broke twice ten hours ago (one repair failed, three ran); h2 passed a job.

    h1 was out of service from t0+1m to t0+2h (a failed repair, then one that passed), and
    from t0+3h+1m to t0+4h+1m: 2 h 59 min in all. Returns t0.
    """
    settings.REPAIR_BACKOFF = 0
    settings.RETRY_BACKOFF = 0
    t0 = timezone.now() - timedelta(hours=10)
    rack = f.rack()
    # The lab was installed an hour before t0.
    Host.objects.update(created_at=t0 - timedelta(hours=1))
    minute = timedelta(minutes=1)

    first = f.job("boot")
    tick(t0, rack)
    assert host_of(first) == "h1"
    run(first, JobStatus.FAILED, host_ok=False, at=t0 + minute)  # break 1
    tick(t0 + 2 * minute, rack)
    run(repair_of("h1"), JobStatus.FAILED, at=t0 + timedelta(hours=1))
    tick(t0 + timedelta(hours=1, minutes=1), rack)
    run(repair_of("h1"), JobStatus.PASSED, at=t0 + timedelta(hours=2))

    second = f.job("boot")
    tick(t0 + timedelta(hours=3), rack)
    assert host_of(second) == "h1"
    run(second, JobStatus.FAILED, host_ok=False, at=t0 + timedelta(hours=3, minutes=1))  # 2
    tick(t0 + timedelta(hours=3, minutes=2), rack)
    run(repair_of("h1"), JobStatus.PASSED, at=t0 + timedelta(hours=4, minutes=1))

    fine = f.job("boot", host=Host.objects.get(hostname="h2"))
    tick(t0 + timedelta(hours=5), rack)
    run(fine, JobStatus.PASSED, at=t0 + timedelta(hours=5, minutes=10))
    return t0


@pytest.fixture
def test_runs(db):  # noqa: ANN001, ANN201
    """smoke-t0 passed on h1 and failed on h2, both on build R1; stable-t0 passed on R1 and
    failed on R2; standalone 'lone' (no build) passed and failed."""
    rack = Worker.objects.filter(name="rack-1").first() or f.rack()
    h1, h2 = Host.objects.get(hostname="h1"), Host.objects.get(hostname="h2")
    now = timezone.now()

    def ran(name: str, build: str, host: Host, result: str) -> None:
        suite = f.suite(name, 1, build=build)
        job = suite.jobs.get()
        Job.objects.filter(pk=job.pk).update(host=host)  # pinned, so it lands on `host`
        tick(now, rack)
        assert host_of(job) == host.hostname
        run(job, result)

    ran("smoke", "R1", h1, JobStatus.PASSED)
    ran("smoke", "R1", h2, JobStatus.FAILED)
    ran("stable", "R1", h1, JobStatus.PASSED)
    ran("stable", "R2", h2, JobStatus.FAILED)
    for result in (JobStatus.PASSED, JobStatus.FAILED):
        job = f.job("lone", host=h1)
        tick(now, rack)
        run(job, result)
