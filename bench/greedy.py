"""An Autotest-style greedy baseline: first fit in the planner's order, never reassigning."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable

from jobs.scheduling.planner import Assignment, HostState, JobState, SuiteState

# For comparison only: the product never uses this. It takes jobs in exactly the planner's
# order (docs/scheduling.md#order-of-consideration: quota phase, then main phase, max_duts
# caps, an unsatisfiable job not using up a quota) and gives each the first free eligible
# host, never moving an earlier job. That is what Autotest's host scheduler, LAVA and
# Tradefed do; the only difference from the planner is the missing reassignment (augmenting
# paths), so the gap between the two is its worth.

HostOrder = Callable[[HostState], object]


def by_hostname(host: HostState) -> object:
    """Autotest's first fit: the lowest hostname that fits."""
    return host.hostname


def by_fewest_labels(host: HostState) -> object:
    """A kinder first fit, with the planner's tie-break: fewer labels, then lowest hostname."""
    return (len(host.labels), host.hostname)


def greedy(  # noqa: C901 — the first-fit baseline, kept in one piece as the algorithm it is
    *,
    hosts: Iterable[HostState],
    jobs: Iterable[JobState],
    suites: Iterable[SuiteState],
    order: HostOrder = by_hostname,
) -> tuple[Assignment, ...]:
    """Lease each job, in the planner's order, the first free host that fits it in `order`."""
    free = sorted((h for h in hosts if h.schedulable), key=order)
    rank = {h.id: i for i, h in enumerate(free)}
    taken: set[int] = set()
    by_labels: dict[frozenset[str], list[int]] = defaultdict(list)  # host class -> ranks
    for i, h in enumerate(free):
        by_labels[h.labels].append(i)
    # Per job label set: the ranks of the hosts that fit, and a cursor past the taken ones.
    # Hosts are never freed within a tick, so the cursor only moves forward.
    candidates: dict[frozenset[str], list[int]] = {}
    cursor: dict[frozenset[str], int] = {}

    def first_fit(job: JobState) -> int | None:
        if job.pinned_host_id is not None:
            r = rank.get(job.pinned_host_id)
            if r is None or r in taken or not job.labels <= free[r].labels:
                return None
            return r
        ranks = candidates.get(job.labels)
        if ranks is None:
            ranks = sorted(
                r for labels, rs in by_labels.items() if job.labels <= labels for r in rs
            )
            candidates[job.labels] = ranks
            cursor[job.labels] = 0
        i = cursor[job.labels]
        while i < len(ranks) and ranks[i] in taken:
            i += 1
        cursor[job.labels] = i
        return ranks[i] if i < len(ranks) else None

    jobs = list(jobs)
    suites = list(suites)
    room = {s.id: s.max_duts - s.held for s in suites if s.max_duts is not None}
    made: list[Assignment] = []
    done: set[int] = set()

    def lease(job: JobState) -> bool:
        left = room.get(job.suite_id)  # type: ignore[arg-type]
        if left is not None and left <= 0:
            return False
        r = first_fit(job)
        if r is None:
            return False
        taken.add(r)
        done.add(job.id)
        made.append(Assignment(job.id, free[r].id))
        if left is not None:
            room[job.suite_id] = left - 1  # type: ignore[index]
        return True

    by_suite: dict[int, list[JobState]] = defaultdict(list)
    for job in jobs:
        if job.suite_id is not None:
            by_suite[job.suite_id].append(job)
    quota = sorted(
        (s for s in suites if s.held < s.min_duts), key=lambda s: (-s.priority, s.created_at, s.id)
    )
    for s in quota:
        need = s.min_duts - s.held
        for job in sorted(by_suite.get(s.id, ()), key=lambda j: j.id):
            if not need or len(taken) == len(free):
                break
            need -= lease(job)
    for job in sorted(jobs, key=lambda j: (-j.priority, j.submitted_at, j.id)):
        if len(taken) == len(free):
            break
        if job.id not in done:
            lease(job)
    return tuple(made)
