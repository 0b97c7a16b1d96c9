"""Planner benchmark: plan() and the greedy baseline on one generated lab, no database."""

from __future__ import annotations

import argparse
import gc
import json
import random
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import timedelta

from bench.greedy import by_fewest_labels, greedy
from bench.labgen import T0, add_shape_arguments, generate, shape_from
from jobs.scheduling.planner import HostState, JobState, RoleNeed, plan

# The targets of docs/performance.md#targets, in milliseconds, by (hosts, jobs).
TARGET_MS = {(10_000, 100_000): 1000.0, (1_000, 10_000): 50.0}


def _timed(fn: Callable[[], object], repeat: int) -> tuple[float, float, object]:
    """Run fn `repeat` times; return (median ms, best ms, last result)."""
    times = []
    result = None
    for _ in range(repeat):
        gc.collect()
        start = time.perf_counter()
        result = fn()
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times), min(times), result


def main(argv: Sequence[str] | None = None) -> None:
    """Time the planner and an Autotest-style greedy first fit on the same generated lab."""
    parser = argparse.ArgumentParser(description=main.__doc__)
    add_shape_arguments(parser, required=True)
    parser.add_argument("--hetero", type=float, default=0.5, help="share of label sets with more")
    parser.add_argument("--capped", type=float, default=0.0, help="share of suites with max_duts")
    parser.add_argument("--busy", type=float, default=0.0, help="share of hosts already leased")
    parser.add_argument(
        "--multi-host",
        type=float,
        default=0.0,
        help="share of unpinned jobs needing 2 or 4 hosts (docs/scheduling.md#multi-host-jobs)",
    )
    parser.add_argument("--repeat", type=int, default=5, help="runs to take the median of")
    parser.add_argument("--json", action="store_true", help="one JSON line (the default)")
    args = parser.parse_args(argv)

    shape = shape_from(args, hetero=args.hetero, capped=args.capped, busy=args.busy)
    lab = generate(shape)
    hosts, jobs, suites = lab.hosts, lab.jobs, lab.suites
    now = None
    if args.multi_host:
        hosts, jobs = with_multi_host(hosts, jobs, args.multi_host, args.seed)
        now = T0 + timedelta(hours=1)
    plan_ms, plan_best, result = _timed(
        lambda: plan(hosts=hosts, jobs=jobs, suites=suites, now=now), args.repeat
    )
    greedy_ms, greedy_best, first_fit = _timed(
        lambda: greedy(hosts=hosts, jobs=jobs, suites=suites), args.repeat
    )
    kinder = greedy(hosts=hosts, jobs=jobs, suites=suites, order=by_fewest_labels)
    leased = len(result.assignments)  # type: ignore[attr-defined]
    out = {
        **lab.describe(),
        "hetero": args.hetero,
        "capped": args.capped,
        "plan_ms": round(plan_ms, 1),
        "plan_best_ms": round(plan_best, 1),
        "leased": leased,
        "greedy_ms": round(greedy_ms, 1),
        "greedy_leased": len(first_fit),  # type: ignore[arg-type]
        # The same first fit, but preferring hosts with fewer labels as the planner does.
        "greedy_fewest_labels_leased": len(kinder),
        "gap": leased - len(first_fit),  # type: ignore[arg-type]
        "target_ms": TARGET_MS.get((args.hosts, args.jobs)),
    }
    if args.multi_host:
        # The greedy baselines lease one host per job: their counts are not comparable.
        out |= {"multi_host": args.multi_host, "holds": len(result.holds)}  # type: ignore[attr-defined]
    print(json.dumps(out))


def with_multi_host(
    hosts: list[HostState], jobs: list[JobState], share: float, seed: int
) -> tuple[list[HostState], list[JobState]]:
    """The lab with `share` of its unpinned jobs needing 2 or 4 hosts of their labels (up to
    one more elastic), and an expected end on every busy host (1 to 120 minutes from now)."""
    rng = random.Random(seed)
    now = T0 + timedelta(hours=1)
    hosts = [
        replace(h, busy_until=now + timedelta(minutes=rng.randint(1, 120))) if h.leased else h
        for h in hosts
    ]
    changed = []
    for job in jobs:
        if job.pinned_host_id is None and rng.random() < share:
            n = rng.choice((2, 2, 4))
            job = replace(job, roles=(RoleNeed("dut", job.labels, n, n + rng.choice((0, 1))),))
        changed.append(job)
    return hosts, changed


if __name__ == "__main__":
    main()
