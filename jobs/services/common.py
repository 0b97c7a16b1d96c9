"""Helpers the services share: finding a job's lease, releasing a lease, flagging a host."""

from __future__ import annotations

from datetime import datetime

from hosts import audit
from hosts.audit import Actor, actor_name
from hosts.choices import EventKind, HostStatus
from hosts.models import Host
from jobs.models import Job, Lease
from schedsite.errors import Conflict


def _active_lease_for(job: Job, *, lock: bool = True) -> Lease | None:
    qs = Lease.objects.active().filter(job=job)
    if lock:
        qs = qs.select_for_update(of=("self",))
    return qs.select_related("host").first()


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
        audit.record(
            EventKind.STATUS,
            actor=by,
            host=host,
            at=at,
            old_status=old,
            new_status=HostStatus.NEEDS_REPAIR,
            message=why,
        )
