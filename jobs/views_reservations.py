"""Testers' reservations: reserve a host now, or the next free one, and end or leave the line;
from the leases page's card, a host's page ("Reserve this host") or a label's page
(docs/ui.md#a-testers-reservations)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.db.models import Q
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_POST

from hosts.models import Host
from jobs import services
from jobs.choices import ReservationStatus
from jobs.forms import TesterReserveForm, reserve_durations
from jobs.models import Reservation
from jobs.views_hosts import host_detail_context
from schedsite import roles
from schedsite.errors import InvalidInput, ServiceError
from schedsite.ui.htmx import action_response, error_response, ui_login_required

CARD = "jobs/partials/reservation_card.html"
HOST_BODY = "hosts/partials/host_detail_body.html"
LABEL_CARD = "jobs/partials/label_reserve.html"


def _capitalized(message: str) -> str:
    return message[:1].upper() + message[1:]


def reservation_rows(user: Any) -> list[dict]:
    """Reservations waiting or holding a host: a tester's own, every one for staff; each with
    its place in line and why it waits."""
    rows = Reservation.objects.select_related("owner", "host", "lease__host").filter(
        Q(status=ReservationStatus.WAITING)
        | Q(status=ReservationStatus.ACTIVE, lease__released_at__isnull=True)
    )
    if not roles.is_staff(user):
        rows = rows.filter(owner=user)
    now = timezone.now()
    return [
        {
            "reservation": r,
            "position": services.reservation_position(r),
            "why": services.reservation_why(r, now=now) if r.lease is None else "",
            "may_end": roles.may(user, "reservation.end", owner_id=r.owner_id),
        }
        for r in rows.order_by("-priority", "created_at", "id")
    ]


def reservation_context(request: HttpRequest, **extra: Any) -> dict:
    return {
        "reservations": reservation_rows(request.user),
        "durations": reserve_durations(request.user),
        "tester_values": {},
        "now": timezone.now(),
        **extra,
    }


@ui_login_required
@require_POST
def reservation_create(request: HttpRequest) -> HttpResponse:
    """Reserve a free host that fits now ("Reserve a host"), or join the line ("Reserve the
    next free one": the button named wait)."""
    form = TesterReserveForm(request.POST)
    form.is_valid()
    data = form.cleaned_data
    hostname = (data.get("host") or "").strip()
    labels = (data.get("labels") or "").replace(",", " ").split()
    minutes = data.get("minutes") or 0
    wait = request.POST.get("wait") == "1"
    values = {"host": hostname, "labels": " ".join(labels), "minutes": minutes}
    values["reason"] = data.get("reason", "")
    error: ServiceError | None = None
    reservation = None
    try:
        host = Host.objects.filter(hostname=hostname).first() if hostname else None
        if hostname and host is None:
            raise InvalidInput(f"no host is named {hostname}", field="host")
        if not minutes:
            raise InvalidInput("choose how long to reserve it for", field="duration")
        reservation = services.reservation_request(
            owner=request.user,
            labels=labels,
            host=host,
            duration=timedelta(minutes=minutes),
            reason=values["reason"],
            wait=wait,
        )
    except ServiceError as exc:
        error = exc
    if error is not None:
        message = _capitalized(error.message)
    elif reservation is not None and reservation.lease is not None:
        until = timezone.localtime(reservation.lease.expires_at)
        message = f"Reserved {reservation.lease.host.hostname} until {until:%H:%M}."
    else:
        message = "No free host yet: you wait in line; the next one that fits is yours."
    answer = {
        "message": message,
        "ok": error is None,
        "status": error.status_code if error else 200,
    }
    fragment = request.POST.get("fragment")
    if fragment == "host" and host is not None:
        # The host page's "Reserve this host": its body again, the error by the form.
        context = host_detail_context(
            request,
            host,
            tester_reserve_error=message if error else "",
            tester_reserve_values=values if error else {},
        )
        fallback = reverse("hosts:host_detail", args=[host.hostname])
        return action_response(request, HOST_BODY, context, fallback=fallback, **answer)
    if fragment == "label" and len(labels) == 1:
        # A label's page: its card again, saying what became of the reservation.
        context = label_reserve_context(
            request,
            labels[0],
            reservation=reservation,
            error=message if error else "",
            values=values if error else {},
        )
        fallback = reverse("stats:label_detail", args=[labels[0]])
        return action_response(request, LABEL_CARD, context, fallback=fallback, **answer)
    context = reservation_context(
        request,
        tester_error=message if error else "",
        tester_field=error.field if error else "",
        tester_values=values if error else {},
    )
    return action_response(request, CARD, context, fallback=reverse("jobs:lease_list"), **answer)


def label_reserve_context(
    request: HttpRequest,
    label: str,
    *,
    reservation: Reservation | None = None,
    error: str = "",
    values: dict | None = None,
) -> dict:
    """A label page's "Reserve the next free one" card: the form, and what became of the
    reservation just asked for (the host it holds, or its place in line and why)."""
    waiting = reservation is not None and reservation.lease is None
    return {
        "label": label,
        "durations": reserve_durations(request.user),
        "reserve_values": values or {},
        "reserve_error": error,
        "reservation": reservation,
        "position": services.reservation_position(reservation) if waiting else None,
        "why": services.reservation_why(reservation) if waiting else "",
        "now": timezone.now(),
    }


@ui_login_required
@require_POST
def reservation_cancel(request: HttpRequest, pk: int) -> HttpResponse:
    """End a reservation: one holding a host frees it, one waiting leaves the line."""
    reservation = get_object_or_404(Reservation.objects.select_related("lease"), pk=pk)
    if not roles.may(request.user, "reservation.end", owner_id=reservation.owner_id):
        return error_response(
            request, "Only the holder of a reservation or lab staff can end it.", 403
        )
    error: ServiceError | None = None
    try:
        done = services.reservation_cancel(
            reservation=reservation, by=request.user, reason="ended on the leases page"
        )
    except ServiceError as exc:
        error = exc
    if error is not None:
        message = _capitalized(error.message)
    elif done.current_status == ReservationStatus.CANCELLED:
        message = f"Reservation {pk} left the line."
    else:
        message = f"Reservation {pk} ended: its host is free."
    return action_response(
        request,
        CARD,
        reservation_context(request),
        message=message,
        ok=error is None,
        status=error.status_code if error else 200,
        fallback=reverse("jobs:lease_list"),
    )
