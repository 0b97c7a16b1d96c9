"""What the services share: finding the active leases a job holds."""

from __future__ import annotations

from django.db.models import Q

from jobs.models import Job, Lease
from jobs.querysets import ACTIVE_LEASE


def active_lease_for(job: Job) -> Lease | None:
    """Lock and return the job's active lease, with its host; None if it holds none."""
    return (
        Lease.objects.active()
        .filter(job=job)
        .select_for_update(of=("self",))
        .select_related("host")
        .first()
    )


def active_leases_for(job: Job | int) -> list[Lease]:
    """Lock and return the job's active leases (a multi-host job's one per host), in id order
    (the order every lease lock is taken in), with their hosts; [] if it holds none."""
    return list(
        Lease.objects.active()
        .filter(job=job)
        .select_for_update(of=("self",))
        .select_related("host")
        .order_by("pk")
    )


def lock_attempt(lease_id: int) -> list[Lease]:
    """Lock the lease and, while it is an active lease of a job, every other active lease of
    that job (a multi-host job's attempt), all in id order (the order every lease lock is taken
    in, so a call naming one lease of a job never deadlocks one naming another); with their
    hosts and jobs. [] if there is no such lease."""
    job = Lease.objects.active().filter(pk=lease_id).values("job_id")
    return list(
        Lease.objects.select_for_update(of=("self",))
        .filter(Q(pk=lease_id) | Q(ACTIVE_LEASE, job_id__in=job))
        .select_related("host", "job")
        .order_by("pk")
    )
