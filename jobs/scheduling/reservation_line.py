"""Testers' reservations waiting in line: which free host one may take, why one waits, and the
tick's phase that serves the line (docs/api.md#reservations).

A reservation takes a free host that fits it (its labels, or the host it names) at its
priority: not a host that a queued test job of a higher priority, or of the same priority
submitted earlier, fits, nor one that a reservation ahead of it in line fits. The line is
ordered as the queue is: priority, highest first, then the time it was asked for.
"""

from __future__ import annotations

from datetime import datetime

from django.db.models import Q, QuerySet

from hosts.choices import HostStatus
from hosts.models import Host
from hosts.rules import job_fits_host
from jobs import outbox, transitions
from jobs.choices import JobKind, OutboxKind, ReservationStatus
from jobs.models import Job, Reservation, decode_labels
from jobs.transitions import Mover
from schedsite.errors import Conflict

# The waiting line as it is served.
LINE_ORDER = ("-priority", "created_at", "id")
# How many waiting reservations one tick looks at: the line is testers times
# RESERVATION_HOSTS_PER_TESTER long, and a tick's work stays bounded.
TICK_BATCH = 200


def waiting_line() -> QuerySet[Reservation]:
    return Reservation.objects.filter(status=ReservationStatus.WAITING).order_by(*LINE_ORDER)


def _ahead(reservation: Reservation) -> Q:
    """Rows (jobs or reservations) ahead of it: a higher priority, or the same and earlier."""
    return Q(priority__gt=reservation.priority) | Q(
        priority=reservation.priority, created_at__lt=reservation.created_at
    )


def fitting_hosts(reservation: Reservation) -> QuerySet[Host]:
    """The lab's hosts (retired ones aside) that fit the reservation."""
    lab = Host.objects.exclude(status=HostStatus.RETIRED)
    return lab.fitting(reservation.labels, reservation.host_id)


def _wanted_ahead(reservation: Reservation, hosts: list[Host]) -> set[int]:
    """Of these free hosts, those a queued test job or a waiting reservation ahead fits."""
    if not hosts:
        return set()
    jobs_ahead = (
        Job.objects.queued()
        .filter(kind=JobKind.TEST)
        .filter(
            Q(priority__gt=reservation.priority)
            | Q(priority=reservation.priority, submitted_at__lt=reservation.created_at)
        )
    )
    # One row per kind of job, however many wait: what each needs of a host.
    wants = [
        (decode_labels(key), host_id, roles)
        for key, host_id, roles in jobs_ahead.values_list("label_key", "host_id", "roles")
        .order_by()
        .distinct()
    ]
    line_ahead = waiting_line().filter(_ahead(reservation)).exclude(pk=reservation.pk)
    wants += [
        (decode_labels(key), host_id, [])
        for key, host_id in line_ahead.values_list("label_key", "host_id").order_by().distinct()
    ]
    taken: set[int] = set()
    for host in hosts:
        names = set(host.label_names)
        for labels, pinned, roles in wants:
            # A multi-host job fits a host one of its roles could play there.
            role_sets = [set(role.get("labels", [])) for role in roles] or [set()]
            if any(
                job_fits_host(
                    labels=set(labels) | extra,
                    pinned_host_id=pinned,
                    host_id=host.pk,
                    host_labels=names,
                )
                for extra in role_sets
            ):
                taken.add(host.pk)
                break
    return taken


def free_hosts(reservation: Reservation, *, now: datetime) -> tuple[list[Host], int]:
    """The free hosts the reservation may take now, in the order it tries them, and how many
    free hosts fit it but go to work ahead of it."""
    free = list(
        fitting_hosts(reservation)
        .schedulable(now)
        .prefetch_related("labels")
        .order_by("hostname")[:50]
    )
    taken = _wanted_ahead(reservation, free)
    return [h for h in free if h.pk not in taken], len(taken)


def take_host(reservation: Reservation, *, now: datetime, mover: Mover) -> bool:
    """Give the reservation the first free host it may take: lock it, check it again, lease it
    for the reservation's duration (compare-and-set on the reservation). False if none."""
    hosts, _ahead_count = free_hosts(reservation, now=now)
    for candidate in hosts:
        # The one lock order: the host row first, as the tick and lease_reserve do; then read
        # it again in a new statement, which sees whatever locked it before us committed.
        list(Host.objects.select_for_update().filter(pk=candidate.pk).values_list("pk"))
        host = Host.objects.filter(pk=candidate.pk).schedulable(now).first()
        if host is None:
            continue  # taken or changed since it was read: try the next
        try:
            lease = transitions.reserve_host(
                host,
                holder=reservation.owner,
                mover=mover,
                at=now,
                until=now + reservation.duration,
                reason=reservation.reason,
            )
        except Conflict:
            continue
        served = Reservation.objects.filter(
            pk=reservation.pk, status=ReservationStatus.WAITING
        ).update(status=ReservationStatus.ACTIVE, lease=lease, decided_at=now)
        if not served:
            # Cancelled meanwhile: undo by raising, the caller's transaction rolls back.
            raise Conflict(f"reservation {reservation.pk} is no longer waiting")
        # Read back what the compare-and-set wrote (a reservation is not a move's object).
        reservation.refresh_from_db(fields=["status", "decided_at"])
        reservation.lease = lease
        return True
    return False


def serve_line(*, now: datetime) -> list[dict]:
    """The tick's phase: give waiting reservations, in line order, the free hosts they may
    take; tell each holder (the outbox). The leases made, as the tick's summary lists them."""
    made: list[dict] = []
    line = list(waiting_line().select_related("owner")[:TICK_BATCH])
    for reservation in line:
        if not take_host(reservation, now=now, mover=Mover.SCHEDULER):
            continue
        lease = reservation.lease
        assert lease is not None
        outbox.write(
            OutboxKind.RESERVATION_LEASED,
            {"reservation_id": reservation.pk, "at": now.isoformat()},
        )
        made.append(
            {
                "job": None,
                "job_id": None,
                "suite": None,
                "host": lease.host.hostname,
                "kind": "reservation",
                "role": "",
                "reservation": reservation.pk,
            }
        )
    return made
