"""The leases page: reserve a host, release a lease, extend or end a reservation."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_http_methods, require_POST

from hosts.models import Host
from jobs import services
from jobs.filtersets import LeaseFilterSet
from jobs.forms import RESERVE_DURATIONS, ExtendForm, ReleaseForm, ReserveForm
from jobs.models import Lease
from jobs.views_hosts import host_detail_context
from jobs.views_reservations import reservation_context
from schedsite import roles
from schedsite.errors import Forbidden, InvalidInput, ServiceError
from schedsite.ui.htmx import (
    action_response,
    clean_query,
    current_list_query,
    error_response,
    filtered_page,
    object_action,
    page_or_fragment,
    refresh_seconds,
    staff_only,
    toast_html,
    ui_login_required,
    wants_fragment,
)

LEASES_PER_PAGE = 50


def _capitalized(message: str) -> str:
    return message[:1].upper() + message[1:]


# --- leases ---------------------------------------------------------------------------------


def lease_queryset():  # noqa: ANN201 - a QuerySet[Lease]
    """Leases newest first, with what a row shows."""
    # Ids grow with acquisition, so "-id" is newest first and walks the primary key instead
    # of sorting every active lease by acquired_at.
    return Lease.objects.select_related("host__worker", "job__suite", "holder").order_by("-id")


def lease_list_context(request: HttpRequest, query: Any, page_number: str | None) -> dict:
    query = query.copy()
    # The page shows the leases that hold hosts now unless asked otherwise (?active=any).
    if "active" not in query:
        query["active"] = "true"
    context = filtered_page(
        LeaseFilterSet,
        lease_queryset(),
        query,
        page_number,
        per_page=LEASES_PER_PAGE,
        path=reverse("jobs:lease_list"),
    )
    leases = list(context["page_obj"].object_list)
    staff = roles.is_staff(request.user)
    return {
        **context,
        "leases": leases,
        # An Actions column for staff, or for a tester who holds a reservation listed here.
        "actions": staff or any(lease.managed_by(request.user) for lease in leases),
        "staff": staff,
        "durations": RESERVE_DURATIONS,
        "refresh": refresh_seconds(),
    }


@ui_login_required
@require_http_methods(["GET", "POST"])
def lease_list(request: HttpRequest) -> HttpResponse:
    """Active leases and reservations; POST reserves a free host (staff)."""
    if request.method == "POST":
        return _lease_reserve(request)
    query = clean_query(request.GET)
    context = lease_list_context(request, query, request.GET.get("page"))
    if not wants_fragment(request):  # the live table's refresh needs none of it
        context.update(reservation_context(request))
    return page_or_fragment(
        request, "jobs/lease_list.html", "jobs/partials/lease_table.html", context
    )


def _lease_reserve(request: HttpRequest) -> HttpResponse:
    if denied := staff_only(request, "lease.create"):
        return denied
    form = ReserveForm(request.POST)
    form.is_valid()
    data = form.cleaned_data
    hostname = (data.get("host") or "").strip()
    reason = data.get("reason", "")
    minutes = data.get("minutes") or 0
    host = Host.objects.filter(hostname=hostname).first() if hostname else None
    error: ServiceError | None = None
    try:
        if not hostname:
            raise InvalidInput("choose a host to reserve", field="host")
        if host is None:
            raise InvalidInput(f"no host is named {hostname}", field="host")
        if not minutes:
            raise InvalidInput("choose how long to reserve it for", field="duration")
        lease = services.lease_reserve(
            host=host, holder=request.user, duration=timedelta(minutes=minutes), reason=reason
        )
    except ServiceError as exc:
        error = exc
    if error is None:
        message = f"Reserved {host.hostname} until {timezone.localtime(lease.expires_at):%H:%M}."
    else:
        message = _capitalized(error.message)
    status = error.status_code if error else 200
    form_values = {"host": hostname, "minutes": minutes, "reason": reason}
    if request.POST.get("fragment") == "host" and host is not None:
        context = host_detail_context(
            request,
            host,
            reserve_error=error.message if error else "",
            reserve_values=form_values if error else {},
        )
        return action_response(
            request,
            "hosts/partials/host_detail_body.html",
            context,
            message=message,
            ok=error is None,
            status=status,
            fallback=reverse("hosts:host_detail", args=[host.hostname]),
        )
    context = {
        "durations": RESERVE_DURATIONS,
        "reserve_error": _capitalized(error.message) if error else "",
        "reserve_field": error.field if error else "",
        "reserve_values": form_values if error else {},
    }
    if error is None and getattr(request, "htmx", False):
        # Success: the table of leases changes too; swap it out of band with its filters.
        list_path = reverse("jobs:lease_list")
        query = current_list_query(request, list_path)
        table = lease_list_context(request, query, query.get("page"))
        table["oob"] = True
        html = render(request, "jobs/partials/reserve_form.html", context).content.decode()
        html += render(request, "jobs/partials/lease_table.html", table).content.decode()
        return HttpResponse(html + toast_html(message))
    return action_response(
        request,
        "jobs/partials/reserve_form.html",
        context,
        message=message,
        ok=error is None,
        status=status,
        fallback=reverse("jobs:lease_list"),
    )


def lease_answer(
    request: HttpRequest,
    lease: Lease,
    *,
    message: str,
    ok: bool = True,
    status: int = 200,
    **extra: Any,
) -> HttpResponse:
    """Answer a lease action with the piece it came from: the host page's body or the row."""
    if request.POST.get("fragment") == "host":
        return action_response(
            request,
            "hosts/partials/host_detail_body.html",
            host_detail_context(request, lease.host, **extra),
            message=message,
            ok=ok,
            status=status,
            fallback=reverse("hosts:host_detail", args=[lease.host.hostname]),
        )
    context = {
        "lease": lease_queryset().get(pk=lease.pk),
        "staff": roles.is_staff(request.user),
        "actions": True,  # whoever acted may act on leases, so the table has the column
        "durations": RESERVE_DURATIONS,
        "now": timezone.now(),
        "note": (ok, message),
        **extra,
    }
    return action_response(
        request,
        "jobs/partials/lease_row.html",
        context,
        message=message,
        ok=ok,
        status=status,
        fallback=reverse("jobs:lease_list"),
    )


def lease_refused(
    request: HttpRequest, lease: Lease, exc: ServiceError, **extra: Any
) -> HttpResponse:
    """Answer a refused lease action: to someone who may not touch the lease, only a toast;
    otherwise the piece the action came from, saying why."""
    if isinstance(exc, Forbidden):
        return error_response(request, _capitalized(exc.message), exc.status_code)
    message = _capitalized(exc.message)
    return lease_answer(request, lease, message=message, ok=False, status=exc.status_code, **extra)


@ui_login_required
@require_POST
def lease_release(request: HttpRequest, pk: int) -> HttpResponse:
    """Release a lease by hand (staff): its job is requeued, or aborted if asked."""
    if denied := staff_only(request, "host.release"):
        return denied
    lease = get_object_or_404(Lease.objects.select_related("host", "job"), pk=pk)
    form = ReleaseForm(request.POST)
    form.is_valid()
    requeue = form.cleaned_data.get("requeue") != "0"
    reason = form.cleaned_data.get("reason", "")
    try:
        services.lease_release(lease=lease, by=request.user, requeue=requeue, reason=reason)
    except ServiceError as exc:
        return lease_refused(request, lease, exc)
    if lease.job is None:
        message = f"Released the reservation of {lease.host.hostname}."
    else:
        outcome = "requeued" if requeue else "aborted"
        message = f"Released {lease.host.hostname}; job {lease.job.name} {outcome}."
    return lease_answer(request, lease, message=message)


@object_action(Lease.objects.select_related("host"))
def reservation_extend(request: HttpRequest, lease: Lease) -> HttpResponse:
    """Push a reservation's end later by a chosen duration (its holder, or staff)."""
    form = ExtendForm(request.POST)
    try:
        if not form.is_valid():
            raise InvalidInput("choose how long to extend it by", field="duration")
        duration = timedelta(minutes=form.cleaned_data["minutes"])
        lease = services.lease_extend(lease=lease, by=request.user, duration=duration)
    except ServiceError as exc:
        return lease_refused(request, lease, exc, extend_error=exc.message)
    until = timezone.localtime(lease.expires_at)
    message = f"Extended the reservation of {lease.host.hostname} until {until:%a %H:%M}."
    return lease_answer(request, lease, message=message)


@object_action(Lease.objects.select_related("host"))
def reservation_end(request: HttpRequest, lease: Lease) -> HttpResponse:
    """End a reservation now and free its host (its holder, or staff)."""
    reason = request.POST.get("reason", "")
    try:
        services.reservation_end(lease=lease, by=request.user, reason=reason)
    except ServiceError as exc:
        return lease_refused(request, lease, exc)
    return lease_answer(request, lease, message=f"Ended the reservation of {lease.host.hostname}.")
