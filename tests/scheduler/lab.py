"""Plain constructors for planner data: hosts, suites and jobs with lab-like defaults."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta

from jobs.scheduling.planner import HostState, JobState, Plan, SuiteState

T0 = datetime(2024, 5, 6, 9, 0)


def host(id: int, *labels: str, hostname: str | None = None, **state: object) -> HostState:
    """Return a ready, free host `h<id>` carrying the labels, unless `state` says otherwise."""
    return HostState(
        id=id,
        hostname=hostname or f"h{id}",
        labels=frozenset(labels),
        **state,  # type: ignore[arg-type]
    )


# What keeps a host from a new lease, in the words of a wait reason: host()'s state for it.
UNAVAILABLE: dict[str, dict[str, bool]] = {
    "locked": {"locked": True},
    "on a paused worker": {"worker_paused": True},
    "on an offline worker": {"worker_offline": True},
    "not ready": {"ready": False},
    "reserved": {"leased": True},  # a lease with no job: a manual reservation
}


def hosts_that_are(*kinds: str) -> list[HostState]:
    """Hosts h1, h2, … with no labels, each kept from new leases the way its kind says."""
    return [host(i, **UNAVAILABLE[kind]) for i, kind in enumerate(kinds, 1)]


def suite(id: int, name: str, *, priority: int = 40, minute: int = 0, **kw: object) -> SuiteState:
    """Return a suite created `minute` minutes after T0."""
    return SuiteState(
        id=id,
        name=name,
        priority=priority,
        created_at=T0 + timedelta(minutes=minute),
        **kw,  # type: ignore[arg-type]
    )


def job(
    id: int,
    *labels: str,
    priority: int | None = None,
    of: SuiteState | None = None,
    minute: int = 0,
    pinned: int | None = None,
) -> JobState:
    """Return queued job `J<id>`; a suite job takes the suite's priority and submission time."""
    return JobState(
        id=id,
        name=f"J{id}",
        suite_id=of.id if of else None,
        priority=priority if priority is not None else (of.priority if of else 40),
        submitted_at=of.created_at if of else T0 + timedelta(minutes=minute),
        labels=frozenset(labels),
        pinned_host_id=pinned,
    )


def suite_jobs(first_id: int, count: int, of: SuiteState, *labels: str) -> list[JobState]:
    """Return `count` jobs of the suite with consecutive ids."""
    return [job(first_id + i, *labels, of=of) for i in range(count)]


def leases(result: Plan) -> dict[int, int]:
    """Return job id -> host id for the plan's assignments."""
    return {a.job_id: a.host_id for a in result.assignments}


def leased_per_suite(result: Plan, jobs: Iterable[JobState]) -> dict[int | None, int]:
    """Return how many hosts each suite got in the plan."""
    suite_of = {j.id: j.suite_id for j in jobs}
    counts: dict[int | None, int] = {}
    for a in result.assignments:
        counts[suite_of[a.job_id]] = counts.get(suite_of[a.job_id], 0) + 1
    return counts
