"""A worker's capacity: staff's max_jobs and its runner's reported concurrency, the smaller wins."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import IntegrityError, transaction
from django.utils import timezone

from hosts import services
from hosts.capacity import WorkerLoad
from hosts.choices import EventKind
from hosts.models import HostEvent, Worker
from jobs import services as job_services
from jobs.models import Lease
from schedsite.errors import InvalidInput
from tests import factories as f
from tests.jobs.test_triggers import ticks_enqueued


@pytest.mark.parametrize(
    ("max_jobs", "runner_concurrency", "capacity"),
    [(None, None, None), (8, None, 8), (None, 4, 4), (8, 4, 4), (2, 4, 2)],
)
def test_the_capacity_is_the_smaller_limit_set_or_unlimited(max_jobs, runner_concurrency, capacity):
    worker = Worker(name="w1", max_jobs=max_jobs, runner_concurrency=runner_concurrency)
    assert worker.capacity == capacity


@pytest.mark.django_db
def test_the_database_refuses_a_max_jobs_of_zero():
    worker = f.worker("w1")
    with pytest.raises(IntegrityError), transaction.atomic():
        Worker.objects.filter(pk=worker.pk).update(max_jobs=0)
    assert Worker.objects.get(pk=worker.pk).max_jobs is None


# --- worker_loads ---------------------------------------------------------------------------


@pytest.mark.django_db
def test_worker_loads_count_active_job_leases_and_not_reservations(sam, django_assert_num_queries):
    rack = f.rack()  # rack-1: h1 and h2
    h3 = f.host("h3", ["board:x"], worker=rack)
    idle = f.worker("idle")
    f.worker("unlimited")
    Worker.objects.filter(pk=rack.pk).update(max_jobs=8, runner_concurrency=4)
    Worker.objects.filter(pk=idle.pk).update(max_jobs=2)
    kept, released = f.job("J1"), f.job("J2")
    job_services.lease_reserve(host=h3, holder=sam, duration=timedelta(hours=1), reason="debug")
    job_services.scheduler_tick()
    lease = Lease.objects.active().get(job=released)
    job_services.lease_release(lease=lease, by=sam, requeue=True, reason="moved")
    assert Lease.objects.active().filter(job=kept).exists()

    with django_assert_num_queries(1):
        loads = Worker.objects.worker_loads()

    # h1 or h2 runs J1; J2's lease ended; h3's reservation runs nothing on the runner.
    assert loads == {
        "rack-1": WorkerLoad(limit=4, running=1),
        "idle": WorkerLoad(limit=2, running=0),
    }


# --- max_jobs -------------------------------------------------------------------------------


@pytest.mark.django_db
def test_setting_and_clearing_max_jobs_is_audited_with_old_and_new(sam):
    worker = f.worker("w1")
    services.worker_update(worker=worker, by=sam, max_jobs=8)
    services.worker_update(worker=worker, by=sam, max_jobs=8)  # no change: no event
    services.worker_update(worker=worker, by=sam, max_jobs=None)

    assert Worker.objects.get(pk=worker.pk).max_jobs is None
    events = HostEvent.objects.filter(worker=worker, kind=EventKind.CAPACITY).order_by("id")
    assert list(events.values_list("actor", "message")) == [
        ("sam", "max jobs unlimited → 8"),
        ("sam", "max jobs 8 → unlimited"),
    ]


@pytest.mark.django_db
@pytest.mark.parametrize("bad", [0, -1, True, "3", 100_001])
def test_a_max_jobs_below_one_or_not_a_number_is_refused(bad):
    worker = f.worker("w1")
    with pytest.raises(InvalidInput, match="max jobs") as err:
        services.worker_update(worker=worker, by="sam", max_jobs=bad)
    assert err.value.field == "max_jobs"
    assert Worker.objects.get(pk=worker.pk).max_jobs is None
    assert not HostEvent.objects.filter(kind=EventKind.CAPACITY).exists()


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("before", "after", "ticks"),
    [(None, 8, 0), (8, 4, 0), (4, 8, 1), (4, None, 1), (8, 6, 0)],
)
def test_a_tick_is_asked_for_only_when_the_capacity_rises(
    before, after, ticks, django_capture_on_commit_callbacks
):
    worker = f.worker("w1")
    Worker.objects.filter(pk=worker.pk).update(max_jobs=before, runner_concurrency=6)

    def update() -> None:
        services.worker_update(worker=worker, by="sam", max_jobs=after)

    # 8 → 6 changes max_jobs but not the capacity, which the runner's 6 holds.
    assert ticks_enqueued(update, django_capture_on_commit_callbacks) == ticks


@pytest.mark.django_db
def test_a_worker_is_created_with_its_max_jobs(sam):
    worker = services.worker_create(name="w9", by=sam, max_jobs=3)
    assert worker.max_jobs == 3 and worker.capacity == 3
    assert HostEvent.objects.get(worker=worker).message == "worker w9 added; max jobs 3"


# --- the runner's concurrency, from its heartbeat -------------------------------------------


@pytest.mark.django_db
def test_the_heartbeat_stores_a_changed_concurrency_and_audits_it(
    django_capture_on_commit_callbacks,
):
    worker = f.worker("w1")
    at = timezone.now()

    services.worker_heartbeat(worker=worker, at=at, concurrency=4)
    services.worker_heartbeat(worker=worker, at=at, concurrency=4)  # unchanged: no event
    services.worker_heartbeat(worker=worker, at=at)  # an older runner: left as it was

    worker.refresh_from_db()
    assert worker.runner_concurrency == 4 and worker.last_seen == at
    events = HostEvent.objects.filter(worker=worker, kind=EventKind.CAPACITY)
    assert list(events.values_list("actor", "message")) == [("w1", "runner concurrency (none) → 4")]

    # A runner restarted with more slots frees capacity: the scheduler should use it now.
    def beat() -> None:
        services.worker_heartbeat(worker=worker, at=at, concurrency=8)

    assert ticks_enqueued(beat, django_capture_on_commit_callbacks) == 1
    assert Worker.objects.get(pk=worker.pk).capacity == 8
