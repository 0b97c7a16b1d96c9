"""Pure scheduling core: decide which queued jobs get which free hosts in one tick.

Callers use `from jobs.scheduling import planner; planner.plan(...)`. The package is split by
concern: the plain values (`types`), the order jobs are considered in (`ordering`), the
matching of jobs to hosts (`matching`) and the wait reasons (`explanations`); `plan` below
runs them in turn.
"""

from __future__ import annotations

import heapq
import itertools
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from datetime import datetime
from operator import attrgetter

# The inventory's rule, on the planner's plain values (HostState.schedulable), for its callers.
from hosts.rules import host_is_schedulable
from jobs.scheduling.planner.explanations import (
    Explainer,
    WaitReasons,
    explain_multi,
    explain_waits,
)
from jobs.scheduling.planner.hostindex import HostIndex
from jobs.scheduling.planner.leasing import Leaser, Unit
from jobs.scheduling.planner.matching import Matching, assign_hosts, job_classes
from jobs.scheduling.planner.multihost import Spec
from jobs.scheduling.planner.ordering import (
    DEFAULT_POLICY,
    JobGroupKey,
    aging_bonus,
    class_key,
    class_key_of,
    consideration_order,
    effective_priority,
    effective_size,
    group_jobs,
    group_key,
    holder_key,
    is_plain,
    job_order_key,
    jobs_by_suite,
    main_phase_order,
    on_a_free_host_of_its_build,
    quota_candidates,
    quota_suites,
    reason_keys,
    same_build_first,
)
from jobs.scheduling.planner.provisioning import fewest_provisions, provisions_of
from jobs.scheduling.planner.types import (
    BUILD_CHOICES,
    HOST_CHOICES,
    ORDERINGS,
    WAIT_CODES,
    Assignment,
    HostState,
    JobState,
    Plan,
    Policy,
    RoleNeed,
    SuiteState,
    WaitCode,
    WaitReason,
    WorkerLoad,
)

_LABELS, _PIN, _SUITE = attrgetter("labels"), attrgetter("pinned_host_id"), attrgetter("suite_id")
_ROLES = attrgetter("roles")

# This package must never import Django: the property tests, the benchmarks and any
# what-if simulator run it on plain data.

__all__ = [
    "DEFAULT_POLICY",
    "BUILD_CHOICES",
    "HOST_CHOICES",
    "WAIT_CODES",
    "ORDERINGS",
    "Assignment",
    "HostIndex",
    "HostState",
    "JobGroupKey",
    "JobState",
    "Plan",
    "Policy",
    "SuiteState",
    "WaitCode",
    "WaitReason",
    "WorkerLoad",
    "aging_bonus",
    "class_key",
    "consideration_order",
    "effective_priority",
    "effective_size",
    "group_jobs",
    "group_key",
    "holder_key",
    "host_is_schedulable",
    "job_order_key",
    "plan",
    "quota_candidates",
    "reason_keys",
    "RoleNeed",
]


def plan(
    *,
    hosts: Iterable[HostState],
    jobs: Iterable[JobState],
    suites: Iterable[SuiteState],
    policy: Policy = DEFAULT_POLICY,
    now: datetime | None = None,
    workers: Mapping[str, WorkerLoad] | None = None,
    usage: Mapping[int, float] | None = None,
    groups: Mapping[JobGroupKey, Sequence[JobState]] | None = None,
    host_index: HostIndex | None = None,
    hosts_by_id: Mapping[int, HostState] | None = None,
) -> Plan:
    """Lease free hosts to queued jobs (docs/scheduling.md#the-promise).

    `policy`: the scheduler settings (docs/scheduling.md#policies); `now` is needed when they
    depend on time (aging, dynsize, fair share). `workers`: the capacity of each worker that
    has one. `usage`: each owner's recent host-seconds, for fair share. `groups` and
    `host_index`: the same jobs as `group_jobs` groups them and the same hosts as
    `HostIndex.of` counts them, from a caller that keeps them between plans; the plan is the
    same, without a pass over the whole queue and every host; `hosts_by_id`, the same hosts by
    id in the same order, likewise.
    """
    hosts = list(hosts)
    jobs = jobs if isinstance(jobs, list) else list(jobs)  # read, never changed
    suites = list(suites)
    workers = workers or {}
    suite_by_id = {suite.id: suite for suite in suites}
    if hosts_by_id is None:
        hosts_by_id = {host.id: host for host in hosts}
    index = host_index if host_index is not None else HostIndex.of(hosts)
    free = list(index.free.values())  # the matching orders them by its own keys
    matching = Matching(
        free,
        # Every build steers the classes under affinity, unless builds are ignored ("none").
        builds=None if policy.builds != "none" else set(),
        host_choice=policy.host_choice,
        worker_room={
            name: load.limit - load.running
            for name, load in workers.items()
            if load.limit is not None
        },
        worker_busy=index.leased_on,
    )

    # One pass over the queue: the jobs of each (labels, pin, suite), in order of first
    # appearance. Jobs alike in these are alike to the matching and to the wait reasons, so
    # the rest of the plan works per class and touches single jobs only as it leases them.
    # Multi-host jobs are counted apart, by their shape (docs/scheduling.md#multi-host-jobs).
    if groups is None:
        multi = list(filter(_ROLES, jobs))
        one_host = list(itertools.filterfalse(_ROLES, jobs)) if multi else jobs
        alike = Counter(
            zip(map(_LABELS, one_host), map(_PIN, one_host), map(_SUITE, one_host), strict=True)
        )
        multi_groups = group_jobs(multi) if multi else {}
    else:
        alike = Counter({key: len(g) for key, g in groups.items() if g and len(key) == 3})
        multi_groups = {key: g for key, g in groups.items() if g and len(key) > 3}
    class_ids = job_classes(alike, matching)
    build_of = {suite.id: suite.build for suite in suites}
    # Hosts each capped suite may still take this tick; held hosts count against the cap.
    room = {s.id: s.max_duts - s.held for s in suites if s.max_duts is not None}
    leaser = Leaser(matching, hosts, room, build_of, policy, now)
    if host_index is not None and multi_groups:
        # The busy hosts a hold may wait for, as the kept index holds them.
        leaser.multi.use_busy(index.busy_by_labels())

    _quota_phase(
        quota_suites(suites, policy, now), groups or jobs, matching, room, class_ids, leaser
    )

    if groups is not None and is_plain(policy):
        order: Iterable[JobState] = _merged(groups, class_ids, leaser)
    else:
        order = _main_order(jobs, policy, now, usage, free, build_of)
    specs = [leaser.multi.spec(g[0]) for g in multi_groups.values()]
    _main_phase(order, matching, class_ids, leaser, specs)
    leased_ids = leaser.leased_ids

    units = leaser.units
    hold_units = leaser.hold_units()
    host_ids = _hosts(matching, [*units, *hold_units], hosts_by_id, leaser.placed, policy)
    assignments = _assignments(units, host_ids[: len(units)])
    holds = {host_ids[len(units) + i]: job.id for i, (job, *_rest) in enumerate(hold_units)}

    full = {
        name: (workers[name].running + started, workers[name].limit)
        for name, started in matching.at_capacity().items()
    }
    leased_hosts = frozenset(a.host_id for a in assignments)
    explainer = Explainer(
        hosts_by_id,
        index,
        matching,
        suite_by_id,
        room,
        full,
        leased_hosts,
        leaser.holder,
        held_hosts=frozenset(holds),
    )
    for job, _j, _build, _role, _slot in units:
        if not job.roles:
            alike[job.labels, job.pinned_host_id, job.suite_id] -= 1
    waiting = [key for key, count in alike.items() if count > 0]
    by_class = explain_waits(waiting, class_ids, explainer)
    class_reasons = {
        class_key_of(labels, pin, suite_id): by_class[class_ids[labels, pin], suite_id]
        for labels, pin, suite_id in waiting
    }
    by_group, holding = explain_multi(multi_groups, leased_ids, explainer, class_reasons)
    holder = (leaser.holder.job.id, holding) if leaser.holder and holding else None  # type: ignore[union-attr]
    wait_reasons = WaitReasons(jobs, leased_ids, class_ids, by_class, by_group, holder)

    return Plan(
        assignments=assignments,
        wait_reasons=wait_reasons,
        class_reasons=class_reasons,
        hosts_free=len(free),
        holds=holds,
        provisions=provisions_of(units, host_ids[: len(units)], hosts_by_id),
    )


def _main_order(
    jobs: list[JobState],
    policy: Policy,
    now: datetime | None,
    usage: Mapping[int, float] | None,
    free: list[HostState],
    build_of: Mapping[int, str],
) -> list[JobState]:
    """The main phase's order (main_phase_order), then same-build-first where it is on."""
    order = main_phase_order(jobs, policy, now, usage)
    if policy.same_build_first_minutes > 0 and now is not None:
        on_its_build = on_a_free_host_of_its_build(free, build_of)
        order = same_build_first(order, on_its_build, policy, now)
    return order


def _main_phase(
    order: Iterable[JobState],
    matching: Matching,
    class_ids: Mapping[tuple[frozenset[str], int | None], int],
    leaser: Leaser,
    specs: list[Spec],
) -> None:
    """Keep each job of the main phase that fits with those kept before it; then the elastic
    hosts of the multi-host jobs kept. `specs`: the shapes of the queue's multi-host jobs."""
    dead, leased_ids, lease = matching.dead, leaser.leased_ids, leaser.lease
    if not specs:
        for job in order:
            if not matching.free:
                break  # every schedulable host is leased: the rest can only wait
            # A dead class cannot take a host for the rest of the tick (see Matching.add), so
            # its jobs are skipped without a call; in a full lab that is nearly every job.
            j = class_ids[job.labels, job.pinned_host_id]
            if not dead[j] and job.id not in leased_ids:
                lease(job, j)
        return
    consider, hopeless = leaser.consider, leaser.hopeless
    classes: list[object] = [*class_ids.values(), *specs]
    seen = -1  # leaser.version when the classes were last sifted (below)
    for job in order:
        if not matching.free:
            if not leaser.holding:
                break  # every schedulable host is leased, none held: the rest can only wait
            if seen != leaser.version:
                # Only held hosts are left: stop once no class or shape could backfill.
                seen = leaser.version
                if all(map(hopeless, classes)):
                    break
        consider(job, -1 if job.roles else class_ids[job.labels, job.pinned_host_id])
    leaser.elastic()


def _hosts(
    matching: Matching,
    units: list[Unit],
    hosts_by_id: Mapping[int, HostState],
    placed: Mapping[int, Mapping[int, int]],
    policy: Policy,
) -> list[int]:
    """The host of each unit: first-fit (assign_hosts), then, unless the policy says otherwise,
    re-chosen for the fewest provisions (docs/scheduling.md#provisioning)."""
    host_ids = assign_hosts(matching, units, hosts_by_id, placed)
    if policy.builds == "min-cost":
        host_ids = fewest_provisions(matching, units, hosts_by_id, placed, host_ids)
    return host_ids


def _assignments(units: Sequence[Unit], host_ids: Sequence[int]) -> tuple[Assignment, ...]:
    """One Assignment per unit; a multi-host job's together, by slot (its elastic hosts were
    matched after the main phase)."""
    if not any(job.roles for job, *_rest in units):
        return tuple(
            Assignment(job.id, host) for (job, *_rest), host in zip(units, host_ids, strict=True)
        )
    by_job: dict[int, list[Assignment]] = {}
    for (job, _j, _build, role, slot), host in zip(units, host_ids, strict=True):
        by_job.setdefault(job.id, []).append(Assignment(job.id, host, role, slot))
    return tuple(a for group in by_job.values() for a in sorted(group, key=attrgetter("slot")))


def _quota_phase(
    short: list[SuiteState],
    jobs: list[JobState] | Mapping[JobGroupKey, Sequence[JobState]],
    matching: Matching,
    room: Mapping[int, int],
    class_ids: Mapping[tuple[frozenset[str], int | None], int],
    leaser: Leaser,
) -> None:
    """Lease each suite short of its min_duts its first jobs (by id) that fit, up to it: a
    multi-host job counts its essential hosts. `jobs`: the queue, or its groups (whose keys
    name their suite): then only the short suites' groups are looked through."""
    if not short:
        return
    short_ids = {suite.id for suite in short}
    if isinstance(jobs, Mapping):
        by_suite = jobs_by_suite(
            job for key, group in jobs.items() if key[2] in short_ids for job in group
        )
    else:
        by_suite = jobs_by_suite(job for job in jobs if job.suite_id in short_ids)
    for suite in short:
        # The quota counts hosts actually leased, not jobs tried: a job no host can take must
        # not use up the suite's minimum, its next job may fit (Autotest's min-DUT rule).
        need = suite.min_duts - suite.held
        for job in by_suite.get(suite.id, ()):
            if need <= 0 or not matching.free or room.get(suite.id, 1) <= 0:
                break
            if job.roles:
                if leaser.lease_multi(job):
                    need -= job.hosts_needed
            elif leaser.lease(job, class_ids[job.labels, job.pinned_host_id]):
                need -= 1


def _merged(
    groups: Mapping[JobGroupKey, Sequence[JobState]],
    class_ids: Mapping[tuple[frozenset[str], int | None], int],
    leaser: Leaser,
) -> Iterator[JobState]:
    """The groups' jobs in main-phase order, by a k-way merge of the groups.

    A group whose class is dead is dropped whole, before its next job when the class was dead
    already (the main phase would refuse it), else once one of its jobs was tried: the main
    phase would skip the rest of its jobs anyway. In a full lab the merge stops after the few
    jobs that take the hosts freed since the last tick, where a sort would order the queue.
    A multi-host group is dropped once its shape can be kept neither with the hold nor
    without it.
    """
    lists = [group for group in groups.values() if group]
    classes = [
        class_ids[key[0], key[1]] if len(key) == 3 else leaser.multi.spec(g[0])
        for key, g in groups.items()
        if g
    ]
    skippable, dead, matching = leaser.skippable, leaser.dead, leaser.matching

    # A one-host group whose class no free host fits at all (no eligible host class: dead from
    # the start and for good, unable even to backfill a held host, which is a free host too)
    # is left out: the main phase would refuse each of its jobs. After a few changes nearly
    # every group is one, and the heap is built of the rest.
    eligible = matching.eligible
    heads = [
        (-g[0].priority, g[0].submitted_at, g[0].id, i, 0)
        for i, (g, c) in enumerate(zip(lists, classes, strict=True))
        if type(c) is not int or eligible[c]
    ]
    heapq.heapify(heads)
    seen = -1  # leaser.version when the groups were last sifted (below)
    while heads:
        if not matching.free and leaser.holding and seen != leaser.version:
            # Only held hosts are left: keep the groups that could still backfill one, once
            # per change of the kept jobs or the hold, instead of trying every group.
            seen = leaser.version
            heads = [h for h in heads if not leaser.hopeless(classes[h[3]])]
            heapq.heapify(heads)
            if not heads:
                break
        i, at = heads[0][3], heads[0][4]
        group = lists[i]
        c = classes[i]
        if type(c) is int and dead[c] and (leaser.holder is None or skippable(c)):
            # Its class was dead before this job came up: the main phase would refuse it and
            # every later one of the group (Leaser.consider changes nothing for them), so the
            # group is dropped without trying it. In a full lab, most groups go this way.
            heapq.heappop(heads)
            continue
        yield group[at]
        at += 1
        if type(c) is int:
            gone = dead[c] and (leaser.holder is None or skippable(c))
        else:
            gone = c.dead and (c.bf_dead or not leaser.holding)
        if at == len(group) or gone:
            heapq.heappop(heads)
        else:
            job = group[at]
            heapq.heapreplace(heads, (-job.priority, job.submitted_at, job.id, i, at))
