"""Manual reservations of a host: reserve and extend."""

from __future__ import annotations

from datetime import datetime, timedelta

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from hosts import audit
from hosts.audit import Actor, actor_user
from hosts.choices import EventKind
from hosts.models import Host
from hosts.services import reason_clean
from jobs.models import Lease
from schedsite.errors import Conflict, InvalidInput


@transaction.atomic
def lease_reserve(
    *, host: Host, holder: Actor, duration: timedelta, reason: str, at: datetime | None = None
) -> Lease:
    """Reserve a free host for manual work: a lease with no job, for a duration."""
    at = at or timezone.now()
    reason = reason_clean(reason, what="reserve a host")
    _check_duration(duration)
    # Lock the host row first: the tick locks hosts before leasing them, so the two serialize.
    host = Host.objects.select_for_update().get(pk=host.pk)
    if Lease.objects.active().filter(host=host).exists():
        raise Conflict(f"host {host.hostname} is already leased")
    try:
        with transaction.atomic():
            lease = Lease.objects.create(
                host=host,
                job=None,
                holder=actor_user(holder),
                reason=reason,
                acquired_at=at,
                expires_at=at + duration,
            )
    except IntegrityError as exc:  # the unique constraint, if a lease slipped in anyway
        raise Conflict(f"host {host.hostname} is already leased") from exc
    audit.record(
        EventKind.RESERVED,
        actor=holder,
        host=host,
        lease_id=lease.pk,
        at=at,
        message=f"reserved until {lease.expires_at:%Y-%m-%d %H:%M} UTC: {reason}",
    )
    return lease


def _check_duration(duration: timedelta) -> None:
    if not isinstance(duration, timedelta) or duration <= timedelta(0):
        raise InvalidInput("duration must be positive", field="duration")
    if duration > timedelta(seconds=settings.MAX_RESERVATION_SECONDS):
        raise InvalidInput(
            f"duration may be at most {settings.MAX_RESERVATION_SECONDS // 3600} hours",
            field="duration",
        )


@transaction.atomic
def lease_extend(
    *, lease: Lease, by: Actor, duration: timedelta, at: datetime | None = None
) -> Lease:
    """Extend a manual reservation to now + duration."""
    at = at or timezone.now()
    _check_duration(duration)
    if lease.job_id is not None:
        raise Conflict("only manual reservations are extended; jobs heartbeat their leases")
    changed = (
        Lease.objects.active()
        .filter(pk=lease.pk, expires_at__gte=at)
        .update(expires_at=at + duration)
    )
    if not changed:
        raise Conflict(f"lease {lease.pk} is no longer active")
    lease.refresh_from_db()
    audit.record(
        EventKind.EXTENDED,
        actor=by,
        host=lease.host,
        lease_id=lease.pk,
        at=at,
        message=f"reserved until {lease.expires_at:%Y-%m-%d %H:%M} UTC",
    )
    return lease
