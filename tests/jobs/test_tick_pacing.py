"""Requested ticks are paced: a burst of requests rides along on one tick
(docs/scheduling.md#triggers)."""

from __future__ import annotations

import time
from datetime import timedelta

import pytest
from django.utils import timezone

from jobs import tasks
from jobs.models import SchedulerState, SchedulerTick
from jobs.scheduling import triggers

# Not inside a test transaction: the tick task paces only outside a caller's transaction.
pytestmark = pytest.mark.django_db(transaction=True)


def a_tick_just_ended() -> None:
    SchedulerTick.objects.create(started_at=timezone.now(), duration_ms=0)
    SchedulerState.objects.update_or_create(
        pk=1, defaults={"tick_pending": True, "requested_at": timezone.now()}
    )


def test_requests_during_the_gap_ride_along_on_the_waiting_tick(settings, monkeypatch) -> None:  # noqa: ANN001
    settings.TICK_MIN_GAP_MS = 250
    a_tick_just_ended()
    waits, rode_along = [], []

    def sleep(seconds: float) -> None:  # a job completes while the tick waits for its gap
        waits.append(seconds)
        rode_along.append(not triggers._claim_request(timezone.now()))

    monkeypatch.setattr(time, "sleep", sleep)
    before = SchedulerTick.objects.count()
    tasks.tick("job completed")
    assert waits and 0 < waits[0] <= 0.25
    assert rode_along == [True] * len(waits)  # no second tick was asked for
    assert SchedulerTick.objects.count() == before + 1
    assert not SchedulerState.objects.get(pk=1).tick_pending  # served by the tick that ran


def test_without_a_gap_a_requested_tick_starts_at_once(settings, monkeypatch) -> None:  # noqa: ANN001
    settings.TICK_MIN_GAP_MS = 0
    a_tick_just_ended()
    waits: list[float] = []
    monkeypatch.setattr(time, "sleep", waits.append)
    tasks.tick("job completed")
    assert waits == []
    assert not SchedulerState.objects.get(pk=1).tick_pending


def test_a_tick_long_past_is_not_waited_for(settings, monkeypatch) -> None:  # noqa: ANN001
    settings.TICK_MIN_GAP_MS = 250
    SchedulerTick.objects.create(started_at=timezone.now() - timedelta(seconds=5))
    waits: list[float] = []
    monkeypatch.setattr(time, "sleep", waits.append)
    tasks.tick("job completed")
    assert waits == []
