"""A simulated lab day on the real services and tick: hosts break, the health loop mends them.

Time is simulated and advanced in steps: each step the workers heartbeat, testers submit
suites, the tick runs at that time, and simulated runners act on their leases at that time (no
HTTP, no cluster). A share of test runs are infrastructure failures: the runner reports the
DUT broken (host_ok false; the DUT really is broken until a repair fixes it), or the runner
vanishes and the lease expires. Repairs fix a broken DUT with some probability; a few hosts
cannot be repaired at all.

A day ends as a lab's does: after the submitting hours testers stop submitting and the lab runs
on for a drain period, finishing what it has and letting the repair loop settle. Staff do
rounds: once every few hours a person presses "Repair now" on every `repair_failed` host,
through the real service. The report says how many repairable hosts are back in service at the
end of the drain, and at the instant submissions stopped, and that no job was lost
(docs/health.md).

The harsh profile (`--profile harsh`) adds what a bad day brings and takes the staff away: each
host breaks every few minutes of testing, runners are killed (their running jobs orphaned, the
runner back a minute later), workers die for a quarter of an hour (no heartbeat, their runner
gone), 70 % of repairs mend a DUT and 3 hosts can never be repaired; nobody presses Repair now.
Its report checks what a lab must do alone: the repairable hosts back in service, no job lost,
every job an infrastructure failure hit with a try left retried, and the hopeless hosts
`repair_failed` (with their next automatic try) at the end.

The day starts at a fixed instant (`--start`), so a seed is the same day whenever it runs
(`--trace FILE` writes a digest a step, to compare two runs). The figures are taken at the
fixed hour; a lab still testing then runs on until its queue drains (at most
`--after-drain-cap-minutes`) and is measured again, reported apart.

    python -m bench.labday --hosts 60 --workers 4 --hours 24 --drain-minutes 60 \
        --staff-rounds-hours 8 --repair-fixes 0.7 --seeds 1
    python -m bench.labday --profile harsh --seeds 1 2 3
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import math
import random
import statistics
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TextIO

from bench.cli import add_shape_options, print_result

BOARDS = ["eve", "kevin", "octopus", "hatch"]
# The simulated day starts here, not at the wall clock's now: a seed is then the same day
# whenever it runs (nothing in a day depends on which day it is, but a start at another second
# of the minute moved every step's time against anything counted in whole minutes).
START = datetime(2026, 1, 5, 6, 0, tzinfo=UTC)
TESTERS = ["alice", "bob", "carol"]


@dataclass(frozen=True)
class Shape:
    """The lab and its day: sizes, odds and durations (seconds)."""

    hosts: int = 60
    workers: int = 4
    hours: float = 24.0  # testers submit for this long
    # Then no more submissions; the lab finishes what it has and the repair loop settles.
    drain_minutes: float = 60
    # A person presses Repair now on every repair_failed host this often (0: nobody does):
    # once a shift in a lab staffed around the clock in three 8-hour shifts.
    staff_rounds_hours: float = 8
    step: int = 20
    infra_failures: float = 0.10  # of test runs: half host_ok false, half the runner vanishing
    real_failures: float = 0.10  # of the other test runs: the test itself failed
    repair_fixes: float = 0.7  # the odds that one repair mends a broken (repairable) DUT
    unrepairable: float = 0.05  # of hosts: every repair fails
    test_minutes: tuple[float, float] = (5, 40)
    verify_minutes: tuple[float, float] = (2, 5)
    repair_minutes: tuple[float, float] = (10, 30)
    suite_every_minutes: float = 15  # a suite from some tester, on average
    suite_jobs: tuple[int, int] = (10, 50)
    max_retries: int = 3
    # A real runner heartbeats every LEASE_TTL / 3; more often costs the benchmark time only.
    heartbeat_every: int = 120
    # How many hosts can never be repaired; -1: the share `unrepairable` of them.
    unrepairable_hosts: int = -1
    # A testing host breaks on average once per this many minutes of tests (0: `infra_failures`
    # decides instead, by run); its runner reports it broken (host_ok false) at the run's end.
    break_every_minutes: float = 0
    # Somewhere in the lab a runner is killed this often on average (0: never): its running
    # jobs are orphaned (their leases expire), it is back `runner_restart_seconds` later.
    runner_kill_every_minutes: float = 0
    runner_restart_seconds: int = 60
    # Somewhere in the lab a worker dies this often on average (0: never): no heartbeat, its
    # runner gone with its running jobs, for `dead_worker_minutes`.
    dead_worker_every_minutes: float = 0
    dead_worker_minutes: float = 15
    # REPAIR_FAILED_RETRY_SECONDS for the run (-1: the product's setting).
    repair_failed_retry_seconds: int = -1
    # REPAIR_FAILED_DEMAND_SECONDS for the run (-1: the product's setting; 0: no sooner round).
    repair_failed_demand_seconds: int = -1
    # After the fixed hour, run on until no test job is queued or running, at most this long.
    after_drain_cap_minutes: float = 360


# A bad day and no staff: docs/health.md's loop alone (bench/RESULTS.md, "A simulated lab day").
PROFILES: dict[str, dict[str, object]] = {
    "harsh": {
        "hosts": 60,
        "workers": 4,
        "hours": 8,
        "drain_minutes": 720,  # the night: nobody submits, the lab finishes and mends itself
        "staff_rounds_hours": 0,
        "step": 60,
        "break_every_minutes": 10,
        "infra_failures": 0.04,  # runners vanishing mid-run, beside the breaks
        "repair_fixes": 0.7,
        "unrepairable_hosts": 3,
        "test_minutes": (2, 10),
        "suite_every_minutes": 20,
        "runner_kill_every_minutes": 30,
        "dead_worker_every_minutes": 90,
    },
}


@dataclass
class Run:
    """What the simulated runner will do with one lease."""

    ends_at: datetime
    outcome: str  # passed, failed, host_broken, vanish, orphaned (its runner was killed)
    heartbeat_at: datetime
    attempt: int = 0  # the job's try this run is


@dataclass
class Lab:
    """The simulation's own view of the DUTs, which the scheduler does not see."""

    shape: Shape
    rng: random.Random
    broken: set[int] = field(default_factory=set)
    unrepairable: set[int] = field(default_factory=set)
    ever_broken: set[int] = field(default_factory=set)
    runs: dict[int, Run] = field(default_factory=dict)
    vanished: int = 0
    reported_broken: int = 0
    rounds: int = 0
    pressed: list[int] = field(default_factory=list)  # host ids, once per press
    # Worker id -> when its runner is back (killed runners, dead workers).
    down_until: dict[int, datetime] = field(default_factory=dict)
    runners_killed: int = 0
    workers_died: int = 0
    orphaned: int = 0
    # (job id, try) of every run an infrastructure failure ended: broken, vanished, orphaned.
    infra: list[tuple[int, int]] = field(default_factory=list)


def build_lab(shape: Shape, *, rng: random.Random) -> Lab:
    """Workers, labelled hosts and tester accounts, through the services."""
    from django.contrib.auth import get_user_model

    from hosts import services as host_services

    User = get_user_model()
    admin, _ = User.objects.get_or_create(username="labday-admin", is_staff=True)
    for name in TESTERS:
        User.objects.get_or_create(username=name)
    workers = [
        host_services.worker_create(name=f"labday-worker-{w}", by=admin)
        for w in range(1, shape.workers + 1)
    ]
    lab = Lab(shape=shape, rng=rng)
    hosts = []
    for i in range(shape.hosts):
        board = BOARDS[i % len(BOARDS)]
        labels = [f"board:{board}", f"pool:{'cq' if i % 3 else 'bvt'}"]
        if i % 5 == 0:
            labels.append("chameleon")
        hosts.append(
            host_services.host_create(
                hostname=f"labday-host{i:03d}",
                worker=workers[i % len(workers)],
                labels=labels,
                by=admin,
            )
        )
    count = shape.unrepairable_hosts
    if count < 0:
        count = round(shape.hosts * shape.unrepairable)
    lab.unrepairable = {host.pk for host in rng.sample(hosts, count)}
    return lab


def submit_suite(lab: Lab, *, at: datetime, number: int) -> None:
    """A tester submits a suite for one board, some jobs wanting the cq pool or a chameleon."""
    from django.contrib.auth import get_user_model

    from jobs import services

    rng = lab.rng
    board = rng.choice(BOARDS)
    extras = [[], [], ["pool:cq"], ["chameleon"]]
    specs = [
        services.JobSpec(
            name=f"test{i}",
            labels=[f"board:{board}", *rng.choice(extras)],
            max_retries=lab.shape.max_retries,
        )
        for i in range(rng.randint(*lab.shape.suite_jobs))
    ]
    services.suite_submit(
        owner=get_user_model().objects.get(username=rng.choice(TESTERS)),
        name=f"suite {number} {board}",
        jobs=specs,
        priority=rng.choice([20, 40, 50, 70]),
        allow_unmatched=True,  # some label sets fit no host, as testers do ask; they wait
        now=at,
    )


def plan_run(lab: Lab, *, kind: str, host_id: int, at: datetime, attempt: int = 0) -> Run:
    """Decide how a job just started on a host will end, and when."""
    from jobs.choices import JobKind

    rng, shape = lab.rng, lab.shape
    minutes = {
        JobKind.VERIFY: shape.verify_minutes,
        JobKind.REPAIR: shape.repair_minutes,
    }.get(kind, shape.test_minutes)
    ends_at = at + timedelta(minutes=rng.uniform(*minutes))
    if kind == JobKind.VERIFY:
        outcome = "failed" if host_id in lab.broken else "passed"
    elif kind == JobKind.REPAIR:
        fixed = host_id not in lab.unrepairable and (
            host_id not in lab.broken or rng.random() < shape.repair_fixes
        )
        outcome = "passed" if fixed else "failed"
    elif shape.break_every_minutes:
        # Breaking at a steady rate while testing: the longer the run, the likelier.
        minutes_run = (ends_at - at).total_seconds() / 60
        if rng.random() < 1 - math.exp(-minutes_run / shape.break_every_minutes):
            outcome = "host_broken"
        elif rng.random() < shape.infra_failures:
            outcome = "vanish"
        else:
            outcome = "failed" if rng.random() < shape.real_failures else "passed"
    else:
        roll = rng.random()
        if roll < shape.infra_failures / 2:
            outcome = "host_broken"
        elif roll < shape.infra_failures:
            outcome = "vanish"
        else:
            outcome = "failed" if rng.random() < shape.real_failures else "passed"
    return Run(ends_at=ends_at, outcome=outcome, heartbeat_at=at, attempt=attempt)


def finish(lab: Lab, lease, run: Run, *, at: datetime) -> None:  # noqa: ANN001
    """Complete a job as its runner would, and note what that did to the DUT."""
    from jobs import services
    from jobs.choices import JobKind, JobStatus

    job, host_id = lease.job, lease.host_id
    host_ok = run.outcome != "host_broken"
    if not host_ok:
        lab.broken.add(host_id)
        lab.ever_broken.add(host_id)
        lab.reported_broken += 1
        if job.kind == JobKind.TEST:
            lab.infra.append((job.pk, run.attempt))
    if job.kind == JobKind.REPAIR and run.outcome == "passed":
        lab.broken.discard(host_id)
    services.job_complete(
        job=job,
        result=JobStatus.PASSED if run.outcome == "passed" else JobStatus.FAILED,
        by="labday-runner",
        message=f"simulated {job.kind}: {run.outcome}",
        host_ok=host_ok,
        at=at,
    )


def vanishing(lab: Lab, lease, run: Run, *, at: datetime) -> None:  # noqa: ANN001
    """A run whose runner will die mid-run: heartbeats until then, silence after."""
    from jobs import services
    from jobs.choices import JobKind

    if at >= run.ends_at and run.heartbeat_at < run.ends_at:
        # The runner died mid-run: its lease goes unheartbeated from here on.
        run.heartbeat_at = run.ends_at
        lab.vanished += 1
        if lease.job.kind == JobKind.TEST:
            lab.infra.append((lease.job_id, run.attempt))
    elif at - run.heartbeat_at >= timedelta(seconds=lab.shape.heartbeat_every) and at < run.ends_at:
        services.lease_heartbeat(lease=lease, by="labday-runner", at=at)
        run.heartbeat_at = at


def start_run(lab: Lab, lease, *, at: datetime) -> None:  # noqa: ANN001
    """Start a leased job as its runner would, and decide how its run will end."""
    from jobs import services
    from jobs.choices import JobStatus

    if lease.job.status != JobStatus.LEASED:
        return  # started by a runner since killed: a restarted one leaves it to expire
    services.job_start(job=lease.job, by="labday-runner", at=at)
    lease.job.refresh_from_db(fields=["attempts"])
    lab.runs[lease.pk] = plan_run(
        lab, kind=lease.job.kind, host_id=lease.host_id, at=at, attempt=lease.job.attempts
    )


def runners_act(lab: Lab, *, at: datetime) -> None:
    """Every runner once: start new leases, heartbeat running ones, complete finished ones."""
    from jobs import services
    from jobs.models import Lease
    from schedsite.errors import ServiceError

    heartbeat = timedelta(seconds=lab.shape.heartbeat_every)
    active = Lease.objects.active().filter(job__isnull=False).select_related("job", "host")
    seen = set()
    for lease in active:
        seen.add(lease.pk)
        run = lab.runs.get(lease.pk)
        if lab.down_until.get(lease.host.worker_id, at) > at:
            continue  # its runner is down: nothing starts, beats or ends
        try:
            if run is None:
                start_run(lab, lease, at=at)
            elif run.outcome == "orphaned":
                continue  # a restarted runner leaves a job it cannot reattach to (runner/)
            elif run.outcome == "vanish":
                vanishing(lab, lease, run, at=at)
            elif at >= run.ends_at:
                finish(lab, lease, run, at=at)
            elif at - run.heartbeat_at >= heartbeat:
                services.lease_heartbeat(lease=lease, by="labday-runner", at=at)
                run.heartbeat_at = at
        except ServiceError as exc:
            print(f"  {at:%H:%M:%S} lease {lease.pk}: {exc}", file=sys.stderr)
    for lease_id in set(lab.runs) - seen:
        del lab.runs[lease_id]  # released: completed, expired, or timed out


def runner_down(lab: Lab, *, worker_id: int, at: datetime, seconds: float) -> None:
    """A worker's runner is killed (or its worker dies): its running jobs are orphaned."""
    from jobs.choices import JobKind
    from jobs.models import Lease

    lab.down_until[worker_id] = at + timedelta(seconds=seconds)
    leases = Lease.objects.active().filter(pk__in=list(lab.runs), host__worker_id=worker_id)
    for lease_id, job_id, kind in leases.values_list("pk", "job_id", "job__kind"):
        run = lab.runs[lease_id]
        if run.outcome == "orphaned" or (run.outcome == "vanish" and at >= run.ends_at):
            continue
        run.outcome = "orphaned"
        lab.orphaned += 1
        if kind == JobKind.TEST:
            lab.infra.append((job_id, run.attempt))


def chaos(lab: Lab, *, worker_ids: list[int], at: datetime) -> None:
    """Now and then a runner is killed or a worker dies, somewhere in the lab."""
    shape, rng = lab.shape, lab.rng
    up = [w for w in worker_ids if lab.down_until.get(w, at) <= at]
    if not up:
        return
    if shape.runner_kill_every_minutes and rng.random() < shape.step / (
        shape.runner_kill_every_minutes * 60
    ):
        lab.runners_killed += 1
        runner_down(lab, worker_id=rng.choice(up), at=at, seconds=shape.runner_restart_seconds)
    if shape.dead_worker_every_minutes and rng.random() < shape.step / (
        shape.dead_worker_every_minutes * 60
    ):
        lab.workers_died += 1
        runner_down(lab, worker_id=rng.choice(up), at=at, seconds=shape.dead_worker_minutes * 60)


def staff_round(lab: Lab, *, at: datetime) -> None:
    """A person presses Repair now on every repair_failed host, as on the hosts page."""
    from django.contrib.auth import get_user_model

    from hosts.choices import HostStatus
    from hosts.models import Host
    from jobs.services import health
    from schedsite.errors import ServiceError

    staff = get_user_model().objects.get(username="labday-admin")
    lab.rounds += 1
    for host in Host.objects.filter(status=HostStatus.REPAIR_FAILED).order_by("pk"):
        try:
            health.host_repair_now(host=host, by=staff)
        except ServiceError as exc:
            print(f"  {at:%H:%M:%S} repair now {host.hostname}: {exc}", file=sys.stderr)
        else:
            lab.pressed.append(host.pk)


@dataclass
class Day:
    """The simulated day's clock and the things each step acts on."""

    lab: Lab
    workers: list  # Worker rows, by name
    start: datetime
    trace: TextIO | None = None
    at: datetime = field(init=False)
    n: int = 0
    suites: int = 0

    def __post_init__(self) -> None:
        self.at = self.start

    def step(self, *, submitting: bool) -> None:
        """One step: chaos and submissions (while testers submit), heartbeats, a staff round
        when one is due, the tick, the runners."""
        from hosts import services as host_services
        from jobs import services

        lab, shape = self.lab, self.lab.shape
        self.n += 1
        self.at = at = self.at + timedelta(seconds=shape.step)
        if submitting:  # runners are killed and workers die while the lab is busy
            chaos(lab, worker_ids=[worker.pk for worker in self.workers], at=at)
        for worker in self.workers:
            if lab.down_until.get(worker.pk, at) <= at:  # a dead one sends nothing
                host_services.worker_heartbeat(worker=worker, at=at)
        if submitting and lab.rng.random() < shape.step / (shape.suite_every_minutes * 60):
            self.suites += 1
            submit_suite(lab, at=at, number=self.suites)
        round_steps = int(shape.staff_rounds_hours * 3600 / shape.step)
        if round_steps and self.n % round_steps == 0:
            staff_round(lab, at=at)
        services.scheduler_tick(now=at)
        runners_act(lab, at=at)
        if self.trace is not None:
            print(step_digest(lab, n=self.n, at=at - self.start), file=self.trace)


def simulate_day(
    shape: Shape, *, seed: int, start: datetime, trace: TextIO | None = None
) -> dict[str, object]:
    """Build the lab, run its day and its drain; return the report."""
    from django.conf import settings

    from hosts.models import Worker

    if shape.repair_failed_retry_seconds >= 0:
        settings.REPAIR_FAILED_RETRY_SECONDS = shape.repair_failed_retry_seconds
    if shape.repair_failed_demand_seconds >= 0:
        settings.REPAIR_FAILED_DEMAND_SECONDS = shape.repair_failed_demand_seconds
    lab = build_lab(shape, rng=random.Random(seed))
    day = Day(lab, list(Worker.objects.order_by("name")), start, trace)
    steps = int(shape.hours * 3600 / shape.step)
    drain_steps = int(shape.drain_minutes * 60 / shape.step)
    at_stop: dict[str, object] = {}
    began = time.perf_counter()
    for n in range(1, steps + drain_steps + 1):
        day.step(submitting=n <= steps)
        if n == steps:
            at_stop = host_figures(lab)
    end_figures = {
        **report(lab, suites=day.suites),
        "repairable_out_at_the_end": out_of_service(lab, at=day.at),
        "unfinished_tests_at_the_end": unfinished_tests(),
    }
    return {
        "seed": seed,
        "start": f"{start:%Y-%m-%dT%H:%M:%S%z}",
        "simulated_hours": shape.hours,
        "drain_minutes": shape.drain_minutes,
        "staff_rounds_hours": shape.staff_rounds_hours,
        "repair_fixes": shape.repair_fixes,
        "repair_failed_retry_seconds": settings.REPAIR_FAILED_RETRY_SECONDS,
        "repair_failed_demand_seconds": settings.REPAIR_FAILED_DEMAND_SECONDS,
        "at_submissions_stop": at_stop,
        **end_figures,
        "after_the_fixed_hour_until_the_queue_drained": run_until_drained(day),
        "wall_s": round(time.perf_counter() - began, 1),
    }


def run_until_drained(day: Day) -> dict[str, object] | None:
    """Past the fixed hour the figures above are taken at: if the lab is still testing then, it
    runs on (nobody submits) until no test job is queued or running, at most
    `after_drain_cap_minutes`, and is measured again. None if nothing was left to run."""
    fixed_hour = day.at
    cap = timedelta(minutes=day.lab.shape.after_drain_cap_minutes)
    while unfinished_count() and day.at - fixed_hour < cap:
        day.step(submitting=False)
    if day.at == fixed_hour:
        return None
    left = unfinished_count()
    return {
        "minutes_after_the_fixed_hour": round((day.at - fixed_hour).total_seconds() / 60),
        "queue_drained": not left,
        **host_figures(day.lab),
        "tests_still_queued_or_running": left,
        "repairable_out": out_of_service(day.lab, at=day.at),
        "sooner_repairs_idle": hopeless_figures(day.lab)["sooner_repairs_idle"],
    }


def unfinished_count() -> int:
    """Test jobs still queued or running."""
    from jobs.choices import ACTIVE_JOB_STATUSES, JobKind, JobStatus
    from jobs.models import Job

    return Job.objects.filter(
        kind=JobKind.TEST, status__in=[JobStatus.QUEUED, *ACTIVE_JOB_STATUSES]
    ).count()


def step_digest(lab: Lab, *, n: int, at: timedelta) -> str:
    """One line a step for `--trace`: two runs of a seed that differ show where they part."""
    from django.db.models import Max

    from hosts.models import HostEvent
    from jobs.models import Job, Lease

    rng = hashlib.sha1(repr(lab.rng.getstate()).encode()).hexdigest()[:10]
    return (
        f"{n} {at.total_seconds():.0f}s rng={rng} runs={sorted(lab.runs)[-3:]} "
        f"broken={sorted(lab.broken)} lease={Lease.objects.aggregate(m=Max('id'))['m']} "
        f"job={Job.objects.aggregate(m=Max('id'))['m']} "
        f"event={HostEvent.objects.aggregate(m=Max('id'))['m']}"
    )


def unfinished_tests() -> dict[str, int]:
    """The test jobs still queued or running at the end, by labels, status and try."""
    from jobs.choices import ACTIVE_JOB_STATUSES, JobKind, JobStatus
    from jobs.models import Job

    jobs = Job.objects.filter(
        kind=JobKind.TEST, status__in=[JobStatus.QUEUED, *ACTIVE_JOB_STATUSES]
    )
    counts = Counter(
        f"{key or '-'} {status} try {attempts}"
        for key, status, attempts in jobs.values_list("label_key", "status", "attempts")
    )
    return dict(sorted(counts.items()))


def out_of_service(lab: Lab, *, at: datetime) -> list[dict[str, object]]:
    """Each repairable host not in service at `at`, and why: what it waits for."""
    from hosts.choices import EventKind, HostStatus
    from hosts.models import Host
    from jobs.choices import MAINTENANCE_KINDS
    from jobs.models import Job
    from jobs.recovery import sooner_repair_at
    from jobs.scheduling.maintenance import jobs_waiting_for

    out = []
    hosts = Host.objects.exclude(status=HostStatus.READY).exclude(pk__in=lab.unrepairable)
    hosts = list(hosts.select_related("worker").prefetch_related("labels").order_by("hostname"))
    # Queued test jobs that fit each and waited REPAIR_FAILED_DEMAND_SECONDS: what would bring
    # a repair_failed host's round sooner (docs/health.md#sooner-when-jobs-need-it).
    wanted_by = jobs_waiting_for(hosts, now=at) if hosts else {}
    for host in hosts:
        sooner = sooner_repair_at(host.repair_rounds, host.next_repair_at)
        job = Job.objects.filter(host=host, kind__in=MAINTENANCE_KINDS).order_by("-id").first()
        last = host.events.filter(kind=EventKind.STATUS).order_by("-id").first()
        out.append(
            {
                "host": host.hostname,
                "status": host.status,
                "dut_broken": host.pk in lab.broken,
                "repair_attempts": host.repair_attempts,
                "repair_rounds": host.repair_rounds,
                "repair_not_before_in_s": host.repair_not_before
                and int((host.repair_not_before - at).total_seconds()),
                "next_repair_in_s": host.next_repair_at
                and int((host.next_repair_at - at).total_seconds()),
                "sooner_repair_in_s": sooner and int((sooner - at).total_seconds()),
                "labels": sorted(label.name for label in host.labels.all()),
                "queued_jobs_waiting_for_it": wanted_by.get(host.pk, 0),
                "locked": host.locked,
                "worker_down": lab.down_until.get(host.worker_id, at) > at,
                "worker_paused": host.worker.paused,
                "last_maintenance": job and f"{job.kind} {job.status}",
                "last_status_event": last
                and f"{int((at - last.created_at).total_seconds())} s ago: {last.message[:120]}",
            }
        )
    return out


def host_figures(lab: Lab) -> dict[str, object]:
    """Where the repairable hosts are now: in service, given up on, or on their way back."""
    from hosts.choices import HostStatus
    from hosts.models import Host

    hosts = dict(Host.objects.values_list("pk", "status"))
    repairable = [pk for pk in hosts if pk not in lab.unrepairable]
    in_service = sum(1 for pk in repairable if hosts[pk] == HostStatus.READY)
    failed = sum(1 for pk in repairable if hosts[pk] == HostStatus.REPAIR_FAILED)
    return {
        "in_service_of_repairable": f"{in_service}/{len(repairable)}",
        "in_service_pct": round(100 * in_service / max(1, len(repairable)), 1),
        "repairable_repair_failed": failed,
        "repairable_in_repair": len(repairable) - in_service - failed,
        "hosts_by_status": dict(sorted(Counter(hosts.values()).items())),
    }


def report(lab: Lab, *, suites: int) -> dict[str, object]:
    """What the day came to: hosts in service, jobs by outcome, maintenance by result."""
    from django.db.models import Count, Exists, OuterRef, Sum

    from hosts.choices import HostStatus
    from hosts.models import Host
    from jobs.choices import ACTIVE_JOB_STATUSES, TERMINAL_JOB_STATUSES, JobKind, JobStatus
    from jobs.models import Job, Lease

    hosts = dict(Host.objects.values_list("pk", "status"))
    tests = Job.objects.filter(kind=JobKind.TEST)
    infra = tests.filter(message__contains="broke (")
    held = Exists(Lease.objects.active().filter(job=OuterRef("pk")))
    lost = (
        Job.objects.exclude(status__in=[*TERMINAL_JOB_STATUSES, JobStatus.QUEUED])
        .exclude(status__in=ACTIVE_JOB_STATUSES)
        .count()
    ) + Job.objects.filter(status__in=ACTIVE_JOB_STATUSES).exclude(held).count()

    def by_status(kind: str) -> dict[str, int]:
        rows = Job.objects.filter(kind=kind).values_list("status").annotate(n=Count("id"))
        return dict(sorted(rows.order_by()))

    retries = tests.aggregate(n=Sum("attempts"))["n"] or 0
    started = tests.exclude(attempts=0).count()
    pressed = set(lab.pressed)
    return {
        "hosts": len(hosts),
        "unrepairable_hosts": len(lab.unrepairable),
        **host_figures(lab),
        "staff_rounds": lab.rounds,
        "repair_now_pressed": len(lab.pressed),
        "pressed_repairable_back": sum(
            1 for pk in pressed - lab.unrepairable if hosts[pk] == HostStatus.READY
        ),
        "broken_repairable": len(lab.ever_broken - lab.unrepairable),
        "broken_repairable_back": sum(
            1 for pk in lab.ever_broken - lab.unrepairable if hosts[pk] == HostStatus.READY
        ),
        "suites": suites,
        "jobs_submitted": tests.count(),
        "passed": tests.filter(status=JobStatus.PASSED).count(),
        "failed_real": tests.filter(status=JobStatus.FAILED)
        .exclude(message__contains="broke (")
        .count(),
        "failed_infra_no_retries_left": infra.filter(status=JobStatus.FAILED).count(),
        "error_runner_vanished_no_retries_left": infra.filter(status=JobStatus.ERROR).count(),
        "still_queued": tests.filter(status=JobStatus.QUEUED).count(),
        "still_active": tests.filter(status__in=ACTIVE_JOB_STATUSES).count(),
        "other_end": tests.exclude(
            status__in=[*ACTIVE_JOB_STATUSES, JobStatus.QUEUED, JobStatus.PASSED, JobStatus.FAILED]
        )
        .exclude(status=JobStatus.ERROR, message__contains="broke (")
        .count(),
        "lost": lost,
        "retries": retries - started,
        "runs_reported_broken": lab.reported_broken,
        "runs_vanished": lab.vanished,
        "runners_killed": lab.runners_killed,
        "workers_died": lab.workers_died,
        "runs_orphaned": lab.orphaned,
        **infra_figures(lab),
        **hopeless_figures(lab),
        "repairs": by_status(JobKind.REPAIR),
        "verifies": by_status(JobKind.VERIFY),
    }


def infra_figures(lab: Lab) -> dict[str, object]:
    """Every test run an infrastructure failure ended: was its job retried when it had a try left?

    A try left and retried means the job went on to a later try or waits queued for one; a job
    that ended on the very try that failed, with tries left, is the failure the loop must not have.
    """
    from jobs.choices import JobStatus
    from jobs.models import Job

    jobs = Job.objects.in_bulk({job_id for job_id, _ in lab.infra})
    with_try_left = not_retried = 0
    for job_id, attempt in lab.infra:
        job = jobs[job_id]
        if attempt > job.max_retries:
            continue  # that was its last try
        with_try_left += 1
        waiting = (JobStatus.QUEUED, JobStatus.LEASED, JobStatus.RUNNING)
        if job.attempts == attempt and job.status not in waiting:
            not_retried += 1
    return {
        "infra_failures": len(lab.infra),
        "infra_failures_with_a_try_left": with_try_left,
        "infra_failures_with_a_try_left_not_retried": not_retried,
    }


def hopeless_figures(lab: Lab) -> dict[str, object]:
    """The hosts no repair mends: where they are, and whether their next automatic try shows;
    and how often the repair loop gave a repairable host up, and tried again by itself."""
    from hosts.choices import EventKind, HostStatus
    from hosts.models import Host, HostEvent

    hosts = Host.objects.filter(pk__in=lab.unrepairable).order_by("hostname")
    status_events = HostEvent.objects.filter(kind=EventKind.STATUS)
    gave_up = status_events.filter(new_status=HostStatus.REPAIR_FAILED)
    automatic = status_events.filter(
        old_status=HostStatus.REPAIR_FAILED, message__startswith="automatic repair"
    )
    return {
        "repairable_given_up": gave_up.exclude(host_id__in=lab.unrepairable).count(),
        "automatic_repairs": automatic.count(),
        # Of those, the rounds queued jobs brought forward (REPAIR_FAILED_DEMAND_SECONDS).
        "sooner_repairs": automatic.filter(message__startswith="automatic repair, sooner").count(),
        # Of those, the rounds an idle lab brought forward (no queued job fitted the host).
        "sooner_repairs_idle": automatic.filter(
            message__startswith="automatic repair, sooner: the lab is idle"
        ).count(),
        "hopeless_hosts": {
            host.hostname: {
                "status": host.status,
                "next_repair_at": host.next_repair_at and f"{host.next_repair_at:%H:%M}",
            }
            for host in hosts
        },
    }


# The lab's and the day's parameters a run can set, with what each means.
SHAPE_OPTIONS = (
    ("hosts", int, None),
    ("workers", int, None),
    ("hours", float, "submitting hours"),
    ("drain_minutes", float, "after the submitting hours, run on this long with no submissions"),
    ("staff_rounds_hours", float, "press Repair now on each repair_failed host this often (0: no)"),
    ("repair_fixes", float, "odds that one repair mends a broken, repairable DUT"),
    ("step", int, "simulated seconds a step"),
    ("suite_every_minutes", float, "a suite from some tester this often on average: the load"),
    ("unrepairable_hosts", int, "hosts no repair mends (-1: 5 % of them)"),
    ("break_every_minutes", float, "a testing host breaks once per this many minutes (0: by run)"),
    ("runner_kill_every_minutes", float, "a runner is killed this often, lab-wide (0: never)"),
    ("dead_worker_every_minutes", float, "a worker dies this often, lab-wide (0: never)"),
    ("dead_worker_minutes", float, "how long a dead worker stays dead"),
    ("repair_failed_retry_seconds", int, "REPAIR_FAILED_RETRY_SECONDS (-1: the setting's)"),
    ("repair_failed_demand_seconds", int, "REPAIR_FAILED_DEMAND_SECONDS (-1: the setting's)"),
    ("after_drain_cap_minutes", float, "then run on until the queue drains, at most this long"),
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--profile", choices=sorted(PROFILES), help="start from this profile's shape"
    )
    known, _ = parser.parse_known_args()
    defaults = Shape(**PROFILES[known.profile]) if known.profile else Shape()
    add_shape_options(parser, SHAPE_OPTIONS, defaults)
    parser.add_argument("--seeds", type=int, nargs="+", default=[1])
    parser.add_argument("--db", default="bench_labday", help="throwaway database (bench_*)")
    parser.add_argument("--json", action="store_true")
    parser.add_argument(
        "--start",
        type=datetime.fromisoformat,
        default=START,
        help=f"the simulated day's start, ISO 8601 (default {START:%Y-%m-%dT%H:%M%z}: the same "
        "day for a seed whenever it runs)",
    )
    parser.add_argument("--trace", help="write one line a step to this file (seed appended)")
    args = parser.parse_args()
    if not 0 <= args.repair_fixes <= 1:
        parser.error("--repair-fixes is a probability: between 0 and 1")
    if min(args.drain_minutes, args.staff_rounds_hours) < 0 or args.suite_every_minutes <= 0:
        parser.error("--drain-minutes, --staff-rounds-hours: >= 0; --suite-every-minutes: > 0")
    from bench import dbload

    # On the profile's shape: it keeps the values no option names (test durations, odds).
    shape = dataclasses.replace(
        defaults, **{name: getattr(args, name) for name, *_ in SHAPE_OPTIONS}
    )
    dbload.setup_simulation(args.db)
    from django.core.management import call_command

    results = []
    for seed in args.seeds:
        if results:  # each seed on an empty lab
            call_command("flush", verbosity=0, interactive=False)
        if args.trace:
            with open(f"{args.trace}.{seed}", "w") as trace:
                result = simulate_day(shape, seed=seed, start=args.start, trace=trace)
        else:
            result = simulate_day(shape, seed=seed, start=args.start)
        print_result(result, as_json=args.json, width=38)
        results.append(result)
    dbload.drop_database(args.db)
    if len(results) > 1:
        pct = [r["in_service_pct"] for r in results]
        at_stop = [r["at_submissions_stop"]["in_service_pct"] for r in results]
        wall = [r["wall_s"] for r in results]
        print(
            f"in service after the drain: min {min(pct)} % median {statistics.median(pct)} %; "
            f"when submissions stopped: min {min(at_stop)} % "
            f"median {statistics.median(at_stop)} %; "
            f"lost: max {max(r['lost'] for r in results)}; "
            f"wall: min {min(wall)} s median {statistics.median(wall)} s"
        )


if __name__ == "__main__":
    main()
