"""A runner's `start` with a build, raced on PostgreSQL: the host is provisioned once, with the
start, and the build it replaced is the one it carried (docs/api.md#provisioning)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from hosts.choices import EventKind, ProvisionResult
from hosts.models import Host, HostEvent, Provision
from jobs import services
from jobs.choices import JobStatus
from jobs.models import Job, Lease
from schedsite.errors import Conflict
from tests import factories as f
from tests.threads import race

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


def leased_to_r121() -> tuple[Lease, Job]:
    """Host eve1 on R119, leased by a tick to a job of build R121."""
    worker = f.worker("w1")
    f.host("eve1", ["board:eve"], worker=worker, build="R119")
    suite = f.suite("nightly", 1, labels=["board:eve"], build="R121")
    f.tick(timezone.now(), worker)
    lease = Lease.objects.active().select_related("job", "host").get()
    assert lease.provision_to == "R121"
    return lease, suite.jobs.get()


def start(lease_id: int, seconds: float) -> Job:
    lease = Lease.objects.select_related("job", "host").get(pk=lease_id)
    return services.lease_job_start(
        lease=lease, by="runner-1", build="R121", provision_seconds=seconds
    )


def test_two_starts_with_a_build_provision_the_host_once():
    lease, job = leased_to_r121()

    results = race(lambda: start(lease.pk, 300), lambda: start(lease.pk, 301))

    errors = [r for r in results if isinstance(r, BaseException)]
    assert len(errors) == 1 and isinstance(errors[0], Conflict), results
    assert Job.objects.get(pk=job.pk).status == JobStatus.RUNNING
    (row,) = Provision.objects.all()
    assert (row.build, row.from_build, row.result) == ("R121", "R119", ProvisionResult.OK)
    assert HostEvent.objects.filter(kind=EventKind.PROVISIONED).count() == 1
    assert Host.objects.get(hostname="eve1").current_build == "R121"


def test_a_start_with_a_build_and_the_leases_expiry_never_both_happen():
    lease, job = leased_to_r121()
    later = timezone.now() + timedelta(hours=2)  # past the lease's expiry

    results = race(lambda: start(lease.pk, 60), lambda: services.scheduler_tick(now=later))

    started = not isinstance(results[0], BaseException)
    host = Host.objects.get(hostname="eve1")
    if started:  # the start came first: it provisioned; the tick then expired the lease
        assert host.current_build == "R121" and Provision.objects.count() == 1
    else:  # the tick came first: nothing was provisioned, nothing started
        assert isinstance(results[0], Conflict), results
        assert host.current_build == "R119" and not Provision.objects.exists()
        assert Job.objects.get(pk=job.pk).started_at is None
