"""Same-build-first: within a priority, jobs a free host already carries the build of go before
jobs that would need a reimage, until those have waited `same_build_first_minutes`
(docs/scheduling.md#same-build-first). Off by default: strict queue order within a priority."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from jobs.scheduling.planner import (
    Policy,
    consideration_order,
    main_phase_order,
    plan,
)
from tests.scheduler.lab import T0, host, job, leases, suite
from tests.scheduler.test_planner_properties import labs as planner_labs
from tests.scheduler.test_planner_properties import matroid_keep, ordered_greedy, plan_result

SBF = Policy(same_build_first_minutes=30)


def lab_with_one_free_host_on_r1():
    """One free host on R1; suite A (R2) submitted before suite B (R1), both priority 40."""
    hosts = [host(1, "board:x", current_build="R1")]
    a = suite(1, "A", build="R2", minute=0)
    b = suite(2, "B", build="R1", minute=1)
    return hosts, [job(1, "board:x", of=a), job(2, "board:x", of=b)], [a, b]


def test_off_by_default_the_earlier_job_takes_the_host_and_reimages_it():
    hosts, jobs, suites = lab_with_one_free_host_on_r1()
    result = plan(hosts=hosts, jobs=jobs, suites=suites, now=T0 + timedelta(minutes=5))
    assert leases(result) == {1: 1}
    assert result.provisions == {1: "R2"}


def test_on_the_job_whose_build_the_free_host_carries_goes_first_and_nothing_is_reimaged():
    hosts, jobs, suites = lab_with_one_free_host_on_r1()
    result = plan(hosts=hosts, jobs=jobs, suites=suites, policy=SBF, now=T0 + timedelta(minutes=5))
    assert leases(result) == {2: 1}
    assert result.provisions == {}
    # The job passed over waits, saying so as any job that finds no free host does.
    assert result.wait_reasons[1] is not None


def test_a_job_that_has_waited_the_setting_keeps_its_place():
    hosts, jobs, suites = lab_with_one_free_host_on_r1()
    at_30 = T0 + timedelta(minutes=30)  # A was submitted at T0: it has waited 30 minutes
    result = plan(hosts=hosts, jobs=jobs, suites=suites, policy=SBF, now=at_30)
    assert leases(result) == {1: 1}
    assert result.provisions == {1: "R2"}


def test_priority_still_comes_first():
    hosts = [host(1, "board:x", current_build="R1")]
    high = suite(1, "A", build="R2", priority=70)
    low = suite(2, "B", build="R1", priority=40)
    jobs = [job(1, "board:x", of=high), job(2, "board:x", of=low)]
    result = plan(
        hosts=hosts, jobs=jobs, suites=[high, low], policy=SBF, now=T0 + timedelta(minutes=1)
    )
    assert leases(result) == {1: 1}  # the higher priority job, though it must reimage


def test_a_host_on_the_build_the_job_does_not_fit_does_not_count():
    """B's build is on a free host, but one without B's labels: B needs a reimage too."""
    hosts = [host(1, "board:x", current_build="R3"), host(2, "board:y", current_build="R1")]
    a = suite(1, "A", build="R2", minute=0)
    b = suite(2, "B", build="R1", minute=1)
    jobs = [job(1, "board:x", of=a), job(2, "board:x", of=b)]
    result = plan(hosts=hosts, jobs=jobs, suites=[a, b], policy=SBF, now=T0 + timedelta(minutes=5))
    assert leases(result) == {1: 1}


def test_a_pinned_job_counts_only_its_own_host():
    hosts = [host(1, "board:x", current_build="R3"), host(2, "board:x", current_build="R1")]
    a = suite(1, "A", build="R2", minute=0)
    b = suite(2, "B", build="R1", minute=1)
    pinned_b = replace(job(2, "board:x", of=b), pinned_host_id=1)  # pinned to the R3 host
    jobs = [job(1, "board:x", of=a), pinned_b]
    order = main_phase_order(jobs, SBF, T0 + timedelta(minutes=5))
    assert [j.id for j in order] == [1, 2]
    ids = consideration_order(
        jobs=jobs, suites=[a, b], policy=SBF, now=T0 + timedelta(minutes=5), free=hosts
    )
    assert ids == [1, 2]  # B's host is on R3: B would reimage it, so it keeps its place


def test_the_queue_page_order_is_the_ticks():
    hosts, jobs, suites = lab_with_one_free_host_on_r1()
    now = T0 + timedelta(minutes=5)
    assert consideration_order(jobs=jobs, suites=suites, policy=SBF, now=now, free=hosts) == [
        2,
        1,
    ]
    assert consideration_order(jobs=jobs, suites=suites, policy=Policy(), now=now) == [1, 2]


BUILDS = ("", "R1", "R2", "R3")
JOB_LABELS = [("board:x",), ("board:y",), ("pool:p",), ("board:x", "pool:p"), ()]


@st.composite
def labs(draw):
    n_hosts = draw(st.integers(1, 5))
    hosts = [
        host(
            i,
            draw(st.sampled_from(["board:x", "board:y"])),
            *draw(st.sampled_from([(), ("pool:p",)])),
            current_build=draw(st.sampled_from(BUILDS[1:])),
        )
        for i in range(1, n_hosts + 1)
    ]
    suites = [
        suite(
            s,
            f"S{s}",
            build=draw(st.sampled_from(BUILDS)),
            priority=draw(st.sampled_from([40, 70])),
            minute=draw(st.integers(0, 40)),
        )
        for s in range(1, draw(st.integers(1, 4)) + 1)
    ]
    jobs = [
        job(j, *draw(st.sampled_from(JOB_LABELS)), of=draw(st.sampled_from(suites)))
        for j in range(1, draw(st.integers(1, 8)) + 1)
    ]
    return hosts, jobs, suites


@settings(max_examples=300, deadline=None)
@given(labs())
def test_it_leases_as_many_jobs_of_each_priority(lab):
    """Only the order within a priority changes: the same number of jobs of each priority is
    leased as in strict order. (Not fewer reimages in every tick: other jobs are leased, whose
    builds may fit the free hosts worse; a day of them reimages fewer, bench/provision.py.)"""
    hosts, jobs, suites = lab
    now = T0 + timedelta(minutes=45)
    strict = plan(hosts=hosts, jobs=jobs, suites=suites, now=now, policy=Policy())
    grouped = plan(hosts=hosts, jobs=jobs, suites=suites, now=now, policy=SBF)
    priority = {j.id: j.priority for j in jobs}

    def per_priority(result):
        out: dict[int, int] = {}
        for a in result.assignments:
            out[priority[a.job_id]] = out.get(priority[a.job_id], 0) + 1
        return out

    assert per_priority(grouped) == per_priority(strict)


@settings(max_examples=400, deadline=None)
@given(
    planner_labs().map(
        lambda lab: replace(lab, policy=replace(lab.policy, same_build_first_minutes=4))
    )
)
def test_the_leased_set_is_the_documented_orders_greedy(lab):
    """Against the independent reference of the planner's property tests (Kuhn's matching on
    concrete hosts, jobs taken in the documented order, same-build-first included)."""
    expected = ordered_greedy(lab, matroid_keep(lab))
    assert {a.job_id for a in plan_result(lab).assignments} == {j.id for j in expected}
