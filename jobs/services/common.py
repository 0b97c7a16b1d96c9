"""What the services share: finding the active lease a job holds."""

from __future__ import annotations

from jobs.models import Job, Lease


def active_lease_for(job: Job) -> Lease | None:
    """Lock and return the job's active lease, with its host; None if it holds none."""
    return (
        Lease.objects.active()
        .filter(job=job)
        .select_for_update(of=("self",))
        .select_related("host")
        .first()
    )
