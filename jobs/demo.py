"""The demo lab that `make run` seeds, its runner accounts, and what keeps its queue moving."""

from __future__ import annotations

import random
from collections import Counter
from datetime import datetime, timedelta
from pathlib import Path

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.db import transaction
from django.db.models import Count, Max, QuerySet
from django.utils import timezone
from rest_framework.authtoken.models import Token

from hosts import services as host_services
from hosts.choices import HostStatus
from hosts.models import HealthPolicy, Host, Worker
from jobs import services, suite_templates
from jobs.choices import DEFAULT_PRIORITY, JobKind, JobStatus
from jobs.models import Job, Lease, Suite, decode_labels, encode_labels
from schedsite.errors import ServiceError

DEMO_USERS = {  # username: (password, staff)
    "admin": ("admin", True),
    "alice": ("alice", False),
}
BOARDS = ["eve", "kevin", "octopus", "hatch"]
TESTS = [
    "login_Smoke",
    "graphics_GLBench",
    "power_Resume",
    "network_WiFi",
    "audio_Loopback",
    "video_Decode",
    "storage_Fio",
    "bluetooth_Pair",
]
# The feeder keeps this many jobs that some host could run queued. It submits one suite at a
# time, at most one per SUBMIT_EVERY, sized to fill the gap: at most ten submissions a minute
# as the tester alice, within a tester's limits (docs/security.md#submission-limits).
KEEP_QUEUED = 30
SUBMIT_EVERY = timedelta(seconds=6)
MAX_SUITE_JOBS = 40
# The demo's health policy: hosts of the busy pool get a verify every so many test jobs, so
# verify jobs show up in the queue without waiting for a host to break.
HEALTH_POLICY = {"name": "pool:cq every 20 jobs", "labels": ["pool:cq"], "every_jobs": 20}
# How the in-process runners play each kind of job: (seconds it runs, chance it passes).
SIMULATED_RUNS = {
    JobKind.TEST: ((3, 12), 0.85),
    JobKind.VERIFY: ((1, 3), 0.9),
    JobKind.REPAIR: ((3, 8), 0.7),
}
# Chance that a test run finds its DUT broken (host_ok false: the host goes to repair).
SIMULATED_HOST_BROKEN = 0.03
# How the in-process runners play provisioning a lease's provision_to build onto its host:
# (seconds it takes, chance it works), as scripts/simulated_provision.sh does.
SIMULATED_PROVISION = ((2, 6), 0.95)


def ensure_groups() -> None:
    for name in ("lab-staff", "runners"):
        Group.objects.get_or_create(name=name)


def ensure_users() -> None:
    User = get_user_model()
    for username, (password, staff) in DEMO_USERS.items():
        user, created = User.objects.get_or_create(username=username)
        if created:
            user.set_password(password)
            user.is_staff = staff
            user.is_superuser = staff
            user.save()


@transaction.atomic
def seed(*, hosts_per_worker: int = 8, rng: random.Random | None = None) -> str:
    """Build the demo lab once: workers, labelled hosts, users and a few suites."""
    rng = rng or random.Random(7)
    ensure_groups()
    ensure_users()
    if Host.objects.exists():
        return "demo lab already present; left as it is"
    admin = get_user_model().objects.get(username="admin")
    alice = get_user_model().objects.get(username="alice")
    now = timezone.now()
    for w in range(1, 4):
        worker = host_services.worker_create(name=f"worker-{w}", by=admin)
        Worker.objects.filter(pk=worker.pk).update(last_seen=now)
        for i in range(hosts_per_worker):
            board = BOARDS[(w + i) % len(BOARDS)]
            labels = [
                f"board:{board}",
                f"pool:{'cq' if i % 3 else 'bvt'}",
                f"model:{board}-{i % 2}",
            ]
            if i % 4 == 0:
                labels.append("chameleon")
            if i % 5 == 0:
                labels.append("bluetooth")
            if i < 4:
                # Each worker's first row is an RF chamber: its multi-host jobs run together.
                labels.append(f"chamber:rf{w}")
            host_services.host_create(
                hostname=f"chromeos{w}-row{i // 4 + 1}-host{i % 4 + 1}.lab",
                worker=worker,
                labels=labels,
                by=admin,
                current_build=f"R{118 + i % 3}-demo",
            )
    # A worker that may run fewer jobs than it has hosts: its waiting jobs say "at capacity".
    host_services.worker_update(worker=Worker.objects.get(name="worker-3"), by=admin, max_jobs=5)
    # Aging on: the queue page shows low-priority jobs gaining priority as they wait.
    services.update_scheduler_settings(
        admin, reason="demo: a weekly job is not starved by the cq stream", aging_minutes=10
    )
    first = Host.objects.order_by("hostname")
    host_services.host_lock(host=first[1], by=admin, reason="flaky USB hub, debugging")
    # The health loop repairs it by itself within the first minutes of the demo.
    services.host_set_status(
        host=first[5], status=HostStatus.NEEDS_REPAIR, by=admin, message="battery swollen"
    )
    HealthPolicy.objects.create(
        name=HEALTH_POLICY["name"],
        label_key=encode_labels(HEALTH_POLICY["labels"]),
        every_jobs=HEALTH_POLICY["every_jobs"],
    )
    submit_random_suite(owner=alice, rng=rng, name="bvt-inline R120", priority=70, min_duts=3)
    graphics = submit_random_suite(
        owner=alice, rng=rng, name="graphics nightly", priority=20, min_duts=2, jobs=14
    )
    if graphics is not None:
        # A scheduled template: the templates page shows its runs, one suite per night.
        suite_templates.template_from_suite(
            by=alice, suite=graphics, name="graphics nightly", cron="0 2 * * *"
        )
    pfq = submit_random_suite(owner=admin, rng=rng, name="pfq smoke", priority=60, max_duts=4)
    if pfq is not None:
        # Runs every half hour while the demo runs, skipped while the previous run is unfinished.
        suite_templates.template_from_suite(
            by=admin, suite=pfq, name="pfq smoke every 30 min", cron="*/30 * * * *"
        )
    services.suite_submit(
        owner=alice,
        name="bluetooth everywhere",
        priority=30,
        fanout_labels=["bluetooth"],
        fanout_name="bluetooth_Pair",
    )
    # Tests that need a DUT and a Wi-Fi peer in one chamber (docs/scheduling.md#multi-host-jobs).
    services.suite_submit(
        owner=alice,
        name="wifi interop R120",
        priority=40,
        build="R120-demo",
        jobs=[interop_job(f"network_WiFiInterop.{i}") for i in range(3)],
    )
    # Shows a job that waits for a host the lab does not have, and says why.
    unmatched = services.JobSpec(name="needs a board nobody has", labels=["board:sarien"])
    services.job_submit(owner=alice, spec=unmatched, allow_unmatched=True)
    return f"seeded {Host.objects.count()} hosts on {Worker.objects.count()} workers"


def interop_job(name: str, *, board: str | None = None) -> services.JobSpec:
    """A two-host job: a DUT (of the board, if given) and a peer, in one RF chamber."""
    dut = [f"board:{board}"] if board else []
    return services.JobSpec(
        name=name,
        roles=[{"name": "dut", "labels": dut}, {"name": "peer", "labels": []}],
        together_by="chamber",
        max_retries=1,
    )


def _chamber_pair(board: str, hosts: dict[int, frozenset[str]]) -> bool:
    """Whether some chamber holds a host of the board and one other host."""
    chambers: Counter[str] = Counter()
    with_board: set[str] = set()
    for labels in hosts.values():
        for label in labels:
            if label.startswith("chamber:"):
                chambers[label] += 1
                if f"board:{board}" in labels:
                    with_board.add(label)
    return any(chambers[chamber] >= 2 for chamber in with_board)


def submit_random_suite(
    *,
    owner,  # noqa: ANN001
    rng: random.Random,
    name: str,
    priority: int = DEFAULT_PRIORITY,
    min_duts: int = 0,
    max_duts: int | None = None,
    jobs: int = 8,
    now: datetime | None = None,
) -> Suite | None:
    """Submit a suite of simulated tests for one board, every job runnable on some host."""
    hosts = working_label_sets()
    boards = [b for b in BOARDS if _carried([f"board:{b}"], hosts)]
    if not boards:
        return None  # the lab has no demo boards left: nothing could run
    # The board with the least work queued, so that no board's hosts sit idle for long.
    queued = _queued_per_board()
    rng.shuffle(boards)
    board = min(boards, key=lambda b: queued[b])
    specs = []
    for i in range(jobs):
        labels = [f"board:{board}"] if i % 3 else [f"board:{board}", "pool:cq"]
        if i == 4:
            labels.append("chameleon")
        if not _carried(labels, hosts):
            # Only the seeded "needs a board nobody has" job shows an impossible wait; jobs
            # for which every host is locked would wait as long, piling up in the queue.
            labels = [f"board:{board}"]
        if i == 5 and _chamber_pair(board, hosts):
            # Now and then a test that needs two hosts at once.
            specs.append(interop_job(f"network_WiFiInterop.{i}", board=board))
            continue
        specs.append(
            services.JobSpec(name=f"{rng.choice(TESTS)}.{i}", labels=labels, max_retries=1)
        )
    return services.suite_submit(
        owner=owner,
        name=name,
        jobs=specs,
        priority=priority,
        min_duts=min_duts,
        max_duts=max_duts,
        build=f"R{rng.randint(118, 121)}-demo",
        now=now,
    )


def simulate_step(
    *, rng: random.Random, keep_queued: int = KEEP_QUEUED, now: datetime | None = None
) -> dict:
    """Act as every worker's runner once, in-process: start leased jobs, finish some.

    Verify and repair jobs run too, with the odds of the demo's scripts, so hosts go through
    the real health loop. `make run` uses real `run_worker` processes instead (see rundemo);
    this in-process stand-in stays for tests and for `simulate_runners` on a machine without
    a web server.
    """
    now = now or timezone.now()
    Worker.objects.update(last_seen=now)
    done = started = 0
    for lease in Lease.objects.active().filter(job__isnull=False).select_related("job", "host"):
        job = lease.job
        try:
            if job.status == JobStatus.LEASED and lease.provision_to:
                started += simulated_provision(lease, rng=rng, now=now)
            elif job.status == JobStatus.LEASED:
                services.job_start(job=job, by="runner-sim", at=now)
                started += 1
            elif job.status == JobStatus.RUNNING:
                services.lease_heartbeat(lease=lease, by="runner-sim", at=now)
                if simulated_finish(job, rng=rng, now=now):
                    done += 1
        except ServiceError:
            continue  # the lease moved on meanwhile (released, expired): nothing to do
    feed_step(rng=rng, keep_queued=keep_queued, now=now)
    return {"started": started, "finished": done, "at": now}


def simulated_provision(lease: Lease, *, rng: random.Random, now: datetime) -> bool:
    """Put the lease's build on its host once the simulated flashing took its time, then start
    the job; or, now and then, fail it as the host's failure. True when the job started."""
    (shortest, longest), works = SIMULATED_PROVISION
    took = (now - lease.acquired_at).total_seconds()
    if took <= rng.uniform(shortest, longest):
        services.lease_heartbeat(lease=lease, by="runner-sim", at=now)
        return False
    if rng.random() >= works:
        services.lease_job_complete(
            lease=lease,
            result=JobStatus.FAILED,
            by="runner-sim",
            message=f"provision: flashing {lease.provision_to}: image verification failed",
            host_ok=False,
            provision_failed=True,
            provision_seconds=took,
            at=now,
        )
        return False
    build = lease.provision_to
    services.lease_job_start(
        lease=lease, by="runner-sim", at=now, build=build, provision_seconds=took
    )
    return True


def simulated_finish(job: Job, *, rng: random.Random, now: datetime) -> bool:
    """Complete a running job once it ran its simulated time, as the demo's scripts would."""
    (shortest, longest), passes = SIMULATED_RUNS.get(job.kind, SIMULATED_RUNS[JobKind.TEST])
    ran = (now - job.started_at).total_seconds() if job.started_at else 0
    if ran <= rng.uniform(shortest, longest):
        return False
    passed = rng.random() < passes
    services.job_complete(
        job=job,
        result=JobStatus.PASSED if passed else JobStatus.FAILED,
        by="runner-sim",
        message=f"simulated {job.kind} {'passed' if passed else 'failed'}",
        host_ok=job.kind != JobKind.TEST or rng.random() >= SIMULATED_HOST_BROKEN,
        at=now,
    )
    return True


def _queued_per_board() -> Counter[str]:
    """How many jobs are queued for each demo board."""
    queued: Counter[str] = Counter()
    rows = Job.objects.queued().values_list("label_key").annotate(n=Count("id")).order_by()
    for label_key, n in rows:
        for label in decode_labels(label_key):
            if label.startswith("board:"):
                queued[label.removeprefix("board:")] += n
    return queued


def working_hosts() -> QuerySet[Host]:
    """Hosts that take the demo's work now or soon: leases end, the health loop mends hosts."""
    # A host waiting for or running a verify or repair comes back by itself; not the hosts
    # whose repairs gave up or that were retired, nor those a visitor (or the seed) locked or
    # whose worker was paused: those may stay out for the whole demo.
    return (
        Host.objects.filter(locked=False)
        .exclude(status__in=[HostStatus.REPAIR_FAILED, HostStatus.RETIRED])
        .exclude(worker__paused=True)
    )


def working_label_sets() -> dict[int, frozenset[str]]:
    """Each working host's labels, by host id (the demo lab is small: one read for all)."""
    return {
        host.pk: frozenset(host.label_names) for host in working_hosts().prefetch_related("labels")
    }


def _carried(
    labels: list[str], hosts: dict[int, frozenset[str]], *, host_id: int | None = None
) -> bool:
    """Whether one of the hosts (the pinned one, if given) carries all the labels."""
    wanted = frozenset(labels)
    if host_id is not None:
        return host_id in hosts and wanted <= hosts[host_id]
    return any(wanted <= carried for carried in hosts.values())


def runnable_queued_count() -> int:
    """Count the queued jobs that a working host could run: labels, and pinned host."""
    hosts = working_label_sets()
    classes = (
        Job.objects.queued().values_list("label_key", "host_id").annotate(n=Count("id")).order_by()
    )
    return sum(
        n
        for label_key, host_id, n in classes
        if _carried(decode_labels(label_key), hosts, host_id=host_id)
    )


def feed_step(
    *, rng: random.Random, keep_queued: int = KEEP_QUEUED, now: datetime | None = None
) -> Suite | None:
    """Keep the demo lab moving: top up the queue with work some host could run."""
    now = now or timezone.now()
    # Count only work a host could run: jobs no host can take (the seeded showcase, or one a
    # visitor submits or pins to a host they locked) wait forever, and must not stop top-ups.
    missing = keep_queued - runnable_queued_count()
    owner = get_user_model().objects.filter(username="alice").first()
    if missing <= 0 or owner is None:
        return None
    last = Suite.objects.filter(owner=owner).aggregate(last=Max("created_at"))["last"]
    if last is not None and now - last < SUBMIT_EVERY:
        return None
    try:
        return submit_random_suite(
            owner=owner,
            rng=rng,
            name=f"continuous {now:%H:%M:%S}",
            priority=rng.choice([20, 40, 50, 70]),
            min_duts=rng.choice([0, 2]),
            jobs=min(max(missing, 4) + rng.randint(0, 6), MAX_SUITE_JOBS),
            now=now,
        )
    except ServiceError:
        return None  # a submission limit, say: the next step tries again


# The demo's runners are real `run_worker` processes running these simulated scripts. The
# test takes 3-12 s, passes 85% of the time, and now and then reports its DUT broken (exit
# status 3); the verify takes 1-3 s and passes 90%; the repair takes 3-8 s and passes 70%.
SCRIPTS = Path(__file__).resolve().parent.parent / "scripts"
SIMULATED_TEST = ["bash", str(SCRIPTS / "simulated_test.sh")]
SIMULATED_VERIFY = ["bash", str(SCRIPTS / "simulated_verify.sh")]
SIMULATED_REPAIR = ["bash", str(SCRIPTS / "simulated_repair.sh")]
# Provisioning a host to a lease's build takes 2-6 s and works 95% of the time.
SIMULATED_PROVISION_CMD = ["bash", str(SCRIPTS / "simulated_provision.sh")]
SIMULATED_BROKEN_EXIT = 3


def ensure_runners() -> dict[str, str]:
    """Give every worker a runner account; return each worker's runner token by name."""
    tokens: dict[str, str] = {}
    for name in Worker.objects.order_by("name").values_list("name", flat=True):
        _worker, user = host_services.worker_runner_ensure(worker_name=name, by="demo")
        tokens[name] = Token.objects.get_or_create(user=user)[0].key
    return tokens
