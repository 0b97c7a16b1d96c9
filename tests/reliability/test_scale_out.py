"""Two qclusters on Redis and concurrent writers: no double lease, no lost job, one planner."""

from __future__ import annotations

import random
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from datetime import timedelta

import pytest
from django.db import OperationalError, connection, connections
from django.utils import timezone

from hosts import services as host_services
from hosts.choices import EventKind, HostStatus
from hosts.models import Host, HostEvent
from jobs import services
from jobs import services as job_services
from jobs.choices import TERMINAL_JOB_STATUSES, JobStatus, ReleaseReason
from jobs.models import Job, Lease, SchedulerTick, Suite
from schedsite.errors import Conflict
from tests import factories as f
from tests.reliability.support import Proc, RedisQueue, cluster_env, wait_until

pytestmark = [pytest.mark.postgres, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

APP = "reltest-scaleout"
RUN_SECONDS = 20  # writers and clusters racing
DRAIN_DEADLINE = 60  # then every job must finish, with only the runner still working
LABELS = (["board:x"], ["board:x", "bt"])

# One statement, so one snapshot: checks that must hold at every instant, whoever is writing.
INVARIANTS_SQL = """
SELECT 'host ' || host_id || ' in ' || count(*) || ' active leases'
  FROM jobs_lease WHERE released_at IS NULL GROUP BY host_id HAVING count(*) > 1
UNION ALL
SELECT 'job ' || job_id || ' in ' || count(*) || ' active leases'
  FROM jobs_lease WHERE released_at IS NULL AND job_id IS NOT NULL
  GROUP BY job_id HAVING count(*) > 1
UNION ALL
SELECT 'job ' || j.id || ' is ' || j.status || ' without an active lease'
  FROM jobs_job j WHERE j.status IN ('leased', 'running') AND NOT EXISTS (
    SELECT 1 FROM jobs_lease l WHERE l.job_id = j.id AND l.released_at IS NULL)
UNION ALL
SELECT 'job ' || j.id || ' is ' || j.status || ' with an active lease'
  FROM jobs_job j JOIN jobs_lease l ON l.job_id = j.id AND l.released_at IS NULL
  WHERE j.status NOT IN ('leased', 'running')
"""


class Lab:
    """What the writer threads share: the jobs they submitted, and what went wrong."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.job_ids: set[int] = set()
        self.errors: list[str] = []
        self.violations: list[str] = []
        self.counts: dict[str, int] = defaultdict(int)
        self.writing = threading.Event()  # set while submitters and staff write
        self.running = threading.Event()  # set while the runner and the watcher work

    def count(self, what: str) -> None:
        with self.lock:
            self.counts[what] += 1


def thread(lab: Lab, name: str, body: Callable[[random.Random], None]) -> threading.Thread:
    def run() -> None:
        rng = random.Random(name)  # seeded: a failure can be replayed
        try:
            body(rng)
        except BaseException as exc:  # noqa: BLE001 — reported by the test
            with lab.lock:
                lab.errors.append(f"{name}: {exc!r}")
        finally:
            connections.close_all()

    return threading.Thread(target=run, name=name, daemon=True)


def races(lab: Lab, what: str, action: Callable[[], object]) -> None:
    """Run one write; losing a race (409 in the API, a deadlock victim) is allowed, not more."""
    try:
        action()
        lab.count(what)
    except Conflict:
        lab.count(f"{what}: conflict")
    except OperationalError as exc:
        if "deadlock" not in str(exc):
            raise
        lab.count(f"{what}: deadlock victim")


def submitter(lab: Lab) -> Callable[[random.Random], None]:
    def body(rng: random.Random) -> None:
        n = 0
        while lab.writing.is_set():
            n += 1
            if n % 5 == 0:
                job = f.job(f"solo-{n}", rng.choice(LABELS), priority=rng.choice([20, 40, 70]))
                ids = [job.pk]
            else:
                specs = [
                    services.JobSpec(name=f"S{n}-t{i}", labels=rng.choice(LABELS))
                    for i in range(rng.randint(1, 4))
                ]
                suite = services.suite_submit(
                    owner="alice",
                    name=f"S{n}",
                    jobs=specs,
                    priority=rng.choice([10, 40, 70, 80]),
                    min_duts=rng.randint(0, min(2, len(specs))),
                    allow_unmatched=True,
                )
                ids = list(suite.jobs.values_list("id", flat=True))
            with lab.lock:
                lab.job_ids.update(ids)
            time.sleep(rng.uniform(0.05, 0.3))  # pacing of the submissions, not a wait

    return body


def runner(lab: Lab) -> Callable[[random.Random], None]:
    """A fake runner for every worker: start what is leased, finish what has run a while."""

    def body(rng: random.Random) -> None:
        while lab.running.is_set():
            now = timezone.now()
            for job in Job.objects.filter(status=JobStatus.LEASED).order_by("?")[:10]:
                races(lab, "start", lambda job=job: services.job_start(job=job, by="runner-1"))
            done = Job.objects.filter(
                status=JobStatus.RUNNING, started_at__lt=now - timedelta(seconds=0.3)
            ).order_by("?")[:10]
            for job in done:
                result = rng.choice([JobStatus.PASSED, JobStatus.PASSED, JobStatus.FAILED])
                races(
                    lab,
                    "complete",
                    lambda job=job, result=result: services.job_complete(
                        job=job, result=result, by="runner-1", host_ok=rng.random() > 0.1
                    ),
                )
            # Lab staff repair what the runner reported broken.
            # (The repair loop runs too: the tick leases repair jobs this runner completes.)
            broken = (HostStatus.NEEDS_REPAIR, HostStatus.REPAIR_FAILED)
            for host in Host.objects.filter(status__in=broken):
                races(
                    lab,
                    "repair",
                    lambda host=host: job_services.host_set_status(
                        host=host, status=HostStatus.READY, by="sam", message="reflashed"
                    ),
                )
            time.sleep(0.05)

    return body


def staff(lab: Lab) -> Callable[[random.Random], None]:
    """Sam: aborts suites, locks and unlocks hosts, reserves a host for a moment."""

    def body(rng: random.Random) -> None:
        while lab.writing.is_set():
            action = rng.choice(["abort", "lock", "unlock", "reserve"])
            if action == "abort":
                suite = Suite.objects.filter(aborted_at__isnull=True).order_by("?").first()
                if suite is not None:
                    races(lab, "abort", lambda s=suite: services.suite_abort(suite=s, by="sam"))
            elif action == "lock":
                # At most three locked at once: a lab with every host locked proves nothing.
                if Host.objects.filter(locked=True).count() < 3:
                    host = Host.objects.filter(locked=False).order_by("?").first()
                    races(
                        lab,
                        "lock",
                        lambda h=host: host_services.host_lock(host=h, by="sam", reason="debug"),
                    )
            elif action == "unlock":
                host = Host.objects.filter(locked=True).order_by("?").first()
                if host is not None:
                    races(lab, "unlock", lambda h=host: host_services.host_unlock(host=h, by="sam"))
            else:
                host = Host.objects.order_by("?").first()

                def reserve_and_release(host: Host = host) -> None:
                    lease = services.lease_reserve(
                        host=host, holder="sam", duration=timedelta(minutes=5), reason="probe"
                    )
                    services.lease_release(lease=lease, by="sam")

                races(lab, "reserve", reserve_and_release)
            time.sleep(rng.uniform(0.2, 0.6))

    return body


def watcher(lab: Lab) -> Callable[[random.Random], None]:
    def body(_rng: random.Random) -> None:
        while lab.running.is_set():
            with connection.cursor() as cursor:
                cursor.execute(INVARIANTS_SQL)
                found = [row[0] for row in cursor.fetchall()]
            with lab.lock:
                lab.violations.extend(found)
            lab.count("watch")
            time.sleep(0.05)

    return body


STARTS = {EventKind.LEASED, EventKind.RESERVED}
ENDS = {EventKind.COMPLETED, EventKind.RELEASED, EventKind.EXPIRED, EventKind.TIMED_OUT}


def double_holds_in_the_audit_trail() -> list[str]:
    """Replay every host's audit trail: a lease may start only once the previous one ended."""
    # Event ids, not timestamps: services stamp the time a call began, before it waited for
    # locks, but an id is drawn inside the transaction, after the row checks that let a lease
    # start saw the previous lease's release committed, so ids order the history truly.
    problems: list[str] = []
    host_holder: dict[int, tuple[str, int]] = {}
    job_host: dict[int, int] = {}
    events = HostEvent.objects.filter(kind__in=STARTS | ENDS).order_by("id")
    for e in events.values_list("id", "host_id", "kind", "job_id", "lease_id"):
        event_id, host, kind, job, lease = e
        holder = ("job", job) if job is not None else ("reservation", lease)
        if kind in STARTS:
            if host in host_holder:
                problems.append(
                    f"event {event_id}: {holder} on host {host} held by {host_holder[host]}"
                )
            if job is not None and job in job_host:
                problems.append(f"event {event_id}: job {job} leased twice")
            host_holder[host] = holder
            if job is not None:
                job_host[job] = host
        else:
            if host_holder.get(host) != holder:
                held = host_holder.get(host)
                problems.append(f"event {event_id}: {holder} ends on host {host}, held by {held}")
            host_holder.pop(host, None)
            if job is not None:
                job_host.pop(job, None)
    if host_holder:
        problems.append(f"still held after the run: {host_holder}")
    return problems


def test_two_clusters_and_concurrent_writers_never_double_lease_or_lose_a_job(
    redis_queue: RedisQueue, processes
) -> None:
    # (redis_queue first: teardown stops the clusters before it removes their queue.)
    w1, w2 = f.worker("w1"), f.worker("w2")
    for i in range(10):
        f.host(f"h{i:02}", LABELS[i % 3 == 0], worker=w1 if i % 2 else w2)
    clusters: list[Proc] = [
        processes(f"qcluster-{n}", "qcluster", env=cluster_env(app=APP, queue=redis_queue))
        for n in (1, 2)
    ]
    for proc in clusters:
        wait_until(
            lambda proc=proc: "running." in proc.output(),
            timeout=30,
            what=lambda proc=proc: f"{proc.name} to start\n{proc.output()}",
        )

    lab = Lab()
    lab.writing.set()
    lab.running.set()
    writers = [
        thread(lab, "submitter-1", submitter(lab)),
        thread(lab, "submitter-2", submitter(lab)),
        thread(lab, "staff", staff(lab)),
    ]
    workers = [thread(lab, "runner", runner(lab)), thread(lab, "watcher", watcher(lab))]
    try:
        for t in writers + workers:
            t.start()
        time.sleep(RUN_SECONDS)  # the length of the race, not a wait for anything
    finally:
        lab.writing.clear()
        for t in writers:
            t.join(30)

    try:
        # Sam puts the lab back in order; the runner keeps finishing what the clusters lease.
        for host in Host.objects.filter(locked=True):
            host_services.host_unlock(host=host, by="sam")
        for lease in Lease.objects.filter(released_at__isnull=True, job__isnull=True):
            services.lease_release(lease=lease, by="sam")

        def unfinished() -> int:
            return Job.objects.exclude(status__in=TERMINAL_JOB_STATUSES).count()

        wait_until(
            lambda: unfinished() == 0 and not lab.errors,
            timeout=DRAIN_DEADLINE,
            what=lambda: (
                f"every job to finish ({unfinished()} left; errors {lab.errors})\n"
                + "\n".join(p.output(3000) for p in clusters)
            ),
            interval=0.5,
        )
    finally:
        lab.running.clear()
        for t in workers:
            t.join(30)
    for proc in clusters:
        assert proc.popen.poll() is None, f"{proc.name} died:\n{proc.output()}"

    print(f"writes: {dict(lab.counts)}; ticks: {SchedulerTick.objects.count()}")  # for -rP
    assert lab.errors == []
    # Watched all along, and never once did the database show a double lease or a job whose
    # status disagrees with its leases.
    assert lab.counts["watch"] >= 50
    assert lab.violations == []

    # Nothing lost (nor invented): exactly the jobs the writers submitted exist, all finished,
    # none in error (no lease may expire here: the runner is alive throughout).
    jobs = dict(Job.objects.filter(kind="test").values_list("id", "status"))
    assert set(jobs) == lab.job_ids
    assert set(jobs.values()) <= {JobStatus.PASSED, JobStatus.FAILED, JobStatus.ABORTED}
    finished = sum(1 for s in jobs.values() if s in (JobStatus.PASSED, JobStatus.FAILED))
    assert finished >= 40, f"too little work was done to prove anything: {dict(lab.counts)}"
    assert not Lease.objects.filter(released_at__isnull=True).exists()
    assert not Lease.objects.filter(release_reason=ReleaseReason.EXPIRED).exists()

    # No double lease at any moment of the history either, and every lease audited: the host
    # events, replayed in order, start and end each lease exactly once.
    assert double_holds_in_the_audit_trail() == []
    starts = HostEvent.objects.filter(kind__in=STARTS).count()
    assert starts == Lease.objects.count()
    leases = list(Lease.objects.values_list("host_id", "job_id"))

    # Every job lease came from a tick that committed its record (a tick that rolled back left
    # neither leases nor a record).
    assert SchedulerTick.objects.count() >= 20
    made = sum(SchedulerTick.objects.values_list("leases_made", flat=True))
    assert made == sum(1 for _h, j in leases if j is not None)
    # Both clusters ran ticks: two planners really competed for the advisory lock.
    for proc in clusters:
        assert proc.output(10**7).count("processing tick") >= 1, proc.name
