"""Every event that can make a lease possible asks for a tick (docs/scheduling.md#triggers)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

import pytest
from django.utils import timezone
from django_q.conf import Conf
from django_q.models import OrmQ
from django_q.signals import post_spawn

from hosts import services as host_services
from hosts.choices import HostStatus
from jobs import services
from jobs import services as job_services
from jobs.models import Job, Lease, SchedulerState
from jobs.scheduling.triggers import TICK_FUNC
from tests import factories as f

pytestmark = pytest.mark.django_db


def ticks_enqueued(action: Callable[[], object], capture) -> int:  # noqa: ANN001
    """Run the action as one committed request; return how many ticks it enqueued."""
    SchedulerState.objects.update_or_create(pk=1, defaults={"tick_pending": False})
    before = queued_ticks()
    with capture(execute=True):
        action()
    return queued_ticks() - before


def queued_ticks() -> int:
    """Ticks waiting in the queue (a host moved to repair_failed also wakes the outbox)."""
    return sum(task.func() == TICK_FUNC for task in OrmQ.objects.all())


def running_job() -> Job:
    f.host("busy", ["board:x"])
    job = f.job("J1")
    services.scheduler_tick()
    job.refresh_from_db()
    return services.job_start(job=job, by="runner-1")


# Each scene sets up the lab and returns the event, so that only the event itself is measured.


def suite_submitted() -> Callable[[], object]:
    return lambda: f.suite("S", 1)


def job_submitted() -> Callable[[], object]:
    return lambda: f.job("solo")


def job_completed() -> Callable[[], object]:
    job = running_job()
    return lambda: services.job_complete(job=job, result="passed", by="runner-1")


def lease_released() -> Callable[[], object]:
    lease = Lease.objects.get(job=running_job())
    return lambda: services.lease_release(lease=lease, by="sam")


def host_unlocked() -> Callable[[], object]:
    host = host_services.host_lock(host=f.host("h"), by="sam", reason="debugging")
    return lambda: host_services.host_unlock(host=host, by="sam")


def worker_resumed() -> Callable[[], object]:
    worker = f.worker("w", paused=True)
    return lambda: host_services.worker_resume(worker=worker, by="sam")


def host_ready() -> Callable[[], object]:
    host = f.host("h", status=HostStatus.NEEDS_REPAIR)
    return lambda: job_services.host_set_status(host=host, status=HostStatus.READY, by="sam")


def worker_back_online() -> Callable[[], object]:
    worker = f.worker("w", online=False)
    return lambda: host_services.worker_heartbeat(worker=worker)


EVENTS = [
    suite_submitted,
    job_submitted,
    job_completed,
    lease_released,
    host_unlocked,
    worker_resumed,
    host_ready,
    worker_back_online,
]


@pytest.mark.parametrize("scene", EVENTS, ids=lambda scene: scene.__name__)
def test_the_event_asks_for_a_tick(scene, django_capture_on_commit_callbacks):
    event = scene()
    assert ticks_enqueued(event, django_capture_on_commit_callbacks) == 1


def test_events_that_cannot_free_a_host_ask_for_nothing(django_capture_on_commit_callbacks):
    host = f.host("h")
    worker = f.worker("w")
    assert (
        ticks_enqueued(
            lambda: host_services.host_lock(host=host, by="s", reason="debugging"),
            django_capture_on_commit_callbacks,
        )
        == 0
    )
    assert (
        ticks_enqueued(
            lambda: host_services.worker_pause(worker=worker, by="s", reason="rack move"),
            django_capture_on_commit_callbacks,
        )
        == 0
    )
    lease = services.lease_reserve(
        host=f.host("h2"), holder="s", duration=timedelta(hours=1), reason="manual"
    )
    assert (
        ticks_enqueued(
            lambda: services.lease_extend(lease=lease, by="s", duration=timedelta(hours=2)),
            django_capture_on_commit_callbacks,
        )
        == 0
    )


def pending_request(*, age: timedelta) -> None:
    """A tick request made `age` ago that no tick has started on yet (the flag is still set)."""
    SchedulerState.objects.update_or_create(
        pk=1, defaults={"tick_pending": True, "requested_at": timezone.now() - age}
    )


def test_requests_made_while_a_tick_is_pending_ride_along(django_capture_on_commit_callbacks):
    pending_request(age=timedelta(seconds=1))
    before = OrmQ.objects.count()
    with django_capture_on_commit_callbacks(execute=True):
        f.job("rides along")
    assert OrmQ.objects.count() == before


def test_a_request_left_pending_by_a_dead_cluster_does_not_hold_up_the_next_one(
    django_capture_on_commit_callbacks,
):
    # The cluster that took the request died before its tick started, so nothing will ever
    # clear the flag; a few seconds on, the next event must send a tick of its own.
    pending_request(age=timedelta(seconds=6))
    before = OrmQ.objects.count()
    with django_capture_on_commit_callbacks(execute=True):
        f.job("after the crash")
    assert OrmQ.objects.count() == before + 1
    # ...and only one: the re-sent request is fresh again, so the next event rides along.
    with django_capture_on_commit_callbacks(execute=True):
        f.job("right after")
    assert OrmQ.objects.count() == before + 1


def test_a_cluster_starting_asks_for_a_tick_once_however_many_workers_start():
    SchedulerState.objects.update_or_create(pk=1, defaults={"tick_pending": False})
    before = OrmQ.objects.count()
    # django-q2 sends post_spawn in each task worker as it starts; these two are one cluster's.
    post_spawn.send(sender="django_q", proc_name="Process-1")
    post_spawn.send(sender="django_q", proc_name="Process-2")
    assert OrmQ.objects.count() == before + 1
    assert SchedulerState.objects.get(pk=1).tick_pending


def test_a_cluster_starting_takes_over_a_request_a_dead_cluster_left_pending():
    # Killed mid-tick a moment ago (under the 5 s an event waits): the flag says a tick is on
    # its way, but its task died with the cluster. The new cluster does not ride along.
    pending_request(age=timedelta(seconds=2))
    before = OrmQ.objects.count()
    post_spawn.send(sender="django_q", proc_name="Process-1")
    assert OrmQ.objects.count() == before + 1


def test_a_task_run_synchronously_is_no_cluster_starting(monkeypatch):  # noqa: ANN001
    # With Q_SYNC every task runs in a worker made for it, which sends post_spawn too.
    monkeypatch.setattr(Conf, "SYNC", True)
    SchedulerState.objects.update_or_create(pk=1, defaults={"tick_pending": False})
    before = OrmQ.objects.count()
    post_spawn.send(sender="django_q", proc_name="MainProcess")
    assert OrmQ.objects.count() == before
    assert not SchedulerState.objects.get(pk=1).tick_pending
