"""Manual reservations of a host: reserve, extend and end."""

from __future__ import annotations

from datetime import datetime, timedelta

from django.conf import settings
from django.db.models import F
from django.utils import timezone

from hosts import audit
from hosts.audit import Actor
from hosts.choices import EventKind, HostStatus
from hosts.models import Host
from hosts.services import reason_clean
from jobs import transitions
from jobs.choices import ReleaseReason
from jobs.models import Job, Lease
from jobs.transitions import Mover
from schedsite import roles
from schedsite.durations import human_duration
from schedsite.errors import Conflict, Forbidden, InvalidInput
from schedsite.transactions import atomic_retry


@atomic_retry
def lease_reserve(
    *, host: Host, holder: Actor, duration: timedelta, reason: str, at: datetime | None = None
) -> Lease:
    """Reserve a free host for manual work: a lease with no job, for a duration."""
    at = at or timezone.now()
    reason = reason_clean(reason, what="reserve a host")
    _check_duration(duration)
    # Lock the host row first: the tick locks hosts before leasing them, so the two serialize.
    host = Host.objects.select_for_update().get(pk=host.pk)
    if host.status == HostStatus.RETIRED:
        raise Conflict(f"host {host.hostname} is retired")
    if Lease.objects.active().filter(host=host).exists():
        raise Conflict(f"host {host.hostname} is already leased")
    return transitions.reserve_host(
        host, holder=holder, mover=Mover.STAFF, at=at, until=at + duration, reason=reason
    )


def _check_duration(duration: timedelta) -> None:
    if not isinstance(duration, timedelta) or duration <= timedelta(0):
        raise InvalidInput("duration must be positive", field="duration")
    if duration > timedelta(seconds=settings.MAX_RESERVATION_SECONDS):
        raise InvalidInput(
            f"duration may be at most {settings.MAX_RESERVATION_SECONDS // 3600} hours",
            field="duration",
        )


def reservation_check_manager(*, lease: Lease, by: Actor) -> None:
    """Refuse anyone but the reservation's holder or staff (docs/ui.md#reservations).

    Asked before whether the lease is a reservation at all: a job's lease is no reservation
    (409) only to its job's owner and staff; anyone else is refused (403) first.
    """
    if by is None or isinstance(by, str):
        return  # a system actor, named in the audit trail: a management command, a script
    if lease.job_id is not None:
        owner_id = Job.objects.filter(pk=lease.job_id).values_list("owner_id", flat=True).first()
        if roles.may(by, "reservation.manage", owner_id=owner_id):
            return
    elif lease.managed_by(by):
        return
    raise Forbidden("only the holder of a reservation or lab staff can change it")


@atomic_retry
def lease_extend(
    *, lease: Lease, by: Actor, duration: timedelta, at: datetime | None = None
) -> Lease:
    """Push a manual reservation's end later by duration, up to MAX_RESERVATION_SECONDS from now."""
    at = at or timezone.now()
    _check_duration(duration)
    reservation_check_manager(lease=lease, by=by)
    if lease.job_id is not None:
        raise Conflict("only manual reservations are extended; jobs heartbeat their leases")
    longest = timedelta(seconds=settings.MAX_RESERVATION_SECONDS)
    # One compare-and-set UPDATE: still active, and still ending early enough that the new end
    # stays within the cap. Two extensions at once both count; neither is lost.
    changed = (
        Lease.objects.active()
        .filter(pk=lease.pk, expires_at__gte=at, expires_at__lte=at + longest - duration)
        .update(expires_at=F("expires_at") + duration)
    )
    if not changed:
        current = Lease.objects.active().filter(pk=lease.pk, expires_at__gte=at).first()
        if current is None:
            raise Conflict(f"lease {lease.pk} is no longer active")
        room = max(timedelta(0), at + longest - current.expires_at)
        raise InvalidInput(
            f"a reservation may end at most {longest // timedelta(hours=1)} hours from now; "
            f"it can be extended by at most {human_duration(room.total_seconds())} more",
            field="duration",
        )
    lease.refresh_from_db()
    audit.record(
        EventKind.EXTENDED,
        actor=by,
        host=lease.host,
        lease_id=lease.pk,
        at=at,
        message=f"reserved until {lease.expires_at:%Y-%m-%d %H:%M} UTC "
        f"(+{human_duration(duration.total_seconds())})",
    )
    return lease


@atomic_retry
def reservation_end(
    *, lease: Lease, by: Actor, reason: str = "", at: datetime | None = None
) -> Lease:
    """End a manual reservation now: its holder or staff give the host back."""
    at = at or timezone.now()
    reason = reason_clean(reason, what="end a reservation", required=False)
    reservation_check_manager(lease=lease, by=by)
    if lease.job_id is not None:
        raise Conflict("only manual reservations are ended this way; release a job's lease")
    lease = Lease.objects.select_for_update(of=("self",)).select_related("host").get(pk=lease.pk)
    if not lease.active:
        raise Conflict(f"lease {lease.pk} is no longer active")
    # The holder ends their own hold (the owner's path); staff end anyone's.
    mover = Mover.OWNER if lease.holder_id == getattr(by, "pk", None) else Mover.STAFF
    transitions.release_leases(
        [lease],
        reason=ReleaseReason.RELEASED,
        mover=mover,
        by=by,
        at=at,
        message=reason.strip() or "reservation ended",
    )
    lease.refresh_from_db()
    return lease
