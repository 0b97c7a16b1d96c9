"""The multi-host benchmark on tiny labs: its report, and holds and backfill doing their job."""

from __future__ import annotations

from bench.multihost import KINDS, MODES, Arrival, Shape, bound_min, goals, run_seed, simulate

# 4 hosts. At 0 four lower one-host jobs take them, ending at 10, 20, 30 and 40 min; at 1 min a
# 4-host job of higher priority arrives, and from then on every minute a long (40 min) and a
# short (2 min) lower job, more than the lab can run. The hosts free up one at a time, and a
# freed host is taken again at once unless something keeps it: without holds the 4-host job
# never finds its four hosts free together. With holds it holds each freed host and starts
# at 40 min, when the last one frees; with backfill the short jobs (ending by 40 min) use the
# held hosts meanwhile, the long ones (ending after it) may not.
FOUR = Shape(hosts=4, workers=2, hours=2, drain_minutes=10)
END_S = 130 * 60


def four_host_starvation() -> list[Arrival]:
    first = [Arrival(0, "1-host lower", 30, 1, minutes * 60) for minutes in (10, 20, 30, 40)]
    multi = [Arrival(60, "4-host", 50, 4, 10 * 60)]
    stream = [
        Arrival(60 * m, "1-host lower", 30, 1, size)
        for m in range(1, END_S // 60)
        for size in (40 * 60, 2 * 60)
    ]
    return first + multi + stream


def run(mode: str) -> dict:
    return simulate(FOUR, mode=mode, arrivals=four_host_starvation(), end_s=END_S)


def test_without_holds_the_four_host_job_starves():
    report = run("no holds")
    four = report["by_kind"]["4-host"]
    assert four["started"] == 0 and four["waiting_at_end"] == 1
    assert four["longest_wait_min"] > bound_min(four_host_starvation())  # 129 > 80
    assert report["held_idle_host_s"] == 0
    assert report["hosts_passing_multi"] > 0  # lower jobs took every host it waited for
    # Nothing was held, so nothing idled: the lower jobs had every host all the time.
    assert report["idle_host_s"] == 0 and report["busy_share"] == 1.0


def test_holds_start_it_when_its_last_host_frees_and_idle_the_held_ones():
    report = run("holds, no backfill")
    four = report["by_kind"]["4-host"]
    assert four["started"] == 1
    assert four["wait_max_min"] == 39.0  # arrived at 1 min, started at 40
    # Held idle: the first host from 10 to 40 min, the second from 20, the third from 30.
    assert report["held_idle_host_s"] == (30 + 20 + 10) * 60
    assert report["hosts_passing_multi"] == 0


def test_backfill_fills_the_held_hosts_with_jobs_that_end_before_the_start():
    held = run("holds, no backfill")
    report = run("holds + backfill")
    four = report["by_kind"]["4-host"]
    assert four["started"] == 1
    assert four["wait_max_min"] == 39.0  # backfill does not delay the holder
    # Every held host ran 2-min jobs back to back: the first host 15 of them from 10 to 40 min,
    # the second 10 from 20, the third 5 from 30; none of the 40-min jobs got one.
    assert report["hosts_passing_multi"] == 15 + 10 + 5
    assert report["held_idle_host_s"] == 0
    assert report["held_idle_host_s"] * 2 <= held["held_idle_host_s"]
    result = goals({mode: run(mode) for mode in MODES}, bound=80.0)
    assert result["multi_within_bound[no holds]"] is False
    assert result["multi_within_bound[holds, no backfill]"] is True
    assert result["multi_within_bound[holds + backfill]"] is True
    assert result["backfill_halves_idle"] is True


# A small random lab: the report's shape, under every mode (a second or two).
SMALL = Shape(
    hosts=10,
    workers=2,
    hours=1,
    drain_minutes=60,
    equal_per_minute=0.45,
    lower_per_minute=0.65,
    two_host_every_minutes=10,
    four_host_every_minutes=20,
)
FIGURES = {
    "arrived",
    "started",
    "waiting_at_end",
    "wait_p50_min",
    "wait_p95_min",
    "wait_max_min",
    "longest_wait_min",
}


def test_a_small_run_reports_waits_per_kind_and_idle_per_mode():
    seed = run_seed(SMALL, 1, list(MODES))
    assert set(seed["runs"]) == set(MODES)
    assert 40 < seed["goals"]["bound_min"] <= 60  # twice the longest job, at most 30 min
    end_min = SMALL.hours * 60 + SMALL.drain_minutes
    for mode, report in seed["runs"].items():
        assert report["mode"] == mode and report["ticks"] > 0
        assert set(report["by_kind"]) == set(KINDS)
        assert 0.5 < report["busy_share"] <= 1.0
        assert 0 <= report["held_idle_host_s"] <= report["idle_host_s"]
        for figures in report["by_kind"].values():
            assert set(figures) == FIGURES
            assert figures["started"] + figures["waiting_at_end"] == figures["arrived"] > 0
            if figures["started"]:
                p50, p95, top = (
                    figures[k] for k in ("wait_p50_min", "wait_p95_min", "wait_max_min")
                )
                assert 0 <= p50 <= p95 <= top <= figures["longest_wait_min"] <= end_min
    assert seed["runs"]["no holds"]["held_idle_host_s"] == 0
    # Backfill misses nothing: no held host idles while a job that would end in time waits.
    assert seed["runs"]["holds + backfill"]["ticks_holding"] > 0
    assert seed["runs"]["holds + backfill"]["missed_backfill_ticks"] == 0
