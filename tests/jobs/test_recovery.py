"""Lab health from the job side: retries after a host broke, verify and repair, expiry."""

from __future__ import annotations

import io
import json
import random
from collections.abc import Callable
from datetime import datetime, timedelta

import pytest
from django.core.management import call_command
from django.utils import timezone

from hosts.choices import HostStatus
from hosts.models import Host, HostEvent, Worker
from jobs import recovery, selectors, services
from jobs import services as job_services
from jobs.choices import JobKind, JobStatus
from jobs.models import Job, Lease
from tests import factories as f
from tests.api.conftest import token_client
from tests.factories import run, tick

pytestmark = pytest.mark.django_db


def host_of(job: Job) -> str:
    """The hostname of the job's active lease."""
    return Lease.objects.active().get(job=job).host.hostname


def status(hostname: str) -> str:
    return Host.objects.get(hostname=hostname).status


def maintenance(kind: str, hostname: str) -> list[Job]:
    return list(Job.objects.filter(kind=kind, host__hostname=hostname).order_by("id"))


rack = pytest.fixture(f.rack)


# --- retries after a host broke ---------------------------------------------------------------


def test_a_job_whose_host_broke_waits_its_backoff_then_runs_on_the_other_host(rack, settings):
    settings.RETRY_BACKOFF = 30
    t0 = timezone.now()
    job = f.job("J", max_retries=2)
    tick(t0, rack)
    assert host_of(job) == "h1"  # the lower hostname, when both are free

    job = run(job, JobStatus.FAILED, host_ok=False, at=t0)

    assert job.status == JobStatus.QUEUED and job.attempts == 1
    assert job.not_before == t0 + timedelta(seconds=30)
    reason = selectors.wait_reasons_for([job])[job.pk]
    until = timezone.localtime(job.not_before)
    assert reason["code"] == "retry_backoff"
    assert reason["message"].startswith("retry 1 of 2 after host h1 broke (")
    assert reason["message"].endswith(f"; waiting until {until:%H:%M:%S}")
    assert status("h1") == HostStatus.NEEDS_REPAIR

    # Before not_before: h2 is free, but the job waits; h1 gets its repair and passes it.
    tick(t0 + timedelta(seconds=10), rack)
    job.refresh_from_db()
    assert job.status == JobStatus.QUEUED
    (repair,) = maintenance(JobKind.REPAIR, "h1")
    run(repair, JobStatus.PASSED, at=t0 + timedelta(seconds=20))
    assert status("h1") == HostStatus.READY

    tick(t0 + timedelta(seconds=31), rack)
    job.refresh_from_db()
    assert job.status == JobStatus.LEASED
    assert host_of(job) == "h2"  # h1 is ready and sorts first, but the job broke there


def test_the_retry_backoff_doubles_per_try_and_stops_at_ten_minutes(settings):
    settings.RETRY_BACKOFF = 30
    waits = [recovery.retry_backoff(attempts).total_seconds() for attempts in range(1, 8)]
    assert waits == [30, 60, 120, 240, 480, 600, 600]
    settings.RETRY_BACKOFF = 0
    assert recovery.retry_backoff(3) == timedelta(0)


def test_a_retry_runs_on_the_host_it_broke_on_when_no_other_is_free():
    worker = f.worker("rack-1")
    f.host("h1", ["board:x"], worker=worker)
    t0 = timezone.now()
    job = f.job("J", max_retries=1)
    tick(t0, worker)
    run(job, JobStatus.FAILED, host_ok=False, at=t0)
    tick(t0 + timedelta(seconds=1), worker)
    (repair,) = maintenance(JobKind.REPAIR, "h1")
    run(repair, JobStatus.PASSED, at=t0 + timedelta(seconds=2))

    tick(t0 + timedelta(seconds=3), worker)

    job.refresh_from_db()
    assert job.status == JobStatus.LEASED and host_of(job) == "h1"
    assert job.attempts == 2


def test_a_test_that_failed_on_a_healthy_host_is_not_retried(rack):
    t0 = timezone.now()
    job = f.job("J", max_retries=2)
    tick(t0, rack)

    job = run(job, JobStatus.FAILED, host_ok=True, at=t0)
    tick(t0 + timedelta(seconds=1), rack)

    job.refresh_from_db()
    assert job.status == JobStatus.FAILED and job.attempts == 1
    assert status("h1") == HostStatus.READY
    assert not Job.objects.exclude(kind=JobKind.TEST).exists()


def test_a_test_that_passed_on_a_broken_host_keeps_its_result_and_the_host_goes_to_repair(rack):
    t0 = timezone.now()
    job = f.job("J", max_retries=2)
    tick(t0, rack)

    job = run(job, JobStatus.PASSED, host_ok=False, at=t0)

    assert job.status == JobStatus.PASSED
    assert status("h1") == HostStatus.NEEDS_REPAIR


def test_every_retry_is_an_event_on_the_host_it_broke_on(rack):
    t0 = timezone.now()
    job = f.job("J", max_retries=1)
    tick(t0, rack)

    run(job, JobStatus.FAILED, host_ok=False, at=t0)

    (event,) = HostEvent.objects.filter(host__hostname="h1", kind="retried")
    assert event.job_id == job.pk
    assert "retry 1 of 1" in event.message and "J" in event.message


# --- verify and repair --------------------------------------------------------------------------


@pytest.fixture
def vanished(rack) -> datetime:
    """Job J leased on h1 whose runner vanished: returns the moment its lease expired."""
    job = f.job("J")
    tick(timezone.now(), rack)
    services.job_start(job=job, by="runner-1")
    return Lease.objects.active().get(job=job).expires_at + timedelta(seconds=1)


def test_a_host_whose_runner_vanished_is_verified_in_the_same_tick(rack, vanished):
    summary = tick(vanished, rack)

    assert Job.objects.get(name="J").status == JobStatus.ERROR
    (verify,) = maintenance(JobKind.VERIFY, "h1")
    assert verify.status == JobStatus.LEASED
    assert status("h1") == HostStatus.VERIFYING
    assert {"host": "h1", "kind": JobKind.VERIFY}.items() <= summary.leases[0].items()


def test_manage_py_tick_json_names_the_kind_of_each_lease(rack):
    f.job("J")
    job_services.host_set_status(
        host=Host.objects.get(hostname="h2"), status=HostStatus.NEEDS_VERIFY, by="sam"
    )
    out = io.StringIO()

    call_command("tick", "--json", stdout=out)

    leases = json.loads(out.getvalue())["leases"]
    assert sorted((lease["host"], lease["kind"]) for lease in leases) == [
        ("h1", "test"),
        ("h2", "verify"),
    ]


def test_a_passed_verify_makes_the_host_ready_and_verified(rack, vanished):
    tick(vanished, rack)
    (verify,) = maintenance(JobKind.VERIFY, "h1")

    run(verify, JobStatus.PASSED, at=vanished)

    host = Host.objects.get(hostname="h1")
    assert host.status == HostStatus.READY and host.last_verified_at == vanished


def test_a_failed_verify_sends_the_host_to_repair_and_the_next_tick_repairs_it(rack, vanished):
    tick(vanished, rack)
    (verify,) = maintenance(JobKind.VERIFY, "h1")

    run(verify, JobStatus.FAILED, at=vanished)
    assert status("h1") == HostStatus.NEEDS_REPAIR
    tick(vanished + timedelta(seconds=1), rack)

    (repair,) = maintenance(JobKind.REPAIR, "h1")
    assert repair.status == JobStatus.LEASED
    assert status("h1") == HostStatus.REPAIRING


@pytest.mark.parametrize("end", ["abort", "release", "timeout"])
def test_a_repair_ended_without_a_result_leaves_its_host_waiting_for_a_new_one(rack, vanished, end):
    tick(vanished, rack)
    (verify,) = maintenance(JobKind.VERIFY, "h1")
    run(verify, JobStatus.FAILED, at=vanished)
    tick(vanished + timedelta(seconds=1), rack)
    (repair,) = maintenance(JobKind.REPAIR, "h1")
    at = vanished + timedelta(seconds=2)
    if end == "abort":
        services.job_abort(job=repair, by="sam", reason="wrong cable", at=at)
    elif end == "release":
        services.lease_release(lease=Lease.objects.active().get(job=repair), by="sam", at=at)
    else:
        services.job_start(job=repair, by="runner-1", at=at)
        Lease.objects.filter(job=repair).update(expires_at=at + timedelta(hours=2))  # heartbeats
        at += repair.timeout + timedelta(seconds=1)
    assert status("h1") == HostStatus.REPAIRING  # nothing moved it yet

    # The next tick sees a host repairing with no repair job holding it, and starts again.
    tick(at + timedelta(seconds=1), rack)
    assert status("h1") == HostStatus.REPAIRING
    assert Lease.objects.active().get(host__hostname="h1").job.kind == JobKind.REPAIR
    events = HostEvent.objects.filter(host__hostname="h1", kind="status", new_status="needs_repair")
    assert "without a result" in events.order_by("-id").first().message


@pytest.mark.parametrize("kind", [JobKind.VERIFY, JobKind.REPAIR])
def test_a_handed_back_maintenance_job_waits_for_the_runner_and_costs_no_repair(
    rack, vanished, kind
):
    tick(vanished, rack)
    if kind == JobKind.REPAIR:
        run(maintenance(JobKind.VERIFY, "h1")[0], JobStatus.FAILED, at=vanished)
        tick(vanished + timedelta(seconds=1), rack)
    (job,) = maintenance(kind, "h1")
    at = vanished + timedelta(seconds=2)

    services.lease_hand_back(
        lease=Lease.objects.active().get(job=job), by="runner-1", reason="SIGTERM", at=at
    )

    job.refresh_from_db()
    host = Host.objects.get(hostname="h1")
    waits_in = {JobKind.VERIFY: HostStatus.NEEDS_VERIFY, JobKind.REPAIR: HostStatus.NEEDS_REPAIR}
    assert (job.status, job.attempts) == (JobStatus.QUEUED, 0)
    assert (host.status, host.repair_attempts) == (waits_in[kind], 0)
    assert "handed back unstarted: SIGTERM" in host.events.order_by("-id").first().message
    services.scheduler_tick(now=at + timedelta(seconds=1))  # the stopping worker is offline
    assert job.leases.active().count() == 0
    tick(at + timedelta(seconds=2), rack)  # its runner is back: the same job runs
    assert Lease.objects.active().get(host=host).job_id == job.pk
    assert Job.objects.filter(kind=kind, host=host).count() == 1


def test_a_host_whose_repairs_keep_failing_ends_repair_failed_and_is_left_alone(rack, settings):
    settings.REPAIR_MAX_ATTEMPTS = 2
    settings.REPAIR_BACKOFF = 60
    t0 = timezone.now()
    job = f.job("J")
    tick(t0, rack)
    run(job, JobStatus.PASSED, host_ok=False, at=t0)
    tick(t0 + timedelta(seconds=1), rack)
    (first,) = maintenance(JobKind.REPAIR, "h1")

    run(first, JobStatus.FAILED, at=t0 + timedelta(seconds=2))
    host = Host.objects.get(hostname="h1")
    assert host.status == HostStatus.NEEDS_REPAIR and host.repair_attempts == 1
    assert host.repair_not_before == t0 + timedelta(seconds=62)
    tick(t0 + timedelta(seconds=61), rack)
    assert len(maintenance(JobKind.REPAIR, "h1")) == 1  # still backing off
    tick(t0 + timedelta(seconds=63), rack)
    _first, second = maintenance(JobKind.REPAIR, "h1")

    run(second, JobStatus.FAILED, at=t0 + timedelta(seconds=64))

    assert status("h1") == HostStatus.REPAIR_FAILED
    # Left alone until its automatic round: 30 min after the give-up at the soonest, with the
    # lab idle for it (docs/health.md#sooner-when-the-lab-is-idle-for-it).
    for later in (100, 1000, 1800):
        tick(t0 + timedelta(seconds=later), rack)
    assert len(maintenance(JobKind.REPAIR, "h1")) == 2
    assert status("h1") == HostStatus.REPAIR_FAILED


# --- bad-host detection -----------------------------------------------------------------------


FailOnH1 = Callable[..., None]


@pytest.fixture(params=["service", "api"])
def fail_on_h1(request: pytest.FixtureRequest) -> FailOnH1:
    """Lease each job in turn on h1 (the only host) and fail it on a healthy-looking host.

    By the service, or as a runner does, through the API: that path reads the host's last
    results along with the lease, in the same query (recovery.with_earlier_results).
    """
    client = None
    if request.param == "api":
        client = token_client(request.getfixturevalue("sam"))

    def fail(*jobs: Job, worker: Worker, at: datetime) -> None:
        for job in jobs:
            tick(at, worker)
            job.refresh_from_db()
            assert host_of(job) == "h1"
            # Completed as they happen, in order: the host's trail orders them by that time.
            if client is None:
                run(job, JobStatus.FAILED)
                continue
            lease = Lease.objects.active().get(job=job).pk
            for step, body in (("start", {}), ("complete", {"result": "failed"})):
                url = f"/api/jobs/{job.pk}/{step}/"
                response = client.post(url, {"lease": lease, **body}, format="json")
                assert response.status_code == 200, response.content

    return fail


@pytest.fixture
def lone() -> Worker:
    worker = f.worker("rack-1")
    f.host("h1", ["board:x"], worker=worker)
    return worker


def test_three_failed_tests_from_two_suites_send_the_host_to_repair(lone, fail_on_h1):
    a, b = f.suite("A", 2), f.suite("B", 1)
    jobs = [*a.jobs.order_by("id"), *b.jobs.all()]

    fail_on_h1(*jobs, worker=lone, at=timezone.now())

    assert status("h1") == HostStatus.NEEDS_REPAIR
    event = HostEvent.objects.filter(host__hostname="h1", new_status="needs_repair").get()
    assert "3 test jobs in a row from 2 suites failed on it" in event.message


def test_three_failed_tests_from_one_suite_leave_the_host_ready(lone, fail_on_h1):
    suite = f.suite("A", 3)

    fail_on_h1(*suite.jobs.order_by("id"), worker=lone, at=timezone.now())

    assert status("h1") == HostStatus.READY


def test_a_passed_verify_breaks_the_failure_streak(lone, fail_on_h1):
    now = timezone.now()
    fail_on_h1(f.job("J1"), worker=lone, at=now)
    fail_on_h1(f.job("J2"), worker=lone, at=now)
    host = Host.objects.get(hostname="h1")
    job_services.host_set_status(host=host, status=HostStatus.NEEDS_VERIFY, by="sam")
    tick(now, lone)
    (verify,) = maintenance(JobKind.VERIFY, "h1")
    run(verify, JobStatus.PASSED)

    fail_on_h1(f.job("J3"), worker=lone, at=now)
    fail_on_h1(f.job("J4"), worker=lone, at=now)

    assert status("h1") == HostStatus.READY


# --- queue expiry -----------------------------------------------------------------------------


def test_a_job_still_queued_past_its_expiry_ends_expired_saying_why_it_waited():
    t0 = timezone.now()
    spec = services.JobSpec(name="J", labels=["board:x"], expires_after=60)
    job = services.job_submit(owner="alice", spec=spec, allow_unmatched=True, now=t0)
    assert job.expires_at == t0 + timedelta(seconds=60)
    services.scheduler_tick(now=t0 + timedelta(seconds=30))
    job.refresh_from_db()
    why = selectors.wait_reasons_for([job])[job.pk]["message"]
    assert job.status == JobStatus.QUEUED

    services.scheduler_tick(now=t0 + timedelta(seconds=61))

    job.refresh_from_db()
    assert job.status == JobStatus.EXPIRED
    assert "60 s" in job.message and why in job.message


def test_a_suites_expiry_applies_to_its_jobs_that_set_none():
    t0 = timezone.now()
    suite = services.suite_submit(
        owner="alice",
        name="S",
        jobs=[
            services.JobSpec(name="own", labels=["board:x"], expires_after=600),
            services.JobSpec(name="inherits", labels=["board:x"]),
        ],
        expires_after=60,
        allow_unmatched=True,  # nothing can run them: they wait until they expire
        now=t0,
    )
    assert suite.expires_after == 60

    services.scheduler_tick(now=t0 + timedelta(seconds=61))

    statuses = dict(suite.jobs.values_list("name", "status"))
    assert statuses == {"own": JobStatus.QUEUED, "inherits": JobStatus.EXPIRED}


# --- nothing broken waits unrepaired ------------------------------------------------------------


def unrepaired(now: datetime) -> list[str]:
    """Hosts in needs_repair that nothing keeps from a repair job, yet have none."""
    return [
        host.hostname
        for host in Host.objects.filter(status=HostStatus.NEEDS_REPAIR, locked=False)
        .select_related("worker")
        .order_by("hostname")
        if host.worker.is_online(now)
        and not host.worker.paused
        and not Job.objects.unfinished().filter(kind=JobKind.REPAIR, host=host).exists()
    ]


def step(rng: random.Random, workers: list[Worker], now: datetime) -> None:
    """One random move of the lab's runners: each active lease's job passes, fails, breaks
    its host, or is left to vanish; sometimes a new job arrives."""
    alive = Lease.objects.active().filter(job__isnull=False, expires_at__gte=now)
    for lease in alive.select_related("job"):
        roll = rng.random()
        if roll < 0.15:
            continue  # its runner vanished: the lease expires unless heartbeated later
        services.lease_heartbeat(lease=lease, at=now)
        job = lease.job
        if roll < 0.3:
            continue  # still running
        result = rng.choice([JobStatus.PASSED, JobStatus.FAILED])
        if job.status == JobStatus.LEASED:
            services.job_start(job=job, by="runner-1", at=now)
        services.job_complete(
            job=job, result=result, by="runner-1", host_ok=rng.random() > 0.3, at=now
        )
    for _ in range(rng.randint(0, 3)):
        labels = [rng.choice(["board:x", "board:y"])]
        f.job(f"J{rng.random():.6f}", labels=labels, max_retries=rng.randint(0, 2))


@pytest.mark.parametrize("seed", range(3))
def test_no_host_waits_in_needs_repair_without_a_repair_job_for_more_than_a_tick(seed):
    rng = random.Random(seed)
    workers = [f.worker(f"rack-{i}") for i in range(2)]
    for i in range(6):
        f.host(f"dut{i}", [f"board:{'xy'[i % 2]}"], worker=workers[i % 2])
    now = timezone.now()
    for _ in range(25):
        now += timedelta(seconds=rng.choice([5, 60, 700]))  # 700 s lets unheartbeated leases die
        step(rng, workers, now)
        tick(now, *workers)
        assert unrepaired(now) == []
    assert Job.objects.filter(kind=JobKind.REPAIR).exists()  # the walk did break hosts
