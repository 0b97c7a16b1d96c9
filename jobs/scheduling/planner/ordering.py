"""The order a tick considers queued jobs in, and the key of a job's wait-reason class."""

from __future__ import annotations

import functools
import json
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime, timedelta
from operator import attrgetter

from jobs.scheduling.planner.types import HostState, JobState, Policy, SuiteState

DEFAULT_POLICY = Policy()

# The jobs a tick treats alike: (labels, pinned host, suite); a multi-host job's key adds its
# roles and together_by (`group_key`), so it never shares a group with one-host jobs.
JobGroupKey = tuple

_ID, _SUBMITTED, _PRIORITY = attrgetter("id"), attrgetter("submitted_at"), attrgetter("priority")


def aging_bonus(policy: Policy, waited_s: float) -> int:
    """Priority levels a wait of waited_s seconds adds: 1 per `aging_minutes`, at most the cap."""
    if policy.aging_minutes <= 0 or waited_s <= 0:
        return 0
    return min(policy.aging_cap, int(waited_s // (policy.aging_minutes * 60)))


def effective_priority(priority: int, submitted_at: datetime, policy: Policy, now: datetime) -> int:
    """The priority a job (or suite) is ordered by: its own, raised by aging."""
    return priority + aging_bonus(policy, (now - submitted_at).total_seconds())


def effective_size(size_s: float | None, waited_s: float, policy: Policy) -> float:
    """The size a job is ordered by within its priority under `size` and `dynsize`.

    `size`: its expected run time (the policy's default when unknown). `dynsize`: that size
    divided by 1 + the number of whole sizes it has waited, so a job that has waited as long as
    it runs counts half its size, then a third, and so on: the response-ratio rule (HRRN) in
    discrete steps, which is how Zoe's DYNSIZE keeps a long job from starving behind a stream
    of short ones (docs/scheduling.md#ordering-within-a-priority).
    """
    size = size_s if size_s is not None and size_s > 0 else policy.default_duration_s
    if policy.ordering == "dynsize" and waited_s > 0:
        return size / (1 + int(waited_s // size))
    return size


def _suite_order_key(suite: SuiteState) -> tuple[int, datetime, int]:
    return (-suite.priority, suite.created_at, suite.id)


def job_order_key(job: JobState) -> tuple[int, datetime, int]:
    return (-job.priority, job.submitted_at, job.id)


def is_plain(policy: Policy) -> bool:
    """Whether the main phase orders jobs by priority, submission and id alone."""
    return (
        policy.ordering == "fifo"
        and policy.aging_minutes <= 0
        and not policy.fair_share
        and policy.same_build_first_minutes <= 0
    )


def group_key(job: JobState) -> JobGroupKey:
    """The key of the job's group in `group_jobs`: (labels, pin, suite), and for a multi-host
    job (labels, pin, suite, roles, together_by)."""
    if job.roles:
        return (job.labels, job.pinned_host_id, job.suite_id, job.roles, job.together_by)
    return (job.labels, job.pinned_host_id, job.suite_id)


def group_jobs(jobs: Iterable[JobState]) -> dict[JobGroupKey, list[JobState]]:
    """The jobs by `group_key` (labels, pin, suite, and a multi-host job's roles), as `plan`
    takes them in `groups`.

    Each group is in `job_order_key` order, and the groups are in order of their lowest job
    id: the order of first appearance in a queue read by id.
    """
    groups: dict[JobGroupKey, list[JobState]] = {}
    for job in sorted(jobs, key=_ID):
        groups.setdefault(group_key(job), []).append(job)
    for group in groups.values():  # by id: two stable sorts give job_order_key's order
        group.sort(key=_SUBMITTED)
        group.sort(key=_PRIORITY, reverse=True)
    return groups


def main_phase_order(
    jobs: Iterable[JobState],
    policy: Policy = DEFAULT_POLICY,
    now: datetime | None = None,
    usage: Mapping[int, float] | None = None,
) -> list[JobState]:
    """Return the jobs in main-phase order: effective priority desc, then fair share (when on),
    then the policy's order within a priority (fifo: none; size, dynsize: effective size asc),
    then submission time, then id.

    Stable sorts on single keys, last key first, give the same order as one sort on the tuple
    key; under the default policy they are attribute sorts that call no Python function per
    job: at 100,000 jobs that is most of the sort's time. (reverse=True keeps equal elements in
    their order.) The time-dependent keys are computed once per distinct (submission time,
    size): the jobs of a suite share both.
    """
    ordered = sorted(jobs, key=_ID)
    ordered.sort(key=_SUBMITTED)
    if is_plain(policy):
        ordered.sort(key=_PRIORITY, reverse=True)
        return ordered
    if now is None:
        raise ValueError("a time-dependent policy needs the tick's time")
    if policy.ordering != "fifo":
        sizes: dict[tuple[datetime, float | None], float] = {}

        def size_key(job: JobState) -> float:
            key = (job.submitted_at, job.size_s)
            size = sizes.get(key)
            if size is None:
                waited = (now - job.submitted_at).total_seconds()
                size = sizes[key] = effective_size(job.size_s, waited, policy)
            return size

        ordered.sort(key=size_key)
    priority_key = effective_priority_key(policy, now)
    ordered.sort(key=priority_key, reverse=True)
    if policy.fair_share:
        ordered = _fair_share(ordered, priority_key, policy, usage or {})
    return ordered


def effective_priority_key(policy: Policy, now: datetime) -> Callable[[JobState], int]:
    """A job's effective priority (its own, raised by aging), computed once per submission
    time."""
    if policy.aging_minutes <= 0:
        return _PRIORITY
    bonus: dict[datetime, int] = {}

    def priority_key(job: JobState) -> int:
        extra = bonus.get(job.submitted_at)
        if extra is None:
            waited = (now - job.submitted_at).total_seconds()
            extra = bonus[job.submitted_at] = aging_bonus(policy, waited)
        return job.priority + extra

    return priority_key


def on_a_free_host_of_its_build(
    free: Iterable[HostState], build_of: Mapping[int, str]
) -> Callable[[JobState], bool]:
    """Whether one of the free hosts a job fits already carries its build (a job with no build:
    True). `build_of`: suite id -> its build; a standalone job's is its own. Decided once per
    distinct (labels, pin, build), against the free hosts' distinct label sets on each build."""
    label_sets: dict[str, set[frozenset[str]]] = defaultdict(set)
    by_id: dict[int, HostState] = {}
    for host in free:
        label_sets[host.current_build].add(host.labels)
        by_id[host.id] = host
    known: dict[tuple[frozenset[str], int | None, str], bool] = {}

    def on_its_build(job: JobState) -> bool:
        build = build_of.get(job.suite_id, "") if job.suite_id is not None else job.build
        if not build:
            return True
        key = (job.labels, job.pinned_host_id, build)
        answer = known.get(key)
        if answer is None:
            if job.pinned_host_id is not None:
                host = by_id.get(job.pinned_host_id)
                answer = host is not None and host.current_build == build
                answer = answer and job.labels <= host.labels  # type: ignore[union-attr]
            else:
                answer = any(job.labels <= labels for labels in label_sets.get(build, ()))
            known[key] = answer
        return answer

    return on_its_build


def same_build_first(
    ordered: list[JobState],
    on_its_build: Callable[[JobState], bool],
    policy: Policy,
    now: datetime,
) -> list[JobState]:
    """Within each effective priority, the jobs that need no reimage go first: those a free
    host they fit already carries the build of (`on_its_build`), those with no build, and
    those that have waited `same_build_first_minutes` or longer; the others after them. Each
    part keeps its order (docs/scheduling.md#same-build-first)."""
    priority_key = effective_priority_key(policy, now)
    patience = timedelta(minutes=policy.same_build_first_minutes)
    result: list[JobState] = []
    later: list[JobState] = []
    level = None
    for job in ordered:
        p = priority_key(job)
        if p != level:
            result.extend(later)
            later.clear()
            level = p
        if job.roles or now - job.submitted_at >= patience or on_its_build(job):
            result.append(job)
        else:
            later.append(job)
    result.extend(later)
    return result


def _fair_share(
    ordered: list[JobState],
    priority_key: Callable[[JobState], int],
    policy: Policy,
    usage: Mapping[int, float],
) -> list[JobState]:
    """Within each priority, order jobs by their owner's virtual time (fair queueing).

    A job's key is its owner's recent usage in host-seconds plus the expected run time of the
    owner's jobs ahead of it at this priority, as if those had run: owners with less usage go
    first, and owners with equal usage interleave, in proportion to their jobs' sizes, instead
    of one owner's hundred jobs all going before another's first. The within-priority order of
    one owner's jobs is kept. Jobs with no owner count as one owner.
    """
    result: list[JobState] = []
    start = 0
    while start < len(ordered):
        level = priority_key(ordered[start])
        end = start
        while end < len(ordered) and priority_key(ordered[end]) == level:
            end += 1
        ahead: dict[int | None, float] = {}
        keyed = []
        for job in ordered[start:end]:
            virtual = usage.get(job.owner, 0.0) if job.owner is not None else 0.0
            virtual += ahead.get(job.owner, 0.0)
            ahead[job.owner] = ahead.get(job.owner, 0.0) + (
                job.size_s if job.size_s and job.size_s > 0 else policy.default_duration_s
            )
            keyed.append((virtual, job))
        keyed.sort(key=lambda pair: pair[0])
        result.extend(job for _virtual, job in keyed)
        start = end
    return result


def quota_suites(
    suites: Iterable[SuiteState], policy: Policy = DEFAULT_POLICY, now: datetime | None = None
) -> list[SuiteState]:
    """Return the suites holding fewer hosts than their minimum, in quota-phase order: effective
    priority desc (aging counts from the suite's creation), then created_at, then id."""
    short = [s for s in suites if s.held < s.min_duts]
    if policy.aging_minutes <= 0:
        return sorted(short, key=_suite_order_key)
    if now is None:
        raise ValueError("a time-dependent policy needs the tick's time")
    return sorted(
        short,
        key=lambda s: (
            -effective_priority(s.priority, s.created_at, policy, now),
            *_suite_order_key(s)[1:],
        ),
    )


def jobs_by_suite(jobs: Iterable[JobState]) -> dict[int, list[JobState]]:
    """Group suite jobs by suite, each group in job order (id)."""
    groups: dict[int, list[JobState]] = defaultdict(list)
    for job in jobs:
        if job.suite_id is not None:
            groups[job.suite_id].append(job)
    for group in groups.values():
        group.sort(key=lambda job: job.id)
    return groups


def quota_candidates(
    *,
    jobs: Iterable[JobState],
    suites: Iterable[SuiteState],
    policy: Policy = DEFAULT_POLICY,
    now: datetime | None = None,
) -> list[int]:
    """Return the quota-phase candidates in the order the tick tries them, assuming each succeeds.

    For every suite short of `min_duts` (priority desc, created_at, id): its first queued jobs
    by id until they count `min(min_duts, max_duts) - held` hosts (a multi-host job counts its
    essential hosts).
    """
    by_suite = jobs_by_suite(jobs)
    order: list[int] = []
    for suite in quota_suites(suites, policy, now):
        want = suite.min_duts - suite.held
        if suite.max_duts is not None:
            want = min(want, suite.max_duts - suite.held)
        for job in by_suite.get(suite.id, []):
            if want <= 0:
                break
            order.append(job.id)
            want -= job.hosts_needed
    return order


def consideration_order(
    *,
    jobs: Iterable[JobState],
    suites: Iterable[SuiteState],
    policy: Policy = DEFAULT_POLICY,
    now: datetime | None = None,
    usage: Mapping[int, float] | None = None,
    free: Iterable[HostState] = (),
) -> list[int]:
    """Return every queued job id in the order a tick takes them, for the queue page.

    First the quota-phase candidates (`quota_candidates`), then every other job in main-phase
    order (priority desc, submission time, id; under `same_build_first_minutes`, the jobs a
    host in `free` carries the build of first within a priority, as `plan` does). A candidate
    that turns out unsatisfiable makes the real tick try the suite's next job instead; that
    needs the hosts, so it is not predicted here.
    """
    jobs, suites = list(jobs), list(suites)
    order = quota_candidates(jobs=jobs, suites=suites, policy=policy, now=now)
    first = set(order)
    main = main_phase_order(jobs, policy, now, usage)
    if policy.same_build_first_minutes > 0:
        build_of = {suite.id: suite.build for suite in suites}
        on_its_build = on_a_free_host_of_its_build(free, build_of)
        main = same_build_first(main, on_its_build, policy, now)  # type: ignore[arg-type]
    order.extend(job.id for job in main if job.id not in first)
    return order


def class_key(job: JobState) -> str:
    """Return the key of the job's wait-reason class: its sorted labels, pinned host and suite.

    Jobs with the same key always get the same WaitReason from `plan` (the reason depends only on
    the labels, the pinned host and the suite's cap), so a tick can store one reason per key in
    `Plan.class_reasons` and resolve a job's reason when it is read. Format:
    `["board:x","pool:bvt"]|pin=-|suite=12`; stable across ticks and processes. A multi-host
    job's key adds its roles and together_by (`|roles=[["dut",["bt"],2,4]]|together=chamber`):
    it never shares a class with one-host jobs. The job holding hosts this tick has a reason
    of its own, under `holder_key` (see `reason_keys`).
    """
    return group_class_key(group_key(job))


@functools.lru_cache(maxsize=65536)
def group_class_key(key: JobGroupKey) -> str:
    """`class_key` of the jobs of a group (`group_key`), the same for all of them; cached: a
    tick keys every waiting multi-host group, thousands in a large queue. A one-host group's
    key is its class key (`class_key_of`); a multi-host group's adds its roles and
    together_by."""
    labels, pin, suite_id, *multi = key
    found = class_key_of(labels, pin, suite_id)
    return found + multi_key_of(*multi) if multi else found


def holder_key(job_id: int) -> str:
    """The key of the holding job's own reason in `Plan.class_reasons`."""
    return f"job={job_id}"


def reason_keys(job: JobState) -> tuple[str, ...]:
    """The keys to look the job's reason up by in `Plan.class_reasons`, the first present wins:
    a multi-host job may be this tick's holder (its own entry), else its class's."""
    if job.roles:
        return (holder_key(job.id), class_key(job))
    return (class_key(job),)


# Sized for the shapes of a large queue: at 100,000 jobs with 5 % multi-host, about 1,400
# shapes are keyed every tick, and a cache smaller than that misses every time.
@functools.lru_cache(maxsize=16384)
def multi_key_of(roles: tuple, together_by: str) -> str:
    spec = [[r.name, sorted(r.labels), r.count, r.max] for r in roles]
    return f"|roles={json.dumps(spec, separators=(',', ':'))}|together={together_by}"


@functools.lru_cache(maxsize=4096)
def labels_key_of(labels: frozenset[str]) -> str:
    # JSON keeps any label text unambiguous inside the key. Cached: a tick words the reasons of
    # hundreds of classes, and a lab has far fewer label sets than that over days.
    return json.dumps(sorted(labels), separators=(",", ":"))


@functools.lru_cache(maxsize=65536)
def class_key_of(labels: frozenset[str], pinned_host_id: int | None, suite_id: int | None) -> str:
    """`class_key` of a one-host job with these labels, pin and suite; cached: a tick keys
    every waiting class, thousands, and they change little from tick to tick."""
    return class_key_from(labels_key_of(labels), pinned_host_id, suite_id)


def class_key_from(labels_key: str, pinned_host_id: int | None, suite_id: int | None) -> str:
    pin = "-" if pinned_host_id is None else pinned_host_id
    suite = "-" if suite_id is None else suite_id
    return f"{labels_key}|pin={pin}|suite={suite}"
