"""The runner protocol addressed by lease (`lease_job_*`), called as services, without HTTP.

A runner names the lease it holds, never the job: these tests check that each step moves the
job and the lease as docs/states.md says, writes its event, asks for a tick where
docs/scheduling.md#triggers says, and that a refused step changes nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta

import pytest
from django.utils import timezone

from hosts.choices import EventKind, HostStatus
from hosts.models import Host, HostEvent, Worker
from jobs import services
from jobs.choices import JobStatus, ReleaseReason
from jobs.models import Job, Lease
from schedsite.errors import Conflict, InvalidInput, ServiceError
from tests import factories as f
from tests.jobs.test_triggers import ticks_enqueued

pytestmark = pytest.mark.django_db

RUNNER = "runner-w1"


def leased(*, max_retries: int = 0, worker: Worker | None = None) -> Lease:
    """One job leased to one host by a tick; returns its lease."""
    f.host("h1", ["board:x"], worker=worker)
    job = f.job("J1", max_retries=max_retries)
    services.scheduler_tick()
    return Lease.objects.active().get(job=job)


def running(**kwargs: object) -> Lease:
    lease = leased(**kwargs)
    services.lease_job_start(lease=lease, by=RUNNER)
    lease.refresh_from_db()
    return lease


def reservation() -> Lease:
    return services.lease_reserve(
        host=f.host("h9"), holder="sam", duration=timedelta(hours=1), reason="manual work"
    )


def rows() -> tuple:
    """Everything a lease_job_* step could change: jobs, leases, host statuses, events."""
    return (
        sorted(Job.objects.values_list("pk", "status", "started_at", "finished_at", "message")),
        sorted(
            Lease.objects.values_list(
                "pk", "job_id", "expires_at", "heartbeat_at", "released_at", "release_reason"
            )
        ),
        sorted(Host.objects.values_list("hostname", "status")),
        sorted(Worker.objects.values_list("name", "last_seen")),
        HostEvent.objects.count(),
    )


def assert_released(lease: Lease, *, at: datetime, reason: str, kind: str) -> HostEvent:
    """The runner released the lease at `at` for `reason`, its host is free, one event says so."""
    lease.refresh_from_db()
    assert (lease.released_at, lease.release_reason, lease.released_by) == (at, reason, RUNNER)
    assert Host.objects.get(hostname="h1").status == HostStatus.READY
    event = HostEvent.objects.get(kind=kind)
    assert (event.actor, event.job_id, event.lease_id) == (RUNNER, lease.job_id, lease.pk)
    return event


# --- the happy paths ------------------------------------------------------------------------


def test_start_runs_the_job_and_renews_its_lease(settings):
    settings.LEASE_TTL = 600
    lease = leased()
    at = timezone.now() + timedelta(minutes=3)
    job = services.lease_job_start(lease=lease, by=RUNNER, at=at)
    assert job.status == JobStatus.RUNNING and job.started_at == at
    lease.refresh_from_db()
    assert lease.released_at is None
    assert lease.heartbeat_at == at and lease.expires_at == at + timedelta(seconds=600)
    event = HostEvent.objects.get(kind=EventKind.STARTED)
    assert (event.actor, event.host.hostname, event.job_id, event.lease_id) == (
        RUNNER,
        "h1",
        job.pk,
        lease.pk,
    )
    assert event.created_at == at and event.message == "job J1 started"


@pytest.mark.parametrize("result", [JobStatus.PASSED, JobStatus.FAILED])
def test_complete_records_the_result_and_releases_the_lease(result):
    lease = running()
    at = timezone.now() + timedelta(minutes=5)
    job = services.lease_job_complete(
        lease=lease, result=result, by=RUNNER, message="42 tests", at=at
    )
    assert job.status == result and job.finished_at == at and job.message == "42 tests"
    event = assert_released(lease, at=at, reason=ReleaseReason.COMPLETED, kind=EventKind.COMPLETED)
    assert event.message == f"job J1 {result}: 42 tests"


def test_complete_of_a_leased_job_that_never_started_is_accepted():
    lease = leased()
    job = services.lease_job_complete(lease=lease, result=JobStatus.FAILED, by=RUNNER)
    assert job.status == JobStatus.FAILED
    assert Lease.objects.get(pk=lease.pk).release_reason == ReleaseReason.COMPLETED


def test_complete_with_a_broken_host_sends_it_to_needs_repair():
    lease = running()
    services.lease_job_complete(lease=lease, result=JobStatus.FAILED, by=RUNNER, host_ok=False)
    host = Host.objects.get(hostname="h1")
    assert host.status == HostStatus.NEEDS_REPAIR
    status = HostEvent.objects.get(kind=EventKind.STATUS, host=host)
    assert (status.actor, status.old_status, status.new_status) == (RUNNER, "ready", "needs_repair")
    assert status.message == "runner reported the host broken after job J1"


def test_heartbeat_renews_the_lease_and_marks_the_worker_seen(settings):
    settings.LEASE_TTL = 600
    lease = running(worker=f.worker("w1"))
    events = HostEvent.objects.count()
    at = timezone.now() + timedelta(minutes=4)
    services.lease_job_heartbeat(lease=lease, by=RUNNER, at=at)
    lease.refresh_from_db()
    assert lease.heartbeat_at == at and lease.expires_at == at + timedelta(seconds=600)
    assert lease.released_at is None
    assert Worker.objects.get(name="w1").last_seen == at
    assert Job.objects.get().status == JobStatus.RUNNING
    # A heartbeat is not audited (docs/states.md#lease): it would flood the host's history.
    assert HostEvent.objects.count() == events


@pytest.mark.parametrize("start", [False, True], ids=["leased", "running"])
def test_abort_ends_the_job_and_releases_the_lease(start):
    lease = running() if start else leased()
    at = timezone.now() + timedelta(minutes=1)
    job = services.lease_job_abort(lease=lease, by=RUNNER, reason="runner shutting down", at=at)
    assert job.status == JobStatus.ABORTED and job.finished_at == at
    assert job.message == "runner shutting down"
    event = assert_released(lease, at=at, reason=ReleaseReason.ABORTED, kind=EventKind.RELEASED)
    assert event.message == "job J1 aborted: runner shutting down"


# --- ticks: asked for where a host is freed, not otherwise ----------------------------------


STEPS = {
    "start": (leased, lambda lease: services.lease_job_start(lease=lease, by=RUNNER), 0),
    "heartbeat": (running, lambda lease: services.lease_job_heartbeat(lease=lease, by=RUNNER), 0),
    "complete": (
        running,
        lambda lease: services.lease_job_complete(lease=lease, result="passed", by=RUNNER),
        1,
    ),
    "abort": (running, lambda lease: services.lease_job_abort(lease=lease, by=RUNNER), 1),
}


@pytest.mark.parametrize("step", STEPS)
def test_a_tick_is_asked_for_only_when_the_step_frees_the_host(
    step, django_capture_on_commit_callbacks
):
    setup, action, ticks = STEPS[step]
    lease = setup()
    assert ticks_enqueued(lambda: action(lease), django_capture_on_commit_callbacks) == ticks


# --- refusals: each raises its error and changes nothing ------------------------------------


def start(lease: Lease) -> object:
    return services.lease_job_start(lease=lease, by=RUNNER)


def complete(lease: Lease) -> object:
    return services.lease_job_complete(lease=lease, result="passed", by=RUNNER)


def heartbeat(lease: Lease) -> object:
    return services.lease_job_heartbeat(lease=lease, by=RUNNER)


def abort(lease: Lease) -> object:
    return services.lease_job_abort(lease=lease, by=RUNNER)


EVERY_STEP = [start, complete, heartbeat, abort]


def assert_refused(
    action: Callable[[Lease], object], lease: Lease, error: type[ServiceError], match: str
) -> None:
    before = rows()
    with pytest.raises(error, match=match):
        action(lease)
    assert rows() == before


@pytest.mark.parametrize("action", EVERY_STEP, ids=lambda a: a.__name__)
def test_a_released_lease_is_refused_naming_why(action):
    lease = running()
    services.lease_release(lease=lease, by="sam", requeue=False, reason="bad cable")
    assert_refused(action, lease, Conflict, r"no longer active \(released\)")


@pytest.mark.parametrize("action", EVERY_STEP, ids=lambda a: a.__name__)
def test_an_expired_lease_whose_job_was_leased_again_cannot_touch_the_new_lease(action):
    # The runner went quiet, the tick expired its lease and gave the job to another host: the
    # old runner's late call must not start, finish, heartbeat or abort the job's new lease.
    old = running(max_retries=1)
    f.host("h2", ["board:x"])
    services.scheduler_tick(now=timezone.now() + timedelta(hours=1))
    new = Lease.objects.active().get(job=old.job)
    assert new.pk != old.pk and new.host.hostname == "h2"
    assert_refused(action, old, Conflict, r"no longer active \(expired\)")


@pytest.mark.parametrize("action", EVERY_STEP, ids=lambda a: a.__name__)
def test_a_manual_reservation_is_refused(action):
    assert_refused(action, reservation(), Conflict, "manual reservation")


@pytest.mark.parametrize("action", EVERY_STEP, ids=lambda a: a.__name__)
def test_a_lease_that_no_longer_exists_is_refused(action):
    lease = leased()
    gone = Lease(pk=lease.pk + 1000, host=lease.host, job=lease.job)
    assert_refused(action, gone, Conflict, "no longer active")


def test_starting_a_job_that_is_already_running_is_refused():
    lease = running()
    assert_refused(start, lease, Conflict, "is running, not leased")


def test_a_heartbeat_past_expiry_is_refused_until_the_tick_ends_the_lease():
    lease = running()
    late = lease.expires_at + timedelta(seconds=1)
    before = rows()
    with pytest.raises(Conflict, match="no longer active"):
        services.lease_job_heartbeat(lease=lease, by=RUNNER, at=late)
    assert rows() == before


@pytest.mark.parametrize("result", ["", "error", "PASSED", "aborted"])
def test_complete_with_a_result_other_than_passed_or_failed_is_refused(result):
    lease = running()
    before = rows()
    with pytest.raises(InvalidInput) as err:
        services.lease_job_complete(lease=lease, result=result, by=RUNNER)
    assert err.value.field == "result"
    assert rows() == before
