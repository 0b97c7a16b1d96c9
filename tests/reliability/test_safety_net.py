"""Leases never outlive their expiry, even when no event asks for a tick: the schedule does."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.conf import settings
from django.utils import timezone
from django_q.conf import Conf
from django_q.models import Schedule, Task
from django_q.scheduler import scheduler

from hosts.choices import EventKind, HostStatus
from hosts.models import Host, HostEvent
from jobs import services
from jobs.choices import JobStatus, ReleaseReason
from jobs.models import Lease
from jobs.tasks import SCHEDULE_NAME
from tests import factories as f

pytestmark = [pytest.mark.postgres, pytest.mark.django_db]


def test_the_periodic_schedule_alone_ends_an_overdue_reservation_and_a_dead_runners_lease(
    monkeypatch: pytest.MonkeyPatch, sam
) -> None:
    w1 = f.worker("w1")
    bench, dut = f.host("bench-1", ["board:x"], worker=w1), f.host("dut-1", ["board:x"], worker=w1)
    past = timezone.now() - timedelta(hours=1)
    # Sam reserved a host for 20 minutes, an hour ago; a runner took a job and vanished.
    reservation = services.lease_reserve(
        host=bench, holder=sam, duration=timedelta(minutes=20), reason="flashing by hand", at=past
    )
    job = f.job("t1", ["board:x"], host=dut)
    services.scheduler_tick(now=past)
    lease = Lease.objects.get(job=job)
    assert lease.expires_at < timezone.now() and lease.released_at is None

    # The safety net every qcluster runs: the tick, every TICK_INTERVAL_MINUTES, forever.
    schedule = Schedule.objects.get(name=SCHEDULE_NAME)
    assert (schedule.func, schedule.schedule_type, schedule.minutes, schedule.repeats) == (
        "jobs.tasks.tick",
        Schedule.MINUTES,
        settings.TICK_INTERVAL_MINUTES,
        -1,
    )
    # Nothing else happens in the lab; the schedule comes due, and a cluster's guard runs it
    # (sync: the task it creates runs here, as a worker would run it).
    Schedule.objects.filter(pk=schedule.pk).update(next_run=timezone.now() - timedelta(seconds=1))
    monkeypatch.setattr(Conf, "SYNC", True)
    scheduler()

    task = Task.objects.get(func="jobs.tasks.tick")
    assert task.success, task.result
    reservation.refresh_from_db()
    assert reservation.release_reason == ReleaseReason.EXPIRED
    assert HostEvent.objects.filter(host=bench, kind=EventKind.EXPIRED).exists()
    lease.refresh_from_db()
    job.refresh_from_db()
    assert lease.release_reason == ReleaseReason.EXPIRED
    assert job.status == JobStatus.ERROR  # no retries left: it ends, with the reason
    assert "heartbeat" in job.message
    # State unknown: verified before it takes tests again (a verify job holds it, or waits).
    assert Host.objects.get(pk=dut.pk).status in (HostStatus.NEEDS_VERIFY, HostStatus.VERIFYING)
    # And the schedule is due again, one interval on.
    schedule.refresh_from_db()
    assert schedule.next_run > timezone.now()
    assert schedule.repeats == -1
