"""The fewest provisions: which free host each leased job gets, so that the fewest hosts must be
reimaged to their job's build (docs/scheduling.md#provisioning).

Worked examples first, then random small labs with 2–4 builds against a brute-force reference
that tries every assignment of the leased jobs to the free hosts.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from datetime import timedelta
from itertools import permutations

from hypothesis import given, settings
from hypothesis import strategies as st

from jobs.scheduling.planner import (
    HOST_CHOICES,
    HostState,
    JobState,
    Plan,
    Policy,
    RoleNeed,
    SuiteState,
    WorkerLoad,
    plan,
)
from tests.scheduler.lab import T0, host, job, leases, suite
from tests.scheduler.test_multihost_properties import any_labs, got_hosts, plan_of
from tests.scheduler.test_planner_properties import MOMENTS, NOW, usable

MIN_COST, FIRST_FIT = Policy(builds="min-cost"), Policy(builds="first-fit")


def build_of(j: JobState, suites: list[SuiteState]) -> str:
    if j.suite_id is None:
        return j.build
    return next(s.build for s in suites if s.id == j.suite_id)


def reimages(result: Plan, hosts: list[HostState], jobs: list[JobState], suites) -> int:
    """How many leased hosts are not on their job's build, counted from the assignments."""
    by_id = {h.id: h for h in hosts}
    job_by_id = {j.id: j for j in jobs}
    return sum(
        1
        for a in result.assignments
        if (b := build_of(job_by_id[a.job_id], suites)) and by_id[a.host_id].current_build != b
    )


# --- worked examples -------------------------------------------------------------------------


def worked_example() -> tuple[list[HostState], list[JobState], list[SuiteState]]:
    """h1 on R1 and h2 on R2 (another label set), both fitting a (R3, ranked first) and b (R1).

    a and b ask for different labels: jobs asking for the same ones are one class of the
    matching, among whose hosts first-fit already matches builds exactly."""
    hosts = [
        host(1, "board:x", "pool:p", current_build="R1"),
        host(2, "board:x", "pool:p", "bt", current_build="R2"),
    ]
    sa = suite(1, "SA", build="R3", priority=70)
    sb = suite(2, "SB", build="R1", priority=40)
    return hosts, [job(1, "board:x", of=sa), job(2, "board:x", "pool:p", of=sb)], [sa, sb]


def test_the_worked_example_reimages_one_host_not_two() -> None:
    hosts, jobs, suites = worked_example()
    fewest = plan(hosts=hosts, jobs=jobs, suites=suites, policy=MIN_COST)
    assert leases(fewest) == {1: 2, 2: 1}
    assert fewest.provisions == {2: "R3"}

    first_fit = plan(hosts=hosts, jobs=jobs, suites=suites, policy=FIRST_FIT)
    assert leases(first_fit) == {1: 1, 2: 2}  # a takes the host with fewer labels first
    assert first_fit.provisions == {1: "R3", 2: "R1"}


def test_the_tick_uses_the_fewest_provisions_by_default() -> None:
    hosts, jobs, suites = worked_example()
    assert Policy().builds == "min-cost"
    assert leases(plan(hosts=hosts, jobs=jobs, suites=suites)) == {1: 2, 2: 1}


def test_builds_ignored_gives_the_hosts_by_host_choice_alone() -> None:
    hosts = [host(1, current_build="R2"), host(2, current_build="R1")]
    s = suite(1, "S", build="R1")
    result = plan(hosts=hosts, jobs=[job(1, of=s)], suites=[s], policy=Policy(builds="none"))
    assert leases(result) == {1: 1}  # the lowest hostname, though h2 carries R1
    assert result.provisions == {1: "R1"}  # the plan still says the host must be reimaged


def test_a_standalone_job_is_matched_to_its_own_build() -> None:
    hosts = [host(1, "board:x", current_build="R1"), host(2, "board:x", "bt", current_build="R7")]
    solo = replace(job(1, "board:x"), build="R7")
    result = plan(hosts=hosts, jobs=[solo], suites=[])
    assert leases(result) == {1: 2}
    assert result.provisions == {}


def test_a_job_with_no_build_never_needs_a_provision() -> None:
    hosts = [host(1, current_build="R1")]
    result = plan(hosts=hosts, jobs=[job(1)], suites=[])
    assert leases(result) == {1: 1}
    assert result.provisions == {}


def test_a_worker_at_capacity_takes_only_as_many_jobs_as_it_may_start() -> None:
    # w1 may start one job and carries both hosts on R1; h3 (no worker) is on R2. Two R1 jobs:
    # one gets an R1 host on w1, the other must reimage h3.
    hosts = [
        host(1, current_build="R1", worker="w1"),
        host(2, current_build="R1", worker="w1"),
        host(3, current_build="R2"),
    ]
    s = suite(1, "S", build="R1")
    result = plan(
        hosts=hosts,
        jobs=[job(1, of=s), job(2, of=s)],
        suites=[s],
        workers={"w1": WorkerLoad(limit=2, running=1)},
    )
    on_w1 = [a for a in result.assignments if a.host_id in (1, 2)]
    assert len(result.assignments) == 2 and len(on_w1) == 1
    assert result.provisions == {3: "R1"}


def test_a_pinned_job_keeps_its_host_even_if_it_must_reimage_it() -> None:
    hosts = [host(1, current_build="R2"), host(2, current_build="R1")]
    s = suite(1, "S", build="R1")
    pinned = replace(job(1, of=s), pinned_host_id=1)
    result = plan(hosts=hosts, jobs=[pinned, job(2, of=s)], suites=[s])
    assert leases(result) == {1: 1, 2: 2}
    assert result.provisions == {1: "R1"}


def test_a_retried_job_avoids_its_failed_host_before_saving_a_provision() -> None:
    # docs/health.md#retries-after-an-infrastructure-failure: elsewhere where it can, first.
    hosts = [host(1, "x", current_build="R1"), host(2, "x", "y", current_build="R2")]
    s = suite(1, "S", build="R1")
    retried = replace(job(1, "x", of=s), avoid_hosts=frozenset({1}))
    result = plan(hosts=hosts, jobs=[retried], suites=[s])
    assert leases(result) == {1: 2}
    assert result.provisions == {2: "R1"}


def test_under_spread_the_least_recently_used_host_on_the_build_comes_first() -> None:
    hosts = [
        host(1, current_build="R1", last_used=T0 + timedelta(minutes=30)),
        host(2, current_build="R2", last_used=T0),  # the oldest, but on another build
        host(3, current_build="R1", last_used=T0 + timedelta(minutes=10)),
    ]
    s = suite(1, "S", build="R1", priority=70)
    jobs = [job(1, of=s), job(2, priority=40)]  # job 2 has no build
    result = plan(hosts=hosts, jobs=jobs, suites=[s], policy=Policy(host_choice="spread"))
    assert leases(result) == {1: 3, 2: 2}
    assert result.provisions == {}


def test_under_pack_the_busiest_worker_on_the_build_comes_first() -> None:
    hosts = [
        host(1, current_build="R2", worker="w1"),  # w1 is the busiest, but not on R1
        host(2, current_build="R1", worker="w1"),
        host(3, current_build="R1", worker="w2"),
        host(4, current_build="R1", worker="w3"),
        host(5, leased=True, lease_priority=40, worker="w1"),
        host(6, leased=True, lease_priority=40, worker="w1"),
        host(7, leased=True, lease_priority=40, worker="w2"),
    ]
    s = suite(1, "S", build="R1")
    result = plan(hosts=hosts, jobs=[job(1, of=s), job(2, of=s)], suites=[s])
    assert result.provisions == {}
    packed = plan(
        hosts=hosts,
        jobs=[job(1, of=s), job(2, of=s)],
        suites=[s],
        policy=Policy(host_choice="pack"),
    )
    assert sorted(leases(packed).values()) == [2, 3]  # w1's R1 host, then w2 (busier than w3)
    assert packed.provisions == {}


def test_a_multi_host_job_counts_each_host_it_must_reimage() -> None:
    hosts = [host(i, "phone", current_build="R1" if i == 1 else "R9") for i in (1, 2, 3)]
    s = suite(1, "S", build="R1")
    pair = replace(job(1, of=s), roles=(RoleNeed("dut", frozenset({"phone"}), 2, 2),))
    result = plan(hosts=hosts, jobs=[pair], suites=[s])
    assert {a.host_id for a in result.assignments} == {1, 2}
    assert result.provisions == {2: "R1"}


# --- random labs against brute force ---------------------------------------------------------

LABELS = ["a", "b", "c"]
BUILDS = ["R1", "R2", "R3", "R4"]
WORKERS = ["", "w1", "w2"]


@st.composite
def labs(draw: st.DrawFn) -> tuple[list[HostState], list[JobState], list[SuiteState], dict, Policy]:
    """Up to 7 hosts on 2 workers (with capacities), 3 suites and 7 one-host jobs, 2–4 builds;
    some jobs pinned, some standalone with a build of their own, some retried."""
    builds = BUILDS[: draw(st.integers(2, 4))]
    n_hosts = draw(st.integers(0, 7))
    names = draw(st.permutations([f"h{i}" for i in range(n_hosts)]))
    hosts = [
        HostState(
            id=i + 1,
            hostname=names[i],
            labels=draw(st.frozensets(st.sampled_from(LABELS), max_size=3)),
            current_build=draw(st.sampled_from(["", *builds])),
            worker=draw(st.sampled_from(WORKERS)),
            last_used=draw(st.none() | st.sampled_from(MOMENTS)),
            leased=draw(st.integers(0, 5)) == 0,
        )
        for i in range(n_hosts)
    ]
    suites = [
        SuiteState(
            id=i + 1,
            name=f"S{i + 1}",
            priority=draw(st.sampled_from([30, 40, 70])),
            created_at=draw(st.sampled_from(MOMENTS)),
            build=draw(st.sampled_from(["", *builds])),
        )
        for i in range(draw(st.integers(0, 3)))
    ]
    jobs = []
    for i in range(draw(st.integers(0, 7))):
        of = draw(st.none() | st.sampled_from(suites)) if suites else None
        pinned = draw(st.integers(1, n_hosts)) if n_hosts and draw(st.integers(0, 5)) == 0 else None
        avoid = draw(st.frozensets(st.integers(1, max(n_hosts, 1)), max_size=2))
        jobs.append(
            JobState(
                id=i + 1,
                name=f"J{i + 1}",
                suite_id=of.id if of else None,
                priority=of.priority if of else draw(st.sampled_from([30, 40, 70])),
                submitted_at=of.created_at if of else draw(st.sampled_from(MOMENTS)),
                labels=draw(st.frozensets(st.sampled_from(LABELS), max_size=2)),
                pinned_host_id=pinned,
                avoid_hosts=avoid if draw(st.integers(0, 3)) == 0 else frozenset(),
                build="" if of else draw(st.sampled_from(["", *builds])),
            )
        )
    workers = draw(
        st.dictionaries(
            st.sampled_from(WORKERS[1:]),
            st.builds(WorkerLoad, limit=st.none() | st.integers(0, 3), running=st.integers(0, 2)),
        )
    )
    policy = Policy(host_choice=draw(st.sampled_from(HOST_CHOICES)))
    return hosts, jobs, suites, workers, policy


def room(workers: dict, worker: str) -> int | None:
    load = workers.get(worker)
    if not worker or load is None or load.limit is None:
        return None
    return load.limit - load.running


def fits(j: JobState, h: HostState) -> bool:
    return usable(h) and j.labels <= h.labels and j.pinned_host_id in (None, h.id)


def cost(j: JobState, h: HostState, build: str) -> tuple[int, int]:
    """(failed hosts taken again, provisions): the order the tick minimizes them in."""
    return (h.id in j.avoid_hosts, bool(build) and h.current_build != build)


def brute_force_minimum(hosts, jobs, suites, workers) -> tuple[int, int]:
    """The least (failed hosts taken again, provisions) over every assignment of these jobs to
    distinct free hosts they fit, each worker starting at most its room."""
    free = [h for h in hosts if usable(h)]
    best = None
    for chosen in permutations(free, len(jobs)):
        if not all(fits(j, h) for j, h in zip(jobs, chosen, strict=True)):
            continue
        started = Counter(h.worker for h in chosen)
        if any((r := room(workers, w)) is not None and n > r for w, n in started.items()):
            continue
        total = [0, 0]
        for j, h in zip(jobs, chosen, strict=True):
            avoided, provision = cost(j, h, build_of(j, suites))
            total[0] += avoided
            total[1] += provision
        if best is None or tuple(total) < best:
            best = tuple(total)
    assert best is not None, "the plan's own assignment is one"
    return best


def planned_cost(result: Plan, hosts, jobs, suites) -> tuple[int, int]:
    by_id = {h.id: h for h in hosts}
    job_by_id = {j.id: j for j in jobs}
    total = [0, 0]
    for a in result.assignments:
        j = job_by_id[a.job_id]
        avoided, provision = cost(j, by_id[a.host_id], build_of(j, suites))
        total[0] += avoided
        total[1] += provision
    return (total[0], total[1])


PROPERTY = settings(max_examples=400, deadline=None)


def assert_same_wait_reasons(fewest: Plan, first: Plan, workers, jobs, hosts) -> None:
    """The same wait reasons, where no worker has a capacity. Where one has, a reason counts
    the free hosts of a full worker as gone to jobs ahead (leased this tick) or kept by the
    capacity, as the plan's hosts end up: only a job fitting none of them has the same one."""
    if not any(load.limit is not None for load in workers.values()):
        assert dict(fewest.wait_reasons) == dict(first.wait_reasons)
        assert fewest.class_reasons == first.class_reasons
        return
    capped = [h for h in hosts if (load := workers.get(h.worker)) and load.limit is not None]
    for j in jobs:
        if j.id in fewest.wait_reasons and not any(
            r.labels <= h.labels for h in capped for r in (j.roles or [j])
        ):
            assert fewest.wait_reasons[j.id] == first.wait_reasons[j.id]


@PROPERTY
@given(labs())
def test_the_plan_needs_the_fewest_provisions_any_assignment_of_its_leases_needs(lab) -> None:
    hosts, jobs, suites, workers, policy = lab
    result = plan(hosts=hosts, jobs=jobs, suites=suites, workers=workers, policy=policy, now=NOW)
    job_by_id = {j.id: j for j in jobs}
    by_id = {h.id: h for h in hosts}
    leased = [job_by_id[a.job_id] for a in result.assignments]
    # The plan's assignment is itself valid: fitting, distinct hosts, workers within room.
    assert all(fits(job_by_id[a.job_id], by_id[a.host_id]) for a in result.assignments)
    assert len({a.host_id for a in result.assignments}) == len(result.assignments)
    started = Counter(by_id[a.host_id].worker for a in result.assignments)
    assert all((r := room(workers, w)) is None or n <= r for w, n in started.items())
    assert planned_cost(result, hosts, jobs, suites) == brute_force_minimum(
        hosts, leased, suites, workers
    )
    # What the plan reports is what its assignments need.
    assert result.provisions == {
        a.host_id: build_of(job_by_id[a.job_id], suites)
        for a in result.assignments
        if cost(job_by_id[a.job_id], by_id[a.host_id], build_of(job_by_id[a.job_id], suites))[1]
    }


@PROPERTY
@given(labs())
def test_the_fewest_provisions_lease_the_same_jobs_as_first_fit(lab) -> None:
    hosts, jobs, suites, workers, policy = lab
    kw = {"hosts": hosts, "jobs": jobs, "suites": suites, "workers": workers, "now": NOW}
    fewest = plan(**kw, policy=replace(policy, builds="min-cost"))
    first = plan(**kw, policy=replace(policy, builds="first-fit"))
    assert set(leases(fewest)) == set(leases(first))
    assert_same_wait_reasons(fewest, first, workers, jobs, hosts)
    # Never worse, by the same order: failed hosts reused first, then provisions (first-fit
    # may save a reimage by sending a retried job back to the host it failed on).
    assert planned_cost(fewest, hosts, jobs, suites) <= planned_cost(first, hosts, jobs, suites)


# --- multi-host jobs: random labs of tests/scheduler/test_multihost_properties.py -------------


@st.composite
def multi_host_labs(draw: st.DrawFn):  # noqa: ANN201
    """The multi-host property tests' labs (holds, elastic hosts, binding workers), with the
    hosts' and suites' builds drawn again from 2–4 builds."""
    lab = draw(any_labs)
    builds = ["", *BUILDS[: draw(st.integers(2, 4))]]
    hosts = [replace(h, current_build=draw(st.sampled_from(builds))) for h in lab.hosts]
    suites = [replace(s, build=draw(st.sampled_from(builds))) for s in lab.suites]
    jobs = [
        j if j.suite_id is not None else replace(j, build=draw(st.sampled_from(builds)))
        for j in lab.jobs
    ]
    return replace(lab, hosts=hosts, suites=suites, jobs=jobs)


@settings(max_examples=200, deadline=None)
@given(multi_host_labs())
def test_with_multi_host_jobs_the_fewest_provisions_keep_the_leases_and_the_rules(lab) -> None:
    fewest = plan_of(replace(lab, policy=replace(lab.policy, builds="min-cost")))
    first = plan_of(replace(lab, policy=replace(lab.policy, builds="first-fit")))
    assert got_hosts(fewest) == got_hosts(first)  # the same jobs, as many hosts per role
    assert Counter(fewest.holds.values()) == Counter(first.holds.values())
    assert_same_wait_reasons(fewest, first, lab.workers, lab.jobs, lab.hosts)
    by_id = {h.id: h for h in lab.hosts}
    job_by_id = {j.id: j for j in lab.jobs}

    def cost_of(result: Plan) -> tuple[int, int, int]:
        """(failed hosts leased again, failed hosts held again, provisions): the order the tick
        minimizes them in; the provisions as the plan reports them."""
        total = [0, 0, 0]
        for a in result.assignments:
            j = job_by_id[a.job_id]
            avoided, provision = cost(j, by_id[a.host_id], build_of(j, lab.suites))
            total[0] += avoided
            total[2] += provision
            assert (result.provisions.get(a.host_id) is not None) == provision
        total[1] = sum(h in job_by_id[j].avoid_hosts for h, j in result.holds.items())
        return (total[0], total[1], total[2])

    assert cost_of(fewest) <= cost_of(first)
    taken = [a.host_id for a in fewest.assignments] + list(fewest.holds)
    assert len(set(taken)) == len(taken)  # no host leased twice, or leased and held
    for a in fewest.assignments:
        j = job_by_id[a.job_id]
        labels = next(r.labels for r in j.roles if r.name == a.role) if j.roles else j.labels
        assert labels <= by_id[a.host_id].labels and usable(by_id[a.host_id])
    for j in job_by_id.values():
        if j.together_by and j.id in got_hosts(fewest):
            values = {
                frozenset(x for x in by_id[a.host_id].labels if x.startswith(j.together_by + ":"))
                for a in fewest.assignments
                if a.job_id == j.id
            }
            assert len(values) == 1
    # Each worker starts at most its room: a job counted once per worker, a held host once.
    started: dict[str, set[object]] = {}
    for a in fewest.assignments:
        started.setdefault(by_id[a.host_id].worker, set()).add(a.job_id)
    for host_id in fewest.holds:
        started.setdefault(by_id[host_id].worker, set()).add(("held", host_id))
    for worker, jobs in started.items():
        assert (r := lab.room(worker)) is None or len(jobs) <= r


def test_a_hold_takes_the_host_its_holder_failed_on_before_a_leased_job_does() -> None:
    """J3 (priority 70, failed on h1) is leased; M1 (failed on h1 too) needs three board:eve
    hosts, one busy for 4 more minutes, and holds the two free ones left. One of J3 and the
    hold must take h1: a job leased now is kept off it first (Hypothesis found the fewest
    provisions handing J3 h1 and the hold h3, the two ways costing the flow the same)."""
    hosts = [
        host(1, "board:eve"),
        host(2, "board:eve", leased=True, lease_priority=40, busy_until=NOW + timedelta(minutes=4)),
        host(3, "board:eve"),
        host(4, "board:eve"),
    ]
    j3 = replace(job(3, "board:eve", priority=70), build="R1", avoid_hosts=frozenset({1}))
    m1 = replace(job(1, "board:eve", priority=40), avoid_hosts=frozenset({1}))
    m1 = replace(m1, roles=(RoleNeed("dut", m1.labels, 3, 3),))
    for builds in ("min-cost", "first-fit"):
        result = plan(hosts=hosts, jobs=[m1, j3], suites=[], now=NOW, policy=Policy(builds=builds))
        assert leases(result) == {3: 3}, builds
        assert result.holds == {1: 1, 4: 1}, builds
        assert result.provisions == {3: "R1"}, builds


def test_a_job_outranked_for_the_host_the_fewest_provisions_moved_a_job_to_says_so() -> None:
    """The matching puts the quota job on h0, the fewest provisions move it to h2, already on
    its build (worker w2 then full): J3, which fits only h2, waits, and its reason counts h2 as
    gone to a job ahead (it once counted the matching's classes, found none and failed)."""
    hosts = [
        host(1, hostname="h0", current_build="R1", worker="w2", last_used=T0),
        host(2, "b", "c", "d", hostname="h3", leased=True, lease_priority=70, worker="w1"),
        host(3, hostname="h1", current_build="R1", worker_offline=True, worker="w2"),
        host(
            4,
            "a",
            "c",
            "d",
            hostname="h2",
            current_build="R2",
            worker="w2",
            last_used=T0 + timedelta(minutes=1),
        ),
    ]
    later = replace(suite(1, "S1", priority=30, minute=2), max_duts=3, held=2)
    quota = replace(suite(2, "S2", priority=70, minute=1), min_duts=1, max_duts=4, build="R2")
    jobs = [
        job(1, of=quota),
        replace(job(2, "c", of=later), owner=1),
        replace(job(3, "a", "c", "d", of=later), priority=40),
    ]
    result = plan(
        hosts=hosts,
        jobs=jobs,
        suites=[later, quota],
        policy=Policy(ordering="dynsize", host_choice="spread", default_duration_s=60.0),
        now=T0 + timedelta(minutes=5),
        workers={"w1": WorkerLoad(limit=2, running=2), "w2": WorkerLoad(limit=2, running=1)},
    )
    assert leases(result) == {1: 4}
    assert result.provisions == {}
    assert result.wait_reasons[3].message == "1 free host went to a job ahead of it in the queue"
