"""Staff and tester actions: release a lease, abort a job or a suite."""

from __future__ import annotations

from datetime import datetime

from django.db import transaction
from django.utils import timezone

from hosts import audit
from hosts.audit import Actor, actor_name
from hosts.choices import EventKind
from hosts.services import reason_clean
from jobs.choices import ACTIVE_JOB_STATUSES, JobStatus, ReleaseReason
from jobs.models import Job, Lease, Suite
from jobs.scheduling.triggers import request_tick
from jobs.services.common import _active_lease_for, _release
from schedsite.errors import Conflict


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
    audit.record(
        EventKind.RELEASED,
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
def job_abort(*, job: Job, by: Actor, reason: str = "", at: datetime | None = None) -> Job:
    """Abort a queued or running job; a held host is released back to the pool."""
    at = at or timezone.now()
    text = (reason or "").strip() or f"aborted by {actor_name(by)}"
    # Lease before job, the order the runner protocol locks them in.
    lease = _active_lease_for(job)
    changed = (
        Job.objects.unfinished()
        .filter(pk=job.pk)
        .update(status=JobStatus.ABORTED, finished_at=at, message=text[:10000])
    )
    if not changed:
        raise Conflict(f"job {job.pk} has already finished")
    if lease is None:
        # A tick leasing this job held its row until it committed, so the update above waited
        # for it and found the job leased; read its lease now rather than leave it active
        # under an aborted job. With the job row ours, no later tick can lease it.
        lease = _active_lease_for(job)
    if lease is not None:
        _release(lease, reason=ReleaseReason.ABORTED, by=by, at=at)
        audit.record(
            EventKind.RELEASED,
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
    held = (
        Lease.objects.select_for_update(of=("self",))
        .active()
        .filter(job__suite=suite)
        .select_related("host", "job")
    )
    # Leases before jobs, the order the runner protocol locks them in.
    list(held.values_list("pk", flat=True))
    count = (
        Job.objects.unfinished()
        .filter(suite=suite)
        .update(status=JobStatus.ABORTED, finished_at=at, message=text)
    )
    # Read the leases again: a tick that leased some of these jobs held their rows until it
    # committed, so the update above waited for it, and its leases are visible only now.
    leases = list(held)
    if leases:
        Lease.objects.filter(pk__in=[lease.pk for lease in leases]).update(
            released_at=at, release_reason=ReleaseReason.ABORTED, released_by=actor_name(by)
        )
        audit.record_many(
            [
                audit.entry(
                    EventKind.RELEASED,
                    actor=by,
                    host=lease.host,
                    lease_id=lease.pk,
                    job_id=lease.job_id,
                    at=at,
                    message=f"job {lease.job.name} aborted: {text}",
                )
                for lease in leases
            ]
        )
        request_tick("suite aborted")
    suite.refresh_from_db()
    return count
