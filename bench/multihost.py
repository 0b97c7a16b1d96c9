"""Multi-host jobs under a saturating stream: do they starve, and what do holds cost?

A time-accelerated simulation of one lab on the real planner (`planner.plan` on planner values,
no database, as `bench.planner` runs it): a lab of hosts with one label, a Poisson stream of
one-host jobs of the multi-host jobs' priority ("equal") and of a lower one ("lower") that
keeps the lab more than busy, and among them 2-host and 4-host jobs arriving at a steady pace.
The clock jumps from event to event (an arrival or a job's end) and a tick plans at every
event, as the real tick runs on every change; nothing can change between two events. Every
job runs exactly its estimate (`size_s`), and each leased host's `busy_until` is its lease's
start plus that estimate, as the snapshot computes it.

The same arrivals (one seed) run in three modes, set by the planner's switches
`Policy.holds` and `Policy.backfill`: no holds; holds without backfill; holds with backfill
(docs/scheduling.md#holds-and-backfill). The report gives, per job kind, the wait submit →
start (p50 / p95 / max, minutes), and per mode the idle host-seconds holds cost (hosts held
free for a multi-host job that could not start yet). The goals: every multi-host
job starts within twice the longest estimated duration of the stream; with backfill, the
held idle host-seconds at most half those of holds without backfill.

    python -m bench.multihost --seeds 1 2 3
"""

from __future__ import annotations

import argparse
import heapq
import math
import os
import random
import statistics
import sys
import time
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime, timedelta

from bench.cli import add_shape_options, print_result, shape_from_options
from jobs.scheduling.planner import HostState, JobState, Plan, Policy, job_order_key, plan
from jobs.scheduling.planner.types import RoleNeed

LABEL = "board:x"
T0 = datetime(2026, 1, 5, 9, 0)
# The modes compared: name -> the planner's switches.
MODES: dict[str, dict[str, bool]] = {
    "no holds": {"holds": False, "backfill": False},
    "holds, no backfill": {"holds": True, "backfill": False},
    "holds + backfill": {"holds": True, "backfill": True},
}
KINDS = ("1-host equal", "1-host lower", "2-host", "4-host")


@dataclass(frozen=True)
class Shape:
    """The lab and its stream: sizes, rates and durations (minutes unless said)."""

    hosts: int = 40
    workers: int = 4
    hours: float = 8.0  # multi-host jobs arrive this long
    # Then the one-host stream goes on (the lab stays saturated) but no multi-host job
    # arrives; a multi-host job still waiting at the end has waited at least this long.
    drain_minutes: float = 120
    priority: int = 50  # the multi-host jobs' and the "equal" one-host jobs'
    lower_priority: int = 30
    # One-host jobs: a short one (a smoke test) or a long one, by these odds.
    short_share: float = 0.5
    short_minutes: tuple[float, float] = (1, 5)
    long_minutes: tuple[float, float] = (10, 30)
    # Arrivals a minute (Poisson). 40 hosts at a mean job of 11.5 min finish 3.5 jobs a
    # minute: the equal stream is half of that, the lower one three quarters.
    equal_per_minute: float = 1.74
    lower_per_minute: float = 2.6
    # One multi-host job of each size this often (the first half a period in).
    two_host_every_minutes: float = 15
    four_host_every_minutes: float = 30
    multi_minutes: tuple[float, float] = (10, 20)


@dataclass(frozen=True)
class Arrival:
    """One job of the stream: when it arrives, what it needs and how long it runs."""

    at_s: int  # seconds after the start
    kind: str  # one of KINDS
    priority: int
    hosts: int
    size_s: int  # its estimate, which is also its run time


@dataclass
class Lab:
    """The simulation's state: the hosts' leases, the queue, and what it measured."""

    hosts: list[HostState]
    queue: dict[int, JobState] = field(default_factory=dict)
    arrivals: dict[int, Arrival] = field(default_factory=dict)
    started_s: dict[int, int] = field(default_factory=dict)  # job id -> start
    running: dict[int, int] = field(default_factory=dict)  # host id -> job id
    ends: list[tuple[int, int]] = field(default_factory=list)  # heap of (end s, job id)
    holds: dict[int, int] = field(default_factory=dict)  # the last tick's held free hosts
    held_idle_host_s: float = 0.0
    idle_host_s: float = 0.0  # free hosts while some job waited, held or not
    busy_host_s: float = 0.0
    # Hosts leased to jobs ranked below a multi-host job the same tick left waiting: without
    # holds, the hosts it starves for; with holds, backfill and hosts the holder cannot use.
    passed_by: int = 0
    ticks: int = 0
    ticks_holding: int = 0
    # Ticks that left a held host idle while a one-host job ranked below the holder would have
    # ended by the holder's expected start: backfill the planner missed (0 is right).
    missed_backfill: int = 0
    plan_ms: list[float] = field(default_factory=list)


def stream(shape: Shape, seed: int) -> list[Arrival]:
    """The arrivals of one seed: the same under every mode."""
    rng = random.Random(seed)
    end_s = round((shape.hours * 60 + shape.drain_minutes) * 60)
    multi_end_s = round(shape.hours * 3600)
    out: list[Arrival] = []

    def one_host(kind: str, priority: int, per_minute: float) -> None:
        at = 0.0
        while True:
            at += rng.expovariate(per_minute / 60)
            if at >= end_s:
                return
            span = shape.short_minutes if rng.random() < shape.short_share else shape.long_minutes
            size = max(1, round(rng.uniform(*span) * 60))
            out.append(Arrival(round(at), kind, priority, 1, size))

    one_host("1-host equal", shape.priority, shape.equal_per_minute)
    one_host("1-host lower", shape.lower_priority, shape.lower_per_minute)
    for hosts, every in ((2, shape.two_host_every_minutes), (4, shape.four_host_every_minutes)):
        at = every * 60 / 2
        while at < multi_end_s:
            size = max(1, round(rng.uniform(*shape.multi_minutes) * 60))
            out.append(Arrival(round(at), f"{hosts}-host", shape.priority, hosts, size))
            at += every * 60
    out.sort(key=lambda a: (a.at_s, a.kind))
    return out


def job_state(job_id: int, arrival: Arrival) -> JobState:
    """The planner's value of an arriving job: a standalone job, multi-host with one role."""
    labels = frozenset({LABEL})
    roles = ()
    if arrival.hosts > 1:
        roles = (RoleNeed(name="dut", labels=labels, count=arrival.hosts, max=arrival.hosts),)
    return JobState(
        id=job_id,
        name=f"{arrival.kind} {job_id}",
        suite_id=None,
        priority=arrival.priority,
        submitted_at=T0 + timedelta(seconds=arrival.at_s),
        labels=labels,
        size_s=float(arrival.size_s),
        roles=roles,
    )


def build_lab(shape: Shape) -> Lab:
    hosts = [
        HostState(
            id=i + 1,
            hostname=f"mh-host{i:03d}",
            labels=frozenset({LABEL}),
            worker=f"mh-worker-{i % shape.workers}",
        )
        for i in range(shape.hosts)
    ]
    return Lab(hosts=hosts)


def _release(lab: Lab, now_s: int) -> None:
    """End the jobs whose run is over: their hosts become free."""
    ended = set()
    while lab.ends and lab.ends[0][0] <= now_s:
        ended.add(heapq.heappop(lab.ends)[1])
    if not ended:
        return
    for i, host in enumerate(lab.hosts):
        if lab.running.get(host.id) in ended:
            del lab.running[host.id]
            lab.hosts[i] = HostState(
                id=host.id,
                hostname=host.hostname,
                labels=host.labels,
                worker=host.worker,
                last_used=T0 + timedelta(seconds=now_s),
            )


def _tick(lab: Lab, policy: Policy, now_s: int) -> None:
    """One tick at `now_s`: plan, check the plan keeps the rules, start what it leased."""
    now = T0 + timedelta(seconds=now_s)
    began = time.perf_counter()
    result = plan(hosts=lab.hosts, jobs=lab.queue.values(), suites=(), policy=policy, now=now)
    lab.plan_ms.append((time.perf_counter() - began) * 1000)
    lab.ticks += 1
    by_job: dict[int, list[int]] = {}
    for a in result.assignments:
        by_job.setdefault(a.job_id, []).append(a.host_id)
    index = {host.id: i for i, host in enumerate(lab.hosts)}
    holds = dict(result.holds)
    waiting_multi = [
        job_order_key(job)
        for job_id, job in lab.queue.items()
        if job.multi_host and job_id not in by_job
    ]
    top_waiting = min(waiting_multi, default=None)
    for job_id, host_ids in by_job.items():
        job = lab.queue.pop(job_id)
        if len(host_ids) != job.hosts_needed or len(set(host_ids)) != len(host_ids):
            raise AssertionError(f"job {job_id} got hosts {host_ids}, needs {job.hosts_needed}")
        end_s = now_s + lab.arrivals[job_id].size_s
        for host_id in host_ids:
            host = lab.hosts[index[host_id]]
            if not host.schedulable:
                raise AssertionError(f"job {job_id} leased busy host {host_id}")
            lab.running[host_id] = job_id
            lab.hosts[index[host_id]] = HostState(
                id=host.id,
                hostname=host.hostname,
                labels=host.labels,
                worker=host.worker,
                leased=True,
                lease_priority=job.priority,
                last_used=host.last_used,
                busy_until=now + timedelta(seconds=lab.arrivals[job_id].size_s),
            )
        lab.started_s[job_id] = now_s
        if top_waiting is not None and job_order_key(job) > top_waiting:
            lab.passed_by += len(host_ids)
        heapq.heappush(lab.ends, (end_s, job_id))
    if holds and not policy.holds:
        raise AssertionError("the planner held hosts with holds off")
    for host_id, job_id in holds.items():
        if host_id in lab.running or job_id not in lab.queue:
            raise AssertionError(f"host {host_id} held for {job_id}: not free or job not waiting")
    if len(set(holds.values())) > 1:
        raise AssertionError(f"more than one holder in a tick: {sorted(set(holds.values()))}")
    lab.holds = holds
    lab.ticks_holding += bool(holds)
    if holds and policy.backfill and _missed_backfill(lab, result, next(iter(holds.values())), now):
        lab.missed_backfill += 1


def _missed_backfill(lab: Lab, result: Plan, holder_id: int, now: datetime) -> bool:
    """Whether a queued one-host job ranked below the holder ends by its expected start (every
    host of this lab fits every job, so it could have taken a held host)."""
    details = result.wait_reasons[holder_id].details
    limit_s = (datetime.fromisoformat(str(details["expected_start"])) - now).total_seconds()
    holder = job_order_key(lab.queue[holder_id])
    return any(
        not job.multi_host and job_order_key(job) > holder and (job.size_s or 0) <= limit_s
        for job in lab.queue.values()
    )


def _account(lab: Lab, seconds: int) -> None:
    """The hosts' time from one tick to the next: busy, held idle, idle while work waited."""
    busy = len(lab.running)
    lab.busy_host_s += busy * seconds
    lab.held_idle_host_s += len(lab.holds) * seconds
    if lab.queue:
        lab.idle_host_s += (len(lab.hosts) - busy) * seconds


def simulate(
    shape: Shape, *, mode: str, arrivals: Sequence[Arrival], end_s: int | None = None
) -> dict[str, object]:
    """Run the arrivals through the planner under `mode` (a key of MODES); the report."""
    policy = Policy(**MODES[mode])
    lab = build_lab(shape)
    if end_s is None:
        end_s = round((shape.hours * 60 + shape.drain_minutes) * 60)
    pending = sorted(arrivals, key=lambda a: a.at_s)
    ids = iter(range(1, len(pending) + 1))
    began = time.perf_counter()
    i = 0
    now_s = 0
    while True:
        next_arrival = pending[i].at_s if i < len(pending) else math.inf
        next_end = lab.ends[0][0] if lab.ends else math.inf
        at = min(next_arrival, next_end, end_s)
        _account(lab, int(at) - now_s)
        now_s = int(at)
        if now_s >= end_s:
            break
        _release(lab, now_s)
        while i < len(pending) and pending[i].at_s <= now_s:
            job_id = next(ids)
            lab.arrivals[job_id] = pending[i]
            lab.queue[job_id] = job_state(job_id, pending[i])
            i += 1
        _tick(lab, policy, now_s)
    span = len(lab.hosts) * end_s
    return {
        "mode": mode,
        "wall_s": round(time.perf_counter() - began, 2),
        "ticks": lab.ticks,
        "ticks_holding": lab.ticks_holding,
        "plan_ms_median": round(statistics.median(lab.plan_ms), 2) if lab.plan_ms else None,
        "plan_ms_max": round(max(lab.plan_ms), 2) if lab.plan_ms else None,
        "held_idle_host_s": round(lab.held_idle_host_s),
        "held_idle_share": round(lab.held_idle_host_s / span, 5) if span else None,
        "idle_host_s": round(lab.idle_host_s),
        "busy_share": round(lab.busy_host_s / span, 3) if span else None,
        "hosts_passing_multi": lab.passed_by,
        "missed_backfill_ticks": lab.missed_backfill,
        "queued_at_end": len(lab.queue),
        "by_kind": waits(lab, end_s=end_s),
    }


def percentile(values: list[float], pct: float) -> float:
    """The nearest-rank percentile of a non-empty sorted list."""
    return values[max(0, math.ceil(pct / 100 * len(values)) - 1)]


def waits(lab: Lab, *, end_s: int) -> dict[str, dict[str, object]]:
    """Per kind: jobs arrived, started, still waiting; wait arrival → start (p50/p95/max
    minutes, started jobs) and the longest wait, a job still waiting counting up to the end."""
    out: dict[str, dict[str, object]] = {}
    for kind in KINDS:
        mine = [job_id for job_id, a in lab.arrivals.items() if a.kind == kind]
        if not mine:
            continue
        started = sorted(
            (lab.started_s[j] - lab.arrivals[j].at_s) / 60 for j in mine if j in lab.started_s
        )
        longest = max((lab.started_s.get(j, end_s) - lab.arrivals[j].at_s) / 60 for j in mine)
        out[kind] = {
            "arrived": len(mine),
            "started": len(started),
            "waiting_at_end": len(mine) - len(started),
            "wait_p50_min": round(percentile(started, 50), 1) if started else None,
            "wait_p95_min": round(percentile(started, 95), 1) if started else None,
            "wait_max_min": round(started[-1], 1) if started else None,
            "longest_wait_min": round(longest, 1),
        }
    return out


def bound_min(arrivals: Iterable[Arrival]) -> float:
    """The goal's bound: twice the longest estimated duration of the stream, in minutes."""
    return round(2 * max(a.size_s for a in arrivals) / 60, 1)


def goals(runs: dict[str, dict], *, bound: float) -> dict[str, object]:
    """Whether one seed's runs meet the goals (None where a mode was not run)."""
    out: dict[str, object] = {"bound_min": bound}
    for mode, run in runs.items():
        multi = [f for k, f in run["by_kind"].items() if not k.startswith("1-host")]
        out[f"multi_within_bound[{mode}]"] = all(
            f["waiting_at_end"] == 0 and f["longest_wait_min"] <= bound for f in multi
        )
    held, backfill = runs.get("holds, no backfill"), runs.get("holds + backfill")
    if held and backfill:
        out["held_idle_ratio"] = (
            round(backfill["held_idle_host_s"] / held["held_idle_host_s"], 3)
            if held["held_idle_host_s"]
            else None
        )
        out["backfill_halves_idle"] = (
            backfill["held_idle_host_s"] * 2 <= held["held_idle_host_s"]
            and held["held_idle_host_s"] > 0
        )
    return out


def run_seed(shape: Shape, seed: int, modes: Sequence[str]) -> dict[str, object]:
    arrivals = stream(shape, seed)
    runs = {mode: simulate(shape, mode=mode, arrivals=arrivals) for mode in modes}
    return {
        "seed": seed,
        "arrivals": len(arrivals),
        "runs": runs,
        "goals": goals(runs, bound=bound_min(arrivals)),
    }


SHAPE_OPTIONS = (
    ("hosts", int, None),
    ("workers", int, None),
    ("hours", float, "multi-host jobs arrive this long"),
    ("drain_minutes", float, "then only the one-host stream, this long"),
    ("equal_per_minute", float, "one-host jobs of the multi-host jobs' priority (Poisson)"),
    ("lower_per_minute", float, "one-host jobs of a lower priority (Poisson)"),
    ("two_host_every_minutes", float, "a 2-host job this often"),
    ("four_host_every_minutes", float, "a 4-host job this often"),
    ("short_share", float, "odds a one-host job is short rather than long"),
)
# The duration ranges (minutes, uniform), each a --flag LO HI.
SPAN_OPTIONS = (
    ("short_minutes", "a short one-host job"),
    ("long_minutes", "a long one-host job"),
    ("multi_minutes", "a multi-host job"),
)


def table(seeds: list[dict]) -> str:
    """A Markdown table: per seed, mode and kind, the waits and the mode's idle figures."""
    lines = [
        "| seed | mode | kind | arrived | started | wait p50 | p95 | max | longest | "
        "held idle host-s | idle host-s | busy |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for seed in seeds:
        for mode, run in seed["runs"].items():
            for kind, f in run["by_kind"].items():
                lines.append(
                    f"| {seed['seed']} | {mode} | {kind} | {f['arrived']} | {f['started']} | "
                    f"{f['wait_p50_min']} | {f['wait_p95_min']} | {f['wait_max_min']} | "
                    f"{f['longest_wait_min']} | {run['held_idle_host_s']} | "
                    f"{run['idle_host_s']} | {run['busy_share']} |"
                )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_shape_options(parser, SHAPE_OPTIONS, Shape)
    for name, text in SPAN_OPTIONS:
        parser.add_argument(
            "--" + name.replace("_", "-"),
            type=float,
            nargs=2,
            metavar=("LO", "HI"),
            default=getattr(Shape, name),
            help=f"minutes {text} runs (uniform)",
        )
    parser.add_argument("--modes", nargs="+", choices=list(MODES), default=list(MODES))
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    shape = shape_from_options(SHAPE_OPTIONS, args, Shape)
    spans = {name: tuple(getattr(args, name)) for name, _ in SPAN_OPTIONS}
    if any(not 0 < lo <= hi for lo, hi in spans.values()):
        parser.error("--short-minutes, --long-minutes, --multi-minutes: 0 < LO <= HI")
    if shape.hosts < 4 or shape.workers < 1:
        parser.error("--hosts: at least 4 (a 4-host job must fit); --workers: at least 1")
    rates = ("equal_per_minute", "lower_per_minute", "two_host_every_minutes")
    if any(getattr(shape, name) <= 0 for name in (*rates, "four_host_every_minutes")):
        parser.error("the rates and periods of the stream: > 0")
    shape = replace(shape, **spans)
    began = time.perf_counter()
    seeds = [run_seed(shape, seed, args.modes) for seed in args.seeds]
    result = {
        "cores": os.cpu_count(),
        "load": os.getloadavg()[0],
        "shape": asdict(shape),
        "wall_s": round(time.perf_counter() - began, 1),
        "seeds": seeds,
        "goals_met": all(
            all(v for k, v in s["goals"].items() if k.startswith("multi_within_bound[holds"))
            and s["goals"].get("backfill_halves_idle", True)
            for s in seeds
        ),
    }
    if args.json:
        print_result(result, as_json=True, width=0)
        return
    head = {k: result[k] for k in ("cores", "load", "shape", "wall_s", "goals_met")}
    print_result(head, as_json=False, width=9)
    for seed in seeds:
        print(f"seed {seed['seed']}: {seed['goals']}")
    print()
    print("minutes; held idle: host-seconds held free for a multi-host job; busy: share of time")
    print(table(seeds))


if __name__ == "__main__":
    main()
