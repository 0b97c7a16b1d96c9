"""Worked examples of multi-host jobs, holds and backfill (docs/scheduling.md#multi-host-jobs,
#holds-and-backfill): what a tester sees happen to a job that needs several hosts."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from jobs.scheduling.planner import (
    Assignment,
    HostState,
    JobState,
    Plan,
    Policy,
    RoleNeed,
    WaitCode,
    WorkerLoad,
    class_key,
    plan,
    reason_keys,
)
from tests.scheduler.lab import T0, host, job, leases, suite

NOW = T0 + timedelta(hours=1)


def busy(id: int, *labels: str, minutes: float, hostname: str | None = None) -> HostState:
    """A host running a priority-40 job expected to end `minutes` from NOW."""
    return host(
        id,
        *labels,
        hostname=hostname,
        leased=True,
        lease_priority=40,
        busy_until=NOW + timedelta(minutes=minutes),
    )


def multi(
    id: int,
    *roles: tuple[str, list[str], int] | tuple[str, list[str], int, int],
    labels: tuple[str, ...] = (),
    priority: int = 40,
    minute: int = 0,
    together_by: str = "",
    of=None,
) -> JobState:
    """A multi-host job M<id>; each role (name, its labels, count[, max])."""
    base = job(id, *labels, priority=priority, minute=minute, of=of)
    return replace(
        base,
        name=f"M{id}",
        roles=tuple(
            RoleNeed(name, frozenset(own) | base.labels, count, rest[0] if rest else count)
            for name, own, count, *rest in roles
        ),
        together_by=together_by,
    )


def sized(j: JobState, minutes: float) -> JobState:
    return replace(j, size_s=minutes * 60)


def run(hosts, jobs, suites=(), **kw) -> Plan:
    return plan(hosts=hosts, jobs=jobs, suites=suites, now=NOW, **kw)


def hosts_of(result: Plan, job_id: int) -> list[tuple[str, str, int]]:
    """(role, hostname, slot) of the job's assignments, by slot."""
    return [(a.role, f"h{a.host_id}", a.slot) for a in result.assignments if a.job_id == job_id]


# --- all or nothing ----------------------------------------------------------------------------


def test_a_multi_host_job_gets_every_essential_host_or_none() -> None:
    # Two free hosts, the job needs three: nothing is leased to it, the one-host job behind it
    # takes a host (no busy host will ever complete it: no hold).
    hosts = [host(1, "bt"), host(2, "bt"), host(3, "bt", locked=True)]
    m = multi(1, ("dut", ["bt"], 3), priority=70)
    one = job(2, "bt")
    result = run(hosts, [m, one])
    assert leases(result) == {2: 1}
    assert result.holds == {}
    reason = result.wait_reasons[1]
    assert reason.code == WaitCode.HOSTS_UNAVAILABLE
    assert reason.message == (
        "Needs 3 hosts together; role dut needs 3: 2 of the 3 hosts that fit are free; "
        "the other one is locked"
    )
    assert reason.details["role"] == "dut"


def test_a_kept_job_moves_so_that_a_multi_host_job_fits_but_is_never_dropped() -> None:
    # J1 (70) would take h1, the lowest hostname of its kind; M2 needs h1 for its dut role
    # (only h1 has `b`) and h3 for its peer: J1 moves to h2 and all three run.
    hosts = [host(1, "a", "b"), host(2, "a", "c"), host(3, "d")]
    j1 = job(1, "a", priority=70)
    m2 = multi(2, ("dut", ["b"], 1), ("peer", ["d"], 1))
    result = run(hosts, [j1, m2])
    assert leases(result)[1] == 2
    assert hosts_of(result, 2) == [("dut", "h1", 0), ("peer", "h3", 1)]
    # With M2 ranked first nothing changes: J1 still fits on h2.
    assert set(run(hosts, [replace(j1, priority=30), m2]).assignments) == set(result.assignments)


def test_a_higher_ranked_one_host_job_keeps_its_host_over_a_multi_host_job() -> None:
    hosts = [host(1, "bt"), host(2, "bt")]
    j1 = job(1, "bt", priority=70)
    m2 = multi(2, ("dut", ["bt"], 2))
    result = run(hosts, [j1, m2])
    assert leases(result) == {1: 1}
    assert result.wait_reasons[2].code == WaitCode.OUTRANKED
    assert result.wait_reasons[2].message == (
        "Needs 2 hosts together: the free hosts that fit went to jobs ahead of it in the queue"
    )


def test_roles_get_their_hosts_in_submission_order_slot_0_first() -> None:
    hosts = [host(1, "ap"), host(2, "phone"), host(3, "phone"), host(4, "phone")]
    m = multi(1, ("dut", ["phone"], 2), ("ap", ["ap"], 1))
    result = run(hosts, [m])
    assert result.assignments == (
        Assignment(1, 2, "dut", 0),
        Assignment(1, 3, "dut", 1),
        Assignment(1, 1, "ap", 2),
    )


def test_a_role_no_host_can_serve_is_named() -> None:
    hosts = [host(1, "phone"), host(2, "phone")]
    m = multi(1, ("dut", ["phone"], 1), ("ap", ["wifi-ap"], 1))
    reason = run(hosts, [m]).wait_reasons[1]
    assert reason.code == WaitCode.NO_MATCHING_HOST
    assert reason.message == "Role ap: no host has label wifi-ap"
    assert reason.details["role"] == "ap"
    too_many = multi(2, ("dut", ["phone"], 3))
    reason = run(hosts, [too_many]).wait_reasons[2]
    assert reason.message == "Role dut needs 3 hosts with phone; the lab has 2"


def test_a_multi_host_job_has_a_class_of_its_own() -> None:
    one = job(1, "bt")
    m = multi(2, ("dut", [], 2), labels=("bt",))
    assert class_key(one) != class_key(m)
    assert class_key(m).startswith('["bt"]|pin=-|suite=-|roles=[["dut",["bt"],2,2]]')
    assert reason_keys(m) == ("job=2", class_key(m))


# --- together_by -------------------------------------------------------------------------------


def test_together_by_keeps_every_host_in_one_chamber() -> None:
    # Chamber 1 has a free bt phone but its peer host is busy; chamber 2 has both free.
    hosts = [
        host(1, "bt", "chamber:1"),
        busy(2, "chamber:1", minutes=30),
        host(3, "bt", "chamber:2"),
        host(4, "chamber:2"),
        host(5, "chamber:3"),
    ]
    m = multi(1, ("dut", ["bt"], 1), ("peer", [], 1), together_by="chamber")
    result = run(hosts, [m])
    assert hosts_of(result, 1) == [("dut", "h3", 0), ("peer", "h4", 1)]


def test_together_by_takes_the_first_value_that_fits_in_sorted_order() -> None:
    hosts = [host(i, "bt", f"chamber:{c}") for i, c in ((1, "b"), (2, "b"), (3, "a"), (4, "a"))]
    m = multi(1, ("dut", ["bt"], 2), together_by="chamber")
    assert sorted(leases_of(run(hosts, [m]), 1)) == [3, 4]


def leases_of(result: Plan, job_id: int) -> list[int]:
    return [a.host_id for a in result.assignments if a.job_id == job_id]


def test_no_chamber_with_every_role_is_said() -> None:
    hosts = [host(1, "bt", "chamber:1"), host(2, "chamber:2")]
    m = multi(1, ("dut", ["bt"], 1), ("peer", [], 1), together_by="chamber")
    reason = run(hosts, [m]).wait_reasons[1]
    assert reason.code == WaitCode.NO_MATCHING_HOST
    assert reason.message == "Needs 2 hosts together by chamber: no chamber has them all"


# --- elastic hosts -----------------------------------------------------------------------------


def test_elastic_hosts_come_after_every_job_of_the_tick() -> None:
    # M1 needs 1 dut and may use up to 3; J2, ranked after it, still gets its host first.
    hosts = [host(i, "phone") for i in range(1, 5)]
    m = multi(1, ("dut", ["phone"], 1, 3), priority=70)
    j2 = job(2, "phone")
    result = run(hosts, [m, j2])
    assert leases(result)[2] == 2
    assert hosts_of(result, 1) == [("dut", "h1", 0), ("dut", "h3", 1), ("dut", "h4", 2)]


def test_elastic_hosts_stay_within_the_suites_max_duts() -> None:
    s = suite(1, "cts", max_duts=2)
    hosts = [host(i, "phone") for i in range(1, 5)]
    m = multi(1, ("dut", ["phone"], 1, 4), of=s)
    assert len(leases_of(run(hosts, [m], [s]), 1)) == 2


def test_elastic_hosts_keep_the_chamber() -> None:
    hosts = [host(1, "chamber:1"), host(2, "chamber:1"), host(3, "chamber:2")]
    m = multi(1, ("dut", [], 1, 3), together_by="chamber")
    assert leases_of(run(hosts, [m]), 1) == [1, 2]


# --- quotas, caps and capacity ------------------------------------------------------------------


def test_a_multi_host_job_counts_its_hosts_toward_min_and_max_duts() -> None:
    s = suite(1, "wifi", priority=30, min_duts=3)
    hosts = [host(i, "phone") for i in range(1, 6)]
    m = multi(10, ("dut", ["phone"], 3), of=s)
    jobs = [m, job(11, "phone", of=s), job(1, "phone", priority=70), job(2, "phone", priority=70)]
    result = run(hosts, jobs, [s])
    # The quota phase leases M10 (3 hosts: the quota is met, J11 waits for the main phase),
    # then the two priority-70 jobs take the other two.
    assert set(leases(result)) == {10, 1, 2}
    capped = suite(2, "small", max_duts=2)
    big = multi(20, ("dut", ["phone"], 3), of=capped)
    reason = run(hosts, [big], [capped]).wait_reasons[20]
    assert reason.code == WaitCode.SUITE_AT_MAX_DUTS
    assert reason.message == "Suite small holds 0 of max 2 hosts; this job needs 3"


def test_a_multi_host_job_counts_once_on_a_worker_it_holds_several_hosts_on() -> None:
    # docs/scheduling.md#worker-capacity: w1 may start one more job and has two free phones;
    # M1 needs two phones: it starts there, one job on w1.
    hosts = [host(1, "phone", worker="w1"), host(2, "phone", worker="w1")]
    m = multi(1, ("dut", ["phone"], 2))
    result = run(hosts, [m], workers={"w1": WorkerLoad(limit=2, running=1)})
    assert result.assignments == (Assignment(1, 1, "dut", 0), Assignment(1, 2, "dut", 1))


def test_a_one_slot_worker_never_gets_two_different_jobs() -> None:
    # The slot M1 takes on w1 is its alone: J2 behind it, though a phone of w1 is still free,
    # waits, and says w1 is at capacity (one job started of the one it could).
    hosts = [
        host(1, "phone", worker="w1"),
        host(2, "phone", worker="w1"),
        host(3, "phone", worker="w1"),
    ]
    m = multi(1, ("dut", ["phone"], 2), minute=0)
    j2 = job(2, "phone", minute=1)
    result = run(hosts, [m, j2], workers={"w1": WorkerLoad(limit=2, running=1)})
    assert {a.job_id for a in result.assignments} == {1}
    assert result.wait_reasons[2].message.endswith("on worker w1 at capacity (2 of 2)")
    # Two one-host jobs on the same one slot: one starts.
    pair = run(hosts, [job(3, "phone"), job(4, "phone")], workers={"w1": WorkerLoad(limit=1)})
    assert len(pair.assignments) == 1


def test_a_multi_host_job_counts_once_on_each_worker_it_spans() -> None:
    # w1 and w2 may each start one more job, two phones each: M1 needs four and takes both
    # workers' slots, once each; with one slot in all it cannot start.
    hosts = [host(i, "phone", worker=f"w{(i + 1) // 2}") for i in range(1, 5)]
    m = multi(1, ("dut", ["phone"], 4))
    loads = {"w1": WorkerLoad(limit=1), "w2": WorkerLoad(limit=1)}
    assert len(run(hosts, [m], workers=loads).assignments) == 4
    short = {"w1": WorkerLoad(limit=1), "w2": WorkerLoad(limit=0)}
    assert run(hosts, [m], workers=short).assignments == ()


def test_a_one_host_job_moves_off_a_worker_so_a_multi_host_job_fits_there_whole() -> None:
    # w1 may start one more job and has two phones; dut3 has no worker. J1 (first) is kept on
    # h1 of w1; M2 needs two phones: J1 moves to dut3 and M2 takes w1's one slot for both.
    hosts = [
        host(1, "phone", worker="w1", hostname="a1"),
        host(2, "phone", worker="w1", hostname="a2"),
        host(3, "phone", hostname="dut3"),
    ]
    j1 = job(1, "phone", priority=70)
    m = multi(2, ("dut", ["phone"], 2))
    result = run(hosts, [j1, m], workers={"w1": WorkerLoad(limit=1)})
    assert set(result.assignments) == {
        Assignment(1, 3),
        Assignment(2, 1, "dut", 0),
        Assignment(2, 2, "dut", 1),
    }


# --- holds and backfill ------------------------------------------------------------------------


def starving_lab() -> tuple[list[HostState], JobState]:
    """Three board:eve hosts: two free, one running a job expected to end in 4 minutes; M1
    (priority 40, the oldest) needs all three."""
    hosts = [host(1, "board:eve"), host(2, "board:eve"), busy(3, "board:eve", minutes=4)]
    return hosts, multi(1, ("dut", [], 3), labels=("board:eve",), minute=0)


def test_the_issue_s_starvation_scenario_holds_the_free_hosts() -> None:
    # Without holds a stream of one-host jobs takes every host as it frees: M1 never finds
    # three free at once. With them, M1 holds the two free hosts and the 30-minute stream job
    # waits; when h3 frees, M1 starts.
    hosts, m = starving_lab()
    stream = sized(job(2, "board:eve", minute=5), 30)
    result = run(hosts, [m, stream])
    assert result.assignments == ()
    assert result.holds == {1: 1, 2: 1}
    reason = result.wait_reasons[1]
    assert reason.code == WaitCode.HOLDING_HOSTS
    assert reason.message == "Holding 2 of 3 hosts (board:eve); expected start in about 4 min"
    assert reason.details == {
        "held": 2,
        "needed": 3,
        "expected_start": (NOW + timedelta(minutes=4)).isoformat(),
        "held_by_role": {"dut": 2},
    }
    assert result.class_reasons["job=1"] == reason
    kept_off = result.wait_reasons[2]
    assert kept_off.code == WaitCode.OUTRANKED
    assert kept_off.message == (
        "2 free hosts are held for job 1, which needs 3 hosts together (expected start in "
        "about 4 min); the other one is busy running a priority 40 job"
    )
    assert kept_off.details["held_for"] == 1
    # The next tick, h3 freed: M1 takes all three.
    freed = [*hosts[:2], host(3, "board:eve")]
    after = run(freed, [m, stream])
    assert sorted(leases_of(after, 1)) == [1, 2, 3]
    assert after.holds == {}


def test_a_short_job_backfills_a_held_host_and_a_long_one_does_not() -> None:
    hosts, m = starving_lab()
    short = sized(job(2, "board:eve", minute=5), 3)  # ends before M1's expected start
    long = sized(job(3, "board:eve", minute=6), 10)
    result = run(hosts, [m, short, long])
    assert leases(result) == {2: 1}
    assert result.holds == {2: 1}
    assert result.wait_reasons[1].message == (
        "Holding 1 of 3 hosts (board:eve); expected start in about 4 min"
    )
    assert result.wait_reasons[3].code == WaitCode.OUTRANKED
    assert "1 is held for job 1" in result.wait_reasons[3].message


def test_a_holder_whose_every_held_host_was_backfilled_says_it_still_holds_its_place() -> None:
    # h1 free, h2 busy for 4 more minutes; M1 needs both and holds h1; a 1-minute job takes h1
    # by backfill. M1 is still the holder: it says so, not that a host that fits is free.
    hosts = [host(1, "board:eve"), busy(2, "board:eve", minutes=4)]
    m = multi(1, ("dut", [], 2), labels=("board:eve",), minute=0)
    short = sized(job(2, "board:eve", minute=5), 1)
    result = run(hosts, [m, short])
    assert leases(result) == {2: 1} and result.holds == {}
    reason = result.wait_reasons[1]
    assert reason.code == WaitCode.HOLDING_HOSTS
    assert reason.message == (
        "Holding none of its 2 hosts (board:eve) for now: the hosts it held went to shorter "
        "jobs that end before it can start; expected start in about 4 min"
    )
    assert "free" not in reason.message
    assert reason.details["held"] == 0
    assert result.class_reasons["job=1"] == reason


def test_a_job_with_no_estimate_backfills_by_the_default_duration() -> None:
    hosts, m = starving_lab()
    unknown = job(2, "board:eve", minute=5)  # size_s None: policy.default_duration_s
    assert leases(run(hosts, [m, unknown], policy=Policy(default_duration_s=120))) == {2: 1}
    assert leases(run(hosts, [m, unknown], policy=Policy(default_duration_s=600))) == {}


def test_a_higher_ranked_job_is_no_backfill_it_takes_its_host() -> None:
    hosts, m = starving_lab()
    hosts.append(busy(4, "board:eve", minutes=10))
    urgent = sized(job(2, "board:eve", priority=70), 60)
    result = run(hosts, [m, urgent])
    assert leases(result) == {2: 1}
    assert result.holds == {2: 1}  # M1 holds what is left, and waits for h3 and h4
    assert result.wait_reasons[1].message == (
        "Holding 1 of 3 hosts (board:eve); expected start in about 10 min"
    )


def test_the_expected_start_is_the_kth_busy_end() -> None:
    # M1 needs four: one free, three busy ending in 2, 9 and 30 minutes; it misses three, so
    # it expects to start when the third ends.
    hosts = [
        host(1, "x"),
        busy(2, "x", minutes=9),
        busy(3, "x", minutes=30),
        busy(4, "x", minutes=2),
    ]
    m = multi(1, ("dut", ["x"], 4))
    reason = run(hosts, [m]).wait_reasons[1]
    assert reason.details["expected_start"] == (NOW + timedelta(minutes=30)).isoformat()
    assert reason.message == "Holding 1 of 4 hosts (x); expected start in about 30 min"


def test_no_hold_when_busy_hosts_cannot_complete_the_job() -> None:
    # The third bt host is reserved by hand (no expected end) and a fourth is locked while it
    # runs: M1 could never start from what frees up, so it holds nothing and the stream runs.
    hosts = [
        host(1, "bt"),
        host(2, "bt"),
        host(3, "bt", leased=True),
        replace(busy(4, "bt", minutes=5), locked=True),
    ]
    m = multi(1, ("dut", ["bt"], 3))
    result = run(hosts, [m, sized(job(2, "bt"), 60)])
    assert result.holds == {}
    assert leases(result) == {2: 1}


def test_only_the_highest_ranked_waiting_multi_host_job_holds() -> None:
    hosts = [host(1, "a"), host(2, "b"), busy(3, "a", minutes=5), busy(4, "b", minutes=5)]
    m1 = multi(1, ("dut", ["a"], 2), priority=70)
    m2 = multi(2, ("dut", ["b"], 2), priority=60)
    result = run(hosts, [m1, m2, sized(job(3, "b"), 60)])
    assert result.holds == {1: 1}
    assert leases(result) == {3: 2}
    assert result.wait_reasons[2].code != WaitCode.HOLDING_HOSTS


def test_overdue_busy_hosts_start_the_hold_now_and_nothing_backfills() -> None:
    hosts = [host(1, "x"), busy(2, "x", minutes=-5)]
    m = multi(1, ("dut", ["x"], 2))
    result = run(hosts, [m, sized(job(2, "x"), 1)])
    assert result.holds == {1: 1}
    assert result.assignments == ()
    reason = result.wait_reasons[1]
    assert reason.details["expected_start"] == NOW.isoformat()
    assert reason.message == (
        "Holding 1 of 2 hosts (x); expected start now: the hosts it waits for are past their "
        "expected end"
    )


def test_a_refused_backfill_stays_refused_as_time_passes() -> None:
    hosts, m = starving_lab()
    long = sized(job(2, "board:eve", minute=5), 10)
    for minutes in (0, 1, 3, 10):
        later = plan(hosts=hosts, jobs=[m, long], suites=[], now=NOW + timedelta(minutes=minutes))
        assert later.assignments == ()
        assert later.holds == {1: 1, 2: 1}


def test_a_held_host_on_a_capped_worker_is_said_held_not_kept_by_the_capacity() -> None:
    # docs/scheduling.md#holds-and-backfill: M1 needs four 'a' hosts; h1 (no worker) and h2, h3
    # (w2, one job at a time) are free, h4 and h5 busy. M1 holds h1 and h2, and its hold takes
    # w2's one slot, so h3 is kept from work by the capacity. The others waiting are told the
    # free hosts are held, not that the held h2 is "on worker w2 at capacity", and a two-host
    # job is told its hosts went ahead or are held (they were free at the start of the tick).
    hosts = [
        host(1, "a"),
        host(2, "a", worker="w2"),
        host(3, "a", worker="w2"),
        busy(4, "a", minutes=-1),
        busy(5, "a", minutes=-1),
    ]
    holder = multi(100, ("dut", ["a"], 4), priority=70)
    one = job(101, priority=40)
    pair = multi(1, ("r0", [], 1), ("r1", [], 1), priority=30)
    result = run(hosts, [holder, one, pair], workers={"w2": WorkerLoad(limit=1, running=0)})

    assert result.assignments == ()
    assert result.holds == {1: 100, 2: 100}
    one_why = result.wait_reasons[101]
    assert one_why.message.startswith("2 free hosts are held for job 100")
    assert one_why.message.endswith(
        "of the other 3, 2 busy running priority ≤ 40 jobs, 1 on worker w2 at capacity (1 of 1)"
    )
    assert (one_why.details["held"], one_why.details["at_capacity"]) == (2, 1)
    pair_why = result.wait_reasons[1]
    assert pair_why.code == WaitCode.OUTRANKED
    assert "held for job 100" in pair_why.message
