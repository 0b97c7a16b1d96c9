"""A tiny run of the scheduling-policy benchmark: its report, under each policy."""

from __future__ import annotations

import pytest
from django.utils import timezone

from bench.policies import POLICIES, PRIORITIES, Shape, simulate, summary, table
from jobs.models import SchedulerSettings

pytestmark = pytest.mark.django_db

# 4 hosts for half an hour at two-minute steps: the cq stream alone fills them, and a daily and
# a weekly suite of short "long" jobs arrive every 10 minutes, so every priority gets leases.
TINY = Shape(
    hosts=4,
    workers=2,
    hours=0.5,
    step=120,
    cq_every_minutes=2,
    long_every_minutes=10,
    daily_minutes=6,
    weekly_minutes=8,
)
KEYS = {
    "submitted",
    "finished",
    "queued_at_end",
    "wait_p50_min",
    "wait_p95_min",
    "wait_max_min",
    "longest_starvation_min",
}


@pytest.mark.parametrize("policy", POLICIES)
def test_a_tiny_run_reports_sane_waits_per_priority(policy):
    report = simulate(TINY, policy=policy, seed=1, start=timezone.now())
    current = SchedulerSettings.load()
    assert current.ordering == policy.partition("+")[0]
    assert current.aging_minutes == (2 if policy == "fifo+aging" else 0)
    assert report["policy"] == policy and report["suites"] > 0
    by_priority = report["by_priority"]
    assert set(by_priority) == {str(p) for p in PRIORITIES}
    assert by_priority["70"]["finished"] > 0
    for figures in by_priority.values():
        assert set(figures) == KEYS
        assert figures["submitted"] > 0
        assert figures["finished"] + figures["queued_at_end"] <= figures["submitted"]
        if figures["wait_p50_min"] is not None:
            p50, p95, top = (figures[k] for k in ("wait_p50_min", "wait_p95_min", "wait_max_min"))
            assert 0 <= p50 <= p95 <= top <= figures["longest_starvation_min"]
        # A job still queued at the end counts its wait up to the end: never more than the run.
        assert figures["longest_starvation_min"] <= TINY.hours * 60
    rows = summary([report])
    assert [(r["policy"], r["priority"]) for r in rows] == [(policy, p) for p in PRIORITIES]
    assert table(rows).count("\n") == 2 + len(PRIORITIES) - 1
