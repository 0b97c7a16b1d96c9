"""The scheduler settings and worker capacity on labs whose answer can be checked by hand.

The worked examples of docs/scheduling.md#policies and #worker-capacity; the properties under
every combination are in test_planner_properties.py.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from jobs.scheduling.planner import JobState, Policy, WorkerLoad, consideration_order, plan
from tests.scheduler.lab import T0, host, job, leases, suite


def sized(j: JobState, minutes: float | None) -> JobState:
    return replace(j, size_s=None if minutes is None else minutes * 60)


def first_leased(jobs: list[JobState], policy: Policy, *, now_minute: int = 0) -> int:
    """The job one free host goes to."""
    result = plan(
        hosts=[host(1)], jobs=jobs, suites=[], policy=policy, now=T0 + timedelta(minutes=now_minute)
    )
    (assignment,) = result.assignments
    return assignment.job_id


# --- ordering within a priority -----------------------------------------------------------


def test_fifo_takes_the_first_submitted_whatever_its_size() -> None:
    jobs = [sized(job(1, minute=0), 60), sized(job(2, minute=1), 5)]
    assert first_leased(jobs, Policy(ordering="fifo"), now_minute=2) == 1


def test_size_takes_the_shortest_first() -> None:
    jobs = [sized(job(1, minute=0), 60), sized(job(2, minute=1), 5)]
    assert first_leased(jobs, Policy(ordering="size"), now_minute=2) == 2


def test_size_uses_the_default_duration_for_a_job_with_no_estimate() -> None:
    jobs = [sized(job(1, minute=0), None), sized(job(2, minute=1), 15)]
    assert first_leased(jobs, Policy(ordering="size", default_duration_s=600), now_minute=2) == 1
    assert first_leased(jobs, Policy(ordering="size", default_duration_s=3600), now_minute=2) == 2


def test_size_never_reorders_across_priorities() -> None:
    jobs = [sized(job(1, priority=70), 60), sized(job(2, priority=40), 1)]
    assert first_leased(jobs, Policy(ordering="size")) == 1


def test_dynsize_lets_a_long_job_that_waited_pass_fresh_short_ones() -> None:
    # A 60-minute job submitted at 9:00, and a stream of 20-minute jobs, each fresh when the
    # tick runs. At 10:00 the long one has waited one whole size: it counts 60 / 2 = 30
    # minutes, still longer than 20. At 11:00 it has waited two: 60 / 3 = 20, equal, and the
    # earlier submission goes first.
    long_job = sized(job(1, minute=0), 60)

    def short_at(minute: int) -> JobState:
        return sized(job(2, minute=minute), 20)

    dynsize = Policy(ordering="dynsize")
    assert first_leased([long_job, short_at(60)], dynsize, now_minute=60) == 2
    assert first_leased([long_job, short_at(119)], dynsize, now_minute=119) == 2
    assert first_leased([long_job, short_at(120)], dynsize, now_minute=120) == 1
    # Under plain size the long job never passes.
    assert first_leased([long_job, short_at(600)], Policy(ordering="size"), now_minute=600) == 2


# --- aging -----------------------------------------------------------------------------------


def test_aging_raises_a_waiting_job_one_level_per_step_up_to_the_cap() -> None:
    weekly = job(1, priority=10, minute=0)

    def cq_at(minute: int) -> JobState:  # a stream of cq jobs, each fresh at the tick
        return job(2, priority=70, minute=minute)

    aging = Policy(aging_minutes=2, aging_cap=60)
    # At minute 100 the weekly job has waited 50 steps: 10 + 50 = 60 < 70.
    assert first_leased([weekly, cq_at(100)], aging, now_minute=100) == 2
    # At minute 120, 60 steps: 70, a tie on priority, and the weekly job was submitted first.
    assert first_leased([weekly, cq_at(120)], aging, now_minute=120) == 1
    # The cap holds it at 10 + 20 = 30 however long it waits.
    assert first_leased([weekly, cq_at(9999)], Policy(aging_minutes=2), now_minute=9999) == 2
    # Off (the default): priority alone.
    assert first_leased([weekly, cq_at(9999)], Policy(), now_minute=9999) == 2


def test_aging_orders_the_quota_phase_by_the_suites_aged_priority() -> None:
    old = suite(1, "weekly", priority=10, minute=0, min_duts=1)
    new = suite(2, "cq", priority=30, minute=50, min_duts=1)
    jobs = [job(1, of=old), job(2, of=new)]
    now = T0 + timedelta(minutes=50)
    assert consideration_order(jobs=jobs, suites=[old, new])[:2] == [2, 1]
    order = consideration_order(
        jobs=jobs, suites=[old, new], policy=Policy(aging_minutes=2), now=now
    )
    assert order[:2] == [1, 2]  # 10 + min(20, 25) = 30, tied, and weekly was created first


# --- host choice -----------------------------------------------------------------------------


def test_affinity_prefers_a_host_on_the_suites_build() -> None:
    hosts = [host(1, current_build="R1"), host(2, current_build="R2")]
    s = suite(1, "bvt", build="R2")
    result = plan(hosts=hosts, jobs=[job(1, of=s)], suites=[s], policy=Policy())
    assert leases(result) == {1: 2}


def test_spread_takes_the_least_recently_used_host() -> None:
    hosts = [
        host(1, last_used=T0 + timedelta(minutes=30)),
        host(2, last_used=T0),
        host(3, last_used=T0 + timedelta(minutes=10)),
    ]
    result = plan(
        hosts=hosts, jobs=[job(1), job(2)], suites=[], policy=Policy(host_choice="spread")
    )
    assert leases(result) == {1: 2, 2: 3}
    never = [*hosts, host(4)]
    result = plan(hosts=never, jobs=[job(1)], suites=[], policy=Policy(host_choice="spread"))
    assert leases(result) == {1: 4}  # a host never used goes first


def test_pack_fills_the_busiest_worker_and_keeps_whole_workers_free() -> None:
    hosts = [
        host(1, worker="w1"),
        host(2, worker="w1"),
        host(3, worker="w2"),
        host(4, worker="w2"),
        host(5, worker="w2", leased=True, lease_priority=40),
    ]
    result = plan(hosts=hosts, jobs=[job(1), job(2)], suites=[], policy=Policy(host_choice="pack"))
    assert leases(result) == {1: 3, 2: 4}  # w2 was already busy: w1 stays whole
    affinity = plan(hosts=hosts, jobs=[job(1), job(2)], suites=[], policy=Policy())
    assert leases(affinity) == {1: 1, 2: 2}  # lowest hostnames


# --- worker capacity -------------------------------------------------------------------------


def test_a_worker_at_capacity_gets_no_more_and_the_job_is_told_so() -> None:
    hosts = [host(i, "board:x", worker="w2", hostname=f"dut{i}") for i in range(1, 4)]
    loads = {"w2": WorkerLoad(limit=8, running=7)}
    result = plan(
        hosts=hosts, jobs=[job(1, "board:x"), job(2, "board:x")], suites=[], workers=loads
    )
    assert leases(result) == {1: 1}
    reason = result.wait_reasons[2]
    assert reason.code == "outranked"
    assert reason.message == (
        "1 free host went to a job ahead of it in the queue; "
        "the other 2 are on worker w2 at capacity (8 of 8)"
    )
    assert reason.details["workers_at_capacity"] == {"w2": {"running": 8, "max_jobs": 8}}


def test_a_full_worker_from_the_start_leaves_its_hosts_unavailable() -> None:
    hosts = [host(1, "board:x", worker="w2"), host(2, "board:x", worker="w2")]
    result = plan(
        hosts=hosts, jobs=[job(1, "board:x")], suites=[], workers={"w2": WorkerLoad(8, 8)}
    )
    assert leases(result) == {}
    reason = result.wait_reasons[1]
    assert reason.code == "hosts_unavailable"
    assert reason.message == "Both hosts that fit are on worker w2 at capacity (8 of 8)"


def test_a_pinned_job_on_a_full_worker_says_whose_capacity() -> None:
    hosts = [host(1, worker="w2", hostname="dut1")]
    result = plan(hosts=hosts, jobs=[job(1, pinned=1)], suites=[], workers={"w2": WorkerLoad(4, 4)})
    assert result.wait_reasons[1].code == "pinned_host_at_capacity"
    assert result.wait_reasons[1].message == (
        "Pinned host dut1 is on worker w2 at capacity (4 of 4)"
    )


def test_capacity_moves_an_earlier_job_off_a_full_worker_to_make_room() -> None:
    # w1 may start one job. J1 (any host) would take h1 on w1 first; J2 fits only h2, also on
    # w1. The tick moves J1 to h3 (no worker) so that J2 can have w1's one slot.
    hosts = [host(1, "a", worker="w1"), host(2, "b", worker="w1"), host(3, "a", "c")]
    jobs = [job(1, priority=70), job(2, "b", priority=40)]
    result = plan(hosts=hosts, jobs=jobs, suites=[], workers={"w1": WorkerLoad(1, 0)})
    assert leases(result) == {1: 3, 2: 2}


def test_without_a_limit_a_worker_takes_every_host_it_has() -> None:
    hosts = [host(i, worker="w1") for i in range(1, 4)]
    jobs = [job(i) for i in range(1, 4)]
    for loads in ({}, {"w1": WorkerLoad(None, 5)}, {"w1": WorkerLoad(3, 0)}):
        assert len(plan(hosts=hosts, jobs=jobs, suites=[], workers=loads).assignments) == 3


# --- fair share ------------------------------------------------------------------------------


def owned(j: JobState, owner: int) -> JobState:
    return replace(j, owner=owner)


def test_fair_share_lets_the_owner_who_used_less_go_first_within_a_priority() -> None:
    jobs = [owned(job(1, minute=0), 1), owned(job(2, minute=5), 2)]
    fair = Policy(fair_share=True)
    usage = {1: 7200.0, 2: 600.0}  # alice used two host-hours lately, bob ten minutes
    result = plan(hosts=[host(1)], jobs=jobs, suites=[], policy=fair, now=T0, usage=usage)
    assert leases(result) == {2: 1}
    result = plan(hosts=[host(1)], jobs=jobs, suites=[], policy=Policy(), now=T0, usage=usage)
    assert leases(result) == {1: 1}  # off: submission order


def test_fair_share_interleaves_owners_with_equal_usage() -> None:
    # alice submitted 4 jobs, then bob 2, all 10 minutes, same priority: with fair share the
    # four hosts go two and two, not four to alice.
    alice = [owned(sized(job(i, minute=0), 10), 1) for i in range(1, 5)]
    bob = [owned(sized(job(i, minute=1), 10), 2) for i in range(5, 7)]
    hosts = [host(i) for i in range(1, 5)]
    fair = Policy(fair_share=True)
    result = plan(hosts=hosts, jobs=alice + bob, suites=[], policy=fair, now=T0, usage={})
    assert sorted(leases(result)) == [1, 2, 5, 6]


def test_fair_share_never_reorders_across_priorities() -> None:
    jobs = [owned(job(1, priority=70), 1), owned(job(2, priority=40), 2)]
    result = plan(
        hosts=[host(1)],
        jobs=jobs,
        suites=[],
        policy=Policy(fair_share=True),
        now=T0,
        usage={1: 1e9},
    )
    assert leases(result) == {1: 1}
