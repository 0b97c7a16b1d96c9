"""Planner benchmark: plan() and the greedy baseline on one generated lab, no database."""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import time
from collections.abc import Callable, Sequence

from bench.greedy import by_fewest_labels, greedy
from bench.labgen import add_shape_arguments, generate, shape_from
from jobs.scheduling.planner import plan

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
    parser.add_argument("--repeat", type=int, default=5, help="runs to take the median of")
    parser.add_argument("--json", action="store_true", help="one JSON line (the default)")
    args = parser.parse_args(argv)

    shape = shape_from(args, hetero=args.hetero, capped=args.capped, busy=args.busy)
    lab = generate(shape)
    hosts, jobs, suites = lab.hosts, lab.jobs, lab.suites
    plan_ms, plan_best, result = _timed(
        lambda: plan(hosts=hosts, jobs=jobs, suites=suites), args.repeat
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
    print(json.dumps(out))


if __name__ == "__main__":
    main()
