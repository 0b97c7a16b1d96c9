"""Planner against the greedy baseline over many generated labs: leases won, lost and equal."""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence

from bench.greedy import by_fewest_labels, greedy
from bench.labgen import LabShape, generate
from jobs.scheduling.planner import plan

# (hosts, jobs, suites, label sets): small and mid-sized labs where jobs and hosts are about
# as many (where reassigning matters most), then the two sizes of docs/performance.md#targets.
SHAPES = (
    (60, 80, 6, 24),
    (200, 200, 10, 40),
    (1000, 1000, 50, 40),
    (1000, 10000, 50, 40),
    (10000, 100000, 500, 200),
)


def compare(shape: LabShape) -> dict[str, int]:
    """Return the leases of the planner and of both greedy first fits on one lab."""
    lab = generate(shape)
    hosts, jobs, suites = lab.hosts, lab.jobs, lab.suites
    return {
        "leased": len(plan(hosts=hosts, jobs=jobs, suites=suites).assignments),
        "greedy": len(greedy(hosts=hosts, jobs=jobs, suites=suites)),
        "greedy_fewest_labels": len(
            greedy(hosts=hosts, jobs=jobs, suites=suites, order=by_fewest_labels)
        ),
    }


def main(argv: Sequence[str] | None = None) -> None:
    """Print one JSON line per lab shape and cap setting, summed over the seeds."""
    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("--seeds", type=int, default=20, help="labs per shape (seeds 0..N-1)")
    parser.add_argument("--big-seeds", type=int, default=3, help="labs per shape of 10,000 hosts")
    parser.add_argument("--hetero", type=float, default=0.8)
    args = parser.parse_args(argv)
    for hosts, jobs, suites, label_sets in SHAPES:
        for capped in (0.0, 0.3):
            seeds = args.big_seeds if hosts >= 10_000 else args.seeds
            totals = {"leased": 0, "greedy": 0, "greedy_fewest_labels": 0}
            more = fewer = max_gap = 0
            for seed in range(seeds):
                shape = LabShape(
                    hosts, jobs, suites, label_sets, seed=seed, hetero=args.hetero, capped=capped
                )
                got = compare(shape)
                for key, value in got.items():
                    totals[key] += value
                gap = got["leased"] - got["greedy"]
                more += gap > 0
                fewer += gap < 0
                max_gap = max(max_gap, gap)
            print(
                json.dumps(
                    {
                        "hosts": hosts,
                        "jobs": jobs,
                        "suites": suites,
                        "label_sets": label_sets,
                        "hetero": args.hetero,
                        "capped": capped,
                        "labs": seeds,
                        **totals,
                        "labs_more": more,
                        "labs_fewer": fewer,
                        "max_gap": max_gap,
                    }
                )
            )


if __name__ == "__main__":
    main()
