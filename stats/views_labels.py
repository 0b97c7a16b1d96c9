"""The lab's history charts (on the dashboard and a label's page) and a label's page
(/labels/<label>/): its hosts, utilization and queue over a range, the jobs waiting for it
and why, its failure and repair rates and its least reliable hosts
(docs/ui.md#history-and-label-pages)."""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from typing import Any

from django.core.exceptions import ValidationError
from django.db.models import Count
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.utils import timezone
from django.utils.http import urlencode
from django.views.decorators.http import require_GET

from hosts.choices import HostStatus
from hosts.models import Host, Label
from hosts.validators import label_validator
from jobs import badges
from jobs import selectors as job_selectors
from jobs.forms import reserve_durations
from jobs.models import Job, Lease
from schedsite.errors import InvalidInput
from schedsite.ui.charts import Chart, Series, line_chart
from schedsite.ui.htmx import error_response, page_or_fragment, ui_login_required
from stats import history, selectors
from stats.history import tracked
from stats.ranges import RANGES, TimeRange, time_range
from stats.views import RANGE_WORDS

WAITING_SHOWN = 20  # queued jobs a label's page lists, in queue order
LEAST_RELIABLE_SHOWN = 5
DEFAULT_RANGE = "24h"


def history_charts(points: Sequence[dict[str, Any]], window: TimeRange) -> list[Chart]:
    """Hosts leased and held, the queue, the wait to start and jobs finished over the range."""
    chart = partial(line_chart, times=[p["t"] for p in points], tz=timezone.get_current_timezone())
    per = "minute" if history.resolution(window) == "minute" else "hour"
    started = [p for p in points if p["wait_p50_s"] is not None]
    finished = [p["finished"] for p in points]
    mean_util = _utilization(points)
    return [
        chart(
            chart_id="history-hosts",
            title="Hosts leased",
            series=[
                Series("Leased", [p["leased"] for p in points], tone="blue", area=True),
                Series("Held", [p["held"] for p in points], tone="amber"),
                Series("All hosts", [p["hosts_total"] for p in points], tone="slate", dashed=True),
            ],
            summary=f"{mean_util}% on average" if mean_util is not None else "",
        ),
        chart(
            chart_id="history-queue",
            title="Queued jobs",
            series=[
                Series("Queued", [p["queued_total"] for p in points], tone="indigo", area=True)
            ],
            summary=f"at most {max(p['queued_total'] for p in points):g}" if points else "",
        ),
        chart(
            chart_id="history-wait",
            title="Wait to start",
            series=[
                Series("p50", [p["wait_p50_s"] for p in started], tone="blue"),
                Series("p95", [p["wait_p95_s"] for p in started], tone="amber"),
            ],
            seconds=True,
            times=[p["t"] for p in started],
            summary=f"p50 and p95 per {per}",
        ),
        chart(
            chart_id="history-finished",
            title="Jobs finished",
            series=[
                Series("Passed", [f.get("passed", 0) for f in finished], tone="green"),
                Series("Failed", [f.get("failed", 0) for f in finished], tone="red"),
                Series(
                    "Other",
                    [sum(f.values()) - f.get("passed", 0) - f.get("failed", 0) for f in finished],
                    tone="slate",
                ),
            ],
            summary=f"{sum(sum(f.values()) for f in finished):g} in all, per {per}",
        ),
    ]


def _utilization(points: Sequence[dict[str, Any]]) -> int | None:
    """Hosts leased as a share of all hosts over the points, in percent; None without hosts."""
    hosts = sum(p["hosts_total"] for p in points)
    return round(100 * sum(p["leased"] for p in points) / hosts) if hosts else None


def history_context(window: TimeRange, label: str) -> dict[str, Any]:
    """What the history section shows: its range tabs, its charts and their API address."""
    points = history.lab_series(window=window, label=label)
    query = {"range": window.name, **({"label": label} if label else {})}
    return {
        "window": window,
        "label": label,
        "ranges": [(name, RANGE_WORDS[name]) for name in RANGES],
        "charts": history_charts(points, window),
        "points": len(points),
        "utilization": _utilization(points),
        "resolution": history.resolution(window),
        "self_url": f"{reverse('stats:lab_history')}?{urlencode(query)}",
        "api_url": f"{reverse('api:stats_lab')}?{urlencode(query)}",
    }


@ui_login_required
@require_GET
def lab_history(request: HttpRequest) -> HttpResponse:
    """The history charts of the lab or of one label over ?range=, as a section of a page."""
    try:
        window = time_range(request.GET.get("range"), now=timezone.now(), default=DEFAULT_RANGE)
        label = history.history_label(request.GET.get("label"))
    except InvalidInput as exc:
        return error_response(request, exc.message[:1].upper() + exc.message[1:] + ".", 400)
    context = history_context(window, label)
    return page_or_fragment(
        request, "stats/lab_history.html", "stats/partials/lab_history.html", context
    )


def _waiting(label: str) -> tuple[list[dict[str, Any]], int]:
    """The first queued jobs asking for the label, in queue order, with why each waits."""
    queued = Job.objects.queued().filter(label_key__contains=f",{label},")
    jobs = list(
        queued.order_by("-priority", "submitted_at", "id").select_related("suite", "host")[
            :WAITING_SHOWN
        ]
    )
    reasons = job_selectors.wait_reasons_for(jobs)
    rows = []
    for job in jobs:
        reason = reasons.get(job.pk)
        rows.append(
            {
                "job": job,
                "priority": badges.priority(job.priority),
                "tone": badges.wait_tone(reason),
                "title": badges.wait_title(reason),
                "message": (reason or {}).get("message", ""),
            }
        )
    return rows, queued.count() if len(jobs) == WAITING_SHOWN else len(jobs)


def _reliability(window: TimeRange, label: str) -> dict[str, Any]:
    """The label's hosts' breaks, repairs and jobs over the range, and the least reliable."""
    rows = selectors.hosts_reliability(window, label=label)
    jobs = sum(row.jobs for row in rows)
    repairs = sum(row.repairs for row in rows)
    worst = sorted(
        (row for row in rows if row.breaks or row.hours_out_of_service or row.failed_repairs),
        key=lambda row: (-row.breaks, -row.hours_out_of_service, row.hostname),
    )
    return {
        "hosts": len(rows),
        "breaks": sum(row.breaks for row in rows),
        "repairs": repairs,
        "failed_repairs": sum(row.failed_repairs for row in rows),
        "jobs": jobs,
        "failed_jobs": jobs - sum(row.passed for row in rows),
        "pass_rate": round(100 * sum(row.passed for row in rows) / jobs) if jobs else None,
        "hours_out": sum(row.hours_out_of_service for row in rows),
        "worst": worst[:LEAST_RELIABLE_SHOWN],
    }


@ui_login_required
@require_GET
def label_detail(request: HttpRequest, label: str) -> HttpResponse:
    """A pool's or a board's page (any label's): its hosts, history, queue and reliability."""
    try:
        label_validator(label)
    except ValidationError:
        return error_response(
            request,
            f"“{label}” is not a label: a label is letters, digits and . _ : / = + - "
            "(no spaces or commas).",
            400,
        )
    if not Label.objects.filter(name=label).exists():
        return error_response(request, f"No host carries the label “{label}”.", 404)
    try:
        window = time_range(request.GET.get("range"), now=timezone.now(), default=DEFAULT_RANGE)
    except InvalidInput as exc:
        return error_response(request, exc.message[:1].upper() + exc.message[1:] + ".", 400)
    hosts = Host.objects.filter(labels__name=label).exclude(status=HostStatus.RETIRED)
    by_status = dict(hosts.values_list("status").annotate(n=Count("pk")).order_by())
    host_ids = set(hosts.values_list("pk", flat=True))
    leased = Lease.objects.active().filter(host__labels__name=label).count()
    held = len(set(job_selectors.current_holds()) & host_ids)
    waiting, waiting_total = _waiting(label)
    context: dict[str, Any] = {
        "label": label,
        "window": window,
        "range_words": RANGE_WORDS[window.name],
        "statuses": [
            (HostStatus(status), by_status[status])
            for status in HostStatus.values
            if by_status.get(status)
        ],
        "hosts_total": sum(by_status.values()),
        "leased": leased,
        "held": held,
        "waiting": waiting,
        "waiting_total": waiting_total,
        "reliability": _reliability(window, label),
        "tracked": tracked(label),
        "hosts_url": f"{reverse('hosts:host_list')}?{urlencode({'label': label})}",
        "host_reliability_url": reverse("stats:host_reliability"),
        # "Reserve the next free one" of its hosts (docs/ui.md#a-testers-reservations).
        "reserve_durations": reserve_durations(request.user),
    }
    if context["tracked"]:
        # The range tabs reload this page: its reliability figures follow the range too.
        context["history"] = history_context(window, label) | {"tabs_url": request.path}
    return render(request, "stats/label_detail.html", context)
