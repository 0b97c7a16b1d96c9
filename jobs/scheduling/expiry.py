"""Expiry and timeouts, run by the tick: overdue leases and jobs past their timeout."""

from __future__ import annotations

from datetime import datetime

from django.db.models import F

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


def lease_expire_overdue(*, now: datetime) -> int:
    """Expire leases past expires_at: retry or fail their jobs, have their hosts checked."""
    overdue = list(
        Lease.objects.select_for_update(skip_locked=True, of=("self",))
        .active()
        .filter(expires_at__lt=now)
        .select_related("host", "job")
    )
    if not overdue:
        return 0
    said = _expired_message
    transitions.release_leases(
        overdue, reason=ReleaseReason.EXPIRED, mover=TICK, by=SCHEDULER, at=now, message=said
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
        ended = [lease.job_id for lease in maintenance]
        text = "lease expired (runner stopped heartbeating)"
        transitions.move_jobs(ended, to=JobStatus.ERROR, mover=TICK, at=now, message=text)
    for lease in maintenance:
        recovery.maintenance_ended(
            lease.job, host=lease.host, passed=None, mover=TICK, by=SCHEDULER, at=now
        )
    return len(overdue)


def job_timeout_overdue(*, now: datetime) -> int:
    """Abort running jobs past their timeout and release their hosts.

    The lease first, then the job, then the host: the one lock order (docs/architecture.md, "Lock
    order"), which a runner's `complete` keeps too, so the two never deadlock. A lease someone
    holds (a runner completing it) is skipped: the next tick sees what became of it.
    """
    leases = list(
        Lease.objects.select_for_update(skip_locked=True, of=("self",))
        .active()
        .filter(job__status=JobStatus.RUNNING, job__started_at__isnull=False)
        .filter(job__started_at__lt=now - F("job__timeout"))
        .select_related("host", "job")
        .order_by("pk")
    )
    if not leases:
        return 0
    text = "timed out: ran longer than its timeout"
    # Every path that moves a running job holds its lease first: these jobs are still running.
    ids = [lease.job_id for lease in leases]
    transitions.move_jobs(ids, to=JobStatus.ABORTED, mover=TICK, at=now, message=text)

    def said(lease: Lease) -> str:
        return (
            f"job {lease.job.name} aborted after its timeout ({lease.job.timeout}); host released"
        )

    transitions.release_leases(
        leases, reason=ReleaseReason.TIMEOUT, mover=TICK, by=SCHEDULER, at=now, message=said
    )
    return len(leases)
