"""A host's event timeline: the newest events on its page, and older ones page by page."""

from __future__ import annotations

from django.db.models import Q
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_GET

from hosts.choices import EventKind, ProvisionResult
from hosts.models import Host, HostEvent, Provision
from schedsite.ui.htmx import ui_login_required, wants_fragment

EVENTS_SHOWN = 50  # events per page of the timeline


def timeline_context(host: Host, *, before: HostEvent | None = None) -> dict:
    """One page of the host's events, newest first, older than `before`, and the next page's URL."""
    events = HostEvent.objects.filter(host=host)
    if before is not None:
        # Keyset on (created_at, id), the timeline's order: a page never repeats or skips an
        # event, however many are written meanwhile.
        events = events.filter(
            Q(created_at__lt=before.created_at) | Q(created_at=before.created_at, id__lt=before.pk)
        )
    page = list(events.order_by("-created_at", "-id")[: EVENTS_SHOWN + 1])
    more = len(page) > EVENTS_SHOWN
    page = page[:EVENTS_SHOWN]
    provision_outcomes(page)
    older_url = ""
    if more:
        older_url = reverse("hosts:host_events", args=[host.hostname]) + f"?before={page[-1].pk}"
    return {"events": page, "older_url": older_url}


def provision_outcomes(events: list[HostEvent]) -> None:
    """Mark each `provisioned` event whose provisioning failed (`outcome`, `outcome_label`, as
    jobs.views_hosts.event_outcomes marks completed ones), by its Provision row: the row of the
    same lease, else (an event with no lease) of the same host and moment. One query, only if
    there are such events. A multi-line message (the provisioning command's output tail) shows
    its first line in the entry and the rest below it (`output`)."""
    provisioned = [e for e in events if e.kind == EventKind.PROVISIONED]
    if not provisioned:
        return
    for event in provisioned:
        first, _, rest = event.message.partition("\n")
        if rest.strip():
            event.message, event.output = first, rest
    leases = {e.lease_id for e in provisioned if e.lease_id is not None}
    rows = Provision.objects.filter(host_id__in={e.host_id for e in provisioned}).filter(
        Q(lease_id__in=leases) | Q(created_at__in={e.created_at for e in provisioned})
    )
    failed_leases, failed_at = set(), set()
    for lease_id, host_id, at, result in rows.values_list(
        "lease_id", "host_id", "created_at", "result"
    ):
        if result == ProvisionResult.FAILED:
            failed_leases.add(lease_id)
            failed_at.add((host_id, at))
    for event in provisioned:
        if (
            event.lease_id in failed_leases
            if event.lease_id is not None
            else (event.host_id, event.created_at) in failed_at
        ):
            event.outcome, event.outcome_label = "failed", "Provisioning failed"


@ui_login_required
@require_GET
def host_events(request: HttpRequest, hostname: str) -> HttpResponse:
    """The host's events older than `?before=<event id>`: list items for "Load older"."""
    host = get_object_or_404(Host, hostname=hostname)
    before = None
    raw = request.GET.get("before", "")
    if raw:
        # Not digits, or past a bigint: no event has that id.
        pk = int(raw) if raw.isdigit() and len(raw) < 19 else 0
        before = HostEvent.objects.filter(host=host, pk=pk).first()
        if before is None:
            return HttpResponse("No such event of this host.", status=400)
    context = {
        "host": host,
        "now": timezone.now(),
        "older": True,
        **timeline_context(host, before=before),
    }
    if wants_fragment(request):
        return render(request, "hosts/partials/event_items.html", context)
    return render(request, "hosts/host_events.html", {**context, "standalone": True})
