"""The tick on a real database: leases, expiry, timeouts, wait reasons and the schedule."""

from __future__ import annotations

import gc
from datetime import timedelta

import pytest
from django.conf import settings
from django.core.management import call_command
from django.utils import timezone
from django_q.models import OrmQ, Schedule

from hosts import services as host_services
from hosts.choices import HostStatus
from hosts.models import Host, HostEvent
from jobs import selectors, services
from jobs.choices import JobStatus, ReleaseReason
from jobs.models import Job, Lease, SchedulerTick, WaitReasonClass
from jobs.scheduling import planner, snapshot
from jobs.scheduling import tick as tick_module
from jobs.scheduling.triggers import request_tick
from tests import factories as f

pytestmark = pytest.mark.django_db


def leased_hosts() -> dict[str, str]:
    return dict(
        Lease.objects.filter(released_at__isnull=True, job__isnull=False).values_list(
            "job__name", "host__hostname"
        )
    )


def test_it_leases_both_jobs_where_greedy_first_fit_would_lease_one():
    f.host("h1", ["board:x", "bt"])
    f.host("h2", ["board:x"])
    f.job("J1", ["board:x"], priority=70)
    f.job("J2", ["board:x", "bt"], priority=40)

    summary = services.scheduler_tick()

    assert leased_hosts() == {"J1": "h2", "J2": "h1"}
    assert {lease["job"] for lease in summary.leases} == {"J1", "J2"}
    assert set(Job.objects.values_list("status", flat=True)) == {JobStatus.LEASED}
    assert Job.objects.get(name="J1").attempts == 1
    assert HostEvent.objects.filter(kind="leased").count() == 2


def test_it_honours_the_minimum_dut_quota_of_the_lower_priority_suite():
    for i in range(4):
        f.host(f"h{i}", ["board:x"])
    f.suite("SA", 4, priority=50, min_duts=2)
    f.suite("SB", 7, priority=30, min_duts=5)

    services.scheduler_tick()

    per_suite = {}
    for name in leased_hosts():
        per_suite[name[:2]] = per_suite.get(name[:2], 0) + 1
    assert per_suite == {"SA": 2, "SB": 2}


def test_a_locked_host_is_not_leased_and_the_waiting_job_says_so():
    h1 = f.host("h1", ["board:x"])
    f.host("h2", ["board:x"])
    host_services.host_lock(host=h1, by="sam", reason="debugging")
    f.job("J1")
    f.job("J2")

    services.scheduler_tick()

    assert leased_hosts() == {"J1": "h2"}
    j2 = Job.objects.get(name="J2")
    reason = selectors.wait_reasons_for([j2])[j2.pk]
    assert "locked" in reason["message"].lower()


def test_hosts_of_paused_or_offline_workers_get_no_leases():
    paused = f.worker("w-paused", paused=True)
    offline = f.worker("w-offline", online=False)
    f.host("h1", ["board:x"], worker=paused)
    f.host("h2", ["board:x"], worker=offline)
    f.job("J1")

    services.scheduler_tick()

    assert leased_hosts() == {}
    j1 = Job.objects.get(name="J1")
    message = selectors.wait_reasons_for([j1])[j1.pk]["message"].lower()
    assert "paused" in message and "offline" in message


def test_a_job_submitted_after_the_last_tick_waits_for_the_next_one():
    f.host("h1", ["board:y"])
    services.scheduler_tick()
    job = f.job("late", ["board:x"])
    assert selectors.wait_reasons_for([job])[job.pk]["code"] == "pending_tick"


def test_an_expired_lease_requeues_a_job_with_retries_and_flags_the_host():
    f.host("h1", ["board:x"])
    f.job("J1", max_retries=1)
    t0 = timezone.now()
    services.scheduler_tick(now=t0)
    lease = Lease.objects.get()

    later = lease.expires_at + timedelta(seconds=1)
    summary = services.scheduler_tick(now=later)

    lease.refresh_from_db()
    job = Job.objects.get(name="J1")
    assert summary.expired == 1
    assert lease.release_reason == ReleaseReason.EXPIRED
    assert job.status == JobStatus.QUEUED
    # Its runner vanished, so nobody knows the host's state: the same tick verifies it before
    # any test runs there again (docs/health.md).
    assert Host.objects.get(hostname="h1").status == HostStatus.VERIFYING
    assert Lease.objects.active().get().job.kind == "verify"
    assert HostEvent.objects.filter(kind="expired", host__hostname="h1").exists()


def test_an_expired_lease_ends_the_job_in_error_when_retries_are_used_up():
    f.host("h1", ["board:x"])
    f.job("J1", max_retries=0)
    services.scheduler_tick()
    lease = Lease.objects.get()

    services.scheduler_tick(now=lease.expires_at + timedelta(seconds=1))

    job = Job.objects.get(name="J1")
    assert job.status == JobStatus.ERROR
    assert "no retries left" in job.message


def test_a_requeued_job_runs_again_on_another_host_and_counts_attempts():
    f.host("h1", ["board:x"])
    f.host("h2", ["board:x"])
    f.job("J1", max_retries=1)
    services.scheduler_tick()
    first = Lease.objects.get()

    services.scheduler_tick(now=first.expires_at + timedelta(seconds=1))

    second = Lease.objects.get(released_at__isnull=True, job__name="J1")
    assert second.host_id != first.host_id  # the first host is being verified
    assert Job.objects.get(name="J1").attempts == 2


def test_a_job_running_past_its_timeout_is_aborted_and_its_host_freed():
    f.host("h1", ["board:x"])
    job = f.job("J1")
    Job.objects.filter(pk=job.pk).update(timeout=timedelta(seconds=30))
    services.scheduler_tick()
    t0 = timezone.now()
    services.job_start(job=job, by="runner-1", at=t0)
    Lease.objects.update(expires_at=t0 + timedelta(hours=1))  # heartbeats keep it alive

    summary = services.scheduler_tick(now=t0 + timedelta(seconds=31))

    job.refresh_from_db()
    assert summary.timed_out == 1
    assert job.status == JobStatus.ABORTED
    lease = Lease.objects.get(job=job)
    assert lease.release_reason == ReleaseReason.TIMEOUT
    assert Host.objects.get(hostname="h1").status == HostStatus.READY


def test_a_manual_reservation_holds_the_host_and_ends_at_its_expiry():
    h1 = f.host("h1", ["board:x"])
    lease = services.lease_reserve(
        host=h1, holder="sam", duration=timedelta(minutes=30), reason="flashing firmware by hand"
    )
    f.job("J1")
    services.scheduler_tick()
    assert leased_hosts() == {}

    services.scheduler_tick(now=lease.expires_at + timedelta(seconds=1))

    lease.refresh_from_db()
    assert lease.release_reason == ReleaseReason.EXPIRED
    assert Host.objects.get(hostname="h1").status == HostStatus.READY  # no job, no doubt
    assert leased_hosts() == {"J1": "h1"}


def test_each_tick_is_recorded_with_its_counts():
    f.host("h1", ["board:x"])
    f.job("J1")
    j2 = f.job("J2")
    services.scheduler_tick()
    tick = SchedulerTick.objects.get()
    assert (tick.jobs_considered, tick.hosts_free, tick.leases_made, tick.queued_after) == (
        2,
        1,
        1,
        1,
    )
    # The reason J2 waits, stored per class.
    stored = dict(WaitReasonClass.objects.values_list("key", "reason"))
    assert list(stored) == [planner.class_key(snapshot.job_state(j2))]
    assert stored[planner.class_key(snapshot.job_state(j2))]["code"] == "outranked"


def test_the_queue_lists_jobs_in_the_order_the_scheduler_considers_them():
    f.suite("low", 2, priority=30)
    f.suite("high", 2, priority=70)
    f.job("solo", priority=50)
    by_id = dict(Job.objects.values_list("id", "name"))
    names = [by_id[i] for i in selectors.queue_order_ids().ids]
    assert names == ["high-t0", "high-t1", "solo", "low-t0", "low-t1"]


def test_the_tick_query_count_does_not_grow_with_the_lab(django_assert_max_num_queries):
    for i in range(3):
        f.host(f"small{i}", ["board:x"])
    f.suite("S", 3)
    with django_assert_max_num_queries(30) as small:
        services.scheduler_tick()  # leases 3
    for i in range(40):
        f.host(f"big{i}", ["board:x", f"slot:{i}"], worker=f.worker(f"w{i}"))
    f.suite("S3", 40)
    f.suite("S4", 40)  # and leaves 40 waiting, each with a reason
    with django_assert_max_num_queries(len(small.captured_queries) + 1):
        services.scheduler_tick()  # leases 40
    assert Lease.objects.filter(released_at__isnull=True).count() == 43


def test_the_periodic_tick_schedule_is_installed_once():
    call_command("migrate", verbosity=0)
    call_command("migrate", verbosity=0)
    schedules = Schedule.objects.filter(func="jobs.tasks.tick")
    assert schedules.count() == 1
    assert schedules.get().repeats == -1


def test_tick_requests_coalesce_into_one_enqueued_tick(django_capture_on_commit_callbacks):
    before = OrmQ.objects.count()
    with django_capture_on_commit_callbacks(execute=True):
        for _ in range(5):
            request_tick("test")
    assert OrmQ.objects.count() == before + 1


def test_the_wait_reason_table_holds_the_classes_still_waiting_and_the_history_stays():
    f.host("h1", ["board:y"])
    job = f.job("J1")  # no host has board:x: it waits
    ids = []
    for i in range(3):
        Job.objects.filter(pk=job.pk).update(message=f"edit {i}")  # so no tick is skipped
        ids.append(services.scheduler_tick().tick_id)
    key = planner.class_key(snapshot.job_state(job))
    assert list(WaitReasonClass.objects.values_list("key", flat=True)) == [key]
    assert selectors.wait_reasons_for([job])[job.pk]["code"] == "no_matching_host"

    f.host("h2", ["board:x"])
    ids.append(services.scheduler_tick().tick_id)  # J1 is leased: no class waits
    services.tick_history_prune(latest_id=ids[-1])

    assert not WaitReasonClass.objects.exists()
    assert list(SchedulerTick.objects.order_by("id").values_list("id", flat=True)) == ids


def test_a_host_released_after_the_tick_started_is_leased_no_earlier_than_its_release():
    # The tick stamps its leases with its start time; a host whose lease was released while
    # the tick ran must not appear leased twice at once in its history.
    t0 = timezone.now()
    f.host("h1", ["board:x"])
    first = f.job("J1")
    services.scheduler_tick(now=t0)
    first.refresh_from_db()
    f.run(first, "passed", at=t0 + timedelta(seconds=2))
    released = Lease.objects.get(job=first).released_at
    assert released == t0 + timedelta(seconds=2)
    f.job("J2")

    services.scheduler_tick(now=t0 + timedelta(seconds=1))  # started before the release

    lease = Lease.objects.get(job__name="J2")
    assert lease.acquired_at >= released
    assert lease.expires_at - lease.acquired_at == timedelta(seconds=settings.LEASE_TTL)
    event = HostEvent.objects.get(kind="leased", lease_id=lease.pk)
    assert event.created_at >= released


def test_the_tick_runs_without_the_cyclic_collector_and_gives_it_back(monkeypatch):
    # Each young-generation collection walks the plan's whole queue list: off during a tick.
    real = planner.plan
    seen = []

    def plan(**kwargs):  # noqa: ANN003, ANN202
        seen.append(gc.isenabled())
        return real(**kwargs)

    monkeypatch.setattr(planner, "plan", plan)
    f.host("h1", ["board:x"])
    f.job("J1")
    assert gc.isenabled()
    services.scheduler_tick()
    assert seen == [False]
    assert gc.isenabled()


def test_a_copy_of_the_wait_reason_table_holds_until_another_tick_plans():
    # The tick writes only the reasons that changed since this process's copy, so the copy must
    # be the table's: the tick that wrote it is still the latest that planned.
    now = timezone.now()
    wrote = SchedulerTick.objects.create(started_at=now)
    copy = (wrote.pk, now, {})
    kept = SchedulerTick.objects.create(started_at=now, unchanged=True)  # kept its plan
    assert tick_module._written_is_current(copy, kept.pk + 1)
    assert not tick_module._written_is_current(
        (wrote.pk, now - timedelta(seconds=1), {}), kept.pk + 1
    )
    planned = SchedulerTick.objects.create(started_at=now)  # another process planned
    assert not tick_module._written_is_current(copy, planned.pk + 1)
    wrote.delete()  # pruned from the history
    assert not tick_module._written_is_current(copy, kept.pk + 1)
