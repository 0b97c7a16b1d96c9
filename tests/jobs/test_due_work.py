"""The tick's one question before it plans (what is due: expiry, timeouts, maintenance), asked
with SQL compiled once and moved to each tick's time (schedsite.prepared). Each flag must turn
at the very second the rules say, at any time and under any setting."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.db.models import Q
from django.utils import timezone

from hosts.models import Host, Worker
from jobs import services
from jobs.models import Job, Lease
from jobs.scheduling import maintenance, tick
from schedsite.prepared import PreparedQuery
from tests import factories as f
from tests.jobs import test_repair_failed_retry as retry
from tests.jobs.test_repair_failed_retry import HOUR, break_h1

pytestmark = pytest.mark.django_db

SECOND = timedelta(seconds=1)


def due(at: datetime) -> dict[str, bool]:
    return tick._due_work(at)


rack = retry.rack  # rack-1 with h1 and h2 (board:x), 2 tries a round, no backoff, 4 h waits


def test_an_idle_lab_has_nothing_due_at_any_time(rack):
    now = timezone.now()
    for at in (now, now + timedelta(days=3), now - timedelta(days=400)):
        Worker.objects.update(last_seen=at)
        assert due(at) == {
            "overdue": False,
            "timed_out": False,
            "reservations": False,
            "maintenance": False,
        }


def test_a_reservation_waiting_in_line_is_due(rack, alice):
    assert not due(timezone.now())["reservations"]
    services.reservation_request(
        owner=alice,
        labels=["board:none"],
        duration=timedelta(hours=1),
        reason="debug",
        wait=True,
        allow_unmatched=True,
    )
    assert due(timezone.now())["reservations"]


def test_a_lease_is_overdue_from_the_second_after_it_expires(rack):
    job = f.job("t1")
    f.tick(timezone.now(), rack)
    lease = Lease.objects.get(job=job)
    for expires in (lease.expires_at, lease.expires_at + timedelta(days=30)):
        Lease.objects.filter(pk=lease.pk).update(expires_at=expires)
        assert not due(expires)["overdue"]
        assert due(expires + SECOND)["overdue"]


def test_a_running_job_is_timed_out_after_its_own_timeout(rack):
    job = f.job("t1")
    started = timezone.now()
    f.tick(started, rack)
    services.job_start(job=job, by="runner-1", at=started)
    Job.objects.filter(pk=job.pk).update(timeout=timedelta(minutes=7))
    assert not due(started + timedelta(minutes=7))["timed_out"]
    assert due(started + timedelta(minutes=7) + SECOND)["timed_out"]
    Job.objects.filter(pk=job.pk).update(timeout=timedelta(hours=2))
    assert not due(started + timedelta(minutes=7) + SECOND)["timed_out"]


def test_a_repair_failed_hosts_round_is_due_at_its_time_and_sooner_only_with_demand(settings, rack):
    settings.REPAIR_FAILED_DEMAND_SECONDS = 1800
    failed_at = break_h1(timezone.now(), rack)
    f.tick(failed_at + SECOND, rack)  # h2 verified: nothing else left to do
    settings.REPAIR_FAILED_DEMAND_SECONDS = 0  # only the ordinary round, 4 h after
    Worker.objects.update(last_seen=failed_at + 4 * HOUR)
    assert not due(failed_at + 4 * HOUR - SECOND)["maintenance"]
    assert due(failed_at + 4 * HOUR)["maintenance"]
    settings.REPAIR_FAILED_DEMAND_SECONDS = 1800
    # The sooner window opens REPAIR_FAILED_DEMAND_SECONDS after the give-up, for a host in
    # service: its worker seen within WORKER_OFFLINE_TIMEOUT of that time.
    half = failed_at + timedelta(minutes=30)
    Worker.objects.update(last_seen=half - timedelta(seconds=settings.WORKER_OFFLINE_TIMEOUT))
    assert not due(half - SECOND)["maintenance"]
    assert due(half)["maintenance"]
    assert not due(half + SECOND)["maintenance"]  # one second later the worker is offline
    for at in (half - SECOND, half, half + SECOND):
        assert due(at)["maintenance"] == maintenance._anything_to_do(now=at)


def test_a_changed_setting_moves_the_times_the_prepared_sql_asks_about(settings, rack):
    settings.REPAIR_FAILED_DEMAND_SECONDS = 1800
    failed_at = break_h1(timezone.now(), rack)
    f.tick(failed_at + SECOND, rack)
    quarter = failed_at + timedelta(minutes=15)
    Worker.objects.update(last_seen=quarter)
    assert not due(quarter)["maintenance"]
    settings.REPAIR_FAILED_DEMAND_SECONDS = 900
    assert due(quarter)["maintenance"]
    settings.WORKER_OFFLINE_TIMEOUT = 1
    assert not due(quarter + 2 * SECOND)["maintenance"]  # the worker is offline by then


def test_with_no_host_at_all_everything_is_looked_at():
    Host.objects.all().delete()
    assert due(timezone.now()) == {
        "overdue": True,
        "timed_out": True,
        "reservations": True,
        "maintenance": True,
    }


@pytest.mark.postgres
def test_a_prepared_query_refuses_a_time_not_derived_from_the_one_it_is_given():
    fixed = datetime(2020, 1, 1, tzinfo=UTC)
    query = PreparedQuery(
        lambda at: Lease.objects.filter(Q(acquired_at__lt=at) | Q(acquired_at__lt=fixed)),
        datetime,
    )
    with pytest.raises(ValueError, match="derived from the prepared time"):
        query.all(timezone.now())
    with pytest.raises(ValueError, match="not a parameter"):
        PreparedQuery(lambda _at: Lease.objects.all(), datetime).all(timezone.now())
    with pytest.raises(TypeError, match="at most one datetime"):
        PreparedQuery(lambda a, b: Lease.objects.all(), datetime, datetime)
