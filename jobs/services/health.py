"""Staff health actions: repair or verify a host now (docs/health.md#staff-actions)."""

from __future__ import annotations

from django.db import transaction
from django.utils import timezone

from hosts.audit import Actor
from hosts.choices import HostStatus
from hosts.models import Host
from jobs import transitions
from jobs.choices import MAINTENANCE_KINDS, JobKind
from jobs.models import Job
from jobs.scheduling.maintenance import create_maintenance_jobs
from jobs.scheduling.triggers import request_tick
from jobs.transitions import Mover
from schedsite.errors import Conflict

# Why a host in each status cannot be verified now, as staff read it.
_NO_VERIFY = {
    HostStatus.VERIFYING: "is being verified already",
    HostStatus.NEEDS_REPAIR: "needs repair: use repair",
    HostStatus.REPAIRING: "is being repaired",
    HostStatus.REPAIR_FAILED: "needs repair: use repair",
    HostStatus.RETIRED: "is retired",
}


def _locked(host: Host) -> Host:
    # The host row first, as every move locks it: a tick leasing a maintenance job waits.
    return Host.objects.select_for_update().get(pk=host.pk)


@transaction.atomic
def host_repair_now(*, host: Host, by: Actor) -> Host:
    """Send a host to repair at once, with a fresh count of attempts."""
    host = _locked(host)
    if host.status == HostStatus.RETIRED:
        raise Conflict(f"host {host.hostname} is retired")
    if host.status == HostStatus.REPAIRING:
        raise Conflict(f"host {host.hostname} is being repaired already")
    now = timezone.now()
    Host.objects.filter(pk=host.pk).update(repair_attempts=0, repair_not_before=None)
    if host.status != HostStatus.NEEDS_REPAIR:
        transitions.move_host(
            host, old=host.status, to=HostStatus.NEEDS_REPAIR, mover=Mover.STAFF, by=by,
            why="staff: repair now", at=now,
        )  # fmt: skip
    # A queued verify is dropped by the tick (its host no longer needs it); a running one ends
    # first, and the repair waits for its lease like any maintenance job.
    if not Job.objects.unfinished().filter(host=host, kind=JobKind.REPAIR).exists():
        create_maintenance_jobs([(host, JobKind.REPAIR)], now=now, why="staff", by=by)
    request_tick("repair now")
    host.refresh_from_db()
    return host


@transaction.atomic
def host_verify_now(*, host: Host, by: Actor) -> Host:
    """Queue a verify job for a ready host (or one waiting for a verify) at once."""
    host = _locked(host)
    if host.status in _NO_VERIFY:
        raise Conflict(f"host {host.hostname} {_NO_VERIFY[host.status]}")
    if Job.objects.unfinished().filter(host=host, kind__in=MAINTENANCE_KINDS).exists():
        raise Conflict(f"host {host.hostname} has a maintenance job already")
    create_maintenance_jobs([(host, JobKind.VERIFY)], now=timezone.now(), why="staff", by=by)
    request_tick("verify now")
    return host
