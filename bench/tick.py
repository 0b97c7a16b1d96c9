"""Tick benchmark on PostgreSQL: a cold tick that leases the lab, then steady-state ticks."""

from __future__ import annotations

import argparse
import cProfile
import gc
import os
import pstats
import random
import resource
import statistics
import sys
import time
from dataclasses import replace

from bench import dbload, machine
from bench.cli import print_result
from bench.labgen import Lab, add_shape_arguments, generate, shape_from
from jobs.scheduling.planner.types import RoleNeed

# The targets of docs/performance.md#targets, in milliseconds, by (hosts, jobs).
COLD_TARGET_MS = 5000.0
STEADY_TARGET_MS = {(10_000, 100_000): 300.0}


def _heartbeat_workers() -> None:
    """Mark every online worker seen now, and extend the active leases past half their TTL,
    as their runners' heartbeats would, without touching the lab (the change log names neither
    write). Without the leases', a run longer than LEASE_TTL (10 minutes) saw every lease the
    cold tick made expire at once, and timed the expiry of the lab."""
    from django.conf import settings
    from django.db.models import Q
    from django.utils import timezone

    from hosts.models import Worker
    from jobs.models import Lease

    now = timezone.now()
    # Offline workers were last seen an hour ago; keep them offline.
    cutoff = now - timezone.timedelta(minutes=30)
    Worker.objects.filter(Q(last_seen__gte=cutoff)).update(last_seen=now)
    ttl = timezone.timedelta(seconds=settings.LEASE_TTL)
    # A reservation's end is its holder's; a job's lease lives while its runner beats.
    Lease.objects.active().filter(job__isnull=False, expires_at__lt=now + ttl / 2).update(
        heartbeat_at=now, expires_at=now + ttl
    )


def _make_multi_host(lab: Lab, share: float, seed: int) -> int:
    """Make a seeded `share` of the queued jobs multi-host; how many were made.

    Of those, three in four need 2 hosts and one in four 4 hosts, one role `dut` with no labels
    of its own (`roles=[{"name": "dut", "labels": [], "count": 2, "max": 2}]`): their hosts are
    the job's label set's. Pinned jobs stay one-host, and so do jobs of a suite whose max_duts
    is below 4 (submission refuses a job needing more hosts than its suite's cap).
    """
    if share <= 0:
        return 0
    rng = random.Random(f"multi-host {seed}")
    capped = {s.id for s in lab.suites if s.max_duts is not None and s.max_duts < 4}
    made = 0
    for i, job in enumerate(lab.jobs):
        if job.pinned_host_id is not None or job.suite_id in capped or rng.random() >= share:
            continue
        count = 4 if rng.random() < 0.25 else 2
        lab.jobs[i] = replace(job, roles=(RoleNeed("dut", job.labels, count, count),))
        made += 1
    return made


def _run_tick(
    label: str, profile: str | None, *, must_lease: frozenset[int] = frozenset()
) -> dict[str, object]:
    """Time one tick. Its workers are marked seen first, untimed, as their runners' heartbeats
    would keep them: a slow run must not time a tick whose workers have all gone offline.
    `must_lease`: the hosts that completions freed for queued jobs just before; a tick that
    leases nothing and holds none of them measured another tick, and the run stops saying so."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from jobs import services

    _heartbeat_workers()
    profiler = cProfile.Profile() if profile else None
    # The capture counts by position in a log capped at 9,000 queries; a churn's submissions
    # can fill it, and a full log would count this tick's queries as none.
    connection.queries_log.clear()
    with CaptureQueriesContext(connection) as queries:
        start, cpu_start = time.perf_counter(), time.process_time()
        if profiler:
            profiler.enable()
        summary = services.scheduler_tick(trigger=f"bench {label}")
        if profiler:
            profiler.disable()
        ms = (time.perf_counter() - start) * 1000
        cpu_ms = (time.process_time() - cpu_start) * 1000
    if profiler and profile:
        stats = pstats.Stats(profiler, stream=sys.stderr)
        print(f"--- profile of the {label} tick", file=sys.stderr)
        order = os.environ.get("BENCH_PROFILE_SORT", "cumulative")  # or tottime, calls, …
        stats.sort_stats(order).print_stats(int(profile))
    sql_ms = sum(float(q["time"]) for q in queries.captured_queries) * 1000
    if must_lease and not summary.leases and not _held(must_lease):
        raise SystemExit(
            f"the {label} tick leased nothing, though completions had freed hosts for queued "
            f"jobs ({len(queries.captured_queries)} queries): it timed a different tick"
        )
    return {
        "ms": round(ms, 1),
        # This process's CPU (planner, refresh, Django, psycopg; not the database server's):
        # steadier than the wall clock on a shared machine.
        "cpu_ms": round(cpu_ms, 1),
        "queries": len(queries.captured_queries),
        "sql_ms": round(sql_ms, 1),
        "plan_ms": round(summary.plan_ms, 1),
        "leased": len(summary.leases),
        # None on code without the steady-state check (a baseline run of an older commit).
        "unchanged": getattr(summary, "unchanged", None),
        # Whether it refreshed the lab by the rows the change log named (None: older code).
        "refreshed": getattr(summary, "refreshed", None),
    }


def _held(hosts: frozenset[int]) -> bool:
    """Whether the latest tick holds one of these hosts for a multi-host job: a freed host held
    rather than leased went where the rules say (docs/scheduling.md#holds-and-backfill)."""
    from jobs.models import SchedulerTick

    latest = SchedulerTick.objects.only("holds").first()
    return latest is not None and any(str(host) in latest.holds for host in hosts)


def _run_queued_analyze() -> None:
    """Do what a cluster worker would do next: the ANALYZE the cold tick asked for."""
    from jobs import tasks

    tasks.analyze_jobs()


def _events(count: int, *, priority: int = 100) -> frozenset[int]:
    """`count` jobs complete and as many new jobs for their hosts arrive: the tick must plan.

    The new jobs need the labels of the hosts just freed, so the next tick has work to lease.
    Returns the hosts freed.
    """
    from jobs import services
    from jobs.models import Lease

    # A multi-host job holds several leases and completes once: `count` distinct jobs.
    by_job: dict[int, Lease] = {}
    for lease in (
        Lease.objects.active()
        .filter(job__isnull=False)
        .select_related("job", "host")
        .order_by("id")[: count * 4]
    ):
        by_job.setdefault(lease.job_id, lease)
    leases = list(by_job.values())[:count]
    if len(leases) < count:
        raise SystemExit(f"only {len(leases)} jobs run; the churn needs {count}")
    freed = frozenset(
        Lease.objects.active()
        .filter(job_id__in=[lease.job_id for lease in leases])
        .values_list("host_id", flat=True)
    )
    for lease in leases:
        services.job_start(job=lease.job, by="runner")
        services.job_complete(job=lease.job, result="passed", by="runner")
    for i, lease in enumerate(leases):
        services.job_submit(
            owner="alice",
            spec=services.JobSpec(
                name=f"churn-{i}", labels=lease.host.label_names, priority=priority
            ),
        )
    return freed


def _churn(
    sizes: list[int], repeats: int, profile: str | None = None
) -> dict[str, dict[str, object]]:
    """For each N: N completions and N submissions, then a timed tick; `repeats` times.

    `profile` profiles the last tick of each N.
    """
    out: dict[str, dict[str, object]] = {}
    for n in sizes:
        ticks = []
        for i in range(repeats):
            freed = _events(n, priority=40)
            last = i == repeats - 1
            ticks.append(_run_tick(f"churn {n}", profile if last else None, must_lease=freed))
        times = sorted(float(t["ms"]) for t in ticks)  # type: ignore[arg-type]
        plans = [float(t["plan_ms"]) for t in ticks]  # type: ignore[arg-type]
        out[str(n)] = {
            "median_ms": round(statistics.median(times), 1),
            "min_ms": times[0],
            "plan_median_ms": round(statistics.median(plans), 1),
            "cpu_median_ms": round(statistics.median(float(t["cpu_ms"]) for t in ticks), 1),
            "queries": ticks[-1]["queries"],
            "leased": ticks[-1]["leased"],
            "refreshed": sum(1 for t in ticks if t["refreshed"]),
            "runs": len(ticks),
        }
    return out


def _rss_mb() -> float:
    """This process's resident memory now (Linux), in MB."""
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return round(int(line.split()[1]) / 1024, 1)
    return 0.0


def _peak_rss_mb() -> float:
    """The most resident memory this process has had (ru_maxrss: KB on Linux), in MB."""
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def _reset_peak_rss() -> bool:
    """Start this process's peak resident memory again from now (Linux: clear_refs 5); False
    where it cannot be."""
    try:
        with open("/proc/self/clear_refs", "w", encoding="ascii") as refs:
            refs.write("5")
    except OSError:
        return False
    return True


def _memory(ticks: int, changes: int) -> dict[str, object]:
    """Run `ticks` ticks, each after `changes` completions and submissions, and sample this
    process's resident memory: is it flat while the kept lab is refreshed tick after tick?

    The process holds what a scheduler process holds (Django, the kept lab, the wait-reason
    table it last wrote) plus the benchmark's own small state; the generated lab is dropped
    before the first tick."""
    every = max(1, ticks // 20)
    # The peak from here on is the scheduler's (whole reads included), not the generation's.
    peak_before = _peak_rss_mb()
    reset = _reset_peak_rss()
    samples = [(0, _rss_mb())]
    # The peak so far (a whole read keeps two labs alive for a moment?) and the blocks Python's
    # allocator holds: blocks that grow are objects kept; RSS growing while they do not is
    # freed memory the process could not give back.
    peaks, blocks = [(0, _peak_rss_mb())], [(0, sys.getallocatedblocks())]
    cpu = []
    for i in range(1, ticks + 1):
        freed = _events(changes, priority=40)
        cpu.append(float(_run_tick(f"memory {i}", None, must_lease=freed)["cpu_ms"]))
        if i % every == 0 or i == ticks:
            samples.append((i, _rss_mb()))
            peaks.append((i, _peak_rss_mb()))
            blocks.append((i, sys.getallocatedblocks()))
    return {
        "ticks": ticks,
        "changes_per_tick": changes,
        "rss_mb_by_tick": samples,
        "peak_rss_mb_by_tick": peaks,
        "peak_reset": reset,  # whether peak_rss_mb_by_tick starts from the first tick
        "peak_rss_mb_before": peak_before,
        "allocated_blocks_by_tick": blocks,
        "rss_growth_mb": round(samples[-1][1] - samples[1][1], 1) if len(samples) > 1 else 0.0,
        "cpu_median_ms": round(statistics.median(cpu), 1) if cpu else None,
    }


def _sizes(text: str) -> list[int]:
    try:
        sizes = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a list of numbers: {text!r}") from None
    if not sizes or min(sizes) < 1:
        raise argparse.ArgumentTypeError("give one or more positive numbers, e.g. 1,10,100")
    return sizes


def _apply_policy(args: argparse.Namespace) -> None:
    """Set the scheduler settings and worker capacities the run asks for, as staff would."""
    from django.db.models import Count

    from hosts.models import Worker
    from jobs import services

    services.update_scheduler_settings(
        "bench",
        reason="bench",
        ordering=args.ordering,
        aging_minutes=args.aging_minutes,
        host_choice=args.host_choice,
    )
    if args.max_jobs > 0:
        for worker in Worker.objects.annotate(n=Count("hosts")):
            limit = max(1, round(worker.n * args.max_jobs))
            Worker.objects.filter(pk=worker.pk).update(max_jobs=limit)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=main.__doc__)
    add_shape_arguments(parser)
    parser.add_argument("--steady", type=int, default=7, help="steady-state ticks to time")
    parser.add_argument("--db", default="bench_tick", help="database to (re)create: bench_*")
    parser.add_argument("--keep", action="store_true", help="keep the database afterwards")
    parser.add_argument("--profile", metavar="N", help="print the top N lines of a cProfile")
    parser.add_argument(
        "--profile-ticks",
        default="cold,replan,steady,event",
        help="which ticks --profile profiles (comma-separated; churn: the last of each N)",
    )
    parser.add_argument(
        "--churn",
        type=_sizes,
        default=[],
        metavar="N,N,…",
        help="after the steady ticks, time ticks after N completions + N submissions",
    )
    parser.add_argument("--churn-repeats", type=int, default=3, help="timed ticks per N")
    parser.add_argument(
        "--churn-ticks",
        type=int,
        default=0,
        metavar="T",
        help="then T more ticks after --churn-ticks-changes changes each, sampling this "
        "process's RSS (memory flat over churn?; 0: none)",
    )
    parser.add_argument("--churn-ticks-changes", type=int, default=10, metavar="N")
    parser.add_argument(
        "--ordering", choices=("fifo", "size", "dynsize"), default="fifo", help="the setting"
    )
    parser.add_argument("--aging-minutes", type=int, default=0, help="the setting (0: off)")
    parser.add_argument("--host-choice", choices=("affinity", "spread", "pack"), default="affinity")
    parser.add_argument(
        "--max-jobs",
        type=float,
        default=0,
        metavar="SHARE",
        help="give every worker a max_jobs of this share of its hosts (0: unlimited)",
    )
    parser.add_argument(
        "--multi-host-share",
        type=float,
        default=0.0,
        metavar="SHARE",
        help="make this share of the queued jobs multi-host (2 or 4 hosts; 0: none)",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON line")
    return parser


def main() -> None:
    """Load a generated lab into PostgreSQL, time a cold tick and steady-state ticks."""
    parser = _parser()
    args = parser.parse_args()
    if not 0 <= args.multi_host_share <= 1:
        parser.error("--multi-host-share: a share between 0 and 1")

    # Every host can take work (no locks, no paused or offline worker), so that the cold tick
    # leases as many of the hosts as the queue can use: "a cold tick that leases 10,000 hosts".
    shape = shape_from(args, unavailable=0.0, paused_workers=0.0, offline_workers=0.0)
    speed = machine.describe()  # before the lab is made: the load of whatever else runs
    lab = generate(shape)
    multi_host = _make_multi_host(lab, args.multi_host_share, args.seed)
    print(f"tick benchmark: {lab.describe()}, {multi_host} multi-host", file=sys.stderr)
    dbload.setup_django(args.db)
    memory: dict[str, object] | None = None
    try:
        from django.utils import timezone

        with dbload.timed("load"):
            dbload.load(lab, now=timezone.now())
        description = lab.describe()
        del lab  # the generated lab is the benchmark's, not the scheduler's: out of the RSS
        gc.collect()
        _apply_policy(args)
        profile = args.profile
        cold = _run_tick("cold", profile if "cold" in args.profile_ticks else None)
        # The cold tick asks a cluster worker to analyse the job table; no cluster runs here.
        _run_queued_analyze()
        # The cold tick changed the lab (leases, leased jobs): this one plans again, finds
        # nothing more to lease, and records the digest the steady ticks then match.
        replan = _run_tick("replan", profile if "replan" in args.profile_ticks else None)
        steady = [
            _run_tick("steady", profile if i == 0 and "steady" in args.profile_ticks else None)
            for i in range(args.steady)
        ]
        freed = _events(1)
        event = _run_tick(
            "event", profile if "event" in args.profile_ticks else None, must_lease=freed
        )
        churn = _churn(
            args.churn, args.churn_repeats, profile if "churn" in args.profile_ticks else None
        )
        if args.churn_ticks > 0:
            memory = _memory(args.churn_ticks, args.churn_ticks_changes)
    finally:
        if not args.keep:
            from django.db import connections

            connections.close_all()
            dbload.drop_database(args.db)
    if any(s["unchanged"] is False for s in steady):
        raise SystemExit("a steady-state tick planned again: the lab changed under the benchmark")
    times = [float(s["ms"]) for s in steady]  # type: ignore[arg-type]
    # The memory run starts the peak again; the generation's and the first ticks' was before.
    peak = max(_peak_rss_mb(), float(memory["peak_rss_mb_before"]) if memory else 0.0)  # type: ignore[arg-type]
    result = {
        **description,
        "cold_ms": cold["ms"],
        "cold_queries": cold["queries"],
        "cold_sql_ms": cold["sql_ms"],
        "cold_plan_ms": cold["plan_ms"],
        "cold_leased": cold["leased"],
        "replan_ms": replan["ms"],
        "replan_queries": replan["queries"],
        "replan_plan_ms": replan["plan_ms"],
        "cold_cpu_ms": cold["cpu_ms"],
        "steady_ms": round(statistics.median(times), 1),
        "steady_cpu_ms": round(statistics.median(float(s["cpu_ms"]) for s in steady), 1),
        "steady_max_ms": max(times),
        "steady_queries": steady[-1]["queries"],
        "steady_ticks": len(steady),
        "event_ms": event["ms"],
        "event_queries": event["queries"],
        "event_cpu_ms": event["cpu_ms"],
        "event_plan_ms": event["plan_ms"],
        "event_leased": event["leased"],
        "churn": churn,
        "multi_host_jobs": multi_host,
        # This process's peak resident memory over the run (the whole reads and every tick),
        # and its resident memory now: the scheduler's kept lab, Django, the benchmark.
        "peak_rss_mb": peak,
        "rss_mb": _rss_mb(),
        "memory": memory,
        "machine": speed,
        "steady_target_ms": STEADY_TARGET_MS.get((args.hosts, args.jobs)),
        "cold_target_ms": COLD_TARGET_MS,
        "policy": {
            "ordering": args.ordering,
            "aging_minutes": args.aging_minutes,
            "host_choice": args.host_choice,
            "max_jobs_share": args.max_jobs,
        },
    }
    print_result(result, as_json=args.json, width=18)


if __name__ == "__main__":
    main()
