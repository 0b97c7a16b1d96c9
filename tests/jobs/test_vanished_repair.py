"""A repair whose runner vanished costs no try: a killed runner or a dead worker says nothing
of the DUT (docs/health.md#the-repair-loop); a repair that loses its runner every time still
ends repair_failed."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest
from django.utils import timezone

from hosts.choices import HostStatus
from hosts.models import Host, HostEvent
from jobs import services
from jobs.choices import JobKind, JobStatus
from jobs.models import Job, Lease
from tests import factories as f
from tests.factories import run, tick

pytestmark = pytest.mark.django_db

rack = pytest.fixture(f.rack)


def h1() -> Host:
    return Host.objects.get(hostname="h1")


def repair_leased(at: datetime, rack) -> Job:  # noqa: ANN001
    """h1's repair job, leased (by the tick at `at` if not yet)."""
    tick(at, rack)
    repair = Job.objects.unfinished().get(kind=JobKind.REPAIR, host__hostname="h1")
    assert repair.status == JobStatus.LEASED, repair.status
    return repair


def vanish(repair: Job, rack) -> datetime:  # noqa: ANN001
    """Its runner starts it and dies: the tick after its lease's end expires it. Returns that
    tick's time."""
    services.job_start(job=repair, by="runner-1")
    at = Lease.objects.get(job=repair).expires_at + timedelta(seconds=1)
    tick(at, rack)
    repair.refresh_from_db()
    assert repair.status == JobStatus.ERROR
    return at


@pytest.fixture
def broken(rack) -> datetime:  # noqa: ANN001
    """h1 needs repair after one failed repair (repair_attempts 1)."""
    services.host_set_status(host=h1(), status=HostStatus.NEEDS_REPAIR, by="sam")
    t = timezone.now()
    run(repair_leased(t, rack), JobStatus.FAILED, at=t)
    assert (h1().status, h1().repair_attempts) == (HostStatus.NEEDS_REPAIR, 1)
    return t + timedelta(minutes=5)  # past the repair backoff


def test_a_repair_whose_runner_vanished_costs_no_try_and_is_repaired_again(rack, broken, settings):  # noqa: ANN001
    settings.REPAIR_MAX_ATTEMPTS = 2  # one more failed try would give it up

    at = vanish(repair_leased(broken, rack), rack)

    host = h1()
    # Not repair_failed: the failed try count is as it was, and a new repair runs at once.
    assert host.repair_attempts == 1
    assert host.status == HostStatus.REPAIRING
    event = HostEvent.objects.filter(host=host, new_status=HostStatus.NEEDS_REPAIR).latest("id")
    assert "runner stopped heartbeating: repair again (not a failed try)" in event.message
    # And a real failure still counts: the host is given up on at its second failed try.
    run(repair_leased(at, rack), JobStatus.FAILED, at=at + timedelta(minutes=1))
    assert (h1().status, h1().repair_attempts) == (HostStatus.REPAIR_FAILED, 2)


def test_a_repair_that_loses_its_runner_every_time_still_ends_repair_failed(rack, settings):  # noqa: ANN001
    settings.REPAIR_MAX_ATTEMPTS = 2
    services.host_set_status(host=h1(), status=HostStatus.NEEDS_REPAIR, by="sam")
    at = timezone.now()
    statuses = []
    for _ in range(3):
        at = vanish(repair_leased(at, rack), rack)
        statuses.append((h1().status, h1().repair_attempts))
        at += timedelta(minutes=10)  # past any backoff

    # The first vanishes cost nothing; from the REPAIR_MAX_ATTEMPTS-th in a row each counts.
    assert statuses[0] == (HostStatus.REPAIRING, 0)
    assert statuses[1][1] == 1
    assert statuses[2] == (HostStatus.REPAIR_FAILED, 2)
