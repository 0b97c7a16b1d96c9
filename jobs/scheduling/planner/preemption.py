"""Preemption: which running preemptible jobs a tick stops, and for whom (opt-in)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from jobs.scheduling.planner.types import HostState, JobState, Policy, WaitCode, WaitReason

# A waiting job that might run if a host were freed. The others wait for something preemption
# cannot change: no host with the labels, the suite's cap, a host that is locked or down.
PREEMPTING = frozenset({WaitCode.HOSTS_UNAVAILABLE, WaitCode.OUTRANKED, WaitCode.PINNED_HOST_BUSY})


@dataclass(frozen=True, slots=True)
class Victim:
    """A test job holding a host that it may be stopped on: preemptible, leased or running."""

    host_id: int
    job_id: int
    name: str
    priority: int
    suite_id: int | None
    acquired_at: datetime


@dataclass(frozen=True, slots=True)
class Preemption:
    job: JobState  # the waiting job the host is freed for
    victim: Victim


def preemptions(
    *,
    waiting: Iterable[JobState],
    reasons: Mapping[int, WaitReason],
    victims: Sequence[Victim],
    hosts_by_id: Mapping[int, HostState],
    spare: Mapping[int, int],
    policy: Policy,
) -> list[Preemption]:
    """Pair waiting jobs, in consideration order, with the jobs to stop for them.

    A waiting job whose reason preemption could change takes one victim, the first that: holds
    a host carrying its labels (its pinned host, if it has one) that could take work once
    freed; runs at a priority at least `preempt_margin` below the waiting job's own (aging does
    not count: an aged weekly job preempts nothing); and whose suite keeps its min_duts
    (`spare`: hosts each suite holds beyond its minimum). Victims are taken lowest priority
    first, then the most recently leased (the least work lost), then by host id. Each victim
    is stopped once, for the first job in the order that can use it.
    """
    if not policy.preemption or not victims:
        return []
    ranked = sorted(victims, key=lambda v: (v.priority, -v.acquired_at.timestamp(), v.host_id))
    taken: set[int] = set()
    left = dict(spare)
    hopeless: set[tuple[frozenset[str], int | None, int]] = set()  # found no victim before
    found: list[Preemption] = []
    for job in waiting:
        if job.roles:
            continue  # one freed host does not start a multi-host job (docs: known limits)
        reason = reasons.get(job.id)
        if reason is None or reason.code not in PREEMPTING:
            continue
        key = (job.labels, job.pinned_host_id, job.priority)
        if key in hopeless:
            continue  # victims only go away, so it finds none now either
        victim = _first_victim(job, ranked, taken, left, hosts_by_id, policy.preempt_margin)
        if victim is None:
            hopeless.add(key)
            continue
        taken.add(victim.host_id)
        if victim.suite_id is not None and victim.suite_id in left:
            left[victim.suite_id] -= 1
        found.append(Preemption(job, victim))
        if len(taken) == len(ranked):
            break
    return found


def _first_victim(
    job: JobState,
    ranked: Sequence[Victim],
    taken: set[int],
    left: Mapping[int, int],
    hosts_by_id: Mapping[int, HostState],
    margin: int,
) -> Victim | None:
    for victim in ranked:
        if victim.priority + margin > job.priority:
            return None  # ranked by priority: every later victim runs higher still
        if victim.host_id in taken:
            continue
        if victim.suite_id is not None and left.get(victim.suite_id, 1) <= 0:
            continue
        host = hosts_by_id.get(victim.host_id)
        if host is None or not host.usable_when_freed or not job.fits(host):
            continue
        return victim
    return None
