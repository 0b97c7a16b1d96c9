"""The properties every tick keeps, on random small labs against brute force.

docs/scheduling.md#properties-every-tick-keeps lists them. Every lab is drawn with a policy
(every ordering, aging on or off, every host choice) and worker capacities, so each property
holds under every combination of the scheduler settings.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jobs.scheduling.planner import (
    HOST_CHOICES,
    ORDERINGS,
    HostIndex,
    HostState,
    JobState,
    Plan,
    Policy,
    SuiteState,
    WorkerLoad,
    class_key,
    group_jobs,
    plan,
)
from tests.scheduler.lab import T0

LABELS = ["a", "b", "c", "d"]
CODES = {
    "no_matching_host",
    "pinned_host_missing",
    "pinned_host_lacks_labels",
    "pinned_host_busy",
    "pinned_host_locked",
    "pinned_host_paused",
    "pinned_host_offline",
    "pinned_host_not_ready",
    "pinned_host_at_capacity",
    "suite_at_max_duts",
    "hosts_unavailable",
    "outranked",
}
HOST_STATES = [
    {},
    {},
    {},
    {"locked": True},
    {"worker_paused": True},
    {"worker_offline": True},
    {"ready": False},
    {"leased": True, "lease_priority": 70},
    {"leased": True},  # a manual reservation
    {"locked": True, "leased": True, "lease_priority": 90},  # locked by staff while it runs
]
MOMENTS = [T0 + timedelta(minutes=m) for m in range(3)]  # few values, so ties happen
NOW = T0 + timedelta(minutes=5)
WORKERS = ["", "w1", "w2"]

labels_st = st.frozensets(st.sampled_from(LABELS), max_size=3)
policies = st.builds(
    Policy,
    ordering=st.sampled_from(ORDERINGS),
    aging_minutes=st.sampled_from([0, 0, 1, 2]),
    aging_cap=st.integers(0, 40),
    host_choice=st.sampled_from(HOST_CHOICES),
    default_duration_s=st.sampled_from([60.0, 600.0]),
    fair_share=st.booleans(),
    # Jobs submitted at MOMENTS have waited 3-5 minutes at NOW: 4 passes over some, not others.
    same_build_first_minutes=st.sampled_from([0, 0, 4, 10]),
)
usages = st.dictionaries(st.sampled_from([1, 2, 3]), st.sampled_from([0.0, 60.0, 500.0, 5000.0]))
loads = st.dictionaries(
    st.sampled_from(WORKERS[1:]),
    st.builds(WorkerLoad, limit=st.none() | st.integers(0, 3), running=st.integers(0, 2)),
)


@dataclass(frozen=True)
class Lab:
    hosts: list[HostState]
    jobs: list[JobState]
    suites: list[SuiteState]
    policy: Policy = Policy()
    workers: dict[str, WorkerLoad] = field(default_factory=dict)
    usage: dict[int, float] = field(default_factory=dict)

    def room(self, worker: str) -> int | None:
        """Jobs the worker may still start, or None if it has no capacity."""
        load = self.workers.get(worker)
        if not worker or load is None or load.limit is None:
            return None
        return load.limit - load.running


@st.composite
def labs(draw: st.DrawFn) -> Lab:
    """Draw up to 8 hosts on 2 workers, 3 suites, 10 queued jobs, a policy and capacities."""
    n_hosts = draw(st.integers(0, 8))
    # Hostname order differs from id order, so a tie-break on the wrong field shows.
    names = draw(st.permutations([f"h{i}" for i in range(n_hosts)]))
    hosts = [
        HostState(
            id=i + 1,
            hostname=names[i],
            labels=draw(labels_st),
            current_build=draw(st.sampled_from(["", "R1", "R2"])),
            worker=draw(st.sampled_from(WORKERS)),
            last_used=draw(st.none() | st.sampled_from(MOMENTS)),
            **draw(st.sampled_from(HOST_STATES)),
        )
        for i in range(n_hosts)
    ]
    suites = []
    for i in range(draw(st.integers(0, 3))):
        min_duts = draw(st.integers(0, 3))
        suites.append(
            SuiteState(
                id=i + 1,
                name=f"S{i + 1}",
                priority=draw(st.sampled_from([30, 40, 70])),
                created_at=draw(st.sampled_from(MOMENTS)),
                min_duts=min_duts,
                max_duts=draw(st.none() | st.integers(0, 4)),
                held=draw(st.integers(0, 3)),
                build=draw(st.sampled_from(["", "R1", "R2"])),
            )
        )
    jobs = []
    for i in range(draw(st.integers(0, 10))):
        of = draw(st.none() | st.sampled_from(suites)) if suites else None
        priority = draw(st.sampled_from([30, 40, 70]))
        if of is not None and draw(st.booleans()):
            priority = of.priority
        pinned = None
        if draw(st.integers(0, 3)) == 0:
            pinned = draw(st.integers(1, n_hosts + 1))  # n_hosts + 1 does not exist
        jobs.append(
            JobState(
                id=i + 1,
                name=f"J{i + 1}",
                suite_id=of.id if of else None,
                priority=priority,
                submitted_at=of.created_at if of else draw(st.sampled_from(MOMENTS)),
                labels=draw(labels_st),
                pinned_host_id=pinned,
                size_s=draw(st.sampled_from([None, 60.0, 120.0, 600.0])),
                owner=draw(st.sampled_from([None, 1, 2, 3])),
            )
        )
    return Lab(hosts, jobs, suites, draw(policies), draw(loads), draw(usages))


def uncapped(lab: Lab) -> Lab:
    return replace(lab, suites=[replace(s, max_duts=None) for s in lab.suites])


# --- an independent reference: concrete hosts, Kuhn's algorithm, the documented order -------


def usable(host: HostState) -> bool:
    return (
        host.ready
        and not host.locked
        and not host.worker_paused
        and not host.worker_offline
        and not host.leased
    )


def fits(job: JobState, host: HostState) -> bool:
    return usable(host) and job.labels <= host.labels and job.pinned_host_id in (None, host.id)


def max_matching(
    jobs: Sequence[JobState], hosts: Sequence[HostState], lab: Lab | None = None
) -> int:
    """Return the size of a maximum matching of jobs to hosts, each worker starting at most its
    room: a maximum flow source → job → host → worker → sink, by depth-first augmenting paths
    on concrete hosts (no classes, no bitsets: independent of the planner)."""
    flow = _Flow(jobs, hosts, lab)
    return sum(flow.augment(j, set(), set()) for j in range(len(jobs)))


class _Flow:
    def __init__(self, jobs: Sequence[JobState], hosts: Sequence[HostState], lab: Lab | None):
        self.jobs, self.hosts = jobs, hosts
        self.room: dict[str, int] = {}
        for h in hosts:
            r = lab.room(h.worker) if lab else None
            self.room[h.worker] = len(hosts) if r is None else max(r, 0)
        self.host_job: dict[int, int] = {}  # host index -> job index
        self.on_worker: dict[str, set[int]] = {w: set() for w in self.room}  # hosts counted

    def augment(self, j: int, seen_hosts: set[int], seen_workers: set[str]) -> bool:
        """Place job j, moving others along a path; False if no path exists."""
        for h, candidate in enumerate(self.hosts):
            if h in seen_hosts or not fits(self.jobs[j], candidate):
                continue
            seen_hosts.add(h)
            if h in self.host_job:
                placed = self.augment(self.host_job[h], seen_hosts, seen_workers)
            else:
                placed = self.count_on_worker(h, seen_hosts, seen_workers)
            if placed:
                self.host_job[h] = j
                return True
        return False

    def count_on_worker(self, h: int, seen_hosts: set[int], seen_workers: set[str]) -> bool:
        """Count free host h on its worker, moving another of its jobs away if it is full."""
        w = self.hosts[h].worker
        if len(self.on_worker[w]) < self.room[w]:
            self.on_worker[w].add(h)
            return True
        if w in seen_workers:
            return False
        seen_workers.add(w)
        for other in list(self.on_worker[w]):
            if other in seen_hosts:
                continue
            seen_hosts.add(other)
            # The job on `other` moves to another host; `other` gives its worker slot to h.
            if self.augment(self.host_job[other], seen_hosts, seen_workers):
                self.on_worker[w].discard(other)
                del self.host_job[other]
                self.on_worker[w].add(h)
                return True
        return False


Keep = Callable[[list[JobState], JobState], bool]


def aged(priority: int, at: datetime, policy: Policy) -> int:
    """The documented aging rule, written out again: +1 per whole aging_minutes, capped."""
    if not policy.aging_minutes:
        return priority
    return priority + min(
        policy.aging_cap, int((NOW - at) / timedelta(minutes=policy.aging_minutes))
    )


def size_order(job: JobState, policy: Policy) -> float:
    """The documented within-priority key: 0 under fifo; the size, shrunk by waiting for dynsize."""
    if policy.ordering == "fifo":
        return 0
    size = job.size_s or policy.default_duration_s
    if policy.ordering == "dynsize":
        return size / (1 + (NOW - job.submitted_at).total_seconds() // size)
    return size


def ordered_greedy(lab: Lab, keep: Keep) -> list[JobState]:
    """Take jobs in the documented order, keeping each one `keep` accepts; return the kept jobs."""
    suite_by_id = {s.id: s for s in lab.suites}
    policy = lab.policy
    kept: list[JobState] = []

    def capped(job: JobState) -> bool:
        s = suite_by_id.get(job.suite_id)  # type: ignore[arg-type]
        if s is None or s.max_duts is None:
            return False
        return s.held + sum(k.suite_id == s.id for k in kept) >= s.max_duts

    def consider(job: JobState) -> bool:
        if job in kept or capped(job) or not keep(kept, job):
            return False
        kept.append(job)
        return True

    for s in sorted(
        lab.suites, key=lambda s: (-aged(s.priority, s.created_at, policy), s.created_at, s.id)
    ):
        got = 0
        for job in sorted((j for j in lab.jobs if j.suite_id == s.id), key=lambda j: j.id):
            if s.held + got >= s.min_duts:
                break
            got += consider(job)
    virtual = fair_share_keys(lab)
    for job in sorted(
        lab.jobs,
        key=lambda j: (
            -aged(j.priority, j.submitted_at, policy),
            needs_reimage_first(lab, j),
            virtual[j.id],
            size_order(j, policy),
            j.submitted_at,
            j.id,
        ),
    ):
        consider(job)
    return kept


def needs_reimage_first(lab: Lab, job: JobState) -> bool:
    """The documented same-build-first key: True (after the others of its priority) for a job
    with a build no free host it fits carries, that has waited less than the setting."""
    minutes = lab.policy.same_build_first_minutes
    build = next((s.build for s in lab.suites if s.id == job.suite_id), job.build)
    if not minutes or not build or job.roles:
        return False
    if NOW - job.submitted_at >= timedelta(minutes=minutes):
        return False
    return not any(fits(job, h) and h.current_build == build for h in lab.hosts)


def fair_share_keys(lab: Lab) -> dict[int, float]:
    """The documented fair-share key: the owner's usage plus the expected run time of the
    owner's jobs ahead of it at the same effective priority (0 for every job when off)."""
    policy = lab.policy
    if not policy.fair_share:
        return {j.id: 0.0 for j in lab.jobs}
    keys = {}
    within = sorted(lab.jobs, key=lambda j: (size_order(j, policy), j.submitted_at, j.id))
    for job in lab.jobs:
        level = aged(job.priority, job.submitted_at, policy)
        ahead = 0.0
        for other in within:
            if other.id == job.id:
                break
            if (
                other.owner == job.owner
                and aged(other.priority, other.submitted_at, policy) == level
            ):
                ahead += other.size_s or policy.default_duration_s
        keys[job.id] = (lab.usage.get(job.owner, 0.0) if job.owner is not None else 0.0) + ahead
    return keys


def matroid_keep(lab: Lab) -> Keep:
    return lambda kept, job: max_matching([*kept, job], lab.hosts, lab) == len(kept) + 1


def first_fit_keep(lab: Lab) -> Keep:
    taken: set[int] = set()
    started: dict[str, int] = {}

    def keep(kept: list[JobState], job: JobState) -> bool:
        for host in sorted(lab.hosts, key=lambda h: h.hostname):
            room = lab.room(host.worker)
            if room is not None and started.get(host.worker, 0) >= room:
                continue
            if host.id not in taken and fits(job, host):
                taken.add(host.id)
                started[host.worker] = started.get(host.worker, 0) + 1
                return True
        return False

    return keep


# --- properties ------------------------------------------------------------------------------

PROPERTY = settings(max_examples=300, deadline=None)


def plan_result(lab: Lab, **kept: object) -> Plan:
    """The plan of the lab; `kept`: what a caller keeping its lab passes (groups, host_index)."""
    return plan(
        hosts=lab.hosts,
        jobs=lab.jobs,
        suites=lab.suites,
        policy=lab.policy,
        now=NOW,
        workers=lab.workers,
        usage=lab.usage,
        **kept,  # type: ignore[arg-type]
    )


def at_capacity_after(lab: Lab, result: Plan) -> set[str]:
    """The workers that may start no more jobs once the plan's leases start."""
    host_by_id = {h.id: h for h in lab.hosts}
    started: dict[str, int] = {}
    for a in result.assignments:
        w = host_by_id[a.host_id].worker
        started[w] = started.get(w, 0) + 1
    return {
        w
        for w in {h.worker for h in lab.hosts}
        if (room := lab.room(w)) is not None and started.get(w, 0) >= room
    }


@PROPERTY
@given(labs())
def test_every_lease_is_valid(lab: Lab) -> None:
    result = plan_result(lab)
    host_by_id = {h.id: h for h in lab.hosts}
    job_by_id = {j.id: j for j in lab.jobs}
    job_ids = [a.job_id for a in result.assignments]
    host_ids = [a.host_id for a in result.assignments]
    assert len(set(job_ids)) == len(job_ids), "a job leased twice"
    assert len(set(host_ids)) == len(host_ids), "a host leased twice"
    for a in result.assignments:
        assert fits(job_by_id[a.job_id], host_by_id[a.host_id])
    for s in lab.suites:
        got = sum(job_by_id[j].suite_id == s.id for j in job_ids)
        if s.max_duts is not None:
            assert got == 0 or s.held + got <= s.max_duts
    for w in {h.worker for h in lab.hosts}:
        room = lab.room(w)
        started = sum(host_by_id[h].worker == w for h in host_ids)
        if room is not None:
            assert started <= max(room, 0), f"worker {w} started {started} with room {room}"


@PROPERTY
@given(labs())
def test_every_queued_job_is_leased_or_told_why_it_waits(lab: Lab) -> None:
    result = plan_result(lab)
    full = at_capacity_after(lab, result)
    leased = {a.job_id for a in result.assignments}
    taken = {a.host_id for a in result.assignments}
    assert leased.isdisjoint(result.wait_reasons)
    assert leased | set(result.wait_reasons) == {j.id for j in lab.jobs}
    for job in lab.jobs:
        reason = result.wait_reasons.get(job.id)
        if reason is None:
            continue
        assert reason.code in CODES
        assert reason.message
        assert result.class_reasons[class_key(job)] == reason
        # A host left free on a worker that is now at capacity can take nothing more.
        blocked = [h for h in lab.hosts if fits(job, h) and h.worker in full and h.id not in taken]
        free_fit = any(fits(job, h) and h not in blocked for h in lab.hosts)
        # "All busy" and "outranked" must not be confused: outranked means there were free
        # matching hosts at the start of the tick, on workers that could take more work.
        if reason.code == "hosts_unavailable":
            assert not free_fit
        if reason.code == "outranked":
            assert free_fit
        if reason.code == "hosts_unavailable" and blocked and job.pinned_host_id is None:
            w = blocked[0].worker
            load = lab.workers[w]
            assert f"worker {w} at capacity (" in reason.message
            assert reason.details["workers_at_capacity"][w]["max_jobs"] == load.limit


@PROPERTY
@given(labs())
def test_it_is_work_conserving(lab: Lab) -> None:
    result = plan_result(lab)
    full = at_capacity_after(lab, result)
    leased_hosts = {a.host_id for a in result.assignments}
    leased_jobs = {a.job_id for a in result.assignments}
    suite_by_id = {s.id: s for s in lab.suites}
    for job in lab.jobs:
        if job.id in leased_jobs:
            continue
        s = suite_by_id.get(job.suite_id)  # type: ignore[arg-type]
        if s is not None and s.max_duts is not None:
            got = sum(j.suite_id == s.id for j in lab.jobs if j.id in leased_jobs)
            if s.held + got >= s.max_duts:
                continue
        left_free = [
            h.hostname
            for h in lab.hosts
            if h.id not in leased_hosts and fits(job, h) and h.worker not in full
        ]
        assert not left_free, f"J{job.id} waits while {left_free} stay free"


@PROPERTY
@given(labs())
def test_the_leased_set_is_the_ordered_greedy_of_spec_4(lab: Lab) -> None:
    result = plan_result(lab)
    expected = ordered_greedy(lab, matroid_keep(lab))
    assert {a.job_id for a in result.assignments} == {j.id for j in expected}


@PROPERTY
@given(labs().map(uncapped))
def test_without_caps_it_leases_a_maximum_matching(lab: Lab) -> None:
    # With max_duts a kept job can cost a later lease (see the scenario test); without, every
    # job is tried and kept when it fits, so the kept set is a largest possible one.
    result = plan_result(lab)
    first_fit = ordered_greedy(lab, first_fit_keep(lab))
    assert len(result.assignments) == max_matching(lab.jobs, lab.hosts, lab) >= len(first_fit)


@PROPERTY
@given(labs())
def test_it_does_not_depend_on_input_order(lab: Lab) -> None:
    forward = plan_result(lab)
    backward = plan_result(
        replace(lab, hosts=lab.hosts[::-1], jobs=lab.jobs[::-1], suites=lab.suites[::-1])
    )
    assert set(forward.assignments) == set(backward.assignments)
    assert forward.wait_reasons == backward.wait_reasons


@PROPERTY
@given(labs(), st.data())
def test_the_lab_kept_between_plans_plans_the_same(lab: Lab, data: st.DataObject) -> None:
    """What the tick passes from its kept lab (`groups`, `host_index`) changes nothing."""
    lab = replace(lab, jobs=sorted(lab.jobs, key=lambda j: j.id))  # as the tick reads them
    # The index as a kept lab has it: counted from other states of the hosts, then each host
    # put in place of its old state, and a host that is gone taken out.
    before = [
        replace(
            h,
            locked=data.draw(st.booleans()),
            leased=data.draw(st.booleans()),
            lease_priority=data.draw(st.sampled_from([None, 10, 90])),
        )
        for h in lab.hosts
    ]
    gone = HostState(id=10**6, hostname="gone", labels=frozenset({"x"}), leased=True, worker="w")
    index = HostIndex.of([*before, gone])
    # A plan of the old states first: the index keeps what it worded (its memo), and the plans
    # after the puts must word again whatever they changed.
    earlier = replace(lab, hosts=[*before, gone])
    plan_result(earlier, groups=group_jobs(lab.jobs), host_index=index)
    for old, new in zip(before, lab.hosts, strict=True):
        index.put(old, new)
    index.put(gone, None)
    whole = plan_result(lab)
    for _again in range(2):  # the second plan finds nothing put since the first
        grouped = plan_result(lab, groups=group_jobs(lab.jobs), host_index=index)
        assert grouped.assignments == whole.assignments
        assert grouped.class_reasons == whole.class_reasons
        assert grouped.wait_reasons == whole.wait_reasons


COMBINATIONS = [
    Policy(ordering=o, aging_minutes=a, host_choice=h, fair_share=fs)
    for o in ORDERINGS
    for a in (0, 1)
    for h in HOST_CHOICES
    for fs in (False, True)
]


@pytest.mark.parametrize(
    "policy",
    COMBINATIONS,
    ids=lambda p: f"{p.ordering}-{p.aging_minutes}-{p.host_choice}-{p.fair_share}",
)
@settings(max_examples=25, deadline=None)
@given(lab=labs())
def test_every_combination_of_settings_keeps_the_rules(policy: Policy, lab: Lab) -> None:
    """Every ordering × aging × host choice × fair share, explicitly: valid leases, caps and
    capacities kept, and the leased set the documented ordered greedy."""
    lab = replace(lab, policy=policy)
    result = plan_result(lab)
    host_by_id = {h.id: h for h in lab.hosts}
    job_by_id = {j.id: j for j in lab.jobs}
    for a in result.assignments:
        assert fits(job_by_id[a.job_id], host_by_id[a.host_id])
    assert len({a.host_id for a in result.assignments}) == len(result.assignments)
    for w in {h.worker for h in lab.hosts}:
        room = lab.room(w)
        started = sum(host_by_id[a.host_id].worker == w for a in result.assignments)
        assert room is None or started <= max(room, 0)
    expected = ordered_greedy(lab, matroid_keep(lab))
    assert {a.job_id for a in result.assignments} == {j.id for j in expected}
