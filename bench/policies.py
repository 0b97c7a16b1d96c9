"""Scheduling policies under a saturating stream: does low-priority long work starve?

The real services and `scheduler_tick(now=t)` at a simulated clock, as in `bench.labday`: a
lab of hosts with one label, a Poisson stream of short high-priority `cq` suites that keeps
the lab more than busy, and every half hour a `daily` suite (priority 20) and a `weekly` suite
(priority 10) of long jobs. Every job's `estimated_duration` is its true run time. Each policy
(set through `services.update_scheduler_settings`) runs on an empty lab with the same seeds,
hence the same submissions; the report gives, per policy and priority, the jobs finished, the
wait submit → lease (p50 / p95 / max, minutes) and the longest starvation: the longest any job
sat queued, a job still queued at the end counting its wait up to the end.

    python -m bench.policies --hosts 24 --workers 3 --hours 8 --step 30 --seeds 1 2 3
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import statistics
import sys
import time
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta

from bench.cli import add_shape_options, print_result, shape_from_options
from bench.labday import Run

LABEL = "board:x"
PRIORITIES = (70, 20, 10)  # cq, daily, weekly
# The policies compared: name -> the scheduler settings it sets (aging's from the options).
POLICIES = ("fifo", "size", "dynsize", "fifo+aging")
RUNNER = "policies-runner"


@dataclass(frozen=True)
class Shape:
    """The lab and its stream: sizes, rates and durations (minutes unless said)."""

    hosts: int = 24
    workers: int = 3
    hours: float = 8.0  # the stream of submissions lasts this long
    drain_minutes: float = 0  # then nobody submits, and the lab runs on this long
    step: int = 30  # simulated seconds a step
    # cq: a suite of 1-4 jobs of 5-15 min every minute on average (Poisson): 2.5 jobs x 10 min
    # a minute is 25 hosts busy, more than the 24 of the lab on its own.
    cq_every_minutes: float = 1.0
    cq_jobs: tuple[int, int] = (1, 4)
    cq_minutes: tuple[float, float] = (5, 15)
    # Every half hour a daily suite (4 x 30 min) and a weekly one (3 x 60 min): 10 hosts more.
    long_every_minutes: float = 30
    daily_jobs: int = 4
    daily_minutes: float = 30
    weekly_jobs: int = 3
    weekly_minutes: float = 60
    heartbeat_every: int = 120  # a real runner heartbeats every LEASE_TTL / 3


@dataclass
class Sim:
    """What the simulated runners know: each lease's planned end, and each job's run time."""

    shape: Shape
    runs: dict[int, Run] = field(default_factory=dict)
    suites: int = 0


def build_lab(shape: Shape) -> None:
    """Workers, hosts with the one label, and the testers, through the services."""
    from django.contrib.auth import get_user_model

    from hosts import services as host_services

    User = get_user_model()
    admin, _ = User.objects.get_or_create(username="policies-admin", is_staff=True)
    for name in ("cq", "nightly"):
        User.objects.get_or_create(username=name)
    workers = [
        host_services.worker_create(name=f"policies-worker-{w}", by=admin)
        for w in range(1, shape.workers + 1)
    ]
    for i in range(shape.hosts):
        host_services.host_create(
            hostname=f"policies-host{i:03d}",
            worker=workers[i % len(workers)],
            labels=[LABEL],
            by=admin,
        )


def poisson(rng: random.Random, mean: float) -> int:
    """How many arrivals a step sees, for a Poisson stream of `mean` arrivals a step."""
    limit, n, p = math.exp(-mean), 0, rng.random()
    while p > limit:
        n += 1
        p *= rng.random()
    return n


def submit(sim: Sim, *, owner: str, kind: str, priority: int, minutes: list[float], at) -> None:  # noqa: ANN001
    """One suite whose jobs each run `minutes[i]` and say so in their estimate."""
    from django.contrib.auth import get_user_model

    from jobs import services

    sim.suites += 1
    specs = [
        services.JobSpec(
            name=f"{kind}{i}",
            labels=[LABEL],
            estimated_duration=timedelta(minutes=m),
            timeout=timedelta(minutes=2 * m + 10),  # the default (60 min) would cut weekly off
        )
        for i, m in enumerate(minutes)
    ]
    services.suite_submit(
        owner=get_user_model().objects.get(username=owner),
        name=f"{kind} {sim.suites}",
        jobs=specs,
        priority=priority,
        now=at,
    )


def submissions(sim: Sim, rng: random.Random, *, n: int, at: datetime) -> None:
    """The step's submissions: Poisson cq suites, and the long suites on the half hour."""
    shape = sim.shape
    for _ in range(poisson(rng, shape.step / (shape.cq_every_minutes * 60))):
        count = rng.randint(*shape.cq_jobs)
        minutes = [round(rng.uniform(*shape.cq_minutes), 2) for _ in range(count)]
        submit(sim, owner="cq", kind="cq", priority=70, minutes=minutes, at=at)
    long_steps = max(1, round(shape.long_every_minutes * 60 / shape.step))
    # The first half-way through the first period, once the stream has filled the lab; then
    # one every period.
    if n % long_steps == long_steps // 2:
        daily = [shape.daily_minutes] * shape.daily_jobs
        weekly = [shape.weekly_minutes] * shape.weekly_jobs
        submit(sim, owner="nightly", kind="daily", priority=20, minutes=daily, at=at)
        submit(sim, owner="nightly", kind="weekly", priority=10, minutes=weekly, at=at)


def runners_act(sim: Sim, *, at: datetime) -> None:
    """Every runner once: start new leases, heartbeat running ones, complete finished ones.

    No failures here: every run passes after exactly its job's estimated duration.
    """
    from jobs import services
    from jobs.choices import JobStatus
    from jobs.models import Lease

    heartbeat = timedelta(seconds=sim.shape.heartbeat_every)
    active = Lease.objects.active().filter(job__isnull=False).select_related("job")
    seen = set()
    for lease in active:
        seen.add(lease.pk)
        run = sim.runs.get(lease.pk)
        if run is None:
            services.job_start(job=lease.job, by=RUNNER, at=at)
            ends = at + lease.job.estimated_duration
            sim.runs[lease.pk] = Run(ends_at=ends, outcome="passed", heartbeat_at=at)
        elif at >= run.ends_at:
            services.job_complete(
                job=lease.job, result=JobStatus.PASSED, by=RUNNER, message="simulated", at=at
            )
        elif at - run.heartbeat_at >= heartbeat:
            services.lease_heartbeat(lease=lease, by=RUNNER, at=at)
            run.heartbeat_at = at
    for lease_id in set(sim.runs) - seen:
        del sim.runs[lease_id]


def policy_settings(policy: str, *, aging_minutes: int, aging_cap: int) -> dict[str, object]:
    """The scheduler settings a policy of POLICIES sets (all of them, so none carries over)."""
    ordering, _, aging = policy.partition("+")
    return {
        "ordering": ordering,
        "aging_minutes": aging_minutes if aging == "aging" else 0,
        "aging_cap": aging_cap,
    }


def simulate(
    shape: Shape,
    *,
    policy: str,
    seed: int,
    start: datetime,
    aging_minutes: int = 2,
    aging_cap: int = 60,
) -> dict[str, object]:
    """Build the lab, set the policy, run the stream and its drain; return the report."""
    from hosts import services as host_services
    from hosts.models import Worker
    from jobs import services

    build_lab(shape)
    settings = policy_settings(policy, aging_minutes=aging_minutes, aging_cap=aging_cap)
    services.update_scheduler_settings("bench", reason="bench", **settings)
    rng = random.Random(seed)  # the submissions only: the same stream under every policy
    sim = Sim(shape=shape)
    workers = list(Worker.objects.all())
    step = timedelta(seconds=shape.step)
    steps = int(shape.hours * 3600 / shape.step)
    drain_steps = int(shape.drain_minutes * 60 / shape.step)
    began = time.perf_counter()
    at = start
    for n in range(1, steps + drain_steps + 1):
        at += step
        for worker in workers:
            host_services.worker_heartbeat(worker=worker, at=at)
        if n <= steps:
            submissions(sim, rng, n=n, at=at)
        services.scheduler_tick(now=at)
        runners_act(sim, at=at)
    return {
        "policy": policy,
        "seed": seed,
        "settings": settings,
        "wall_s": round(time.perf_counter() - began, 1),
        "suites": sim.suites,
        "by_priority": waits(end=at),
    }


def percentile(values: list[float], pct: float) -> float:
    """The nearest-rank percentile of a non-empty sorted list."""
    return values[max(0, math.ceil(pct / 100 * len(values)) - 1)]


def waits(*, end: datetime) -> dict[str, dict[str, object]]:
    """Per priority: jobs submitted, finished and still queued; wait submit → first lease
    (p50/p95/max minutes, leased jobs); the longest starvation (any job, a job still queued
    at `end` counting its wait up to `end`)."""
    from django.db.models import Min

    from jobs.choices import JobKind, JobStatus
    from jobs.models import Job

    rows = (
        Job.objects.filter(kind=JobKind.TEST)
        .annotate(leased=Min("leases__acquired_at"))
        .values_list("priority", "submitted_at", "leased", "status")
    )
    out: dict[str, dict[str, object]] = {}
    for priority in PRIORITIES:
        mine = [r for r in rows if r[0] == priority]
        leased = sorted((r[2] - r[1]).total_seconds() / 60 for r in mine if r[2] is not None)
        starved = [((r[2] or end) - r[1]).total_seconds() / 60 for r in mine]
        out[str(priority)] = {
            "submitted": len(mine),
            "finished": sum(1 for r in mine if r[3] == JobStatus.PASSED),
            "queued_at_end": sum(1 for r in mine if r[3] == JobStatus.QUEUED),
            "wait_p50_min": round(percentile(leased, 50), 1) if leased else None,
            "wait_p95_min": round(percentile(leased, 95), 1) if leased else None,
            "wait_max_min": round(leased[-1], 1) if leased else None,
            "longest_starvation_min": round(max(starved), 1) if starved else None,
        }
    return out


# The lab's and the stream's parameters a run can set, with what each means.
SHAPE_OPTIONS = (
    ("hosts", int, None),
    ("workers", int, None),
    ("hours", float, "the stream of submissions lasts this long"),
    ("drain_minutes", float, "then nobody submits and the lab runs on this long"),
    ("step", int, "simulated seconds a step"),
    ("cq_every_minutes", float, "a cq suite this often on average (Poisson): the load"),
    ("long_every_minutes", float, "a daily and a weekly suite this often"),
)
FIGURES = ("finished", "wait_p50_min", "wait_p95_min", "wait_max_min", "longest_starvation_min")


def summary(runs: list[dict]) -> list[dict[str, object]]:
    """Per policy and priority, each figure's min and median over the seeds."""
    rows = []
    for policy in dict.fromkeys(r["policy"] for r in runs):
        mine = [r for r in runs if r["policy"] == policy]
        for priority in PRIORITIES:
            row: dict[str, object] = {"policy": policy, "priority": priority, "seeds": len(mine)}
            for figure in FIGURES:
                values = [r["by_priority"][str(priority)][figure] for r in mine]
                values = [v for v in values if v is not None]
                row[figure] = (min(values), statistics.median(values)) if values else None
            rows.append(row)
    return rows


def table(rows: list[dict[str, object]]) -> str:
    """A Markdown table of `summary`: each cell `min / median` over the seeds."""

    def cell(value: object) -> str:
        if value is None:
            return "–"
        low, mid = value
        return f"{low:g} / {mid:g}"

    head = (
        "| policy | priority | seeds | finished | wait p50 | wait p95 | wait max | longest starv. |"
    )
    lines = [head, "|---|---|---|---|---|---|---|---|"]
    for row in rows:
        cells = " | ".join(cell(row[f]) for f in FIGURES)
        lines.append(f"| {row['policy']} | {row['priority']} | {row['seeds']} | {cells} |")
    return "\n".join(lines)


def run_children(args: argparse.Namespace, argv: list[str]) -> list[dict]:
    """Each policy x seed in a process of its own (bench.dbload.run_children)."""
    from bench import dbload

    return dbload.run_children(
        "bench.policies",
        "--policies",
        args.policies,
        args.seeds,
        db=args.db,
        parallel=args.parallel,
        argv=argv,
    )


def run_here(shape: Shape, args: argparse.Namespace) -> list[dict]:
    """Every policy × seed in this process, on one throwaway database flushed between runs."""
    from bench import dbload

    dbload.setup_simulation(args.db)
    from django.core.management import call_command
    from django.db import connection
    from django.utils import timezone

    runs = []
    try:
        for seed in args.seeds:
            for policy in args.policies:
                if runs:  # each run on an empty lab
                    call_command("flush", verbosity=0, interactive=False)
                run = simulate(
                    shape,
                    policy=policy,
                    seed=seed,
                    start=timezone.now(),
                    aging_minutes=args.aging_minutes,
                    aging_cap=args.aging_cap,
                )
                runs.append(run)
                if not args.json:
                    print(f"  {policy} seed {seed}: {run['wall_s']} s", file=sys.stderr)
    finally:
        connection.close()
        dbload.drop_database(args.db)
    return runs


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_shape_options(parser, SHAPE_OPTIONS, Shape)
    parser.add_argument("--policies", nargs="+", choices=POLICIES, default=list(POLICIES))
    parser.add_argument("--aging-minutes", type=int, default=2, help="for fifo+aging")
    parser.add_argument("--aging-cap", type=int, default=60, help="for fifo+aging")
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--parallel", type=int, default=1, help="processes, each its own db")
    parser.add_argument("--db", default="bench_policies", help="throwaway database (bench_*)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    if args.cq_every_minutes <= 0 or args.long_every_minutes <= 0 or args.step <= 0:
        parser.error("--cq-every-minutes, --long-every-minutes, --step: > 0")
    shape = shape_from_options(SHAPE_OPTIONS, args, Shape)
    began = time.perf_counter()
    runs = run_children(args, argv) if args.parallel > 1 else run_here(shape, args)
    runs.sort(key=lambda r: (args.policies.index(r["policy"]), r["seed"]))
    rows = summary(runs)
    result = {
        "cores": os.cpu_count(),
        "shape": asdict(shape),
        "aging": {"aging_minutes": args.aging_minutes, "aging_cap": args.aging_cap},
        "wall_s": round(time.perf_counter() - began, 1),
        "runs": runs,
        "summary": rows,
    }
    if args.json:
        print(json.dumps(result))
        return
    head = {k: result[k] for k in ("cores", "shape", "aging", "wall_s")}
    print_result(head, as_json=False, width=8)
    print()
    print(
        "| policy | seed | wall s | priority | submitted | finished | queued at end | "
        "wait p50 | p95 | max | longest starvation |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for run in runs:
        for priority, f in run["by_priority"].items():
            print(
                f"| {run['policy']} | {run['seed']} | {run['wall_s']} | {priority} | "
                f"{f['submitted']} | {f['finished']} | {f['queued_at_end']} | "
                f"{f['wait_p50_min']} | {f['wait_p95_min']} | {f['wait_max_min']} | "
                f"{f['longest_starvation_min']} |"
            )
    print()
    print("minutes; min / median over the seeds")
    print(table(rows))


if __name__ == "__main__":
    main()
