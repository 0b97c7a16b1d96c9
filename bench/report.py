"""Run every benchmark once and print bench/RESULTS.md's tables, with the commands that ran."""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PY = "python"  # as written in the commands; run with the project's interpreter

PLANNER_RUNS = (
    ("10000", "100000", "500", "200"),
    ("1000", "10000", "50", "40"),
)
TICK_RUNS = (
    ("1000", "10000", "50", "40"),
    ("10000", "100000", "500", "200"),
)
LATENCY_RUNS = (
    ("1000", "40", "orm"),
    ("10000", "200", "orm"),
    ("10000", "200", "redis"),
)


def run(args: list[str], cwd: Path = ROOT) -> tuple[str, list[dict]]:
    """Run `python -m bench.<args>` in cwd; return the command as written and its JSON lines."""
    command = [PY, "-m", *args]
    print(f"$ {' '.join(command)}  (in {cwd})", file=sys.stderr)
    out = subprocess.run(
        [sys.executable, "-m", *args], cwd=cwd, check=True, capture_output=True, text=True
    )
    lines = [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]
    return " ".join(command), lines


def fmt(value: object) -> str:
    if isinstance(value, float):
        return f"{value:,.1f}" if value < 10_000 else f"{value:,.0f}"
    if isinstance(value, int):
        return f"{value:,}"
    return "—" if value is None else str(value)


def verdict(value: float, target: float | None) -> str:
    if target is None:
        return ""
    return "met" if value <= target else "**missed**"


def table(header: list[str], rows: list[list[object]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(fmt(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def machine() -> str:
    def sh(cmd: list[str]) -> str:
        try:
            return subprocess.run(cmd, capture_output=True, text=True, check=True).stdout.strip()
        except (OSError, subprocess.CalledProcessError):
            return "?"

    cpu = "?"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    pg = sh(["psql", "-h", "127.0.0.1", "-U", "postgres", "-tAc", "SHOW server_version"])
    return (
        f"{os.cpu_count()} cores ({cpu}), Python {platform.python_version()}, "
        f"PostgreSQL {pg}, {platform.system()} {platform.release()}"
    )


def load_average() -> str:
    try:
        return Path("/proc/loadavg").read_text().split()[0]
    except OSError:
        return "?"


def lab_args(module: str, hosts: str, jobs: str, suites: str, label_sets: str) -> list[str]:
    """The arguments that run a benchmark module on a generated lab of this size, for JSON."""
    sizes = ["--hosts", hosts, "--jobs", jobs, "--suites", suites, "--label-sets", label_sets]
    return [module, *sizes, "--json"]


def main() -> None:  # noqa: PLR0915 — a script: arguments, the runs, their tables
    """Run the benchmarks and print the tables of bench/RESULTS.md (markdown) on stdout."""
    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("--quick", action="store_true", help="skip the latency runs")
    parser.add_argument(
        "--baseline",
        type=Path,
        help="a tree of an older commit with this bench/ copied in: adds its figures as 'before'",
    )
    args = parser.parse_args()
    base: Path | None = args.baseline
    base_commit = ""
    if base is not None:
        base_commit = (base / "COMMIT").read_text().strip() if (base / "COMMIT").exists() else "?"

    date = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    load_at_start = load_average()
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
    ).stdout.strip()
    dirty = subprocess.run(
        ["git", "status", "--porcelain"], cwd=ROOT, capture_output=True, text=True
    ).stdout.strip()
    out: list[str] = [
        f"Run: {date}, commit `{commit}`"
        + (" plus uncommitted changes (the working tree of this change)" if dirty else "")
        + f"; {machine()}.",
        "",
        "### Planner alone (no database)",
        "",
    ]

    rows = []
    commands = []
    for hosts, jobs, suites, label_sets in PLANNER_RUNS:
        cmd, (r,) = run(lab_args("bench.planner", hosts, jobs, suites, label_sets))
        commands.append(cmd)
        before = None
        if base is not None:
            _cmd, (b,) = run(cmd.split()[2:], cwd=base)
            before = b["plan_ms"]
        rows.append(
            [
                f"{int(hosts):,} × {int(jobs):,} × {suites} × {label_sets}",
                r["plan_ms"],
                before,
                r["target_ms"],
                verdict(r["plan_ms"], r["target_ms"]),
                r["leased"],
                r["greedy_leased"],
                r["greedy_ms"],
            ]
        )
    out.append(
        table(
            [
                "hosts × queued jobs × suites × label sets",
                "plan ms (median of 5)",
                f"before ({base_commit})" if base else "before",
                "target ms",
                "",
                "leased",
                "greedy leased",
                "greedy ms",
            ],
            rows,
        )
    )
    out += ["", "```", *commands, "```", "", "### Planner against the greedy baseline", ""]

    cmd, lines = run(["bench.compare"])
    rows = [
        [
            f"{r['hosts']:,} × {r['jobs']:,} × {r['suites']} × {r['label_sets']}",
            "yes" if r["capped"] else "no",
            r["labs"],
            r["leased"],
            r["greedy"],
            r["greedy_fewest_labels"],
            r["labs_more"],
            r["labs_fewer"],
            r["max_gap"],
        ]
        for r in lines
    ]
    out.append(
        table(
            [
                "lab (hosts × jobs × suites × label sets)",
                "max_duts caps",
                "labs",
                "planner leased",
                "greedy leased",
                "greedy (fewest labels) leased",
                "labs where planner > greedy",
                "labs where planner < greedy",
                "largest gap",
            ],
            rows,
        )
    )
    out += ["", "```", cmd, "```", "", "### The tick on PostgreSQL", ""]

    rows = []
    commands = []
    for hosts, jobs, suites, label_sets in TICK_RUNS:
        cmd, (r,) = run(lab_args("bench.tick", hosts, jobs, suites, label_sets))
        commands.append(cmd)
        b: dict = {}
        if base is not None:
            _cmd, (b,) = run(cmd.split()[2:] + ["--db", "bench_tick_before"], cwd=base)

        def before(key: str, b: dict = b) -> str:
            if not b:
                return "—"
            return f"{fmt(b[key + '_ms'])} ms, {b[key + '_queries']} queries"

        size = f"{int(hosts):,} / {int(jobs):,}"
        rows.append(
            [
                size,
                "cold (nothing leased yet)",
                r["cold_ms"],
                r["cold_queries"],
                before("cold"),
                f"{r['cold_leased']:,} leased",
                r["cold_target_ms"],
                verdict(r["cold_ms"], r["cold_target_ms"]),
            ]
        )
        rows.append(
            [size, "next tick (re-plans, nothing to lease)", r["replan_ms"], r["replan_queries"]]
            + [before("replan"), "0 leased", None, ""]
        )
        rows.append(
            [
                size,
                f"steady state (median of {r['steady_ticks']}, max {fmt(r['steady_max_ms'])})",
                r["steady_ms"],
                r["steady_queries"],
                before("steady"),
                "unchanged",
                r["steady_target_ms"],
                verdict(r["steady_ms"], r["steady_target_ms"]),
            ]
        )
        rows.append(
            [size, "after one job completes and one arrives", r["event_ms"], r["event_queries"]]
            + [before("event"), f"{r['event_leased']} leased", None, ""]
        )
    out.append(
        table(
            ["hosts / queued jobs", "tick", "ms", "SQL queries"]
            + [f"before ({base_commit})" if base else "before", "", "target ms", ""],
            rows,
        )
    )
    out += ["", "```", *commands, "```", ""]

    if not args.quick:
        out += ["### Submit → leased with `manage.py qcluster` running (idle lab)", ""]
        rows = []
        commands = []
        for hosts, label_sets, broker in LATENCY_RUNS:
            cmd, (r,) = run(
                ["bench.latency", "--hosts", hosts, "--label-sets", label_sets]
                + ["--broker", broker, "--json"]
            )
            commands.append(cmd)
            rows.append(
                [
                    f"{int(hosts):,}",
                    broker,
                    r["submissions"],
                    r["p50_ms"],
                    r["p50_target_ms"],
                    verdict(r["p50_ms"], r["p50_target_ms"]),
                    r["p99_ms"],
                    r["p99_target_ms"],
                    verdict(r["p99_ms"], r["p99_target_ms"]),
                    r["max_ms"],
                ]
            )
        out.append(
            table(
                ["hosts", "broker", "submissions", "p50 ms", "target", "", "p99 ms", "target"]
                + ["", "max ms"],
                rows,
            )
        )
        out += ["", "```", *commands, "```", ""]
    out.append(
        f"Load average (1 min) at the start of the run {load_at_start}, at the end "
        f"{load_average()}."
    )
    print("\n".join(out))


if __name__ == "__main__":
    main()
