"""The tick under the scheduler settings and worker capacity, on a real database.

The planner's rules are tested on plain values (tests/scheduler/test_planner_policies.py);
these check that the tick reads what they need: the settings row, job sizes and run-time
history, when hosts were last used, and each worker's capacity and running jobs.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from hosts import services as host_services
from jobs import selectors, services
from jobs import services as job_services
from jobs.choices import JobStatus
from jobs.models import Job, Lease
from jobs.scheduling import queue, snapshot
from tests import factories as f

pytestmark = pytest.mark.django_db


def leased() -> dict[str, str]:
    return dict(
        Lease.objects.filter(released_at__isnull=True, job__isnull=False).values_list(
            "job__name", "host__hostname"
        )
    )


def settings(**fields: object) -> None:
    services.update_scheduler_settings("sam", reason="test", **fields)


def sized_job(name: str, minutes: float | None, *, at: timedelta = timedelta()) -> Job:
    job = f.job(name)
    Job.objects.filter(pk=job.pk).update(
        estimated_duration=None if minutes is None else timedelta(minutes=minutes),
        submitted_at=timezone.now() - timedelta(hours=1) + at,
    )
    return job


def test_size_ordering_gives_the_one_host_to_the_shortest_job() -> None:
    f.host("h1", ["board:x"])
    sized_job("long", 60)
    sized_job("short", 5, at=timedelta(minutes=1))
    services.scheduler_tick()
    assert leased() == {"long": "h1"}  # fifo: the first submitted

    Lease.objects.all().delete()
    Job.objects.update(status=JobStatus.QUEUED, attempts=0)
    settings(ordering="size")
    services.scheduler_tick()
    assert leased() == {"short": "h1"}


def test_a_job_with_no_estimate_is_sized_by_the_median_of_its_names_last_runs() -> None:
    f.host("h1", ["board:x"])
    now = timezone.now()
    for minutes in (2, 3, 90):  # median 3 minutes
        done = f.job("login_Smoke")
        Job.objects.filter(pk=done.pk).update(
            status=JobStatus.PASSED,
            started_at=now - timedelta(minutes=minutes + 1),
            finished_at=now - timedelta(minutes=1),
        )
    assert snapshot.run_time_medians(["login_Smoke", "never_ran"]) == {"login_Smoke": 180.0}

    sized_job("stress", 30)
    sized_job("login_Smoke", None, at=timedelta(minutes=1))
    settings(ordering="size")
    services.scheduler_tick()
    assert leased() == {"login_Smoke": "h1"}  # 3 minutes (its history) before 30


def test_aging_lets_a_long_waiting_low_priority_job_pass() -> None:
    f.host("h1", ["board:x"])
    weekly = f.job("weekly", priority=10)
    Job.objects.filter(pk=weekly.pk).update(submitted_at=timezone.now() - timedelta(hours=3))
    f.job("cq", priority=70)
    settings(aging_minutes=2, aging_cap=90)  # 180 minutes: +90 → 100 > 70
    services.scheduler_tick()
    assert leased() == {"weekly": "h1"}


def test_spread_takes_the_host_unused_for_longest() -> None:
    h1 = f.host("h1", ["board:x"])
    h2 = f.host("h2", ["board:x"])
    settings(host_choice="spread")
    first = f.job("first")
    services.scheduler_tick()
    assert leased() == {"first": "h1"}  # neither used yet: the lowest hostname
    f.run(Job.objects.get(pk=first.pk), "passed")
    f.job("second")
    services.scheduler_tick()
    assert leased() == {"second": "h2"}  # h1 was just used, h2 never
    assert {h1.pk, h2.pk} == set(Lease.objects.values_list("host_id", flat=True))


def test_a_worker_gets_no_more_jobs_than_its_capacity_and_the_rest_are_told_why() -> None:
    w2 = f.worker("w2")
    for i in range(4):
        f.host(f"dut{i}", ["board:x"], worker=w2)
    host_services.worker_update(worker=w2, by="sam", max_jobs=3)
    f.suite("cq", 4)

    f.tick(timezone.now(), w2)

    assert len(leased()) == 3
    waiting = Job.objects.get(status=JobStatus.QUEUED)
    reason = selectors.wait_reasons_for([waiting])[waiting.pk]
    assert "worker w2 at capacity (3 of 3)" in reason["message"]


def test_the_runners_reported_concurrency_caps_the_worker_too() -> None:
    w2 = f.worker("w2")
    for i in range(4):
        f.host(f"dut{i}", ["board:x"], worker=w2)
    host_services.worker_heartbeat(worker=w2, at=timezone.now(), concurrency=2)
    f.suite("cq", 4)
    services.scheduler_tick()
    assert len(leased()) == 2

    # Capacity counts the jobs already running: the next tick adds none.
    f.suite("cq2", 1)
    services.scheduler_tick()
    assert len(leased()) == 2


def test_raising_capacity_asks_for_a_tick_that_plans_again() -> None:
    w2 = f.worker("w2")
    for i in range(3):
        f.host(f"dut{i}", ["board:x"], worker=w2)
    host_services.worker_update(worker=w2, by="sam", max_jobs=1)
    f.suite("cq", 3)
    services.scheduler_tick()
    services.scheduler_tick()  # nothing changed: the unchanged-tick shortcut
    assert len(leased()) == 1
    host_services.worker_update(worker=w2, by="sam", max_jobs=3)
    summary = services.scheduler_tick()
    assert not summary.unchanged
    assert len(leased()) == 3


def test_under_aging_the_queue_lists_the_order_the_tick_takes(alice) -> None:  # noqa: ANN001
    weekly = f.job("weekly", priority=10)
    Job.objects.filter(pk=weekly.pk).update(submitted_at=timezone.now() - timedelta(hours=3))
    f.job("cq", priority=70)
    settings(aging_minutes=2, aging_cap=90)

    selection = queue.queue_select()
    assert [Job.objects.get(pk=pk).name for pk in selection.ids[0:10]] == ["weekly", "cq"]
    rows = f.signed_in(alice).get("/api/queue/").json()["results"]
    assert [(row["name"], row["priority"], row["effective_priority"]) for row in rows] == [
        ("weekly", 10, 100),
        ("cq", 70, 70),
    ]
    page = f.signed_in(alice).get("/queue/").content.decode()
    assert "+90 after 180 min waiting: 100" in page

    f.host("h1", ["board:x"])
    services.scheduler_tick()
    assert leased() == {"weekly": "h1"}  # the first in the queue is the one leased


def test_fair_share_usage_is_counted_on_lease_release_and_orders_the_queue(alice, bob) -> None:  # noqa: ANN001
    from jobs.models import OwnerUsage

    f.host("h1", ["board:x"])
    first = f.job("alice-1", owner=alice)
    services.scheduler_tick()
    lease = Lease.objects.get(job=first)
    Lease.objects.filter(pk=lease.pk).update(acquired_at=timezone.now() - timedelta(hours=2))
    f.run(Job.objects.get(pk=first.pk), "passed")
    usage = OwnerUsage.objects.get(owner=alice)  # kept by the trigger on release
    assert 7100 < usage.host_seconds < 7300

    f.job("alice-2", owner=alice)
    f.job("bob-1", owner=bob)  # submitted later, same priority
    settings(fair_share=True)
    services.scheduler_tick()
    assert leased() == {"bob-1": "h1"}


def test_fair_share_usage_decays_by_the_half_life_between_releases(alice) -> None:  # noqa: ANN001
    """On either database (the demo runs on SQLite): a second release halves the first's use
    after one half-life and adds its own."""
    from jobs.models import OwnerUsage

    settings(fair_share_half_life_hours=24)
    f.host("h1", ["board:x"])
    start = timezone.now() - timedelta(hours=30)
    for name, held, end in (("a1", 2, start + timedelta(hours=2)), ("a2", 1, timezone.now())):
        job = f.job(name, owner=alice)
        services.scheduler_tick()
        Lease.objects.filter(job=job).update(acquired_at=end - timedelta(hours=held))
        f.run(Job.objects.get(pk=job.pk), "passed", at=end)
    usage = OwnerUsage.objects.get(owner=alice)
    # 7200 s halved over the 28 hours between the releases (0.5 ** (28/24) = 0.445), + 3600 s.
    assert abs(usage.host_seconds - (7200 * 0.5 ** (28 / 24) + 3600)) < 60


def test_verify_and_repair_jobs_take_a_slot_of_the_workers_capacity_too() -> None:
    from hosts.choices import HostStatus

    w2 = f.worker("w2")
    duts = [f.host(f"dut{i}", ["board:x"], worker=w2) for i in range(3)]
    host_services.worker_update(worker=w2, by="sam", max_jobs=2)
    for dut in duts:
        job_services.host_set_status(host=dut, status=HostStatus.NEEDS_VERIFY, by="sam")
    f.tick(timezone.now(), w2)
    active = Lease.objects.filter(released_at__isnull=True, job__isnull=False)
    assert active.count() == 2  # the third verify waits for a slot
    assert Job.objects.filter(kind="verify", status=JobStatus.QUEUED).count() == 1
