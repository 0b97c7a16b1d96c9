"""The planner on small labs whose right answer a lab engineer can check by hand."""

from __future__ import annotations

from jobs.scheduling.planner import class_key, consideration_order, plan, quota_candidates
from tests.scheduler.lab import (
    host,
    hosts_that_are,
    job,
    leased_per_suite,
    leases,
    suite,
    suite_jobs,
)

# --- matching --------------------------------------------------------------------------------


def test_it_leases_the_host_that_carries_all_the_labels() -> None:
    hosts = [host(1, "board:x", "pool:bvt"), host(2, "board:y", "pool:bvt")]
    result = plan(hosts=hosts, jobs=[job(1, "board:x", "pool:bvt")], suites=[])
    assert leases(result) == {1: 1}
    assert result.wait_reasons == {}


def test_it_moves_an_earlier_job_to_make_room_for_a_later_one() -> None:
    # Greedy first-fit gives J1 h1 and leaves J2 waiting; the matching leases both.
    hosts = [host(1, "board:x", "bt"), host(2, "board:x")]
    jobs = [job(1, "board:x", priority=70), job(2, "board:x", "bt", priority=40)]
    result = plan(hosts=hosts, jobs=jobs, suites=[])
    assert leases(result) == {1: 2, 2: 1}


def test_it_moves_jobs_along_a_chain_of_hosts() -> None:
    # J1 sits on h1 and J2 on h2; J3 fits only h1, so J1 moves to h2 and J2 moves to h3.
    hosts = [host(1, "a", "b"), host(2, "b", "c"), host(3, "c", "d")]
    jobs = [job(1, "b", priority=70), job(2, "c", priority=60), job(3, "a", priority=50)]
    result = plan(hosts=hosts, jobs=jobs, suites=[])
    assert leases(result) == {1: 2, 2: 3, 3: 1}


def test_it_never_drops_an_earlier_job_for_a_later_one() -> None:
    hosts = [host(1, "a", "b")]
    jobs = [job(1, "a", priority=70), job(2, "a", "b", priority=40)]
    result = plan(hosts=hosts, jobs=jobs, suites=[])
    assert leases(result) == {1: 1}
    assert result.wait_reasons[2].code == "outranked"


def test_a_locked_host_is_not_leased_and_the_waiting_job_is_told_about_the_lock() -> None:
    hosts = [host(1, "board:x", locked=True, lock_reason="flashing"), host(2, "board:x")]
    jobs = [job(1, "board:x"), job(2, "board:x")]
    result = plan(hosts=hosts, jobs=jobs, suites=[])
    assert leases(result) == {1: 2}
    reason = result.wait_reasons[2]
    assert reason.code == "outranked"
    assert reason.message == (
        "1 free host went to a job ahead of it in the queue; the other one is locked"
    )
    assert reason.details["locked"] == 1


def test_the_higher_priority_job_gets_the_only_host() -> None:
    result = plan(hosts=[host(1)], jobs=[job(1, priority=40), job(2, priority=70)], suites=[])
    assert leases(result) == {2: 1}


def test_equal_priorities_go_by_submission_time_then_id() -> None:
    jobs = [job(1, minute=5), job(2, minute=1), job(3, minute=1)]
    result = plan(hosts=[host(1)], jobs=jobs, suites=[])
    assert leases(result) == {2: 1}
    result = plan(hosts=[host(1)], jobs=[jobs[0], jobs[2]], suites=[])
    assert leases(result) == {3: 1}


def test_unschedulable_hosts_of_every_kind_are_never_leased() -> None:
    hosts = [
        *hosts_that_are("locked", "on a paused worker", "on an offline worker", "not ready"),
        host(5, leased=True, lease_priority=30),
        host(6, leased=True),
    ]
    result = plan(hosts=hosts, jobs=[job(1, priority=80)], suites=[])
    assert result.assignments == ()
    assert result.wait_reasons[1].code == "hosts_unavailable"


# --- minimum DUTs (the Autotest scenarios) ---------------------------------------------------


def _two_suites() -> tuple[list, list]:
    sa = suite(1, "SA", priority=50, min_duts=2)
    sb = suite(2, "SB", priority=30, min_duts=5, minute=1)
    return [sa, sb], suite_jobs(1, 4, sa, "board:x") + suite_jobs(11, 7, sb, "board:x")


def test_with_four_hosts_each_suite_gets_part_of_its_minimum() -> None:
    suites, jobs = _two_suites()
    result = plan(hosts=[host(i, "board:x") for i in range(1, 5)], jobs=jobs, suites=suites)
    assert leased_per_suite(result, jobs) == {1: 2, 2: 2}


def test_with_seven_hosts_each_suite_gets_its_minimum() -> None:
    suites, jobs = _two_suites()
    result = plan(hosts=[host(i, "board:x") for i in range(1, 8)], jobs=jobs, suites=suites)
    assert leased_per_suite(result, jobs) == {1: 2, 2: 5}


def test_the_quota_goes_before_higher_priority_jobs() -> None:
    weekly = suite(1, "weekly", priority=10, min_duts=1)
    cq = suite(2, "cq", priority=70, minute=1)
    jobs = [job(1, of=weekly), job(2, of=cq), job(3, of=cq)]
    result = plan(hosts=[host(1), host(2)], jobs=jobs, suites=[weekly, cq])
    assert set(leases(result)) == {1, 2}


def test_the_quota_goes_to_the_older_suite_first_at_equal_priority() -> None:
    newer = suite(1, "newer", priority=40, min_duts=2, minute=5)
    older = suite(2, "older", priority=40, min_duts=2, minute=1)
    jobs = suite_jobs(1, 2, newer) + suite_jobs(11, 2, older)
    result = plan(hosts=[host(1), host(2)], jobs=jobs, suites=[newer, older])
    assert leased_per_suite(result, jobs) == {2: 2}


def test_an_unsatisfiable_job_does_not_use_up_the_quota() -> None:
    # If J1 (no host has bt) counted against SA's minimum, SA would get one host and the cq
    # job the other.
    sa = suite(1, "SA", priority=30, min_duts=2)
    cq = suite(2, "cq", priority=70, minute=1)
    jobs = [job(1, "bt", of=sa), job(2, "board:x", of=sa), job(3, "board:x", of=sa)]
    jobs.append(job(4, "board:x", of=cq))
    result = plan(hosts=[host(1, "board:x"), host(2, "board:x")], jobs=jobs, suites=[sa, cq])
    assert set(leases(result)) == {2, 3}
    assert result.wait_reasons[1].code == "no_matching_host"
    assert result.wait_reasons[4].code == "outranked"


def test_hosts_already_held_count_towards_the_minimum() -> None:
    sa = suite(1, "SA", priority=30, min_duts=2, held=1)
    cq = suite(2, "cq", priority=70, minute=1)
    jobs = suite_jobs(1, 3, sa) + suite_jobs(11, 2, cq)
    result = plan(hosts=[host(1), host(2)], jobs=jobs, suites=[sa, cq])
    assert leased_per_suite(result, jobs) == {1: 1, 2: 1}


def test_the_quota_stops_at_max_duts() -> None:
    sa = suite(1, "SA", priority=30, min_duts=3, max_duts=2)
    cq = suite(2, "cq", priority=70, minute=1)
    jobs = suite_jobs(1, 3, sa) + suite_jobs(11, 2, cq)
    result = plan(hosts=[host(i) for i in range(1, 5)], jobs=jobs, suites=[sa, cq])
    assert leased_per_suite(result, jobs) == {1: 2, 2: 2}


# --- max DUTs --------------------------------------------------------------------------------


def test_a_suite_gets_no_more_than_max_duts() -> None:
    sa = suite(1, "SA", priority=70, max_duts=2)
    sb = suite(2, "SB", priority=30, minute=1)
    jobs = suite_jobs(1, 4, sa) + suite_jobs(11, 2, sb)
    result = plan(hosts=[host(i) for i in range(1, 6)], jobs=jobs, suites=[sa, sb])
    assert leased_per_suite(result, jobs) == {1: 2, 2: 2}
    reason = result.wait_reasons[3]
    assert reason.code == "suite_at_max_duts"
    assert reason.message == "Suite SA holds 2 of max 2 hosts"
    assert reason.details["held"] == 2
    assert result.wait_reasons[4] is reason


def test_hosts_already_held_count_towards_max_duts() -> None:
    sa = suite(1, "SA", max_duts=3, held=2)
    jobs = suite_jobs(1, 3, sa)
    result = plan(hosts=[host(i) for i in range(1, 5)], jobs=jobs, suites=[sa])
    assert leases(result).keys() == {1}
    assert result.wait_reasons[2].message == "Suite SA holds 3 of max 3 hosts"


def test_a_kept_job_stays_kept_even_when_a_suite_cap_then_costs_a_lease() -> None:
    # The tick keeps each job that fits with the jobs kept before it. J2 fits (J1 moves to h2)
    # and fills SA's cap, so J3 is refused by the cap and J4 finds no host: two leases where a
    # first-fit greedy (J1 h1, J3 h3, J4 h2) makes three. The order wins over the count.
    sa = suite(1, "SA", priority=40, max_duts=1)
    jobs = [job(1, "a", priority=70), job(2, "c", of=sa), job(3, "d", of=sa)]
    jobs.append(job(4, "a", priority=30))
    hosts = [host(1, "a", "c"), host(2, "a"), host(3, "d")]
    result = plan(hosts=hosts, jobs=jobs, suites=[sa])
    assert leases(result) == {1: 2, 2: 1}
    assert result.wait_reasons[3].code == "suite_at_max_duts"
    assert result.wait_reasons[4].code == "outranked"


# --- pinned jobs -----------------------------------------------------------------------------


def test_a_pinned_job_waits_its_turn_by_priority() -> None:
    jobs = [job(1, "board:x", priority=40, pinned=1), job(2, "board:x", priority=70)]
    result = plan(hosts=[host(1, "board:x")], jobs=jobs, suites=[])
    assert leases(result) == {2: 1}
    reason = result.wait_reasons[1]
    assert reason.code == "outranked"
    assert reason.message == "Its pinned host h1 went to a job ahead of it in the queue"


def test_a_pinned_job_gets_its_host_when_an_earlier_job_can_use_another() -> None:
    jobs = [job(1, "board:x", priority=70), job(2, priority=40, pinned=1)]
    result = plan(hosts=[host(1, "board:x"), host(2, "board:x")], jobs=jobs, suites=[])
    assert leases(result) == {1: 2, 2: 1}


def test_a_pinned_job_only_ever_gets_its_pinned_host() -> None:
    jobs = [job(1, pinned=2)]
    result = plan(hosts=[host(1), host(2, locked=True)], jobs=jobs, suites=[])
    assert result.assignments == ()
    assert result.wait_reasons[1].code == "pinned_host_locked"


def test_two_jobs_pinned_to_one_host_get_it_one_at_a_time() -> None:
    jobs = [job(1, pinned=1, priority=30), job(2, pinned=1, priority=60)]
    result = plan(hosts=[host(1), host(2)], jobs=jobs, suites=[])
    assert leases(result) == {2: 1}
    assert result.wait_reasons[1].code == "outranked"


# --- host preference -------------------------------------------------------------------------


def test_it_prefers_a_host_already_on_the_suites_build() -> None:
    sa = suite(1, "SA", build="R2")
    hosts = [host(1, "board:x", current_build="R1"), host(2, "board:x", current_build="R2")]
    result = plan(hosts=hosts, jobs=[job(1, "board:x", of=sa)], suites=[sa])
    assert leases(result) == {1: 2}


def test_build_affinity_comes_before_fewer_labels() -> None:
    sa = suite(1, "SA", build="R2")
    hosts = [host(1, "board:x", "bt", current_build="R2"), host(2, "board:x", current_build="R1")]
    result = plan(hosts=hosts, jobs=[job(1, "board:x", of=sa)], suites=[sa])
    assert leases(result) == {1: 1}


def test_build_affinity_never_costs_a_lease() -> None:
    sa = suite(1, "SA", build="R2", priority=70)
    hosts = [host(1, "board:x", "bt", current_build="R2"), host(2, "board:x", current_build="R1")]
    jobs = [job(1, "board:x", of=sa), job(2, "board:x", "bt", priority=30)]
    result = plan(hosts=hosts, jobs=jobs, suites=[sa])
    assert leases(result) == {1: 2, 2: 1}


def test_it_prefers_the_host_with_fewer_labels_to_keep_rare_hosts_free() -> None:
    hosts = [host(1, "board:x", "bt"), host(2, "board:x")]
    result = plan(hosts=hosts, jobs=[job(1, "board:x")], suites=[])
    assert leases(result) == {1: 2}


def test_among_equal_hosts_it_takes_the_lowest_hostname() -> None:
    hosts = [host(1, "board:x", hostname="zeta"), host(2, "board:x", hostname="alpha")]
    hosts.append(host(3, "board:x", hostname="mu"))
    result = plan(hosts=hosts, jobs=[job(1, "board:x"), job(2, "board:x")], suites=[])
    assert leases(result) == {1: 2, 2: 3}


# --- why it waits ----------------------------------------------------------------------------


def _reason(hosts: list, waiting_job: object, suites: list | None = None) -> object:
    result = plan(hosts=hosts, jobs=[waiting_job], suites=suites or [])
    assert result.assignments == ()
    return result.wait_reasons[waiting_job.id]  # type: ignore[attr-defined]


def test_reason_names_the_label_no_host_has() -> None:
    reason = _reason([host(1, "board:x")], job(1, "board:x", "bt"))
    assert reason.code == "no_matching_host"
    assert reason.message == "No host has label bt"
    assert reason.details["missing_labels"] == ["bt"]


def test_reason_says_when_no_host_has_the_labels_together() -> None:
    reason = _reason([host(1, "board:x"), host(2, "bt", locked=True)], job(1, "board:x", "bt"))
    assert reason.code == "no_matching_host"
    assert reason.message == "No host has all of board:x, bt together"


def test_reason_counts_busy_and_locked_matching_hosts() -> None:
    hosts = [
        host(1, "board:x", leased=True, lease_priority=70),
        host(2, "board:x", "bt", leased=True, lease_priority=40),
        host(3, "board:x", locked=True),
        host(4, "board:y"),
    ]
    reason = _reason(hosts, job(1, "board:x", priority=80))
    assert reason.code == "hosts_unavailable"
    assert (
        reason.message
        == "None of the 3 hosts that fit is free: 2 busy running priority ≤ 70 jobs, 1 locked"
    )
    assert reason.details["busy"] == 2
    assert reason.details["max_running_priority"] == 70


def test_reason_says_the_priority_busy_hosts_run_not_a_locked_one() -> None:
    hosts = [
        host(1, "board:x", leased=True, lease_priority=70),
        host(2, "board:x", locked=True, leased=True, lease_priority=90),  # locked mid-run
    ]
    reason = _reason(hosts, job(1, "board:x", priority=80))
    assert reason.message == (
        "None of the 2 hosts that fit is free: 1 busy running a priority 70 job, 1 locked"
    )
    assert reason.details["max_running_priority"] == 70


def test_reason_counts_reserved_paused_offline_and_not_ready_hosts() -> None:
    offline = "on an offline worker"
    hosts = hosts_that_are("reserved", "on a paused worker", offline, offline, "not ready")
    reason = _reason(hosts, job(1))
    assert reason.code == "hosts_unavailable"
    assert reason.message == (
        "None of the 5 hosts that fit is free: 1 reserved by hand, 1 on a paused worker, "
        "2 on an offline worker, 1 not ready (being checked or repaired)"
    )


def test_reason_counts_the_hosts_that_went_to_jobs_ahead() -> None:
    hosts = [host(1), host(2), host(3, leased=True, lease_priority=70)]
    jobs = [job(1, priority=70), job(2, priority=60), job(3, priority=50)]
    result = plan(hosts=hosts, jobs=jobs, suites=[])
    reason = result.wait_reasons[3]
    assert reason.code == "outranked"
    assert reason.message == (
        "2 free hosts went to 2 jobs ahead of it in the queue; "
        "the other one is busy running a priority 70 job"
    )
    assert reason.details["outranked_by"] == 2


def test_reason_for_a_missing_pinned_host() -> None:
    reason = _reason([host(1)], job(1, pinned=99))
    assert (reason.code, reason.message) == (
        "pinned_host_missing",
        "Pinned host #99 does not exist",
    )


def test_reason_names_the_labels_the_pinned_host_lacks() -> None:
    reason = _reason([host(1, "board:x")], job(1, "board:x", "bt", "servo", pinned=1))
    assert reason.code == "pinned_host_lacks_labels"
    assert reason.message == "Pinned host h1 lacks labels bt, servo"


def test_reason_for_a_pinned_host_in_each_unusable_state() -> None:
    cases = {
        "pinned_host_busy": (
            dict(leased=True, lease_priority=70),
            "is busy (running a priority 70 job)",
        ),
        "pinned_host_locked": (dict(locked=True, lock_reason="flashing"), "is locked: flashing"),
        "pinned_host_paused": (dict(worker_paused=True), "is on a paused worker"),
        "pinned_host_offline": (dict(worker_offline=True), "is on an offline worker"),
        "pinned_host_not_ready": (dict(ready=False), "is not ready (being checked or repaired)"),
    }
    for code, (state, words) in cases.items():
        reason = _reason([host(1, **state), host(2)], job(1, pinned=1))
        assert (reason.code, reason.message) == (code, f"Pinned host h1 {words}")


def test_reason_for_a_pinned_host_reserved_by_hand() -> None:
    reason = _reason([host(1, leased=True)], job(1, pinned=1))
    assert reason.message == "Pinned host h1 is busy (reserved by hand)"


def test_waiting_jobs_of_one_class_share_one_reason_stored_under_their_class_key() -> None:
    sa = suite(1, "SA")
    jobs = suite_jobs(1, 5, sa, "board:x") + [job(11, "board:x")]
    result = plan(hosts=[host(1, "board:x")], jobs=jobs, suites=[sa])
    waiting = [j for j in jobs if j.id not in leases(result)]
    assert len(waiting) == 5
    for waiting_job in waiting:
        assert result.class_reasons[class_key(waiting_job)] is result.wait_reasons[waiting_job.id]
    assert result.wait_reasons[2] is result.wait_reasons[5]
    assert class_key(jobs[1]) != class_key(jobs[-1])  # standalone job: another class


def test_class_key_is_stable_and_ignores_label_order() -> None:
    sa = suite(7, "SA")
    assert class_key(job(1, "pool:bvt", "board:x", of=sa, pinned=3)) == (
        '["board:x","pool:bvt"]|pin=3|suite=7'
    )
    assert class_key(job(2, "board:x", "pool:bvt", of=sa, pinned=3)) == class_key(
        job(1, "pool:bvt", "board:x", of=sa, pinned=3)
    )


# --- the queue page order --------------------------------------------------------------------


def test_consideration_order_lists_quota_candidates_then_the_main_order() -> None:
    sa = suite(1, "SA", priority=50, min_duts=2)
    sb = suite(2, "SB", priority=30, min_duts=5, max_duts=3, held=1, minute=1)
    sc = suite(3, "SC", priority=80, minute=2)
    jobs = suite_jobs(1, 4, sa) + suite_jobs(11, 4, sb) + [job(21, of=sc), job(31, priority=70)]
    order = consideration_order(jobs=list(reversed(jobs)), suites=[sc, sb, sa])
    # SA's first two; SB's min(5, 3) - 1 = 2; then by priority: SC, standalone, SA, SB.
    assert order == [1, 2, 11, 12, 21, 31, 3, 4, 13, 14]


def test_quota_candidates_are_the_jobs_each_short_suite_tries_first() -> None:
    sa = suite(1, "SA", priority=50, min_duts=2)
    sb = suite(2, "SB", priority=30, min_duts=5, max_duts=3, held=1, minute=1)
    full = suite(3, "SC", priority=80, min_duts=1, held=1, minute=2)  # quota already met
    jobs = suite_jobs(1, 4, sa) + suite_jobs(11, 4, sb) + suite_jobs(21, 2, full)
    quota = quota_candidates(jobs=list(reversed(jobs)), suites=[full, sb, sa])
    # SA wants 2; SB wants min(5, 3) - 1 = 2; SC holds its minimum already.
    assert quota == [1, 2, 11, 12]
    assert consideration_order(jobs=jobs, suites=[full, sb, sa])[:4] == quota
