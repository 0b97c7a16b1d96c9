"""A tick killed with SIGKILL mid-apply leaves the database as it was; the next tick carries on."""

from __future__ import annotations

import os
import signal
import time
from datetime import timedelta
from pathlib import Path

import pytest
from django.db import connection
from django.db.models import Count
from django.utils import timezone

from hosts.choices import HostStatus
from hosts.models import Host, HostEvent
from jobs import services
from jobs.choices import JobStatus, ReleaseReason
from jobs.models import Job, Lease, SchedulerTick
from tests import factories as f
from tests.reliability.support import backends, live_database_url, subprocess_env, wait_until

pytestmark = [pytest.mark.postgres, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

APP = "reltest-killed-tick"


def lab_state() -> dict[str, object]:
    """Everything a tick writes, as an operator would count it."""
    return {
        "jobs": dict(Job.objects.order_by().values_list("status").annotate(n=Count("id"))),
        "hosts": dict(Host.objects.order_by().values_list("hostname", "status")),
        "leases": Lease.objects.count(),
        "active_leases": sorted(
            Lease.objects.filter(released_at__isnull=True).values_list("host__hostname", "job_id")
        ),
        "events": HostEvent.objects.count(),
        "ticks": SchedulerTick.objects.count(),
    }


def tick_backend_holds(pid: int) -> dict[str, bool]:
    """What the killed tick's session holds: the advisory lock, and uncommitted lease writes."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT "
            " bool_or(l.locktype = 'advisory' AND l.granted),"
            " bool_or(c.relname = 'jobs_lease' AND l.mode = 'RowExclusiveLock'),"
            " max(a.state)"
            " FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid"
            " LEFT JOIN pg_class c ON c.oid = l.relation WHERE l.pid = %s",
            [pid],
        )
        advisory, wrote_leases, state = cursor.fetchone()
    return {
        "advisory_lock": bool(advisory),
        "wrote_leases": bool(wrote_leases),
        "idle_in_transaction": state == "idle in transaction",
    }


def test_a_tick_killed_before_commit_leaves_nothing_behind_and_the_next_tick_carries_on(
    processes, tmp_path: Path
) -> None:
    w1 = f.worker("w1")
    # A runner vanished two hours ago: its lease is overdue, so the tick has an expiry to do.
    stale_host = f.host("h9", ["board:x"], worker=w1)
    stale = f.job("stale", ["board:x"], host=stale_host)
    services.scheduler_tick(now=timezone.now() - timedelta(hours=2))
    assert Lease.objects.get(job=stale).expires_at < timezone.now()
    for i in range(3):
        f.host(f"h{i}", ["board:x"], worker=w1)
    f.suite("S", 5)  # five jobs for three free hosts
    before = lab_state()

    marker = tmp_path / "reached"
    tick = processes(
        "tick",
        "tick",
        env=subprocess_env(
            DATABASE_URL=live_database_url(APP),
            SCHEDSITE_FAULT_POINT="tick.before_commit",
            SCHEDSITE_FAULT_FILE=str(marker),
        ),
    )
    wait_until(
        lambda: marker.exists() or tick.popen.poll() is not None,
        timeout=30,
        what="the tick to reach its fault point",
    )
    assert tick.popen.poll() is None, f"the tick exited early:\n{tick.output()}"
    assert int(marker.read_text()) == tick.pid

    # It is really mid-apply: it holds the planner's lock and has written leases, uncommitted.
    (backend,) = backends(application_name=APP)
    assert tick_backend_holds(backend) == {
        "advisory_lock": True,
        "wrote_leases": True,
        "idle_in_transaction": True,
    }
    assert lab_state() == before  # nobody else can see any of it

    os.kill(tick.pid, signal.SIGKILL)
    assert tick.popen.wait(10) == -signal.SIGKILL
    # PostgreSQL notices the dead client and rolls back, releasing the advisory lock with it.
    wait_until(lambda: not backends(application_name=APP), timeout=10, what="the backend to end")
    assert lab_state() == before

    # The next tick must not wait on a lock the dead tick held: bound it instead of hanging.
    with connection.cursor() as cursor:
        cursor.execute("SET lock_timeout = '5s'")
    try:
        started = time.monotonic()
        summary = services.scheduler_tick(trigger="after the kill")
        assert time.monotonic() - started < 5
    finally:
        with connection.cursor() as cursor:
            cursor.execute("RESET lock_timeout")

    assert summary.expired == 1
    assert sorted((lease["job"], lease["host"]) for lease in summary.leases) == [
        ("S-t0", "h0"),
        ("S-t1", "h1"),
        ("S-t2", "h2"),
        ("verify h9", "h9"),  # its runner vanished: the host is verified before more tests
    ]
    stale.refresh_from_db()
    assert stale.status == JobStatus.ERROR  # no retries left
    assert Lease.objects.get(job=stale).release_reason == ReleaseReason.EXPIRED
    assert Host.objects.get(hostname="h9").status == HostStatus.VERIFYING
    after = lab_state()
    assert after["ticks"] == before["ticks"] + 1
    assert after["jobs"] == {JobStatus.LEASED: 4, JobStatus.QUEUED: 2, JobStatus.ERROR: 1}
    assert after["leases"] == before["leases"] + 4
    # The expiry and its host's move to needs_verify; the verify job queued, its host's move
    # to verifying, and one event per lease: exactly one tick's worth, none from the dead one.
    assert after["events"] == before["events"] + 8
