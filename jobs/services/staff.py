"""Staff and tester actions: release a lease, abort a job or a suite, change a job's priority."""

from __future__ import annotations

from datetime import datetime

from django.utils import timezone

from hosts import audit
from hosts.audit import Actor, actor_name, actor_user
from hosts.choices import EventKind
from hosts.services import reason_clean
from jobs import limits, transitions
from jobs.choices import JobStatus, ReleaseReason, priority_name
from jobs.models import Job, Lease, Suite
from jobs.scheduling.triggers import request_tick
from jobs.services.common import active_leases_for, lock_attempt
from jobs.transitions import Mover
from schedsite.errors import Conflict
from schedsite.transactions import atomic_retry


@atomic_retry
def lease_release(
    *, lease: Lease, by: Actor, requeue: bool = True, reason: str = "", at: datetime | None = None
) -> Lease:
    """Release a lease by hand; its job is requeued (default) or aborted."""
    at = at or timezone.now()
    reason = reason_clean(reason, what="release a lease", required=False)
    lease_id = lease.pk
    attempt = lock_attempt(lease_id)
    lease = next((each for each in attempt if each.pk == lease_id), None)
    if lease is None:
        raise Lease.DoesNotExist(f"lease {lease_id} does not exist")
    if not lease.active:
        raise Conflict(f"lease {lease.pk} is no longer active")
    text = reason.strip() or "released by hand"
    job = lease.job
    outcome, status = ("requeued", JobStatus.QUEUED) if requeue else ("aborted", JobStatus.ABORTED)
    said = f"job {job.name} {outcome}: {text}" if job else text
    # A multi-host job's attempt ends whole: every host of it is released.
    leases = [each for each in attempt if each.active]
    transitions.release_leases(
        leases, reason=ReleaseReason.RELEASED, mover=Mover.STAFF, by=by, at=at, message=said
    )
    if job is not None:
        transitions.move_jobs(
            [job.pk], to=status, mover=Mover.STAFF, at=at, message=f"{outcome}: {text}"
        )
    lease.refresh_from_db()
    return lease


@atomic_retry
def job_abort(
    *,
    job: Job,
    by: Actor,
    reason: str = "",
    at: datetime | None = None,
    mover: Mover = Mover.OWNER,
) -> Job:
    """Abort a queued or running job; a held host is released back to the pool."""
    at = at or timezone.now()
    text = (reason or "").strip() or f"aborted by {actor_name(by)}"
    # Leases before job, the order the runner protocol locks them in; a multi-host job's
    # every lease.
    leases = active_leases_for(job)
    transitions.move_job(job, to=JobStatus.ABORTED, mover=mover, at=at, message=text[:10000])
    if not leases:
        # A tick leasing this job held its row until it committed, so the update above waited
        # for it and found the job leased; read its leases now rather than leave them active
        # under an aborted job. With the job row ours, no later tick can lease it.
        leases = active_leases_for(job)
    if leases:
        transitions.release_leases(
            leases,
            reason=ReleaseReason.ABORTED,
            mover=mover,
            by=by,
            at=at,
            message=f"job {job.name} aborted: {text}",
            trigger="job aborted",
        )
    job.refresh_from_db()
    return job


def _priority_text(value: int) -> str:
    name = priority_name(value)
    return f"{value} ({name})" if name else str(value)


@atomic_retry
def job_set_priority(*, job: Job, by: Actor, priority: int, at: datetime | None = None) -> Job:
    """Change a queued job's priority; the next tick orders the queue by it.

    `priority` is already parsed (jobs.choices.parse_priority); the range and a tester's
    priority cap are submission's (jobs.limits). Only a queued job changes: a job that holds a
    host or has finished is a Conflict. Audited as an `updated` event naming the job.
    """
    at = at or timezone.now()
    limits.priority_check(priority, user=actor_user(by))
    old = Job.objects.filter(pk=job.pk).values_list("priority", flat=True).first()
    # Compare-and-set on the status: a job leased by a tick meanwhile keeps its priority.
    changed = Job.objects.filter(pk=job.pk, status=JobStatus.QUEUED).update(priority=priority)
    if not changed:
        status = Job.objects.filter(pk=job.pk).values_list("status", flat=True).first()
        if status is None:
            raise Conflict(f"job {job.pk} no longer exists")
        raise Conflict(f"job {job.pk} is {status}: only a queued job's priority can change")
    job.priority = priority
    if old != priority:
        audit.record(
            EventKind.UPDATED,
            actor=by,
            subject=f"job {job.pk}",
            job_id=job.pk,
            at=at,
            message=f"job {job.name}: priority {_priority_text(old)} → {_priority_text(priority)}",
        )
        request_tick("job priority changed")
    return job


@atomic_retry
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
        .order_by("pk")  # in id order, as every lease lock is taken
    )
    # Leases before jobs, the order the runner protocol locks them in.
    list(held.values_list("pk", flat=True))
    jobs = Job.objects.filter(suite=suite)
    count = transitions.move_jobs(
        jobs, to=JobStatus.ABORTED, mover=Mover.OWNER, at=at, message=text
    )
    # Read the leases again: a tick that leased some of these jobs held their rows until it
    # committed, so the update above waited for it, and its leases are visible only now.
    transitions.release_leases(
        list(held),
        reason=ReleaseReason.ABORTED,
        mover=Mover.OWNER,
        by=by,
        at=at,
        message=lambda lease: f"job {lease.job.name} aborted: {text}",
        trigger="suite aborted",
    )
    suite.refresh_from_db()
    return count
