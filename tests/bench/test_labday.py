"""A short simulated lab day: hosts that break come back by themselves and no job is lost."""

from __future__ import annotations

import pytest
from django.utils import timezone

from bench.labday import Shape, simulate_day
from hosts.choices import HostStatus
from hosts.models import Host

pytestmark = pytest.mark.django_db

# A tiny lab whose runs are short and often break their DUT, so that one simulated hour
# sees hosts break, get repaired and run tests again; repairs of a repairable DUT always work.
TINY = Shape(
    hosts=8,
    workers=2,
    hours=1,
    step=30,
    infra_failures=0.3,
    repair_fixes=1.0,
    unrepairable=0.125,
    test_minutes=(2, 6),
    verify_minutes=(1, 2),
    repair_minutes=(1, 3),
    suite_every_minutes=5,
    suite_jobs=(5, 10),
)


def test_a_simulated_hour_loses_no_job_and_mends_the_repairable_hosts():
    report = simulate_day(TINY, seed=3, start=timezone.now())
    assert report["lost"] == 0
    assert report["runs_reported_broken"] > 0
    assert report["runs_vanished"] > 0
    assert report["broken_repairable_back"] >= 1
    assert report["repairs"].get("passed", 0) >= 1
    # Nothing repairable gave up; what is not ready is still on its way back.
    assert report["repairable_repair_failed"] == 0
    on_the_way_back = {
        HostStatus.READY,
        HostStatus.NEEDS_REPAIR,
        HostStatus.REPAIRING,
        HostStatus.NEEDS_VERIFY,
        HostStatus.VERIFYING,
    }
    assert set(Host.objects.values_list("status", flat=True)) <= on_the_way_back | {
        HostStatus.REPAIR_FAILED
    }
    assert report["passed"] > 0
