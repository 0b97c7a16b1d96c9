"""Staff health actions: repair or verify a host now; an admin's purge of a retired host."""

from __future__ import annotations

from django.utils import timezone

from hosts import audit
from hosts.audit import Actor
from hosts.choices import EventKind, HostStatus
from hosts.models import Host, HostEvent
from jobs import transitions
from jobs.choices import MAINTENANCE_KINDS, JobKind
from jobs.models import Job, Lease
from jobs.recovery import fresh_repair_round
from jobs.scheduling.maintenance import create_maintenance_jobs
from jobs.scheduling.triggers import request_tick
from jobs.transitions import Mover
from schedsite.errors import Conflict
from schedsite.transactions import atomic_retry

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


@atomic_retry
def host_repair_now(*, host: Host, by: Actor) -> Host:
    """Send a host to repair at once, with a fresh count of attempts."""
    host = _locked(host)
    if host.status == HostStatus.RETIRED:
        raise Conflict(f"host {host.hostname} is retired")
    if host.status == HostStatus.REPAIRING:
        raise Conflict(f"host {host.hostname} is being repaired already")
    now = timezone.now()
    # A fresh round, as the automatic repair of a repair_failed host gives; the rounds' backoff
    # starts again too: staff sent it.
    Host.objects.filter(pk=host.pk).update(**fresh_repair_round(), repair_rounds=0)
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


@atomic_retry
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


def host_purge_counts(host: Host) -> dict[str, int]:
    """What purging the host removes, by kind of row."""
    return {
        "leases": Lease.objects.filter(host=host).count(),
        "events": HostEvent.objects.filter(host=host).count(),
        "maintenance jobs": Job.objects.filter(host=host, kind__in=MAINTENANCE_KINDS).count(),
        "test jobs unpinned": Job.objects.filter(host=host, kind=JobKind.TEST).count(),
    }


@atomic_retry
def host_purge(*, host: Host, by: Actor) -> dict[str, int]:
    """Delete a host with its leases, events and maintenance jobs for real (admins only)."""
    host = _locked(host)
    if Lease.objects.active().filter(host=host).exists():
        raise Conflict(f"host {host.hostname} has an active lease; release it first")
    if Job.objects.unfinished().filter(host=host).exists():
        raise Conflict(f"unfinished jobs are pinned to {host.hostname}; abort them first")
    counts = host_purge_counts(host)
    Lease.objects.filter(host=host).delete()
    Job.objects.filter(host=host, kind__in=MAINTENANCE_KINDS).delete()
    # Finished tests keep their results in their suites; only the pin to the host goes.
    Job.objects.filter(host=host).update(host=None)
    HostEvent.objects.filter(host=host).delete()
    summary = ", ".join(f"{n} {what}" for what, n in counts.items())
    audit.record(
        EventKind.DELETED, actor=by, host=host, message=f"host {host.hostname} purged: {summary}"
    )
    host.delete()
    return counts
