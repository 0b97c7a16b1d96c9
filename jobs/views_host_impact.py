"""What locking a host or pausing a worker would change, said before staff do it.

The what-if planner (jobs/scheduling/whatif.py, docs/scheduling.md#what-if-plans) on the lab
as it is now: loaded when staff start filling in the lock or pause form, never on page loads.
"""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render
from django.utils import timezone
from django.views.decorators.http import require_GET

from hosts.models import Host, Worker
from jobs.scheduling import whatif
from schedsite.ui.htmx import staff_only, ui_login_required


def _impact(request: HttpRequest, change: whatif.Change, action: str) -> HttpResponse:
    if denied := staff_only(request, action):
        return denied
    result = whatif.plan_change(change, now=timezone.now())
    context = {"summary": whatif.summary(result), "stranded": len(result.stranded)}
    return render(request, "hosts/partials/hold_impact.html", context)


@ui_login_required
@require_GET
def lock_impact(request: HttpRequest, hostname: str) -> HttpResponse:
    host = get_object_or_404(Host, hostname=hostname)
    change = whatif.Change(lock_host_ids=frozenset([host.pk]), lock_reason="(the lock you preview)")
    return _impact(request, change, "host.lock_impact")


@ui_login_required
@require_GET
def pause_impact(request: HttpRequest, name: str) -> HttpResponse:
    worker = get_object_or_404(Worker, name=name)
    hosts = frozenset(Host.objects.filter(worker=worker).values_list("pk", flat=True))
    return _impact(request, whatif.Change(pause_host_ids=hosts), "worker.pause_impact")
