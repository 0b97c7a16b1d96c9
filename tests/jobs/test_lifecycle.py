"""The lease lifecycle and runner protocol: every transition is a compare-and-set."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from hosts import services as host_services
from hosts.choices import HostStatus
from hosts.models import Host, HostEvent
from jobs import services
from jobs.choices import JobStatus, ReleaseReason
from jobs.models import Job, Lease
from schedsite.errors import Conflict, InvalidInput
from tests import factories as f

pytestmark = pytest.mark.django_db


@pytest.fixture
def leased_job():
    f.host("h1", ["board:x"], worker=f.worker("w1"))
    job = f.job("J1", max_retries=1)
    services.scheduler_tick()
    job.refresh_from_db()
    assert job.status == JobStatus.LEASED
    return job


def test_a_runner_starts_heartbeats_and_completes_a_job(leased_job):
    job = services.job_start(job=leased_job, by="runner-1")
    assert job.status == JobStatus.RUNNING
    lease = Lease.objects.get(job=job)
    before = lease.expires_at
    lease = services.lease_heartbeat(lease=lease, at=timezone.now() + timedelta(seconds=5))
    assert lease.expires_at > before

    job = services.job_complete(job=job, result="passed", by="runner-1", message="ok")

    lease.refresh_from_db()
    assert job.status == JobStatus.PASSED and job.message == "ok"
    assert lease.release_reason == ReleaseReason.COMPLETED
    assert Host.objects.get(hostname="h1").status == HostStatus.READY


def test_a_runner_can_report_the_host_broken(leased_job):
    services.job_start(job=leased_job, by="runner-1")
    services.job_complete(job=leased_job, result="failed", by="runner-1", host_ok=False)
    assert Host.objects.get(hostname="h1").status == HostStatus.NEEDS_REPAIR


def test_completing_twice_is_a_conflict_and_changes_nothing(leased_job):
    services.job_start(job=leased_job, by="runner-1")
    services.job_complete(job=leased_job, result="passed", by="runner-1")
    with pytest.raises(Conflict):
        services.job_complete(job=leased_job, result="failed", by="runner-1")
    leased_job.refresh_from_db()
    assert leased_job.status == JobStatus.PASSED


def test_a_late_complete_after_expiry_is_a_conflict(leased_job):
    lease = Lease.objects.get(job=leased_job)
    services.scheduler_tick(now=lease.expires_at + timedelta(seconds=1))
    with pytest.raises(Conflict):
        services.job_complete(job=leased_job, result="passed", by="runner-1")
    leased_job.refresh_from_db()
    assert leased_job.status == JobStatus.QUEUED  # requeued by the expiry, untouched since


def test_a_heartbeat_for_a_released_lease_is_a_conflict(leased_job):
    lease = Lease.objects.get(job=leased_job)
    services.lease_release(lease=lease, by="sam")
    with pytest.raises(Conflict):
        services.lease_heartbeat(lease=lease)


def test_a_heartbeat_marks_the_worker_seen(leased_job):
    lease = Lease.objects.get(job=leased_job)
    at = timezone.now() + timedelta(seconds=3)
    services.lease_heartbeat(lease=lease, at=at)
    assert Host.objects.get(hostname="h1").worker.last_seen == at


def test_staff_release_requeues_the_job_by_default(leased_job):
    lease = Lease.objects.get(job=leased_job)
    services.lease_release(lease=lease, by="sam", reason="host acting up")
    leased_job.refresh_from_db()
    assert leased_job.status == JobStatus.QUEUED
    event = HostEvent.objects.filter(kind="released").get()
    assert event.actor == "sam" and "host acting up" in event.message


def test_staff_release_can_abort_the_job(leased_job):
    lease = Lease.objects.get(job=leased_job)
    services.lease_release(lease=lease, by="sam", requeue=False)
    leased_job.refresh_from_db()
    assert leased_job.status == JobStatus.ABORTED


def test_releasing_a_released_lease_is_a_conflict(leased_job):
    lease = Lease.objects.get(job=leased_job)
    services.lease_release(lease=lease, by="sam")
    with pytest.raises(Conflict):
        services.lease_release(lease=lease, by="sam")


def test_reserving_a_leased_host_is_a_conflict(leased_job):
    host = Host.objects.get(hostname="h1")
    with pytest.raises(Conflict):
        services.lease_reserve(host=host, holder="sam", duration=timedelta(hours=1), reason="x")


def test_a_reservation_needs_a_reason_and_a_sane_duration():
    host = f.host("h1", ["board:x"])
    with pytest.raises(InvalidInput):
        services.lease_reserve(host=host, holder="sam", duration=timedelta(hours=1), reason=" ")
    with pytest.raises(InvalidInput):
        services.lease_reserve(host=host, holder="sam", duration=timedelta(0), reason="x")
    assert not Lease.objects.exists()


def test_a_reservation_can_be_extended():
    host = f.host("h1", ["board:x"])
    lease = services.lease_reserve(
        host=host, holder="sam", duration=timedelta(hours=1), reason="manual debugging"
    )
    lease = services.lease_extend(lease=lease, by="sam", duration=timedelta(hours=3))
    assert lease.expires_at > timezone.now() + timedelta(hours=2)


def test_aborting_a_suite_aborts_its_jobs_and_frees_its_hosts():
    f.host("h1", ["board:x"])
    suite = f.suite("S", 3)
    services.scheduler_tick()
    assert services.suite_abort(suite=suite, by="sam") == 3
    assert set(Job.objects.values_list("status", flat=True)) == {JobStatus.ABORTED}
    assert not Lease.objects.filter(released_at__isnull=True).exists()
    with pytest.raises(Conflict):
        services.suite_abort(suite=suite, by="sam")


# A host's lock and a worker's pause: the object, its two services, and the events they
# write (the first is also the object's flag).
HOLDS = [
    (
        lambda: f.host("h1"),
        host_services.host_lock,
        host_services.host_unlock,
        "locked",
        "unlocked",
    ),
    (
        lambda: f.worker("w1"),
        host_services.worker_pause,
        host_services.worker_resume,
        "paused",
        "resumed",
    ),
]


@pytest.mark.parametrize(("make", "hold", "release", "held", "freed"), HOLDS, ids=["lock", "pause"])
def test_a_hold_needs_a_reason_and_holding_or_releasing_twice_is_a_conflict(
    make, hold, release, held, freed
):
    subject = make()
    target = {subject._meta.model_name: subject}
    with pytest.raises(InvalidInput):
        hold(**target, by="sam", reason="")
    hold(**target, by="sam", reason="debugging")
    with pytest.raises(Conflict):
        hold(**target, by="sam", reason="again")
    assert not getattr(release(**target, by="sam"), held)
    with pytest.raises(Conflict):
        release(**target, by="sam")
    kinds = list(HostEvent.objects.filter(**target).values_list("kind", flat=True))
    assert kinds.count(held) == 1 and kinds.count(freed) == 1


def test_bad_submissions_are_rejected_whole():
    with pytest.raises(InvalidInput):
        services.suite_submit(
            owner="alice", name="S", priority=101, jobs=[services.JobSpec(name="t")]
        )
    with pytest.raises(InvalidInput):
        services.suite_submit(
            owner="alice", name="S", jobs=[services.JobSpec(name="t"), services.JobSpec(name="")]
        )
    with pytest.raises(InvalidInput):
        services.suite_submit(
            owner="alice", name="S", jobs=[services.JobSpec(name="t", labels=["bad label"])]
        )
    with pytest.raises(InvalidInput):
        services.suite_submit(
            owner="alice", name="S", min_duts=3, max_duts=2, jobs=[services.JobSpec(name="t")]
        )
    from jobs.models import Suite

    assert not Suite.objects.exists() and not Job.objects.exists()


def test_a_fanout_suite_pins_one_job_to_every_matching_host():
    f.host("h1", ["board:x", "bt"])
    f.host("h2", ["board:x", "bt"])
    f.host("h3", ["board:x"])
    suite = services.suite_submit(
        owner="alice", name="bt all", fanout_labels=["bt"], fanout_name="bluetooth_Pair"
    )
    pinned = sorted(suite.jobs.values_list("host__hostname", flat=True))
    assert pinned == ["h1", "h2"]
    services.scheduler_tick()
    assert Lease.objects.filter(released_at__isnull=True).count() == 2
