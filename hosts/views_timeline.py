"""A host's event timeline: the newest events on its page, and older ones page by page."""

from __future__ import annotations

from django.db.models import Q
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_GET

from hosts.models import Host, HostEvent
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
    older_url = ""
    if more:
        older_url = reverse("hosts:host_events", args=[host.hostname]) + f"?before={page[-1].pk}"
    return {"events": page, "older_url": older_url}


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
    return render(request, "hosts/host_events.html", context)
