"""bench.labday's harsh profile, in small (bench/RESULTS.md, "A simulated lab day"): runners
are killed and workers die mid-job, hosts break often, some never mend, and nobody on staff
acts; no job is lost, every job an infrastructure failure hit with a try left is retried, and
the hopeless hosts end repair_failed with their next automatic try."""

from __future__ import annotations

from dataclasses import replace

import pytest
from django.utils import timezone

from bench.labday import PROFILES, Shape, simulate_day
from hosts.choices import HostStatus
from hosts.models import Host

pytestmark = [pytest.mark.django_db, pytest.mark.slow]  # a simulated day: a minute or more

# Two workers, so a killed runner orphans a good share of the lab; a short day, a long night.
SMALL_HARSH = replace(
    Shape(**PROFILES["harsh"]),
    hosts=10,
    workers=2,
    hours=1.5,
    drain_minutes=240,
    unrepairable_hosts=1,
    suite_every_minutes=10,
    suite_jobs=(5, 10),
    runner_kill_every_minutes=15,
    dead_worker_every_minutes=30,
    repair_failed_retry_seconds=-1,
)


def test_a_harsh_day_without_staff_loses_nothing_and_gives_up_only_on_the_hopeless_host():
    report = simulate_day(SMALL_HARSH, seed=2, start=timezone.now())

    # The day was harsh: runners killed and workers dead mid-job, hosts breaking.
    assert report["runners_killed"] + report["workers_died"] >= 3
    assert report["runs_orphaned"] > 0
    assert report["runs_reported_broken"] >= 10
    assert report["staff_rounds"] == report["repair_now_pressed"] == 0
    # What a lab must do alone.
    assert report["lost"] == 0
    assert report["infra_failures_with_a_try_left"] > 0
    assert report["infra_failures_with_a_try_left_not_retried"] == 0
    (hopeless,) = report["hopeless_hosts"].values()
    assert hopeless["status"] == HostStatus.REPAIR_FAILED and hopeless["next_repair_at"]
    assert report["repairable_repair_failed"] == 0
    assert report["in_service_of_repairable"] == "9/9"
    assert report["repairable_out_at_the_end"] == []  # what the report says keeps hosts out
    assert Host.objects.filter(status=HostStatus.REPAIR_FAILED).count() == 1
