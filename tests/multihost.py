"""Multi-host jobs for tests: submitted as one-host jobs, then given their roles.

These helpers write the normalized roles the submission stores (jobs/submission_schema.py), so
that the tick, the protocol and the API are tested on their own.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from django.db import transaction
from django.utils import timezone

from hosts.models import Host
from jobs.models import Job, Lease
from jobs.scheduling import labstate, planner
from jobs.scheduling.tick import _apply
from tests import factories as f


def role(name: str, labels: Sequence[str] = (), count: int = 1, max: int | None = None) -> dict:  # noqa: A002
    return {"name": name, "labels": sorted(labels), "count": count, "max": max or count}


def multihost_job(
    name: str,
    roles: Sequence[dict],
    labels: Sequence[str] = (),
    *,
    together_by: str = "",
    priority: int = 40,
    max_retries: int = 0,
    owner: object = "alice",
) -> Job:
    """A queued job needing the hosts of `roles` (see `role`), each with `labels` too."""
    job = f.job(name, labels, priority=priority, max_retries=max_retries, owner=owner)
    Job.objects.filter(pk=job.pk).update(roles=list(roles), together_by=together_by)
    job.refresh_from_db()
    return job


def lease_hosts(
    job: Job, hosts: Sequence[tuple[str, Host]], *, now: datetime | None = None
) -> list[dict]:
    """Lease the job its hosts ((role, host) by slot) through the tick's apply, as a plan
    assigning them would: under its row locks and re-check. Returns the leases made."""
    now = now or timezone.now()
    assignments = [
        planner.Assignment(job_id=job.pk, host_id=host.pk, role=name, slot=slot)
        for slot, (name, host) in enumerate(hosts)
    ]
    with transaction.atomic():
        snap = labstate.scheduler_snapshot(now=now)
        return _apply(assignments, snap=snap, now=now)


def attempt(job: Job) -> list[Lease]:
    """The job's active leases, by slot."""
    return list(Lease.objects.active().filter(job=job).select_related("host").order_by("slot"))
