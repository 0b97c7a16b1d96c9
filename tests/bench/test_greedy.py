"""The planner against the Autotest-style greedy baseline, on generated labs (no database)."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from bench import planner as planner_bench
from bench.greedy import by_fewest_labels, by_hostname, greedy
from bench.labgen import LabShape, generate
from jobs.scheduling.planner import plan
from tests.scheduler.lab import host, job, suite

# Small heterogeneous labs: few hosts per class, so that where a job goes matters.
SMALL = [LabShape(60, 80, 6, 24, seed=seed, hetero=0.8) for seed in range(60)]


def leased(lab_hosts, lab_jobs, lab_suites) -> tuple[int, int]:  # noqa: ANN001
    """Return (planner leases, greedy leases) on the same input."""
    ours = len(plan(hosts=lab_hosts, jobs=lab_jobs, suites=lab_suites).assignments)
    theirs = len(greedy(hosts=lab_hosts, jobs=lab_jobs, suites=lab_suites))
    return ours, theirs


def test_the_same_seed_gives_the_same_lab_and_another_seed_another() -> None:
    shape = LabShape(200, 500, 10, 24, seed=7, capped=0.3)
    first, again = generate(shape), generate(shape)
    assert (first.hosts, first.jobs, first.suites) == (again.hosts, again.jobs, again.suites)
    other = generate(replace(shape, seed=8))
    assert other.hosts != first.hosts


def test_a_generated_lab_has_the_sizes_and_mix_asked_for() -> None:
    lab = generate(LabShape(1000, 5000, 40, 40, seed=1, pinned=0.05, capped=0.5))
    assert (len(lab.hosts), len(lab.jobs), len(lab.suites), len(lab.label_sets)) == (
        1000,
        5000,
        40,
        40,
    )
    assert len({h.hostname for h in lab.hosts}) == 1000
    assert [j.id for j in lab.jobs] == list(range(1, 5001))
    assert all(any(lbl.startswith("board:") for lbl in h.labels) for h in lab.hosts)
    # Both kinds of need: (board, pool) only, and more than that.
    sizes = {len(ls) for ls in lab.label_sets}
    assert 2 in sizes and max(sizes) > 2
    assert 0 < sum(j.pinned_host_id is not None for j in lab.jobs) < 5000
    assert any(s.max_duts is not None for s in lab.suites)
    assert any(s.min_duts for s in lab.suites)
    assert any(j.suite_id is None for j in lab.jobs)


def test_greedy_strands_the_job_of_spec_4_that_the_planner_leases() -> None:
    hosts = [host(1, "board:x", "bt"), host(2, "board:x")]
    jobs = [job(1, "board:x", priority=70), job(2, "board:x", "bt", priority=40)]
    assert leased(hosts, jobs, []) == (2, 1)


def test_greedy_takes_jobs_in_the_planner_order_with_quotas_and_caps() -> None:
    sa = suite(1, "SA", priority=70, max_duts=1)
    sb = suite(2, "SB", priority=30, min_duts=1)
    jobs = [job(1, "board:x", of=sa), job(2, "board:x", of=sa), job(3, "board:x", of=sb)]
    result = greedy(hosts=[host(1, "board:x"), host(2, "board:x")], jobs=jobs, suites=[sa, sb])
    # SB's quota first, then SA's first job; SA's cap stops its second.
    assert [(a.job_id, a.host_id) for a in result] == [(3, 1), (1, 2)]


@pytest.mark.parametrize("order", [by_hostname, by_fewest_labels], ids=["hostname", "labels"])
def test_on_labs_without_caps_the_planner_never_leases_fewer_than_greedy(order) -> None:  # noqa: ANN001
    for shape in SMALL:
        lab = generate(shape)
        assert not any(s.max_duts for s in lab.suites)
        ours = len(plan(hosts=lab.hosts, jobs=lab.jobs, suites=lab.suites).assignments)
        theirs = len(greedy(hosts=lab.hosts, jobs=lab.jobs, suites=lab.suites, order=order))
        assert ours >= theirs, f"seed {shape.seed}: planner {ours} < greedy {theirs}"


def test_on_some_heterogeneous_lab_the_planner_leases_strictly_more() -> None:
    gaps = [leased(lab.hosts, lab.jobs, lab.suites) for lab in map(generate, SMALL)]
    assert any(ours > theirs for ours, theirs in gaps)


def test_with_caps_the_planner_can_lease_fewer_and_that_is_the_ordered_rule() -> None:
    # The tick keeps every job that fits with those kept before it, even when a suite's cap
    # then refuses a later job greedy would have placed (tests/scheduler has the proof).
    sa = suite(1, "SA", priority=40, max_duts=1)
    jobs = [job(1, "a", priority=70), job(2, "c", of=sa), job(3, "d", of=sa)]
    jobs.append(job(4, "a", priority=30))
    hosts = [host(1, "a", "c"), host(2, "a"), host(3, "d")]
    assert leased(hosts, jobs, [sa]) == (2, 3)


def test_the_planner_benchmark_prints_one_json_line(capsys) -> None:  # noqa: ANN001
    planner_bench.main(
        ["--hosts", "50", "--jobs", "200", "--suites", "5", "--label-sets", "8", "--repeat", "1"]
    )
    line = capsys.readouterr().out.strip()
    assert "\n" not in line
    result = json.loads(line)
    assert {"plan_ms", "leased", "greedy_ms", "greedy_leased"} <= set(result)
    assert result["leased"] >= result["greedy_leased"]
