"""A tick request lost with a killed cluster is sent again by a surviving one's watcher, and
only a lost one (docs/scheduling.md#triggers)."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest
from django.db import connection, connections
from django.utils import timezone
from django_q.models import OrmQ
from django_q.signals import post_spawn

from jobs.models import SchedulerState
from jobs.scheduling import triggers
from jobs.scheduling.triggers import TICK_LOCK_KEY, resend_lost_request

pytestmark = pytest.mark.django_db


def pending_request(*, age: timedelta, pending: bool = True) -> None:
    """A tick request made `age` ago that no tick has started on yet (the flag still set)."""
    SchedulerState.objects.update_or_create(
        pk=1, defaults={"tick_pending": pending, "requested_at": timezone.now() - age}
    )


def test_a_request_pending_past_the_stale_time_is_sent_again_once():
    pending_request(age=timedelta(seconds=6))
    before = OrmQ.objects.count()

    assert resend_lost_request() is True
    assert OrmQ.objects.count() == before + 1
    state = SchedulerState.objects.get(pk=1)
    assert state.tick_pending and timezone.now() - state.requested_at < timedelta(seconds=2)
    # Fresh again: the next check (this cluster's other workers, other clusters) leaves it.
    assert resend_lost_request() is False
    assert OrmQ.objects.count() == before + 1


@pytest.mark.parametrize(
    ("age", "pending"),
    [(timedelta(seconds=2), True), (timedelta(minutes=5), False)],
    ids=["young request", "no request"],
)
def test_a_young_request_or_none_is_left_alone(age, pending):  # noqa: ANN001
    pending_request(age=age, pending=pending)
    before = OrmQ.objects.count()
    assert resend_lost_request() is False
    assert OrmQ.objects.count() == before


@pytest.mark.postgres
def test_a_request_waiting_behind_a_running_tick_is_not_lost():
    if connection.vendor != "postgresql":
        pytest.skip("NEEDS POSTGRESQL: the planner's advisory lock")
    pending_request(age=timedelta(seconds=30))
    held, release, done = threading.Event(), threading.Event(), threading.Event()

    def a_long_tick() -> None:
        # Another session holds the planner's lock, as a tick does while it plans.
        try:
            with connections["default"].cursor() as cursor:
                cursor.execute("SELECT pg_advisory_lock(%s)", [TICK_LOCK_KEY])
                held.set()
                release.wait(10)
                cursor.execute("SELECT pg_advisory_unlock(%s)", [TICK_LOCK_KEY])
        finally:
            connections["default"].close()
            done.set()

    thread = threading.Thread(target=a_long_tick)
    thread.start()
    try:
        assert held.wait(10)
        before = OrmQ.objects.count()
        assert resend_lost_request() is False
        assert OrmQ.objects.count() == before
    finally:
        release.set()
        thread.join(10)
    # The tick ended and the request still waits: now it is lost, and sent again.
    assert done.is_set()
    assert resend_lost_request() is True


def test_the_watcher_starts_only_in_a_clusters_worker_process(monkeypatch):  # noqa: ANN001
    started = []
    monkeypatch.setattr(triggers, "_watcher", None)
    monkeypatch.setattr(triggers.threading, "Thread", lambda **kw: started.append(kw) or _Fake())
    # This test process is no cluster's worker: a post_spawn sent here starts nothing.
    post_spawn.send(sender="django_q", proc_name="Process-1")
    assert started == []
    # In a worker (a child process of the cluster), it starts one thread, once.
    monkeypatch.setattr(triggers.multiprocessing, "parent_process", lambda: object())
    SchedulerState.objects.update_or_create(pk=1, defaults={"tick_pending": True})
    post_spawn.send(sender="django_q", proc_name="Process-1")
    post_spawn.send(sender="django_q", proc_name="Process-1")
    assert [kw["name"] for kw in started] == ["tick-request-watcher"]


class _Fake:
    def start(self) -> None:
        pass

    def is_alive(self) -> bool:
        return True
