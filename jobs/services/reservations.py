"""Manual reservations of a host: reserve, extend and end."""

from __future__ import annotations

from datetime import datetime, timedelta

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db.models import F, Q
from django.utils import timezone

from hosts import audit
from hosts.audit import Actor
from hosts.choices import EventKind, HostStatus
from hosts.models import Host
from hosts.services import labels_validate, reason_clean
from jobs import limits, transitions
from jobs.choices import DEFAULT_PRIORITY, ReleaseReason, ReservationStatus
from jobs.models import Job, Lease, Reservation, encode_labels
from jobs.scheduling import reservation_line
from jobs.scheduling.triggers import request_tick
from jobs.services.submission import ALLOW_UNMATCHED
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


def longest_reservation(by: Actor) -> timedelta:
    """The longest a reservation of `by`'s may last from now: MAX_RESERVATION_SECONDS for staff
    (and system actors), the smaller RESERVATION_TESTER_MAX_SECONDS for a tester."""
    longest = settings.MAX_RESERVATION_SECONDS
    if by is not None and not isinstance(by, str) and not roles.is_staff(by):
        longest = min(longest, settings.RESERVATION_TESTER_MAX_SECONDS)
    return timedelta(seconds=longest)


def _check_duration(duration: timedelta, *, by: Actor = None) -> None:
    if not isinstance(duration, timedelta) or duration <= timedelta(0):
        raise InvalidInput("duration must be positive", field="duration")
    longest = longest_reservation(by)
    if duration > longest:
        raise InvalidInput(
            f"duration may be at most {human_duration(longest.total_seconds())}",
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
    _check_duration(duration, by=by)
    reservation_check_manager(lease=lease, by=by)
    if lease.job_id is not None:
        raise Conflict("only manual reservations are extended; jobs heartbeat their leases")
    longest = longest_reservation(by)
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
            f"a reservation may end at most {human_duration(longest.total_seconds())} from now; "
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


# --- testers' reservations, served at once or waiting in line ---------------------------------


def _check_target(labels: list[str], host: Host | None) -> None:
    if host is None and not labels:
        raise InvalidInput("give the labels a host must carry, or a host", field="labels")
    if host is not None and labels:
        raise InvalidInput("give labels or a host, not both", field="host")


def _check_matched(reservation: Reservation) -> None:
    """Refuse a request no host in the lab, retired ones aside, could ever serve."""
    if reservation_line.fitting_hosts(reservation).exists():
        return
    if reservation.host is not None:
        raise InvalidInput(f"host {reservation.host.hostname} is retired", field="host")
    raise InvalidInput(
        f"no host carries {', '.join(reservation.labels)}, so the reservation could never be "
        f"served; {ALLOW_UNMATCHED} to wait for such a host anyway",
        field="labels",
    )


def _check_tester_limit(owner: Actor) -> None:
    """A tester holds or waits for at most RESERVATION_HOSTS_PER_TESTER reservations."""
    if owner is None or isinstance(owner, str) or roles.is_staff(owner):
        return
    # Lock the tester's row: two requests of theirs at once are counted one after the other.
    get_user_model().objects.select_for_update().filter(pk=owner.pk).first()
    most = settings.RESERVATION_HOSTS_PER_TESTER
    held = (
        Reservation.objects.filter(owner=owner)
        .filter(
            Q(status=ReservationStatus.WAITING)
            | Q(status=ReservationStatus.ACTIVE, lease__released_at__isnull=True)
        )
        .count()
    )
    if held >= most:
        raise Conflict(
            f"you hold or wait for {held} reservation{'s' * (held != 1)}, the most a tester may "
            f"(RESERVATION_HOSTS_PER_TESTER = {most}): end or cancel one first"
        )


@atomic_retry
def reservation_request(
    *,
    owner: Actor,
    duration: timedelta,
    reason: str,
    labels: list[str] | None = None,
    host: Host | None = None,
    wait: bool = False,
    priority: int | None = None,
    allow_unmatched: bool = False,
    at: datetime | None = None,
) -> Reservation:
    """A tester (or staff) asks for a host that fits: a free one is theirs at once; with no
    free one they may take, it waits in line (`wait`) or is refused (409), nothing written."""
    at = at or timezone.now()
    names = labels_validate(labels or [])
    _check_target(names, host)
    reason = reason_clean(reason, what="reserve a host")
    _check_duration(duration, by=owner)
    priority = DEFAULT_PRIORITY if priority is None else priority
    limits.priority_check(priority, user=audit.actor_user(owner))
    reservation = Reservation(
        owner=audit.actor_user(owner),
        label_key=encode_labels(names),
        host=host,
        duration=duration,
        reason=reason,
        priority=priority,
        created_at=at,
    )
    if not allow_unmatched:
        _check_matched(reservation)
    _check_tester_limit(owner)
    reservation.save()
    mover = Mover.STAFF if roles.is_staff(owner) else Mover.OWNER
    if reservation_line.take_host(reservation, now=at, mover=mover):
        return reservation
    if not wait:
        why = reservation_why(reservation, now=at)
        raise Conflict(f"no free host you may take: {why}; ask with wait to join the line")
    request_tick("reservation waiting")
    return reservation


@atomic_retry
def reservation_cancel(
    *, reservation: Reservation, by: Actor, reason: str = "", at: datetime | None = None
) -> Reservation:
    """End a reservation: a waiting one leaves the line, an active one gives its host back."""
    at = at or timezone.now()
    if not roles.may(by, "reservation.manage", owner_id=reservation.owner_id):
        raise Forbidden("only the holder of a reservation or lab staff can change it")
    if reservation.lease_id is not None:
        reservation_end(lease=reservation.lease, by=by, reason=reason, at=at)
        return Reservation.objects.select_related("lease").get(pk=reservation.pk)
    reason = reason_clean(reason, what="cancel a reservation", required=False)
    cancelled = Reservation.objects.filter(
        pk=reservation.pk, status=ReservationStatus.WAITING
    ).update(status=ReservationStatus.CANCELLED, decided_at=at)
    if not cancelled:
        reservation.refresh_from_db()
        if reservation.lease_id is not None:  # served meanwhile: end what it holds
            reservation_end(lease=reservation.lease, by=by, reason=reason, at=at)
        else:
            raise Conflict(f"reservation {reservation.pk} is no longer waiting")
    return Reservation.objects.select_related("lease").get(pk=reservation.pk)


def reservation_position(reservation: Reservation) -> int | None:
    """Its place in the waiting line (1: served next); None once it stopped waiting."""
    if reservation.status != ReservationStatus.WAITING:
        return None
    ahead = reservation_line.waiting_line().filter(reservation_line._ahead(reservation))
    return ahead.exclude(pk=reservation.pk).count() + 1


def reservation_why(reservation: Reservation, *, now: datetime | None = None) -> str:
    """Why a reservation waits, in words: no host fits, none that fits is free, or the free
    ones go to work ahead of it."""
    now = now or timezone.now()
    fitting = reservation_line.fitting_hosts(reservation)
    what = (
        f"host {reservation.host.hostname}"
        if reservation.host is not None
        else f"a host with {', '.join(reservation.labels)}"
    )
    total = fitting.count()
    if not total:
        return f"no host in the lab fits ({what})"
    free, ahead = reservation_line.free_hosts(reservation, now=now)
    if free:
        return f"{len(free)} free host{'s' * (len(free) != 1)} fit; the next tick takes one"
    if ahead:
        return (
            f"the {ahead} free host{'s' * (ahead != 1)} that fit go first to queued jobs of a "
            "higher priority or to reservations ahead in line"
        )
    leased = fitting.filter(leases__released_at__isnull=True).count()
    return (
        f"none of the {total} host{'s' * (total != 1)} that fit ({what}) is free: "
        f"{leased} leased or reserved, {total - leased} locked, not ready or offline"
    )
