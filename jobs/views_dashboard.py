"""The dashboard: the lab's counts, charts over the recent ticks and the suites in progress."""

from __future__ import annotations

from functools import partial

from django.http import HttpRequest, HttpResponse
from django.utils import timezone
from django.views.decorators.http import require_GET

from jobs import selectors
from jobs.models import SchedulerTick
from schedsite.ui.charts import Chart, Series, line_chart
from schedsite.ui.durations import human_duration
from schedsite.ui.htmx import page_or_fragment, ui_login_required

CHART_TICKS = 120  # ticks drawn on the dashboard charts
SUITES_ON_DASHBOARD = 8
REPAIR_FAILED_NAMED = 12  # hosts the repair_failed call-out names; the list link has them all


def dashboard_charts(ticks: list[SchedulerTick]) -> list[Chart]:
    """Queue length, hosts leased and oldest wait over the recent ticks."""
    chart = partial(
        line_chart, times=[t.started_at for t in ticks], tz=timezone.get_current_timezone()
    )
    queued_now = leased_now = oldest_now = ""
    if ticks:
        last = ticks[-1]
        util = round(100 * last.hosts_leased / last.hosts_total) if last.hosts_total else 0
        queued_now = f"{last.queued_after} queued now"
        leased_now = f"{last.hosts_leased} of {last.hosts_total} ({util}%)"
        oldest_now = f"{human_duration(last.oldest_wait_s)} now"
    queued = Series("Queued jobs", [t.queued_after for t in ticks], tone="indigo", area=True)
    leased = Series("Leased", [t.hosts_leased for t in ticks], tone="blue", area=True)
    total = Series("All hosts", [t.hosts_total for t in ticks], tone="slate", dashed=True)
    wait = Series("Oldest queued job", [t.oldest_wait_s for t in ticks], tone="amber", area=True)
    return [
        capacity_chart(ticks, chart),
        chart(chart_id="chart-queue", title="Queue length", series=[queued], summary=queued_now),
        chart(
            chart_id="chart-leased",
            title="Hosts leased",
            series=[leased, total],
            summary=leased_now,
        ),
        chart(
            chart_id="chart-wait",
            title="Oldest wait",
            series=[wait],
            seconds=True,
            summary=oldest_now,
        ),
    ]


def capacity_chart(ticks: list[SchedulerTick], chart: partial[Chart]) -> Chart:
    """Hosts schedulable, in maintenance and repair_failed over the ticks that counted them."""
    counted = [t for t in ticks if t.hosts_schedulable is not None]
    summary = f"{counted[-1].hosts_schedulable} free now" if counted else ""
    # Short names: four charts share a 1280-pixel row and a legend does not wrap. "Free" is
    # the word of the counts panel for the same rule (Host.objects.schedulable).
    series = [
        Series("Free", [t.hosts_schedulable for t in counted], tone="blue", area=True),
        Series("In maintenance", [t.hosts_in_maintenance for t in counted], tone="amber"),
        Series("Failed", [t.hosts_repair_failed for t in counted], tone="slate"),
    ]
    return chart(
        chart_id="chart-capacity",
        title="Lab capacity",
        series=series,
        summary=summary,
        times=[t.started_at for t in counted],
    )


def repair_failed_callout(counts: dict[str, int]) -> dict | None:
    """The hosts whose repairs gave up, for the call-out; None when there are none."""
    total = counts["hosts_repair_failed"]
    if not total:
        return None
    names = selectors.repair_failed_hostnames(limit=REPAIR_FAILED_NAMED)
    return {
        "total": total,
        "names": names,
        "more": total - len(names),
        "next_try": selectors.repair_failed_next_try(),
    }


@ui_login_required
@require_GET
def dashboard(request: HttpRequest) -> HttpResponse:
    """Counts, utilization, charts over the recent ticks and the suites in progress."""
    now = timezone.now()
    counts = selectors.dashboard_counts(now=now)
    ticks = selectors.recent_ticks(limit=CHART_TICKS)
    suites, suites_total = selectors.suites_in_progress(limit=SUITES_ON_DASHBOARD)
    ids = [s.pk for s in suites]
    job_counts = selectors.suite_job_counts(ids)
    held = selectors.suite_hosts_held(ids)
    rows = [
        {"suite": s, "counts": job_counts.get(s.pk, {}), "held": held.get(s.pk, 0)} for s in suites
    ]
    total = counts["hosts_total"]
    context = {
        "now": now,
        "counts": counts,
        "utilization": round(100 * counts["hosts_leased"] / total) if total else 0,
        "repair_failed": repair_failed_callout(counts),
        "charts": dashboard_charts(ticks),
        "last_tick": ticks[-1] if ticks else None,
        "suite_rows": rows,
        "suites_total": suites_total,
        "live_url": request.path,
    }
    return page_or_fragment(request, "dashboard.html", "partials/dashboard_panels.html", context)
