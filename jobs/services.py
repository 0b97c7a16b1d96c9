"""State changes of suites, jobs and leases, and the scheduler tick; each one is atomic."""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta

from django.conf import settings
from django.db import IntegrityError, OperationalError, connection, transaction
from django.db.models import F, Subquery
from django.utils import timezone

from hosts.choices import EventKind, HostStatus
from hosts.models import Host, HostEvent, Worker
from hosts.services import (
    Actor,
    actor_name,
    actor_user,
    event_record,
    labels_validate,
    reason_clean,
)
from jobs import limits, selectors
from jobs.choices import ACTIVE_JOB_STATUSES, JobStatus, ReleaseReason
from jobs.models import IdempotencyKey, Job, Lease, SchedulerTick, Suite, encode_labels
from jobs.scheduler import planner
from jobs.scheduling.triggers import request_tick
from schedsite.errors import Conflict, InvalidInput

log = logging.getLogger("schedsite.scheduler")

# Any constant works as long as every process uses the same one.
TICK_LOCK_KEY = 0x5C4ED517E


# --- submission -----------------------------------------------------------------------------


@dataclass(frozen=True)
class JobSpec:
    """What a tester asks for in one job."""

    name: str
    labels: Sequence[str] = ()
    host: Host | None = None  # pinned host
    priority: int | None = None  # defaults to the suite's
    max_retries: int = 0
    timeout: timedelta | None = None
    estimated_duration: timedelta | None = None


def _check_priority(priority: int, field_name: str = "priority") -> None:
    if isinstance(priority, bool) or not isinstance(priority, int) or not 0 <= priority <= 100:
        raise InvalidInput(f"{field_name} must be an integer from 0 to 100", field=field_name)


def _job_from_spec(
    spec: JobSpec, *, suite: Suite | None, owner: Actor, now: datetime, index: int | None = None
) -> Job:
    where = f"jobs[{index}]." if index is not None else ""
    name = (spec.name or "").strip()
    if not name:
        raise InvalidInput(f"{where}name is required", field=f"{where}name")
    if len(name) > 200:
        raise InvalidInput(f"{where}name: at most 200 characters", field=f"{where}name")
    priority = spec.priority if spec.priority is not None else (suite.priority if suite else 40)
    _check_priority(priority, f"{where}priority")
    if not 0 <= spec.max_retries <= 100:
        raise InvalidInput(f"{where}max_retries must be 0–100", field=f"{where}max_retries")
    timeout = spec.timeout or timedelta(seconds=settings.JOB_DEFAULT_TIMEOUT)
    if timeout <= timedelta(0):
        raise InvalidInput(f"{where}timeout must be positive", field=f"{where}timeout")
    labels = labels_validate(spec.labels, field=f"{where}labels")
    return Job(
        suite=suite,
        name=name,
        priority=priority,
        label_key=encode_labels(labels),
        host=spec.host,
        max_retries=spec.max_retries,
        timeout=timeout,
        estimated_duration=spec.estimated_duration,
        owner=actor_user(owner),
        created_at=now,
        submitted_at=suite.created_at if suite else now,
    )


@transaction.atomic
def suite_submit(
    *,
    owner: Actor,
    name: str,
    jobs: Sequence[JobSpec] = (),
    build: str = "",
    priority: int = 40,
    min_duts: int = 0,
    max_duts: int | None = None,
    fanout_labels: Sequence[str] | None = None,
    fanout_name: str = "",
    now: datetime | None = None,
) -> Suite:
    """Submit a suite with its jobs, or a fan-out suite with one job per matching host."""
    now = now or timezone.now()
    name = (name or "").strip()
    if not name:
        raise InvalidInput("name is required", field="name")
    if len(name) > 200:
        raise InvalidInput("name: at most 200 characters", field="name")
    _check_priority(priority)
    if isinstance(min_duts, bool) or not isinstance(min_duts, int) or min_duts < 0:
        raise InvalidInput("min_duts must be a whole number ≥ 0", field="min_duts")
    if max_duts is not None and (not isinstance(max_duts, int) or max_duts < 1):
        raise InvalidInput("max_duts must be empty or ≥ 1", field="max_duts")
    if max_duts is not None and min_duts > max_duts:
        raise InvalidInput("min_duts cannot exceed max_duts", field="min_duts")
    suite = Suite(
        name=name,
        build=(build or "")[:200],
        priority=priority,
        min_duts=min_duts,
        max_duts=max_duts,
        owner=actor_user(owner),
        created_at=now,
        fanout_labels=encode_labels(fanout_labels) if fanout_labels is not None else "",
    )
    if fanout_labels is not None:
        if jobs:
            raise InvalidInput("a fan-out suite takes labels, not a job list", field="jobs")
        jobs = _fanout_specs(fanout_labels, fanout_name or name)
    if not jobs:
        raise InvalidInput("a suite needs at least one job", field="jobs")
    if len(jobs) > settings.MAX_JOBS_PER_SUITE:
        raise InvalidInput(
            f"a suite may have at most {settings.MAX_JOBS_PER_SUITE} jobs", field="jobs"
        )
    rows = [
        _job_from_spec(spec, suite=suite, owner=owner, now=now, index=i)
        for i, spec in enumerate(jobs)
    ]
    if (user := actor_user(owner)) is not None:
        limits.submission_check(
            user=user,
            priority=priority,
            job_priorities=[row.priority for row in rows],
            min_duts=min_duts,
            new_jobs=len(rows),
            now=now,
        )
    suite.save()  # after the checks: the rate limit counts the user's suites saved before
    Job.objects.bulk_create(rows)
    request_tick("suite submitted")
    return suite


def _fanout_specs(labels: Sequence[str], job_name: str) -> list[JobSpec]:
    names = sorted(set(labels))
    if not names:
        raise InvalidInput("fan-out needs at least one label", field="fanout_labels")
    hosts = Host.objects.all()
    for name in names:
        hosts = hosts.filter(labels__name=name)
    hosts = list(hosts.order_by("hostname").distinct())
    if not hosts:
        raise InvalidInput(
            f"no host carries {', '.join(names)}: a fan-out suite would be empty",
            field="fanout_labels",
        )
    return [JobSpec(name=f"{job_name}@{h.hostname}", labels=names, host=h) for h in hosts]


@transaction.atomic
def job_submit(*, owner: Actor, spec: JobSpec, now: datetime | None = None) -> Job:
    """Submit a standalone job."""
    now = now or timezone.now()
    job = _job_from_spec(spec, suite=None, owner=owner, now=now)
    if (user := actor_user(owner)) is not None:
        limits.submission_check(
            user=user, priority=None, job_priorities=[job.priority], new_jobs=1, now=now
        )
    job.save()
    request_tick("job submitted")
    return job


# --- the runner protocol --------------------------------------------------------------------


def _active_lease_for(job: Job, *, lock: bool = True) -> Lease | None:
    qs = Lease.objects.active().filter(job=job)
    if lock:
        qs = qs.select_for_update(of=("self",))
    return qs.select_related("host").first()


@transaction.atomic
def job_start(*, job: Job, by: Actor, at: datetime | None = None) -> Job:
    """Mark a leased job running (the runner has begun the test)."""
    at = at or timezone.now()
    lease = _active_lease_for(job)
    if lease is None:
        raise Conflict(f"job {job.pk} holds no active lease (status {job.status})")
    changed = Job.objects.filter(pk=job.pk, status=JobStatus.LEASED).update(
        status=JobStatus.RUNNING, started_at=at
    )
    if not changed:
        raise Conflict(f"job {job.pk} is {Job.objects.get(pk=job.pk).status}, not leased")
    Lease.objects.filter(pk=lease.pk).update(
        heartbeat_at=at, expires_at=at + timedelta(seconds=settings.LEASE_TTL)
    )
    event_record(
        kind=EventKind.STARTED,
        actor=by,
        host=lease.host,
        lease_id=lease.pk,
        job_id=job.pk,
        message=f"job {job.name} started",
        at=at,
    )
    job.refresh_from_db()
    return job


@transaction.atomic
def lease_heartbeat(*, lease: Lease, by: Actor = None, at: datetime | None = None) -> Lease:
    """Extend an active lease by LEASE_TTL and mark its worker seen."""
    at = at or timezone.now()
    ttl = timedelta(seconds=settings.LEASE_TTL)
    # Compare-and-set: a heartbeat for a released (or already expired) lease changes nothing.
    changed = (
        Lease.objects.active()
        .filter(pk=lease.pk, expires_at__gte=at)
        .update(heartbeat_at=at, expires_at=at + ttl)
    )
    if not changed:
        raise Conflict(f"lease {lease.pk} is no longer active")
    lease.refresh_from_db()
    worker_id = Host.objects.filter(pk=lease.host_id).values_list("worker_id", flat=True).first()
    if worker_id:
        Worker.objects.filter(pk=worker_id).update(last_seen=at)
    return lease


@transaction.atomic
def job_complete(
    *,
    job: Job,
    result: str,
    by: Actor,
    message: str = "",
    host_ok: bool = True,
    at: datetime | None = None,
) -> Job:
    """Record a job's result and release its lease; a broken host goes to needs_repair."""
    at = at or timezone.now()
    if result not in (JobStatus.PASSED, JobStatus.FAILED):
        raise InvalidInput("result must be 'passed' or 'failed'", field="result")
    lease = _active_lease_for(job)
    if lease is None:
        raise Conflict(f"job {job.pk} holds no active lease (status {job.status})")
    changed = Job.objects.filter(pk=job.pk, status__in=ACTIVE_JOB_STATUSES).update(
        status=result, finished_at=at, message=(message or "")[:10000]
    )
    if not changed:
        raise Conflict(f"job {job.pk} is no longer running")
    _release(lease, reason=ReleaseReason.COMPLETED, by=by, at=at)
    event_record(
        kind=EventKind.COMPLETED,
        actor=by,
        host=lease.host,
        lease_id=lease.pk,
        job_id=job.pk,
        message=f"job {job.name} {result}" + (f": {message[:200]}" if message else ""),
        at=at,
    )
    if not host_ok:
        _host_needs_repair(
            lease.host, by=by, why=f"runner reported the host broken after job {job.name}", at=at
        )
    request_tick("job completed")
    job.refresh_from_db()
    return job


def _release(lease: Lease, *, reason: str, by: Actor, at: datetime) -> None:
    changed = (
        Lease.objects.active()
        .filter(pk=lease.pk)
        .update(released_at=at, release_reason=reason, released_by=actor_name(by))
    )
    if not changed:
        raise Conflict(f"lease {lease.pk} is no longer active")


def _host_needs_repair(host: Host, *, by: Actor, why: str, at: datetime) -> None:
    old = Host.objects.filter(pk=host.pk).values_list("status", flat=True).first()
    if old and old != HostStatus.NEEDS_REPAIR:
        Host.objects.filter(pk=host.pk).update(status=HostStatus.NEEDS_REPAIR)
        event_record(
            kind=EventKind.STATUS,
            actor=by,
            host=host,
            at=at,
            message=f"{old} → needs_repair: {why}",
        )


# --- staff and tester actions ---------------------------------------------------------------


@transaction.atomic
def lease_release(
    *, lease: Lease, by: Actor, requeue: bool = True, reason: str = "", at: datetime | None = None
) -> Lease:
    """Release a lease by hand; its job is requeued (default) or aborted."""
    at = at or timezone.now()
    reason = reason_clean(reason, what="release a lease", required=False)
    lease = (
        Lease.objects.select_for_update(of=("self",)).select_related("host", "job").get(pk=lease.pk)
    )
    if lease.released_at is not None:
        raise Conflict(f"lease {lease.pk} is no longer active")
    _release(lease, reason=ReleaseReason.RELEASED, by=by, at=at)
    text = reason.strip() or "released by hand"
    job = lease.job
    if job is not None:
        if requeue:
            Job.objects.filter(pk=job.pk, status__in=ACTIVE_JOB_STATUSES).update(
                status=JobStatus.QUEUED, started_at=None, message=f"requeued: {text}"
            )
            text = f"job {job.name} requeued: {text}"
        else:
            Job.objects.filter(pk=job.pk, status__in=ACTIVE_JOB_STATUSES).update(
                status=JobStatus.ABORTED, finished_at=at, message=f"aborted: {text}"
            )
            text = f"job {job.name} aborted: {text}"
    event_record(
        kind=EventKind.RELEASED,
        actor=by,
        host=lease.host,
        lease_id=lease.pk,
        job_id=job.pk if job else None,
        message=text,
        at=at,
    )
    request_tick("lease released")
    lease.refresh_from_db()
    return lease


@transaction.atomic
def lease_reserve(
    *, host: Host, holder: Actor, duration: timedelta, reason: str, at: datetime | None = None
) -> Lease:
    """Reserve a free host for manual work: a lease with no job, for a duration."""
    at = at or timezone.now()
    reason = reason_clean(reason, what="reserve a host")
    _check_duration(duration)
    # Lock the host row first: the tick locks hosts before leasing them, so the two serialize.
    host = Host.objects.select_for_update().get(pk=host.pk)
    if Lease.objects.active().filter(host=host).exists():
        raise Conflict(f"host {host.hostname} is already leased")
    try:
        with transaction.atomic():
            lease = Lease.objects.create(
                host=host,
                job=None,
                holder=actor_user(holder),
                reason=reason,
                acquired_at=at,
                expires_at=at + duration,
            )
    except IntegrityError as exc:  # the unique constraint, if a lease slipped in anyway
        raise Conflict(f"host {host.hostname} is already leased") from exc
    event_record(
        kind=EventKind.RESERVED,
        actor=holder,
        host=host,
        lease_id=lease.pk,
        at=at,
        message=f"reserved until {lease.expires_at:%Y-%m-%d %H:%M} UTC: {reason}",
    )
    return lease


IDEMPOTENCY_KEY_LIFETIME = timedelta(hours=24)


def idempotency_keys_purge(*, now: datetime | None = None) -> int:
    """Forget Idempotency-Keys older than a day; return how many."""
    cutoff = (now or timezone.now()) - IDEMPOTENCY_KEY_LIFETIME
    deleted, _ = IdempotencyKey.objects.filter(created_at__lte=cutoff).delete()
    return deleted


def _check_duration(duration: timedelta) -> None:
    if not isinstance(duration, timedelta) or duration <= timedelta(0):
        raise InvalidInput("duration must be positive", field="duration")
    if duration > timedelta(seconds=settings.MAX_RESERVATION_SECONDS):
        raise InvalidInput(
            f"duration may be at most {settings.MAX_RESERVATION_SECONDS // 3600} hours",
            field="duration",
        )


@transaction.atomic
def lease_extend(
    *, lease: Lease, by: Actor, duration: timedelta, at: datetime | None = None
) -> Lease:
    """Extend a manual reservation to now + duration."""
    at = at or timezone.now()
    _check_duration(duration)
    if lease.job_id is not None:
        raise Conflict("only manual reservations are extended; jobs heartbeat their leases")
    changed = (
        Lease.objects.active()
        .filter(pk=lease.pk, expires_at__gte=at)
        .update(expires_at=at + duration)
    )
    if not changed:
        raise Conflict(f"lease {lease.pk} is no longer active")
    lease.refresh_from_db()
    event_record(
        kind=EventKind.EXTENDED,
        actor=by,
        host=lease.host,
        lease_id=lease.pk,
        at=at,
        message=f"reserved until {lease.expires_at:%Y-%m-%d %H:%M} UTC",
    )
    return lease


@transaction.atomic
def job_abort(*, job: Job, by: Actor, reason: str = "", at: datetime | None = None) -> Job:
    """Abort a queued or running job; a held host is released back to the pool."""
    at = at or timezone.now()
    text = (reason or "").strip() or f"aborted by {actor_name(by)}"
    # Lock the job before reading its lease: a tick that leased it concurrently has then
    # committed, so its new lease is seen and released here rather than left active under an
    # aborted job.
    Job.objects.select_for_update().filter(pk=job.pk).first()
    lease = _active_lease_for(job)
    changed = (
        Job.objects.unfinished()
        .filter(pk=job.pk)
        .update(status=JobStatus.ABORTED, finished_at=at, message=text[:10000])
    )
    if not changed:
        raise Conflict(f"job {job.pk} has already finished")
    if lease is not None:
        _release(lease, reason=ReleaseReason.ABORTED, by=by, at=at)
        event_record(
            kind=EventKind.RELEASED,
            actor=by,
            host=lease.host,
            lease_id=lease.pk,
            job_id=job.pk,
            message=f"job {job.name} aborted: {text}",
            at=at,
        )
        request_tick("job aborted")
    job.refresh_from_db()
    return job


@transaction.atomic
def suite_abort(*, suite: Suite, by: Actor, at: datetime | None = None) -> int:
    """Abort every unfinished job of a suite; returns how many were aborted."""
    at = at or timezone.now()
    changed = Suite.objects.filter(pk=suite.pk, aborted_at__isnull=True).update(
        aborted_at=at, aborted_by=actor_name(by)
    )
    if not changed:
        raise Conflict(f"suite {suite.name} is already aborted")
    text = f"suite aborted by {actor_name(by)}"
    # Jobs first, in id order as the tick locks them, then their leases: a lease the tick made
    # while we waited for these rows is committed by then and is released with the rest.
    list(
        Job.objects.select_for_update()
        .unfinished()
        .filter(suite=suite)
        .order_by("pk")
        .values_list("pk", flat=True)
    )
    leases = list(
        Lease.objects.select_for_update(of=("self",))
        .active()
        .filter(job__suite=suite)
        .select_related("host", "job")
    )
    count = (
        Job.objects.unfinished()
        .filter(suite=suite)
        .update(status=JobStatus.ABORTED, finished_at=at, message=text)
    )
    if leases:
        Lease.objects.filter(pk__in=[lease.pk for lease in leases]).update(
            released_at=at, release_reason=ReleaseReason.ABORTED, released_by=actor_name(by)
        )
        HostEvent.objects.bulk_create(
            [
                HostEvent(
                    host=lease.host,
                    kind=EventKind.RELEASED,
                    actor=actor_name(by),
                    lease_id=lease.pk,
                    job_id=lease.job_id,
                    created_at=at,
                    message=f"job {lease.job.name} aborted: {text}",
                )
                for lease in leases
            ]
        )
        request_tick("suite aborted")
    suite.refresh_from_db()
    return count


# --- expiry and timeouts (run by the tick) --------------------------------------------------


def lease_expire_overdue(*, now: datetime) -> int:
    """Expire leases past expires_at: requeue or fail their jobs, flag their hosts."""
    overdue = list(
        Lease.objects.select_for_update(skip_locked=True, of=("self",))
        .active()
        .filter(expires_at__lt=now)
        .select_related("host", "job")
    )
    if not overdue:
        return 0
    ids = [lease.pk for lease in overdue]
    # Compare-and-set on every row: a lease completed meanwhile is not expired.
    Lease.objects.active().filter(pk__in=ids).update(
        released_at=now, release_reason=ReleaseReason.EXPIRED, released_by="scheduler"
    )
    events: list[HostEvent] = []
    requeue, fail, broken = [], [], []
    for lease in overdue:
        job = lease.job
        if job is None:
            events.append(
                HostEvent(
                    host=lease.host,
                    kind=EventKind.EXPIRED,
                    actor="scheduler",
                    lease_id=lease.pk,
                    created_at=now,
                    message="reservation ended",
                )
            )
            continue
        broken.append(lease.host_id)
        if job.attempts <= job.max_retries:
            requeue.append(job.pk)
            outcome = f"job {job.name} requeued (attempt {job.attempts} of {job.max_retries + 1})"
        else:
            fail.append(job.pk)
            outcome = f"job {job.name} ended in error after {job.attempts} attempt(s)"
        events.append(
            HostEvent(
                host=lease.host,
                kind=EventKind.EXPIRED,
                actor="scheduler",
                lease_id=lease.pk,
                job_id=job.pk,
                created_at=now,
                message=f"no heartbeat since {(lease.heartbeat_at or lease.acquired_at):%H:%M:%S}; "
                f"{outcome}; host → needs_repair (state unknown)",
            )
        )
    active = (JobStatus.LEASED, JobStatus.RUNNING)
    if requeue:
        Job.objects.filter(pk__in=requeue, status__in=active).update(
            status=JobStatus.QUEUED,
            started_at=None,
            message="lease expired (runner stopped heartbeating); requeued",
        )
    if fail:
        Job.objects.filter(pk__in=fail, status__in=active).update(
            status=JobStatus.ERROR,
            finished_at=now,
            message="lease expired (runner stopped heartbeating); no retries left",
        )
    if broken:
        # The runner vanished mid-job, so nobody knows what state the host is in.
        Host.objects.filter(pk__in=broken).update(status=HostStatus.NEEDS_REPAIR)
    HostEvent.objects.bulk_create(events)
    return len(overdue)


def job_timeout_overdue(*, now: datetime) -> int:
    """Abort running jobs past their timeout and release their hosts."""
    candidates = list(
        Job.objects.select_for_update(skip_locked=True)
        .filter(status=JobStatus.RUNNING, started_at__isnull=False)
        .filter(started_at__lt=now - F("timeout"))
        .values_list("id", "name", "timeout")
    )
    if not candidates:
        return 0
    ids = [c[0] for c in candidates]
    Job.objects.filter(pk__in=ids, status=JobStatus.RUNNING).update(
        status=JobStatus.ABORTED, finished_at=now, message="timed out: ran longer than its timeout"
    )
    leases = list(Lease.objects.active().filter(job_id__in=ids).select_related("job"))
    Lease.objects.active().filter(pk__in=[lease.pk for lease in leases]).update(
        released_at=now, release_reason=ReleaseReason.TIMEOUT, released_by="scheduler"
    )
    HostEvent.objects.bulk_create(
        [
            HostEvent(
                host_id=lease.host_id,
                kind=EventKind.TIMED_OUT,
                actor="scheduler",
                lease_id=lease.pk,
                job_id=lease.job_id,
                created_at=now,
                message=f"job {lease.job.name} aborted after its timeout "
                f"({lease.job.timeout}); host released",
            )
            for lease in leases
        ]
    )
    return len(candidates)


# --- the tick -------------------------------------------------------------------------------


@dataclass
class TickSummary:
    """What one tick did."""

    tick_id: int | None = None
    started_at: datetime | None = None
    duration_ms: float = 0.0
    plan_ms: float = 0.0
    jobs_considered: int = 0
    hosts_free: int = 0
    leases: list[dict] = field(default_factory=list)  # {"job", "suite", "host"}
    expired: int = 0
    timed_out: int = 0
    skipped_assignments: int = 0
    unchanged: bool = False  # nothing had changed since the previous tick: its plan stands

    def as_dict(self) -> dict:
        data = asdict(self)
        data["started_at"] = self.started_at.isoformat() if self.started_at else None
        return data


def fault_point(name: str) -> None:
    """Stop here forever when SCHEDSITE_FAULT_POINT names this point (fault-injection tests)."""
    # Like a failpoint: the reliability tests start a tick in a subprocess, wait for the file
    # that says it reached this point with all its writes made but not committed, and kill -9
    # it, proving that a tick killed mid-apply leaves nothing behind.
    if os.environ.get("SCHEDSITE_FAULT_POINT") != name:
        return
    marker = os.environ.get("SCHEDSITE_FAULT_FILE")
    if marker:
        with open(marker, "w", encoding="utf-8") as fh:
            fh.write(str(os.getpid()))
    while True:
        time.sleep(3600)


def _acquire_tick_lock() -> None:
    # One planner at a time across every process and cluster; released with the transaction.
    # On SQLite the IMMEDIATE transaction already holds the database's write lock.
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(%s)", [TICK_LOCK_KEY])


def scheduler_tick(*, now: datetime | None = None, trigger: str = "") -> TickSummary:
    """Expire overdue leases, plan, and lease free hosts to queued jobs in one transaction."""
    last_error: Exception | None = None
    for _attempt in range(3):
        try:
            summary = _tick_once(now=now, trigger=trigger)
        except (IntegrityError, OperationalError) as exc:
            # A write that raced the tick (a reservation, a deadlock victim): the whole tick
            # rolled back, so nothing is half-applied; plan again from a fresh snapshot.
            last_error = exc
            log.warning("tick rolled back and retried: %s", exc)
        else:
            _log_tick(summary, trigger=trigger)
            _refresh_statistics(summary)
            return summary
    assert last_error is not None
    raise last_error


# A tick that makes this many leases changes the lease table enough to mislead the planner.
ANALYZE_AFTER_LEASES = 1000


def _refresh_statistics(summary: TickSummary) -> None:
    """Re-analyse the lease and job tables after a tick that changed them wholesale."""
    # Right after a cold tick leases thousands of hosts, PostgreSQL still believes the lease
    # table is empty until autovacuum gets to it (about a minute), and picks plans that make
    # pages such as the workers list 100× slower meanwhile (docs/performance.md).
    if len(summary.leases) < ANALYZE_AFTER_LEASES or connection.vendor != "postgresql":
        return
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE jobs_lease, jobs_job")


def _log_tick(summary: TickSummary, *, trigger: str) -> None:
    # One line per tick, idle and unchanged ones included ("is the scheduler alive?"); with
    # LOG_FORMAT=json the extras become fields a log shipper can index.
    leased = len(summary.leases)
    queued = summary.jobs_considered - leased
    log.info(
        "tick %s: %d leased, %d expired, %d timed out, %d queued, %.1f ms (plan %.1f ms)",
        summary.tick_id,
        leased,
        summary.expired,
        summary.timed_out,
        queued,
        summary.duration_ms,
        summary.plan_ms,
        extra={
            "tick_id": summary.tick_id,
            "leased": leased,
            "expired": summary.expired,
            "timed_out": summary.timed_out,
            "queued": queued,
            "jobs_considered": summary.jobs_considered,
            "hosts_free": summary.hosts_free,
            "unchanged": summary.unchanged,
            "duration_ms": round(summary.duration_ms, 1),
            "plan_ms": round(summary.plan_ms, 1),
            "trigger": trigger,
        },
    )


def _tick_once(*, now: datetime | None, trigger: str) -> TickSummary:
    start = time.perf_counter()
    with transaction.atomic():
        _acquire_tick_lock()
        now = now or timezone.now()
        summary = TickSummary(started_at=now)
        summary.expired = lease_expire_overdue(now=now)
        summary.timed_out = job_timeout_overdue(now=now)
        # Taken before the snapshot, so the plan sees at least everything the digest covers: a
        # write landing in between only makes the next tick plan again, never skip wrongly.
        fingerprint = selectors.lab_fingerprint(now=now)
        if fingerprint is not None and _tick_unchanged(
            summary, fingerprint=fingerprint, trigger=trigger, start=start
        ):
            return summary
        snap = selectors.scheduler_snapshot(now=now)
        plan_start = time.perf_counter()
        result = planner.plan(hosts=snap.hosts, jobs=snap.jobs, suites=snap.suites)
        summary.plan_ms = (time.perf_counter() - plan_start) * 1000
        summary.jobs_considered = len(snap.jobs)
        summary.hosts_free = sum(1 for h in snap.hosts if h.schedulable)
        made = _apply(result.assignments, snap=snap, now=now)
        summary.skipped_assignments = len(result.assignments) - len(made)
        summary.leases = made
        reasons = _reasons_by_class(result)
        summary.duration_ms = (time.perf_counter() - start) * 1000
        queued_after = len(snap.jobs) - len(made)
        oldest = min((j.submitted_at for j in snap.jobs), default=None)
        tick = SchedulerTick.objects.create(
            started_at=now,
            duration_ms=summary.duration_ms,
            plan_ms=summary.plan_ms,
            jobs_considered=summary.jobs_considered,
            hosts_free=summary.hosts_free,
            hosts_total=len(snap.hosts),
            hosts_leased=snap.leased_count + len(made),
            leases_made=len(made),
            leases_expired=summary.expired,
            jobs_timed_out=summary.timed_out,
            queued_after=queued_after,
            oldest_wait_s=(now - oldest).total_seconds() if oldest and queued_after else 0.0,
            trigger=trigger[:50],
            wait_reasons=reasons,
            fingerprint=fingerprint or "",
        )
        summary.tick_id = tick.pk
        _prune_ticks(tick.pk)
        fault_point("tick.before_commit")
    return summary


def _tick_unchanged(summary: TickSummary, *, fingerprint: str, trigger: str, start: float) -> bool:
    """Record a tick that keeps the previous plan if the lab is unchanged; True if it did."""
    if summary.expired or summary.timed_out:
        return False
    previous = SchedulerTick.objects.defer("wait_reasons").order_by("-id").first()
    if previous is None or previous.fingerprint != fingerprint:
        return False
    # The planner is a pure function of what the digest covers, so it would return the same
    # plan, and that plan leased nothing (a lease changes the digest). The previous tick's
    # counts and wait reasons therefore still describe the lab: copy them. The reasons are
    # copied inside the database; at 100,000 queued jobs they are hundreds of kilobytes.
    now = summary.started_at
    assert now is not None
    waited = 0.0
    if previous.queued_after:
        waited = previous.oldest_wait_s + (now - previous.started_at).total_seconds()
    summary.unchanged = True
    summary.jobs_considered = previous.jobs_considered
    summary.hosts_free = previous.hosts_free
    summary.duration_ms = (time.perf_counter() - start) * 1000
    tick = SchedulerTick.objects.create(
        started_at=now,
        duration_ms=summary.duration_ms,
        jobs_considered=previous.jobs_considered,
        hosts_free=previous.hosts_free,
        hosts_total=previous.hosts_total,
        hosts_leased=previous.hosts_leased,
        queued_after=previous.queued_after,
        oldest_wait_s=waited,
        trigger=trigger[:50],
        wait_reasons=Subquery(
            SchedulerTick.objects.filter(pk=previous.pk).values("wait_reasons")[:1]
        ),
        fingerprint=fingerprint,
        unchanged=True,
    )
    summary.tick_id = tick.pk
    _prune_ticks(tick.pk)
    return True


def _apply(
    assignments: Iterable[planner.Assignment], *, snap: selectors.Snapshot, now: datetime
) -> list[dict]:
    """Create the planned leases, keeping only those still valid under row locks."""
    assignments = list(assignments)
    if not assignments:
        return []
    host_ids = sorted(a.host_id for a in assignments)
    job_ids = sorted(a.job_id for a in assignments)
    # id_list: a cold tick filters by 10,000 ids four times; one array parameter each time.
    hosts_in, jobs_in = selectors.id_list(host_ids), selectors.id_list(job_ids)
    # Lock order everywhere: hosts, then jobs. Locking first and re-reading in a new statement
    # means any write that locked these rows before us has committed and is visible now.
    list(Host.objects.select_for_update().filter(pk__in=hosts_in).values_list("pk", flat=True))
    list(Job.objects.select_for_update().filter(pk__in=jobs_in).values_list("pk", flat=True))
    ok_hosts = set(
        Host.objects.schedulable(now).filter(pk__in=hosts_in).values_list("pk", flat=True)
    )
    ok_jobs = set(Job.objects.queued().filter(pk__in=jobs_in).values_list("pk", flat=True))
    kept = [a for a in assignments if a.host_id in ok_hosts and a.job_id in ok_jobs]
    if not kept:
        return []
    lease_of_host = _insert_leases(kept, now=now)
    Job.objects.queued().filter(pk__in=selectors.id_list(a.job_id for a in kept)).update(
        status=JobStatus.LEASED, attempts=F("attempts") + 1, message=""
    )
    jobs = snap.jobs_by_id
    hosts = snap.hosts_by_id
    suites = snap.suite_names
    made: list[dict] = []
    events: list[HostEvent] = []
    for a in kept:
        job, host = jobs[a.job_id], hosts[a.host_id]
        suite_name = suites.get(job.suite_id) if job.suite_id else None
        made.append({"job": job.name, "job_id": job.id, "suite": suite_name, "host": host.hostname})
        events.append(
            HostEvent(
                host_id=host.id,
                kind=EventKind.LEASED,
                actor="scheduler",
                lease_id=lease_of_host.get(host.id),
                job_id=job.id,
                created_at=now,
                message=f"leased to job {job.name}"
                + (f" of suite {suite_name}" if suite_name else "")
                + f" (priority {job.priority})",
            )
        )
    _insert_events(events)
    return made


def _columns(model: type, *names: str) -> str:
    return ", ".join(connection.ops.quote_name(model._meta.get_field(n).column) for n in names)


def _insert_leases(kept: Sequence[planner.Assignment], *, now: datetime) -> dict[int, int]:
    """Create one lease per assignment; return host id -> lease id."""
    expires = now + timedelta(seconds=settings.LEASE_TTL)
    if connection.vendor != "postgresql":
        leases = Lease.objects.bulk_create(
            [
                Lease(
                    host_id=a.host_id,
                    job_id=a.job_id,
                    reason="scheduled",
                    acquired_at=now,
                    expires_at=expires,
                )
                for a in kept
            ]
        )
        return {lease.host_id: lease.pk for lease in leases if lease.pk is not None}
    # One INSERT ... SELECT FROM unnest(arrays): bulk_create spends about a second of a cold
    # tick building and binding 10,000 rows x 7 parameters; two arrays bind in microseconds.
    # The partial unique constraints still guard every row.
    table = connection.ops.quote_name(Lease._meta.db_table)
    columns = _columns(
        Lease, "host", "job", "reason", "acquired_at", "expires_at", "release_reason", "released_by"
    )
    sql = (
        f"INSERT INTO {table} ({columns}) "
        "SELECT h, j, 'scheduled', %s, %s, '', '' "
        "FROM unnest(%s::bigint[], %s::bigint[]) AS u(h, j) "
        f"RETURNING {_columns(Lease, 'host', 'id')}"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [now, expires, [a.host_id for a in kept], [a.job_id for a in kept]])
        return dict(cursor.fetchall())


def _insert_events(events: Sequence[HostEvent]) -> None:
    """Write the scheduler's lease events in one statement."""
    if connection.vendor != "postgresql" or not events:
        HostEvent.objects.bulk_create(events)
        return
    # Same reason as _insert_leases: one statement with one array per column.
    table = connection.ops.quote_name(HostEvent._meta.db_table)
    columns = _columns(
        HostEvent, "host", "kind", "actor", "lease_id", "job_id", "created_at", "message"
    )
    sql = (
        f"INSERT INTO {table} ({columns}) "
        "SELECT h, k, a, l, j, c, m FROM unnest(%s::bigint[], %s::text[], %s::text[], "
        "%s::bigint[], %s::bigint[], %s::timestamptz[], %s::text[]) AS u(h, k, a, l, j, c, m)"
    )
    with connection.cursor() as cursor:
        cursor.execute(
            sql,
            [
                [e.host_id for e in events],
                [e.kind for e in events],
                [e.actor for e in events],
                [e.lease_id for e in events],
                [e.job_id for e in events],
                [e.created_at for e in events],
                [e.message for e in events],
            ],
        )


def _reasons_by_class(result: planner.Plan) -> dict:
    return {
        key: {"code": r.code, "message": r.message, "details": dict(r.details)}
        for key, r in result.class_reasons.items()
    }


# Ticks that keep their wait-reason tables; only the latest is ever read, the few before it
# are kept so a reader holding an older tick still resolves its reasons.
TICKS_WITH_REASONS = 5


def _prune_ticks(latest_id: int) -> None:
    if latest_id % 50 == 0:  # prune now and then, not on every tick
        tick_history_prune(latest_id=latest_id)
        idempotency_keys_purge()


def tick_history_prune(*, latest_id: int) -> None:
    """Bound the tick history, and drop the wait-reason tables of all but the latest ticks."""
    keep = settings.TICK_HISTORY
    cutoff = SchedulerTick.objects.order_by("-id").values_list("id", flat=True)[keep : keep + 1]
    cutoff_ids = list(cutoff)
    if cutoff_ids:
        SchedulerTick.objects.filter(id__lte=cutoff_ids[0]).delete()
    # At 100,000 queued jobs a table is hundreds of kilobytes; kept on 2,000 rows it would be
    # most of the database. The charts need only the counts.
    SchedulerTick.objects.filter(id__lte=latest_id - TICKS_WITH_REASONS).exclude(
        wait_reasons={}
    ).update(wait_reasons={})


# --- the runner protocol addressed by lease (what the REST API calls) -----------------------


def _lock_job_lease(lease: Lease) -> Lease:
    # The lease is what a runner holds: lock it and check it is still active, so a runner whose
    # lease expired (and whose job was leased again elsewhere) cannot act on the new lease.
    locked = Lease.objects.select_for_update().filter(pk=lease.pk).first()
    if locked is None or locked.released_at is not None:
        why = f" ({locked.release_reason})" if locked and locked.release_reason else ""
        raise Conflict(f"lease {lease.pk} is no longer active{why}")
    if locked.job_id is None:
        raise Conflict(f"lease {lease.pk} is a manual reservation, not a job's lease")
    return locked


@transaction.atomic
def lease_job_start(*, lease: Lease, by: Actor, at: datetime | None = None) -> Job:
    """Start the job of a lease the runner holds."""
    lease = _lock_job_lease(lease)
    return job_start(job=lease.job, by=by, at=at)


@transaction.atomic
def lease_job_complete(
    *,
    lease: Lease,
    result: str,
    by: Actor,
    message: str = "",
    host_ok: bool = True,
    at: datetime | None = None,
) -> Job:
    """Report the result of the job of a lease the runner holds, and release the lease."""
    if result not in (JobStatus.PASSED, JobStatus.FAILED):
        raise InvalidInput("result must be 'passed' or 'failed'", field="result")
    lease = _lock_job_lease(lease)
    return job_complete(
        job=lease.job, result=result, by=by, message=message, host_ok=host_ok, at=at
    )


@transaction.atomic
def lease_job_heartbeat(*, lease: Lease, by: Actor, at: datetime | None = None) -> Lease:
    """Heartbeat a job's lease; manual reservations are extended instead, never heartbeated."""
    # A heartbeat sets expires_at to now + LEASE_TTL, which would cut a reservation short.
    lease = _lock_job_lease(lease)
    return lease_heartbeat(lease=lease, by=by, at=at)


@transaction.atomic
def lease_job_abort(
    *, lease: Lease, by: Actor, reason: str = "", at: datetime | None = None
) -> Job:
    """Abort the job of a lease the runner holds (the runner is shutting down)."""
    lease = _lock_job_lease(lease)
    return job_abort(job=lease.job, by=by, reason=reason, at=at)
