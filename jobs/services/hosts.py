"""A host's status: its moves and its retirement, through the host state machine.

The rest of a host's and a worker's changes are hosts.services'; these need the jobs app (the
host state machine is jobs.transitions', and a host with unfinished jobs is not retired).
"""

from __future__ import annotations

from collections.abc import Iterable

from django.db import transaction
from django.utils import timezone

from hosts import audit
from hosts import services as inventory
from hosts.audit import Actor
from hosts.choices import EventKind, HostStatus
from hosts.models import Host
from hosts.services import check_status, host_has_history
from jobs import transitions
from jobs.choices import JobKind, JobStatus
from jobs.recovery import next_repair_at, next_try_words
from jobs.scheduling.triggers import request_tick
from jobs.services.health import host_repair_now, host_verify_now
from jobs.transitions import Mover
from schedsite.errors import Conflict, ServiceError


@transaction.atomic
def host_update(*, host: Host, by: Actor, status: str | None = None, **changes: object) -> Host:
    """Change a host's labels, worker or build (hosts.services.host_update) and its status."""
    host = inventory.host_update(host=host, by=by, **changes)  # type: ignore[arg-type]
    if status is not None and status != host.status:
        host = host_set_status(host=host, status=status, by=by)
    return host


@transaction.atomic
def host_set_status(*, host: Host, status: str, by: Actor, message: str = "") -> Host:
    """Move a host between ready / needs_repair / repairing / repair_failed."""
    check_status(status)
    old = Host.objects.filter(pk=host.pk).values_list("status", flat=True).first()
    if old is None:
        raise Conflict(f"host {host.hostname} no longer exists")
    if old == status:
        return host
    when = None
    if status == HostStatus.REPAIR_FAILED:  # set by hand: the automatic repair comes all the same
        rounds = Host.objects.filter(pk=host.pk).values_list("repair_rounds", flat=True)[0]
        when = next_repair_at(rounds, at=timezone.now())
        message = "; ".join(filter(None, [message, next_try_words(when)]))
    transitions.move_host(host, old=old, to=status, mover=Mover.STAFF, by=by, why=message)
    if when is not None:
        Host.objects.filter(pk=host.pk).update(next_repair_at=when)
        host.next_repair_at = when
    return host


@transaction.atomic
def host_delete(*, host: Host, by: Actor) -> Host | None:
    """Remove a host, or retire it once it has history; return it when it was retired."""
    host = Host.objects.select_for_update().get(pk=host.pk)
    if host.leases.active().exists():
        raise Conflict(f"host {host.hostname} has an active lease; release it first")
    if host.status == HostStatus.RETIRED:
        raise Conflict(f"host {host.hostname} is retired already")
    # Unfinished maintenance jobs end at the next tick (their host no longer needs them), and
    # so does a fan-out's queued job (`skipped`, docs/scheduling.md); another test pinned here
    # would wait forever.
    pinned = host.pinned_jobs.unfinished().filter(kind=JobKind.TEST)
    if pinned.exclude(status=JobStatus.QUEUED, fanout=True).exists():
        raise Conflict(f"unfinished jobs are pinned to {host.hostname}; abort them first")
    if host_has_history(host):
        transitions.move_host(
            host, old=host.status, to=HostStatus.RETIRED, mover=Mover.STAFF, by=by,
            why="retired: deleted with history",
        )  # fmt: skip
        audit.record(
            EventKind.RETIRED, actor=by, host=host, message=f"host {host.hostname} retired"
        )
        if pinned.exists():
            request_tick("host retired")  # its fan-out jobs end skipped
        host.refresh_from_db()
        return host
    audit.record(EventKind.DELETED, actor=by, host=host, message=f"host {host.hostname} deleted")
    host.delete()
    return None


@transaction.atomic
def hosts_bulk_health(*, hosts: Iterable[Host], by: Actor, repair: bool) -> dict[str, str | None]:
    """Verify (or repair) several hosts now; returns hostname → None when done, or why not.

    One savepoint per host (the single-host services are atomic themselves): a host in the
    wrong state — verifying one that needs repair, repairing a retired one — is reported and
    skipped while the others still go.
    """
    act = host_repair_now if repair else host_verify_now
    results: dict[str, str | None] = {}
    for host in hosts:
        try:
            act(host=host, by=by)
            results[host.hostname] = None
        except ServiceError as exc:
            results[host.hostname] = exc.message
    return results
