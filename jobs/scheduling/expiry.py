"""Expiry and timeouts, run by the tick: overdue leases and jobs past their timeout."""

from __future__ import annotations

from collections import Counter
from datetime import datetime

from django.db.models import F, QuerySet

from hosts.audit import SCHEDULER
from hosts.choices import HostStatus
from jobs import recovery, transitions
from jobs.choices import JobKind, JobStatus, ReleaseReason
from jobs.models import Lease
from jobs.transitions import Mover

TICK = Mover.SCHEDULER


def _expired_message(lease: Lease) -> str:
    job = lease.job
    if job is None:
        return "reservation ended"
    if job.kind != JobKind.TEST:
        outcome = f"{job.kind} job {job.name} ended in error"
    elif job.attempts <= job.max_retries:
        outcome = f"job {job.name} retried (attempt {job.attempts} of {job.max_retries + 1})"
    else:
        outcome = f"job {job.name} ended in error after {job.attempts} attempt(s)"
    # The host's move is its own status event, with the status it left.
    return f"no heartbeat since {(lease.heartbeat_at or lease.acquired_at):%H:%M:%S}; {outcome}"


def _whole_attempts(locked: list[Lease]) -> list[Lease]:
    """The locked job leases whose jobs' active leases are all among them (one query).

    A multi-host job's attempt ends whole: a job one of whose leases someone else holds
    locked (a runner's heartbeat or `complete` under way) is left for the next tick, which
    sees what became of it.
    """
    jobs = {lease.job_id for lease in locked if lease.job_id is not None}
    if not jobs:
        return locked
    counts = Counter(
        Lease.objects.active().filter(job_id__in=jobs).values_list("job_id", flat=True)
    )
    mine = Counter(lease.job_id for lease in locked if lease.job_id is not None)
    return [
        lease
        for lease in locked
        if lease.job_id is None or counts[lease.job_id] == mine[lease.job_id]
    ]


def _with_siblings(overdue: list[Lease]) -> list[Lease]:
    """The overdue leases and the other active leases of their multi-host jobs, locked (what
    someone else holds locked is skipped, never waited for: the lock order stays lease first,
    in id order, as the runner's heartbeat takes them)."""
    jobs = {lease.job_id for lease in overdue if lease.job is not None and lease.job.roles}
    if not jobs:
        return overdue
    have = {lease.pk for lease in overdue}
    siblings = (
        Lease.objects.select_for_update(skip_locked=True, of=("self",))
        .active()
        .filter(job_id__in=jobs)
        .exclude(pk__in=have)
        .select_related("host", "job")
        .order_by("pk")
    )
    return _whole_attempts([*overdue, *siblings])


def overdue_leases(now: datetime) -> QuerySet[Lease]:
    """Active leases past their expires_at at `now`."""
    return Lease.objects.active().filter(expires_at__lt=now)


def timed_out_leases(now: datetime) -> QuerySet[Lease]:
    """Active leases of running jobs past their timeout at `now`."""
    return (
        Lease.objects.active()
        .filter(job__status=JobStatus.RUNNING, job__started_at__isnull=False)
        .filter(job__started_at__lt=now - F("job__timeout"))
    )


def lease_expire_overdue(*, now: datetime) -> int:
    """Expire leases past expires_at: retry or fail their jobs, have their hosts checked.

    A lease of a multi-host job that expires ends the whole attempt: its other leases are
    released too (their hosts free again), the job is retried or ended once, and only the
    hosts whose leases expired are verified.
    """
    overdue = list(
        overdue_leases(now)
        .select_for_update(skip_locked=True, of=("self",))
        .select_related("host", "job")
        .order_by("pk")
    )
    if not overdue:
        return 0
    leases = _with_siblings(overdue)
    overdue = [lease for lease in leases if lease.expires_at < now]
    others = [lease for lease in leases if lease.expires_at >= now]
    if not overdue:
        return 0
    said = _expired_message
    transitions.release_leases(
        overdue, reason=ReleaseReason.EXPIRED, mover=TICK, by=SCHEDULER, at=now, message=said
    )
    if others:

        def ended(lease: Lease) -> str:
            return f"job {lease.job.name}: its attempt ended, a lease of it expired; host released"

        transitions.release_leases(
            others, reason=ReleaseReason.RELEASED, mover=TICK, by=SCHEDULER, at=now, message=ended
        )
    tests = [lease for lease in overdue if lease.job and lease.job.kind == JobKind.TEST]
    maintenance = [lease for lease in overdue if lease.job and lease.job.kind != JobKind.TEST]
    if tests:
        why = "its runner stopped heartbeating"
        recovery.retry_or_end(tests, end_as=JobStatus.ERROR, mover=TICK, at=now, why=why)
        # The runner vanished mid-job: the DUT may be fine, or not. A verify tells.
        hosts = [lease.host_id for lease in tests]
        why = "its job's runner stopped heartbeating: state unknown"
        transitions.move_hosts(
            hosts, to=HostStatus.NEEDS_VERIFY, mover=TICK, by=SCHEDULER, why=why, at=now
        )
    if maintenance:
        ended_jobs = [lease.job_id for lease in maintenance]
        text = "lease expired (runner stopped heartbeating)"
        transitions.move_jobs(ended_jobs, to=JobStatus.ERROR, mover=TICK, at=now, message=text)
    for lease in maintenance:
        recovery.maintenance_ended(
            lease.job, host=lease.host, passed=None, mover=TICK, by=SCHEDULER, at=now
        )
    return len(overdue)


def job_timeout_overdue(*, now: datetime) -> int:
    """Abort running jobs past their timeout and release their hosts (every host of a
    multi-host job).

    The lease first, then the job, then the host: the one lock order (docs/architecture.md, "Lock
    order"), which a runner's `complete` keeps too, so the two never deadlock. A lease someone
    holds (a runner completing it) is skipped, with the other leases of its job: the next tick
    sees what became of it.
    """
    leases = list(
        timed_out_leases(now)
        .select_for_update(skip_locked=True, of=("self",))
        .select_related("host", "job")
        .order_by("pk")
    )
    leases = _whole_attempts(leases)
    if not leases:
        return 0
    text = "timed out: ran longer than its timeout"
    # Every path that moves a running job holds its lease first: these jobs are still running.
    ids = list({lease.job_id: None for lease in leases})
    transitions.move_jobs(ids, to=JobStatus.ABORTED, mover=TICK, at=now, message=text)

    def said(lease: Lease) -> str:
        return (
            f"job {lease.job.name} aborted after its timeout ({lease.job.timeout}); host released"
        )

    transitions.release_leases(
        leases, reason=ReleaseReason.TIMEOUT, mover=TICK, by=SCHEDULER, at=now, message=said
    )
    return len(ids)
