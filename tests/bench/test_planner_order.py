"""The planner's fast main-phase sort gives exactly the order of docs/scheduling.md#main-phase."""

from __future__ import annotations

from datetime import timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from jobs.scheduling.planner import JobState
from jobs.scheduling.planner.ordering import job_order_key, main_phase_order
from tests.scheduler.lab import T0


@st.composite
def job_lists(draw: st.DrawFn) -> list[JobState]:
    """Draw jobs with many ties in priority and submission time, in any id order."""
    ids = draw(st.lists(st.integers(1, 10_000), unique=True, max_size=40))
    return [
        JobState(
            id=i,
            name=f"J{i}",
            suite_id=None,
            priority=draw(st.sampled_from([10, 40, 70])),
            submitted_at=T0 + timedelta(seconds=draw(st.integers(0, 3))),
        )
        for i in ids
    ]


@settings(max_examples=300, deadline=None)
@given(job_lists())
def test_the_three_stable_sorts_equal_the_tuple_key_sort(jobs: list[JobState]) -> None:
    assert main_phase_order(jobs) == sorted(jobs, key=job_order_key)
