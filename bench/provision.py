"""Provisioning in a lab day: how often does each way of choosing hosts reimage a DUT?

A time-accelerated lab day on the real services and `scheduler_tick(now=t)`, as in
`bench.labday`: 200 hosts of four boards in two pools (a fifth of them with a chameleon), and
testers submitting suites of 5-40 jobs, each suite for one build of the 3-4 builds in flight
(a new build appears every so often and the oldest fades out) and one priority (a few are
high), its jobs asking for a board, or a board and a pool, or a board and a chameleon, or only a
pool: label sets that span several host classes. The offered load is about what the lab could
run if it never provisioned, so the time spent reimaging is time the lab cannot test.

The simulated runners provision as the runner protocol says (docs/scheduling.md#provisioning):
a lease whose job's build differs from its host's `current_build` first reimages the host
(`--provision-minutes`, 5 by default), then the host carries the job's build and the test runs
(1-10 minutes). The same submissions (one seed) run under each strategy, set through the
planner's internal switch `Policy.builds`:

- `none`: builds ignored; hosts are chosen by their other order.
- `first-fit`: Autotest's preference: a host already on the job's build if one is left, in
  queue order.
- `min-cost`: what the tick does: among the assignments that lease the same jobs, one that
  needs the fewest provisions.
- `same-build-first`: min-cost with the scheduler setting `same_build_first_minutes`
  (`--same-build-first-minutes`, 30 by default): within a priority, jobs a free host already
  carries the build of go first (docs/scheduling.md#same-build-first).

The report gives, per strategy and seed, the provisions per 1,000 jobs started, the host-hours
spent provisioning and the jobs finished per hour, and their means over the seeds. The goals:
the tick (min-cost, and min-cost with same-build-first) provisions fewer times than first-fit on
the mean and finishes at least as many jobs per hour.

    python -m bench.provision --seeds 1 2 3 4 5 --json
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import random
import statistics
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta

from bench.cli import add_shape_options, print_result, shape_from_options

STRATEGIES = ("none", "first-fit", "min-cost", "same-build-first")
BOARDS = ("eve", "kevin", "octopus", "hatch")
# The label sets a suite's jobs ask for, besides the suite's board ("" stands for it alone):
# each spans several host classes (pools, chameleons), which is where the strategies differ.
EXTRAS: tuple[tuple[str, ...], ...] = ((), (), ("pool:cq",), ("pool:bvt",), ("chameleon",))
PRIORITIES = (20, 40, 50, 70)
PRIORITY_WEIGHTS = (3, 3, 3, 1)  # a tenth of the suites are high priority (cq)
RUNNER = "provision-runner"
FIRST_BUILD = 120  # builds are named R120, R121, ...


@dataclass(frozen=True)
class Shape:
    """The lab and its day: sizes, rates and durations (minutes unless said)."""

    hosts: int = 200
    workers: int = 8
    hours: float = 1.0  # testers submit this long; the day ends then
    step: int = 30  # simulated seconds a step
    provision_minutes: float = 5.0
    test_minutes: tuple[float, float] = (1, 10)
    # The builds testers test at a time; a new one appears this often and the oldest fades.
    builds_in_flight: int = 4
    # The scheduler setting under the strategy same-build-first (min-cost with it on).
    same_build_first_minutes: int = 30
    new_build_every_minutes: float = 30
    suite_jobs: tuple[int, int] = (5, 40)
    # A suite this often on average (Poisson). 200 hosts at a mean test of 5.5 min finish 36
    # jobs a minute when nothing provisions; 22.5 jobs every 0.7 min is 32 a minute.
    suite_every_minutes: float = 0.7
    # Of the suites, the share whose jobs ask for a pool only, on any board.
    any_board_share: float = 0.1
    # A worker goes offline after WORKER_OFFLINE_TIMEOUT (120 s) without a heartbeat; a real
    # runner's heartbeat also extends its leases (LEASE_TTL 600 s).
    heartbeat_every: int = 60


@dataclass(frozen=True)
class PlannedSuite:
    """One suite of the day's submissions: the same under every strategy of a seed."""

    at_s: int  # seconds after the start
    board: str  # "" for a suite on any board
    build: str
    priority: int
    jobs: tuple[tuple[tuple[str, ...], float], ...]  # (labels, test minutes) each


def builds_at(shape: Shape, at_s: float) -> list[str]:
    """The builds in flight `at_s` seconds into the day, oldest first."""
    every = shape.new_build_every_minutes * 60
    released = int(at_s // every) if every else 0
    last = FIRST_BUILD + shape.builds_in_flight - 1 + released
    return [f"R{n}" for n in range(last - shape.builds_in_flight + 1, last + 1)]


def submissions(shape: Shape, seed: int) -> list[PlannedSuite]:
    """The day's suites for a seed: when, for which build and board, and their jobs."""
    rng = random.Random(f"provision-submissions-{seed}")
    out: list[PlannedSuite] = []
    at = 0.0
    end_s = shape.hours * 3600
    while True:
        at += rng.expovariate(1 / (shape.suite_every_minutes * 60))
        if at >= end_s:
            return out
        builds = builds_at(shape, at)
        # The newer a build, the more it is tested: weights 1, 2, ... oldest to newest.
        build = rng.choices(builds, weights=range(1, len(builds) + 1))[0]
        priority = rng.choices(PRIORITIES, weights=PRIORITY_WEIGHTS)[0]
        count = rng.randint(*shape.suite_jobs)
        if rng.random() < shape.any_board_share:
            board = ""
            labels = [("pool:bvt",)] * count
        else:
            board = rng.choice(BOARDS)
            labels = [(f"board:{board}", *rng.choice(EXTRAS)) for _ in range(count)]
        jobs = tuple((tuple(ls), round(rng.uniform(*shape.test_minutes), 2)) for ls in labels)
        out.append(PlannedSuite(round(at), board, build, priority, jobs))


def host_labels(i: int) -> list[str]:
    """Host i's labels: its board, its pool, and a chameleon on every fifth."""
    labels = [f"board:{BOARDS[i % len(BOARDS)]}", f"pool:{'cq' if i % 3 else 'bvt'}"]
    if i % 5 == 0:
        labels.append("chameleon")
    return labels


@contextmanager
def builds_policy(builds: str, same_build_first_minutes: int = 30) -> Iterator[None]:
    """Plan every tick inside with the planner's `Policy.builds` set to `builds`.

    The switch is planner-internal, no scheduler setting a user could change: the tick reads its
    policy from `SchedulerSettings.policy()`, which the block wraps to set this one field.
    """
    from jobs.scheduler_models import SchedulerSettings

    if builds not in STRATEGIES:
        raise ValueError(f"builds: one of {', '.join(STRATEGIES)}")
    original = SchedulerSettings.policy

    def policy(self: SchedulerSettings):  # noqa: ANN202 - the planner's Policy
        if builds == "same-build-first":
            return dataclasses.replace(
                original(self), builds="min-cost", same_build_first_minutes=same_build_first_minutes
            )
        return dataclasses.replace(original(self), builds=builds)

    SchedulerSettings.policy = policy  # type: ignore[method-assign]
    try:
        yield
    finally:
        SchedulerSettings.policy = original  # type: ignore[method-assign]


@dataclass
class Run:
    """What a simulated runner does with one lease: provision (maybe), then test."""

    host_id: int
    leased_at: datetime
    provision_to: str  # the build it reimages the host to; "" if the host already has it
    tested_from: datetime  # when provisioning ends (the lease's start if none is needed)
    ends_at: datetime
    started: bool = False


@dataclass
class Sim:
    """The simulation's state and what it counted."""

    shape: Shape
    minutes: dict[int, float] = field(default_factory=dict)  # job id -> its test's minutes
    runs: dict[int, Run] = field(default_factory=dict)  # lease id -> its run
    worker_of: dict[int, int] = field(default_factory=dict)  # host id -> worker id
    jobs_started: int = 0  # leases a runner took up
    lost: int = 0  # leases gone before their run ended (0 is right)
    provisions: int = 0  # provisionings begun
    provisions_done: int = 0  # provisionings ended: the host carries the job's build
    provision_s: float = 0.0  # host-seconds spent provisioning, up to the day's end
    test_s: float = 0.0  # host-seconds spent testing, up to the day's end
    # Leases whose `provision_to` (as the tick wrote it) differs from what the runner found
    # it must do; and how many carried one at all (none before the tick writes it).
    provision_to_disagrees: int = 0
    leases_with_provision_to: int = 0
    waits_s: dict[int, list[float]] = field(default_factory=dict)  # priority -> submit → lease


def build_lab(shape: Shape, *, seed: int) -> Sim:
    """Workers and labelled hosts, each on one of the builds in flight at the start."""
    from django.contrib.auth import get_user_model

    from hosts import services as host_services

    rng = random.Random(f"provision-lab-{seed}")
    User = get_user_model()
    admin, _ = User.objects.get_or_create(username="provision-admin", is_staff=True)
    # The lab's testers are staff, whose submissions no per-user limit refuses: the day's load
    # is the benchmark's to set.
    User.objects.get_or_create(username="provision-tester", is_staff=True)
    workers = [
        host_services.worker_create(name=f"provision-worker-{w}", by=admin)
        for w in range(1, shape.workers + 1)
    ]
    sim = Sim(shape=shape)
    first = builds_at(shape, 0)
    for i in range(shape.hosts):
        host = host_services.host_create(
            hostname=f"provision-host{i:03d}",
            worker=workers[i % len(workers)],
            labels=host_labels(i),
            current_build=rng.choice(first),
            by=admin,
        )
        sim.worker_of[host.pk] = host.worker_id
    return sim


def submit(sim: Sim, planned: PlannedSuite, *, number: int, at: datetime) -> None:
    """One planned suite through the submission service; note each job's test minutes."""
    from django.contrib.auth import get_user_model

    from jobs import services
    from jobs.models import Job

    specs = [
        services.JobSpec(
            name=f"test{i}", labels=list(labels), estimated_duration=timedelta(minutes=minutes)
        )
        for i, (labels, minutes) in enumerate(planned.jobs)
    ]
    suite = services.suite_submit(
        owner=get_user_model().objects.get(username="provision-tester"),
        name=f"suite {number} {planned.board or 'any'} {planned.build}",
        build=planned.build,
        jobs=specs,
        priority=planned.priority,
        now=at,
    )
    ids = Job.objects.filter(suite=suite).order_by("pk").values_list("pk", flat=True)
    for job_id, (_labels, minutes) in zip(ids, planned.jobs, strict=True):
        sim.minutes[job_id] = minutes


def provisioned_start(lease, *, build: str, at: datetime, seconds: float) -> None:  # noqa: ANN001
    """The runner has put `build` on the lease's host: `start` with the build, as the reference
    runner's --provision-cmd does (the host carries it from now; a `provisioned` event and a
    Provision row with how long it took)."""
    from jobs import services

    services.lease_job_start(lease=lease, by=RUNNER, at=at, build=build, provision_seconds=seconds)


def take_up(sim: Sim, lease, *, at: datetime) -> Run:  # noqa: ANN001
    """A runner's first sight of a new lease: provision if the host lacks the job's build."""
    from jobs import services

    job = lease.job
    build = job.build_to_test
    provision_to = build if build and build != lease.host.current_build else ""
    if lease.provision_to or provision_to:
        sim.leases_with_provision_to += bool(lease.provision_to)
        sim.provision_to_disagrees += lease.provision_to != provision_to
    tested_from = at + timedelta(minutes=sim.shape.provision_minutes if provision_to else 0)
    run = Run(
        host_id=lease.host_id,
        leased_at=at,
        provision_to=provision_to,
        tested_from=tested_from,
        ends_at=tested_from + timedelta(minutes=sim.minutes[job.pk]),
    )
    sim.jobs_started += 1
    sim.waits_s.setdefault(job.priority, []).append((at - job.submitted_at).total_seconds())
    if provision_to:
        sim.provisions += 1
    else:
        services.lease_job_start(lease=lease, by=RUNNER, at=at)
        run.started = True
    return run


def runners_act(sim: Sim, *, at: datetime, new: bool) -> None:
    """The runners once: start the provisioned runs and complete the finished ones; with `new`,
    take up the leases they have not seen yet (the tick's latest), and act on those too.

    A run's times are exact (a test starts when its provisioning ends, not at the step that
    notices); the calls are made at the first step at or after them.
    """
    from jobs import services
    from jobs.choices import JobStatus
    from jobs.models import Lease

    leases = Lease.objects.active().filter(job__isnull=False).select_related("job__suite", "host")
    due = [
        lease_id
        for lease_id, run in sim.runs.items()
        if at >= (run.ends_at if run.started else run.tested_from)
    ]
    acting = list(leases.filter(pk__in=due).order_by("pk")) if due else []
    if new:
        acting += leases.exclude(pk__in=list(sim.runs)).order_by("pk")
    for lease in acting:
        run = sim.runs.get(lease.pk)
        if run is None:
            run = sim.runs[lease.pk] = take_up(sim, lease, at=at)
        if not run.started and at >= run.tested_from:
            sim.provisions_done += 1
            provisioned_start(
                lease, build=run.provision_to, at=at, seconds=sim.shape.provision_minutes * 60
            )
            run.started = True
        if run.started and at >= run.ends_at:
            services.lease_job_complete(
                lease=lease, result=JobStatus.PASSED, by=RUNNER, message="passed", at=at
            )
            del sim.runs[lease.pk]


def heartbeat(sim: Sim, *, workers: Sequence, at: datetime) -> None:
    """Each worker's runner heartbeats, extending the leases it holds; a lease gone (none
    should go: no run outlives its lease here) is forgotten."""
    from jobs import services

    held: dict[int, list[int]] = {}
    for lease_id, run in sim.runs.items():
        held.setdefault(sim.worker_of[run.host_id], []).append(lease_id)
    for worker in workers:
        gone = services.worker_leases_heartbeat(
            worker=worker, leases=held.get(worker.pk, ()), at=at
        )
        for lease_id in gone:
            sim.lost += 1
            del sim.runs[lease_id]


def account(sim: Sim, *, since: datetime, until: datetime) -> None:
    """The host-seconds each run spent provisioning and testing from `since` to `until`."""
    for run in sim.runs.values():
        prov = (min(run.tested_from, until) - max(run.leased_at, since)).total_seconds()
        test = (min(run.ends_at, until) - max(run.tested_from, since)).total_seconds()
        sim.provision_s += max(0.0, prov)
        sim.test_s += max(0.0, test)


def simulate(
    shape: Shape, *, strategy: str, seed: int, start: datetime, planned: list[PlannedSuite]
) -> dict[str, object]:
    """Build the lab, run the day's submissions under `strategy`; return the report."""
    from hosts.models import Worker
    from jobs import services

    with builds_policy(strategy, shape.same_build_first_minutes):
        sim = build_lab(shape, seed=seed)
        workers = list(Worker.objects.order_by("pk"))
        step = timedelta(seconds=shape.step)
        end = start + timedelta(hours=shape.hours)
        beat_every = max(1, shape.heartbeat_every // shape.step)
        pending = iter(enumerate(planned, 1))
        upcoming = next(pending, None)
        began, cpu = time.perf_counter(), time.process_time()
        at = start
        n = 0
        for worker in workers:
            services.worker_leases_heartbeat(worker=worker, at=at)
        while at < end:
            previous, at = at, min(at + step, end)
            n += 1
            account(sim, since=previous, until=at)
            if n % beat_every == 0:
                heartbeat(sim, workers=workers, at=at)
            while upcoming is not None and start + timedelta(seconds=upcoming[1].at_s) <= at:
                submit(sim, upcoming[1], number=upcoming[0], at=at)
                upcoming = next(pending, None)
            runners_act(sim, at=at, new=False)  # what ended frees its host for this tick
            services.scheduler_tick(now=at)
            runners_act(sim, at=at, new=True)  # and the runners take up its leases at once
        wall, cpu = time.perf_counter() - began, time.process_time() - cpu
    return report(sim, strategy=strategy, seed=seed, wall_s=wall, cpu_s=cpu, suites=len(planned))


def percentile(values: list[float], pct: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(pct / 100 * len(ordered)))]


def report(
    sim: Sim, *, strategy: str, seed: int, wall_s: float, cpu_s: float, suites: int
) -> dict[str, object]:
    """What the day came to under one strategy."""
    from jobs.choices import JobKind, JobStatus
    from jobs.models import Job

    shape = sim.shape
    tests = Job.objects.filter(kind=JobKind.TEST)
    finished = tests.filter(status=JobStatus.PASSED).count()
    waits = [w for values in sim.waits_s.values() for w in values]
    high = sim.waits_s.get(max(PRIORITIES), [])
    span_s = shape.hosts * shape.hours * 3600

    def minutes(value: float | None) -> float | None:
        return None if value is None else round(value / 60, 1)

    return {
        "strategy": strategy,
        "seed": seed,
        "wall_s": round(wall_s, 1),
        "cpu_s": round(cpu_s, 1),  # this process's; PostgreSQL's is not in it
        "suites": suites,
        "jobs_submitted": tests.count(),
        "jobs_started": sim.jobs_started,
        "jobs_finished": finished,
        "jobs_finished_per_hour": round(finished / shape.hours, 1),
        "queued_at_end": tests.filter(status=JobStatus.QUEUED).count(),
        "provisions": sim.provisions,
        "provisions_done": sim.provisions_done,
        "provisions_per_1000_jobs": round(1000 * sim.provisions / max(1, sim.jobs_started), 1),
        "provision_host_hours": round(sim.provision_s / 3600, 2),
        "test_host_hours": round(sim.test_s / 3600, 2),
        "provisioning_share": round(sim.provision_s / span_s, 3),
        "testing_share": round(sim.test_s / span_s, 3),
        "wait_p50_min": minutes(statistics.median(waits) if waits else None),
        "wait_p95_min": minutes(percentile(waits, 95)),
        "high_wait_p95_min": minutes(percentile(high, 95)),
        "leases_lost": sim.lost,
        "leases_with_provision_to": sim.leases_with_provision_to,
        "provision_to_disagrees": sim.provision_to_disagrees,
    }


# The figures the means and the goal read.
FIGURES = ("provisions_per_1000_jobs", "provision_host_hours", "jobs_finished_per_hour")


def means(runs: list[dict]) -> dict[str, dict[str, float]]:
    """Per strategy, the mean of each figure over its seeds."""
    out: dict[str, dict[str, float]] = {}
    for strategy in STRATEGIES:
        mine = [r for r in runs if r["strategy"] == strategy]
        if mine:
            out[strategy] = {
                "seeds": len(mine),
                **{f: round(statistics.fmean(r[f] for r in mine), 2) for f in FIGURES},
            }
    return out


def goals(mean: dict[str, dict[str, float]]) -> dict[str, bool | None]:
    """Whether min-cost (and min-cost with same-build-first) provisions less than first-fit and
    finishes at least as many jobs per hour."""
    first = mean.get("first-fit")
    out: dict[str, bool | None] = {}
    for strategy, prefix in (("min-cost", ""), ("same-build-first", "same_build_first_")):
        tick = mean.get(strategy)
        fewer = as_many = None
        if tick and first:
            fewer = tick["provisions_per_1000_jobs"] < first["provisions_per_1000_jobs"]
            as_many = tick["jobs_finished_per_hour"] >= first["jobs_finished_per_hour"]
        out[prefix + "fewer_provisions"] = fewer
        out[prefix + "as_many_jobs_per_hour"] = as_many
    return out


def table(runs: list[dict], mean: dict[str, dict[str, float]]) -> str:
    """A Markdown table: each strategy's seeds, then its mean."""
    lines = [
        "| strategy | seed | provisions / 1,000 jobs | provisioning host-h | jobs finished / h | "
        "queued at end | wait p50 | p95 | high p95 |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for strategy in STRATEGIES:
        for r in (r for r in runs if r["strategy"] == strategy):
            lines.append(
                f"| {strategy} | {r['seed']} | {r['provisions_per_1000_jobs']} | "
                f"{r['provision_host_hours']} | {r['jobs_finished_per_hour']} | "
                f"{r['queued_at_end']} | {r['wait_p50_min']} | {r['wait_p95_min']} | "
                f"{r['high_wait_p95_min']} |"
            )
        if strategy in mean:
            m = mean[strategy]
            lines.append(
                f"| **{strategy}** | mean | {m['provisions_per_1000_jobs']} | "
                f"{m['provision_host_hours']} | {m['jobs_finished_per_hour']} | | | | |"
            )
    return "\n".join(lines)


SHAPE_OPTIONS = (
    ("hosts", int, None),
    ("workers", int, None),
    ("hours", float, "testers submit this long; the day ends then"),
    ("step", int, "simulated seconds a step"),
    ("provision_minutes", float, "how long provisioning a host takes"),
    ("builds_in_flight", int, "builds tested at a time"),
    ("new_build_every_minutes", float, "a new build appears this often (0: never)"),
    ("suite_every_minutes", float, "a suite this often on average: the load"),
    ("any_board_share", float, "of the suites, those asking for a pool on any board"),
    ("same_build_first_minutes", int, "the setting under the strategy same-build-first"),
)
SPAN_OPTIONS = (
    ("test_minutes", float, "minutes a test runs (uniform)"),
    ("suite_jobs", int, "jobs a suite has (uniform)"),
)


def run_children(args: argparse.Namespace, argv: list[str]) -> list[dict]:
    """Each strategy x seed in a process of its own (bench.dbload.run_children)."""
    from bench import dbload

    return dbload.run_children(
        "bench.provision",
        "--strategies",
        args.strategies,
        args.seeds,
        db=args.db,
        parallel=args.parallel,
        argv=argv,
    )


def run_here(shape: Shape, args: argparse.Namespace) -> list[dict]:
    """Every strategy × seed in this process, on one throwaway database flushed between runs."""
    from bench import dbload

    dbload.setup_simulation(args.db)
    from django.core.management import call_command
    from django.db import connection
    from django.utils import timezone

    runs = []
    try:
        for seed in args.seeds:
            planned = submissions(shape, seed)
            for strategy in args.strategies:
                if runs:  # each run on an empty lab
                    call_command("flush", verbosity=0, interactive=False)
                run = simulate(
                    shape, strategy=strategy, seed=seed, start=timezone.now(), planned=planned
                )
                runs.append(run)
                if not args.json:
                    print(f"  {strategy} seed {seed}: {run['wall_s']} s", file=sys.stderr)
    finally:
        connection.close()
        dbload.drop_database(args.db)
    return runs


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_shape_options(parser, SHAPE_OPTIONS, Shape)
    for name, kind, text in SPAN_OPTIONS:
        parser.add_argument(
            "--" + name.replace("_", "-"),
            type=kind,
            nargs=2,
            metavar=("LO", "HI"),
            default=getattr(Shape, name),
            help=text,
        )
    parser.add_argument("--strategies", nargs="+", choices=STRATEGIES, default=list(STRATEGIES))
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3, 4, 5])
    parser.add_argument("--parallel", type=int, default=2, help="processes, each its own db")
    parser.add_argument("--db", default="bench_provision", help="throwaway database (bench_*)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    shape = shape_from_options(SHAPE_OPTIONS, args, Shape)
    spans = {name: tuple(getattr(args, name)) for name, *_ in SPAN_OPTIONS}
    if any(not 0 < lo <= hi for lo, hi in spans.values()):
        parser.error("--test-minutes, --suite-jobs: 0 < LO <= HI")
    if min(shape.hosts, shape.workers, shape.step, shape.builds_in_flight) < 1:
        parser.error("--hosts, --workers, --step, --builds-in-flight: at least 1")
    if shape.hours <= 0 or shape.suite_every_minutes <= 0 or shape.provision_minutes < 0:
        parser.error("--hours, --suite-every-minutes: > 0; --provision-minutes: >= 0")
    if shape.new_build_every_minutes < 0 or not 0 <= shape.any_board_share <= 1:
        parser.error("--new-build-every-minutes: >= 0; --any-board-share: between 0 and 1")
    shape = dataclasses.replace(shape, **spans)
    began = time.perf_counter()
    parallel = args.parallel > 1 and len(args.seeds) * len(args.strategies) > 1
    runs = run_children(args, argv) if parallel else run_here(shape, args)
    runs.sort(key=lambda r: (STRATEGIES.index(r["strategy"]), r["seed"]))
    mean = means(runs)
    result = {
        "cores": os.cpu_count(),
        "shape": asdict(shape),
        "wall_s": round(time.perf_counter() - began, 1),
        "runs": runs,
        "means": mean,
        "goals": goals(mean),
    }
    if args.json:
        print(json.dumps(result))
        return
    head = {k: result[k] for k in ("cores", "shape", "wall_s", "goals")}
    print_result(head, as_json=False, width=6)
    print()
    print("provisions per 1,000 jobs started; host-hours provisioning over the day; waits in")
    print("minutes, submit → lease (high: priority 70)")
    print(table(runs, mean))


if __name__ == "__main__":
    main()
