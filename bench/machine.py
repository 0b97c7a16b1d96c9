"""The machine a benchmark ran on, in figures a result can be read against.

The 2-core machines these benchmarks run on differ from day to day: on one, a tick took
100 ms; on another, the same commit took 300 ms with nothing else running. Each benchmark's
JSON carries `machine`, so that two results are compared as ratios of its `python_loop_ms`
when they come from different days, not as absolute figures.
"""

from __future__ import annotations

import os
import time

LOOP = 1_000_000  # additions: 160 ms with the project's Python on the machine of 2026-11-28


def _loop_ms() -> float:
    start = time.process_time()
    total = 0
    for i in range(LOOP):
        total += i
    return (time.process_time() - start) * 1000


def describe(runs: int = 5) -> dict[str, object]:
    """Cores, the load average now, and the fastest of `runs` timings of one pure-Python loop
    (this interpreter, one core: what the planner's and Django's Python code runs at)."""
    return {
        "cores": os.cpu_count(),
        "load": round(os.getloadavg()[0], 2),
        "python_loop_ms": round(min(_loop_ms() for _ in range(runs)), 1),
    }
