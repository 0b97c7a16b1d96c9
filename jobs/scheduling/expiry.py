"""Expiry and timeouts, run by the tick: overdue leases and jobs past their timeout."""

from __future__ import annotations

from datetime import datetime

from django.db.models import F

from hosts import audit
from hosts.audit import SCHEDULER
from hosts.choices import EventKind, HostStatus
from hosts.models import Host, HostEvent
from jobs.choices import JobStatus, ReleaseReason
from jobs.models import Job, Lease


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
                audit.entry(
                    EventKind.EXPIRED,
                    actor=SCHEDULER,
                    host=lease.host,
                    lease_id=lease.pk,
                    at=now,
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
            audit.entry(
                EventKind.EXPIRED,
                actor=SCHEDULER,
                host=lease.host,
                lease_id=lease.pk,
                job_id=job.pk,
                at=now,
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
    audit.record_many(events)
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
    leases = list(Lease.objects.active().filter(job_id__in=ids).select_related("host", "job"))
    Lease.objects.active().filter(pk__in=[lease.pk for lease in leases]).update(
        released_at=now, release_reason=ReleaseReason.TIMEOUT, released_by="scheduler"
    )
    audit.record_many(
        [
            audit.entry(
                EventKind.TIMED_OUT,
                actor=SCHEDULER,
                host=lease.host,
                lease_id=lease.pk,
                job_id=lease.job_id,
                at=now,
                message=f"job {lease.job.name} aborted after its timeout "
                f"({lease.job.timeout}); host released",
            )
            for lease in leases
        ]
    )
    return len(candidates)
