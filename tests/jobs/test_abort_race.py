"""An abort that races a tick leasing the same job never leaves an active lease behind."""

from __future__ import annotations

import threading

import pytest
from django.db import connections, transaction

from jobs import services
from jobs.choices import JobStatus
from jobs.models import Job, Lease
from jobs.scheduling import tick as tick_module
from tests import factories as f

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


def race_abort_against_a_held_tick(abort) -> None:  # noqa: ANN001
    """Hold a tick open after it leased, start `abort`, then let the tick commit."""
    reached, go_on = threading.Event(), threading.Event()
    real_fault_point = tick_module.fault_point

    def hold(name: str) -> None:
        if name == "tick.before_commit" and threading.current_thread().name == "tick":
            reached.set()
            go_on.wait(30)
        else:
            real_fault_point(name)

    errors: list[BaseException] = []

    def run(target) -> None:  # noqa: ANN001
        try:
            target()
        except BaseException as exc:  # noqa: BLE001 — reported by the test
            errors.append(exc)
        finally:
            connections.close_all()

    # Patched where the tick looks it up.
    tick_module.fault_point = hold
    try:
        tick = threading.Thread(target=run, args=(services.scheduler_tick,), name="tick")
        tick.start()
        assert reached.wait(30), "the tick never reached its commit point"
        aborter = threading.Thread(target=run, args=(abort,), name="abort")
        aborter.start()
        # The abort now waits on the rows the tick has locked; let the tick commit.
        aborter.join(0.5)
        go_on.set()
        tick.join(30)
        aborter.join(30)
    finally:
        tick_module.fault_point = real_fault_point
    assert errors == []


def test_a_job_aborted_while_a_tick_leases_it_has_its_lease_released():
    f.host("h1", ["board:x"])
    job = f.job("j1")

    race_abort_against_a_held_tick(
        lambda: services.job_abort(job=Job.objects.get(pk=job.pk), by="sam")
    )

    job.refresh_from_db()
    assert job.status == JobStatus.ABORTED
    assert not Lease.objects.filter(job=job, released_at__isnull=True).exists()


def test_a_suite_aborted_while_a_tick_leases_its_jobs_has_every_lease_released():
    for i in range(3):
        f.host(f"h{i}", ["board:x"])
    suite = f.suite("S", 3)

    race_abort_against_a_held_tick(lambda: services.suite_abort(suite=suite, by="sam"))

    statuses = set(Job.objects.filter(suite=suite).values_list("status", flat=True))
    assert statuses == {JobStatus.ABORTED}
    assert not Lease.objects.filter(job__suite=suite, released_at__isnull=True).exists()


def test_a_staff_abort_and_a_runner_finishing_the_same_job_do_not_deadlock():
    """Both lock the lease before the job, so one waits for the other instead of a deadlock."""
    f.host("h1", ["board:x"])
    job = f.job("j1")
    services.scheduler_tick()
    lease = Lease.objects.get(job=job, released_at__isnull=True)
    runner_has_lease, errors = threading.Event(), []

    def runner() -> None:
        # What the runner protocol does: lock the lease, then (a moment later) the job.
        try:
            with transaction.atomic():
                Lease.objects.select_for_update().get(pk=lease.pk)
                runner_has_lease.set()
                threading.Event().wait(0.5)  # the abort starts meanwhile
                Job.objects.filter(pk=job.pk).update(message="finishing")
        except BaseException as exc:  # noqa: BLE001 — reported by the test
            errors.append(exc)
        finally:
            connections.close_all()

    def staff() -> None:
        try:
            runner_has_lease.wait(10)
            services.job_abort(job=Job.objects.get(pk=job.pk), by="sam")
        except BaseException as exc:  # noqa: BLE001 — reported by the test
            errors.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=runner), threading.Thread(target=staff)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert errors == []
    job.refresh_from_db()
    assert job.status == JobStatus.ABORTED
    assert not Lease.objects.filter(job=job, released_at__isnull=True).exists()
