"""One lock order (lease → job → host): a job's timeout racing its runner's `complete` on
PostgreSQL never deadlocks, and ends one way or the other, never half of each."""

from __future__ import annotations

import contextlib
import threading
from datetime import timedelta

import pytest
from django.db import connections, transaction
from django.utils import timezone

from jobs import services, transitions
from jobs.choices import JobStatus
from jobs.models import Job, Lease
from jobs.scheduling import expiry
from schedsite.errors import Conflict
from tests import factories as f

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

ROUNDS = 8


def race_timeout_against_complete(job: Job, lease: Lease) -> dict[str, object]:
    """Start the tick's timeout pass and the runner's `complete` together; between its first
    lock and its second, each waits (a little) for the other to have taken its first lock: in
    two opposite orders that is a deadlock every time."""
    start = threading.Barrier(2, timeout=10)
    between = threading.Barrier(2, timeout=0.5)  # the other side may be waiting on our lock
    outcome: dict[str, object] = {}
    real_move_job, real_move_jobs = transitions.move_job, transitions.move_jobs

    def pause(side: str) -> None:
        if threading.current_thread().name == side:
            with contextlib.suppress(threading.BrokenBarrierError):
                between.wait()

    def move_job(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202 — complete: lease held
        pause("complete")
        return real_move_job(*args, **kwargs)

    def move_jobs(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202 — timeout: first rows held
        pause("timeout")
        return real_move_jobs(*args, **kwargs)

    def timeout() -> None:
        start.wait()
        # The tick's own transaction; a job past its timeout by an hour.
        with transaction.atomic():
            outcome["timed out"] = expiry.job_timeout_overdue(
                now=timezone.now() + timedelta(hours=2)
            )

    def complete() -> None:
        start.wait()
        # Unwrapped: a deadlock must show here, not be hidden by the service's retry.
        with transaction.atomic():
            services.lease_job_complete.__wrapped__(lease=lease, by="runner", result="passed")

    def run(name: str, target) -> None:  # noqa: ANN001
        try:
            target()
        except BaseException as exc:  # noqa: BLE001 — reported by the test
            outcome[f"{name} error"] = exc
        finally:
            connections.close_all()

    transitions.move_job, transitions.move_jobs = move_job, move_jobs
    try:
        threads = [
            threading.Thread(target=run, args=(name, target), name=name)
            for name, target in (("timeout", timeout), ("complete", complete))
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        assert not any(t.is_alive() for t in threads), "a side never finished"
    finally:
        transitions.move_job, transitions.move_jobs = real_move_job, real_move_jobs
    return outcome


@pytest.mark.parametrize("round_", range(ROUNDS))
def test_a_timeout_racing_a_complete_never_deadlocks_and_ends_one_way(round_: int) -> None:
    f.host("h1", ["board:x"])
    job = f.job("j1")
    Job.objects.filter(pk=job.pk).update(timeout=timedelta(minutes=1))
    services.scheduler_tick()
    lease = Lease.objects.active().select_related("job", "host").get(job=job)
    services.lease_job_start(lease=lease, by="runner")
    lease = Lease.objects.select_related("job", "host").get(pk=lease.pk)

    outcome = race_timeout_against_complete(job, lease)

    job.refresh_from_db()
    lease.refresh_from_db()
    assert lease.released_at is not None
    complete_error = outcome.pop("complete error", None)
    assert "timeout error" not in outcome, outcome  # a deadlock would show here or below
    if job.status == JobStatus.PASSED:  # the runner won: nothing left to time out
        assert complete_error is None, complete_error
        assert lease.release_reason == "completed"
        assert outcome["timed out"] == 0
    else:  # the timeout won: the runner is told its lease ended, with why
        assert job.status == JobStatus.ABORTED, job.status
        assert lease.release_reason == "timeout"
        assert outcome["timed out"] == 1
        assert isinstance(complete_error, Conflict), complete_error
        assert "no longer active (timeout)" in str(complete_error)
