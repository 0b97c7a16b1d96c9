"""A tick keeps the previous plan only when nothing it depends on has changed (PostgreSQL)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import timedelta

import pytest
from django.conf import settings
from django.db import connection, connections, transaction
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from hosts import services as host_services
from hosts.models import Host, Label, Worker
from jobs import selectors, services
from jobs.models import Job, Lease, SchedulerTick, Suite
from tests import factories as f

# The change log is written by PostgreSQL triggers; elsewhere every tick plans (and these would
# not apply).
pytestmark = [pytest.mark.django_db, pytest.mark.postgres]


def settle() -> services.TickSummary:
    """Tick until a tick finds nothing changed; return that tick."""
    for _ in range(3):
        summary = services.scheduler_tick()
        if summary.unchanged:
            return summary
    raise AssertionError("the lab never settled")


def reason_of(name: str) -> dict:
    job = Job.objects.get(name=name)
    return selectors.wait_reasons_for([job])[job.pk]


def test_a_tick_with_nothing_changed_keeps_the_previous_plan_its_reasons_and_counts():
    f.host("h1", ["board:x"])
    f.host("h2", ["board:y"])
    host_services.host_lock(host=Host.objects.get(hostname="h2"), by="sam", reason="flaky servo")
    f.job("J1", ["board:x"])
    f.job("J2", ["board:x"])
    f.job("J3", ["board:y"])
    first = services.scheduler_tick()  # leases J1
    planned = services.scheduler_tick()  # the lab changed (J1 leased): plans again
    reasons = {name: reason_of(name) for name in ("J2", "J3")}

    with CaptureQueriesContext(connection) as captured:
        kept = services.scheduler_tick()

    assert (first.unchanged, planned.unchanged, kept.unchanged) == (False, False, True)
    assert kept.leases == [] and kept.plan_ms == 0
    assert {name: reason_of(name) for name in ("J2", "J3")} == reasons
    assert "locked" in reasons["J3"]["message"]
    previous, latest = SchedulerTick.objects.order_by("-id")[1], SchedulerTick.objects.latest("id")
    assert latest.unchanged
    # The wait-reason table stands as the tick that planned left it: nothing is written to it.
    assert not [q for q in captured if "jobs_waitreasonclass" in q["sql"]]
    assert (latest.jobs_considered, latest.queued_after, latest.hosts_leased) == (2, 2, 1)
    assert latest.oldest_wait_s >= previous.oldest_wait_s


def test_heartbeats_alone_do_not_make_the_tick_plan_again():
    worker = f.worker("w1")
    f.host("h1", ["board:x"], worker=worker)
    f.job("J1")
    f.job("J2")
    settle()
    lease = Lease.objects.get(released_at__isnull=True)
    services.lease_heartbeat(lease=lease, by="runner-1")  # rewrites the lease and the worker
    host_services.worker_heartbeat(worker=worker)

    assert services.scheduler_tick().unchanged


def unlock_by_update() -> None:
    Host.objects.filter(hostname="h1").update(locked=False, lock_reason="")


def add_label_through_the_m2m() -> None:
    Host.objects.get(hostname="h2").labels.add(Label.objects.get_or_create(name="bt")[0])


def resume_worker_by_update() -> None:
    Worker.objects.filter(name="w-paused").update(paused=False, paused_reason="")


def release_reservation_by_update() -> None:
    Lease.objects.filter(job__isnull=True).update(
        released_at=timezone.now(), release_reason="released"
    )


def raise_suite_cap_by_update() -> None:
    Suite.objects.filter(name="capped").update(max_duts=2)


def requeue_by_update() -> None:
    # A job the runner lost, put back by hand; its host is free again too.
    Lease.objects.filter(job__name="capped-t0").update(
        released_at=timezone.now(), release_reason="released"
    )
    Job.objects.filter(name="capped-t0").update(status="queued")


@pytest.mark.parametrize(
    "change",
    [
        unlock_by_update,
        add_label_through_the_m2m,
        resume_worker_by_update,
        release_reservation_by_update,
        raise_suite_cap_by_update,
        requeue_by_update,
    ],
)
def test_any_write_makes_the_next_tick_plan_even_one_that_bypasses_the_services(
    change: Callable[[], None],
) -> None:
    # Each change below makes one more lease possible; none goes through a service, so
    # nothing but the data itself can tell the tick.
    h1 = f.host("h1", ["board:x", "pool:a"])
    host_services.host_lock(host=h1, by="sam", reason="debugging")
    f.host("h2", ["board:x", "pool:b"])
    f.host("h3", ["board:x", "pool:c"], worker=f.worker("w-paused", paused=True))
    h4 = f.host("h4", ["board:x", "pool:d"])
    services.lease_reserve(
        host=h4, holder="sam", duration=timedelta(hours=1), reason="flashing firmware"
    )
    f.host("h5", ["board:x", "pool:e"])
    f.host("h6", ["board:x", "pool:e"])
    f.suite("capped", 2, labels=["pool:e"], max_duts=1)
    f.job("on-h1", ["pool:a"])
    f.job("needs-bt", ["pool:b", "bt"])
    f.job("on-h3", ["pool:c"])
    f.job("on-h4", ["pool:d"])
    settle()

    change()
    summary = services.scheduler_tick()

    assert not summary.unchanged
    assert len(summary.leases) == 1


def test_a_worker_going_offline_with_no_write_at_all_is_noticed():
    f.host("h1", ["board:x"], worker=f.worker("w1"))
    f.host("h2", ["board:x"], worker=f.worker("w2"))
    f.job("J1")
    f.job("J2")
    f.job("J3")
    settle()
    assert "busy" in reason_of("J3")["message"]
    Worker.objects.filter(name="w2").update(
        last_seen=timezone.now() - timedelta(seconds=settings.WORKER_OFFLINE_TIMEOUT - 5)
    )
    # last_seen moved but w2 is still online: the plan's input is the same.
    assert services.scheduler_tick().unchanged

    later = timezone.now() + timedelta(seconds=10)  # w2 passes the offline cutoff
    summary = services.scheduler_tick(now=later)

    assert not summary.unchanged
    assert "offline" in reason_of("J3")["message"]


def test_a_job_starting_does_not_make_the_tick_plan_again():
    # Starting rewrites the job's row (leased → running) but nothing the plan reads.
    f.host("h1", ["board:x"])
    f.job("J1")
    f.job("J2")
    settle()
    services.lease_job_start(lease=Lease.objects.get(released_at__isnull=True), by="runner-1")

    assert services.scheduler_tick().unchanged


@pytest.mark.django_db(transaction=True)
def test_a_change_committed_while_a_tick_runs_makes_the_next_tick_plan():
    # The tick takes the change log with one DELETE; a write still uncommitted then is left
    # in the log, so the tick after it commits plans again and leases what it freed.
    host_services.host_lock(host=f.host("h1", ["board:x"]), by="sam", reason="debugging")
    f.job("J1")
    settle()
    written, go_on = threading.Event(), threading.Event()

    def unlock_and_hold_the_transaction() -> None:
        try:
            with transaction.atomic():
                Host.objects.filter(hostname="h1").update(locked=False, lock_reason="")
                written.set()
                go_on.wait(30)
        finally:
            connections.close_all()

    writer = threading.Thread(target=unlock_and_hold_the_transaction)
    writer.start()
    assert written.wait(30)
    during = services.scheduler_tick()
    go_on.set()
    writer.join(30)

    after = services.scheduler_tick()

    assert during.leases == []  # the unlock was not committed yet: h1 still looked locked
    assert not after.unchanged
    assert [lease["job"] for lease in after.leases] == ["J1"]
