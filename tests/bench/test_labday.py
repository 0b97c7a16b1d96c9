"""A short simulated lab day: hosts that break come back, the day drains, staff do rounds."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest
from django.utils import timezone

from bench.labday import Shape, simulate_day
from hosts.choices import HostStatus
from hosts.models import Host, HostEvent
from jobs.choices import JobKind
from jobs.models import Job

pytestmark = pytest.mark.django_db

# A tiny lab whose runs are short and often break their DUT, so that three quarters of a
# simulated hour see hosts break, get repaired and run tests again, and a half-hour drain
# sees the lab run on with nobody submitting. Repairs of a repairable DUT always work here.
TINY = Shape(
    hosts=8,
    workers=2,
    hours=0.75,
    step=60,
    drain_minutes=30,
    staff_rounds_hours=0,
    infra_failures=0.3,
    repair_fixes=1.0,
    unrepairable=0.125,
    test_minutes=(2, 6),
    verify_minutes=(1, 2),
    repair_minutes=(1, 3),
    suite_every_minutes=5,
    suite_jobs=(5, 10),
)


def test_a_short_day_and_its_drain_lose_no_job_and_mend_the_repairable_hosts():
    start = timezone.now()
    report = simulate_day(TINY, seed=3, start=start)
    stop = start + timedelta(hours=TINY.hours)
    assert report["lost"] == 0
    assert report["runs_reported_broken"] > 0
    assert report["runs_vanished"] > 0
    assert report["broken_repairable_back"] >= 1
    assert report["repairs"].get("passed", 0) >= 1
    assert report["passed"] > 0
    # The drain: nobody submits after the submitting hours, and the lab runs on.
    tests = Job.objects.filter(kind=JobKind.TEST)
    assert not tests.filter(submitted_at__gt=stop).exists()
    assert tests.filter(finished_at__gt=stop).exists()
    assert report["at_submissions_stop"]["in_service_of_repairable"].endswith("/7")
    # Nothing repairable gave up, and no round was made; the unrepairable host may have.
    assert report["repairable_repair_failed"] == 0
    assert report["staff_rounds"] == report["repair_now_pressed"] == 0
    assert set(Host.objects.values_list("status", flat=True)) <= {
        HostStatus.READY,
        HostStatus.NEEDS_REPAIR,
        HostStatus.REPAIRING,
        HostStatus.NEEDS_VERIFY,
        HostStatus.VERIFYING,
        HostStatus.REPAIR_FAILED,
    }


def test_a_staff_round_brings_a_repair_failed_host_back_into_service():
    # Repairs mend a broken DUT only half the time, so some repairable host fails three in a
    # row; a round every half hour presses Repair now on it and a later repair mends it.
    shape = replace(TINY, staff_rounds_hours=0.5, repair_fixes=0.5, infra_failures=0.4)
    report = simulate_day(shape, seed=4, start=timezone.now())
    assert report["lost"] == 0
    assert report["staff_rounds"] == 2
    assert report["repair_now_pressed"] >= 1
    assert report["pressed_repairable_back"] >= 1
    # The audit trail shows the press by a person, and that host is ready at the end.
    pressed = HostEvent.objects.filter(
        actor="labday-admin",
        old_status=HostStatus.REPAIR_FAILED,
        new_status=HostStatus.NEEDS_REPAIR,
    ).values("host_id")
    assert Host.objects.filter(pk__in=pressed, status=HostStatus.READY).exists()
