"""The dashboard: the lab's counts, charts over the recent ticks and the suites in progress."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from functools import partial

from django.http import HttpRequest, HttpResponse
from django.utils import timezone
from django.views.decorators.http import require_GET

from jobs import badges, selectors
from jobs.models import Job, SchedulerTick
from schedsite.ui.charts import Chart, Series, line_chart
from schedsite.ui.durations import human_duration
from schedsite.ui.htmx import page_or_fragment, ui_login_required

CHART_TICKS = 120  # ticks drawn on the dashboard charts
SUITES_ON_DASHBOARD = 8
REPAIR_FAILED_NAMED = 12  # hosts the repair_failed call-out names; the list link has them all
# Queued jobs read, oldest first, in search of the oldest one that could run: a queue whose
# oldest thousands can never run is said to be so rather than read whole every 5 s.
WAIT_SCAN_BATCH = 100
WAIT_SCAN_MAX = 500


@dataclass(frozen=True)
class QueueWaits:
    """The oldest wait of a job that could run, apart from the jobs that cannot run as asked."""

    runnable_s: float | None  # the oldest job whose wait reason is not red; None: none found
    impossible: int  # jobs older than it that cannot run as asked (a red wait reason)
    impossible_oldest_s: float | None
    scanned_all: bool  # False: the scan stopped at WAIT_SCAN_MAX jobs, all of them impossible


def queue_waits(now: datetime, tick: SchedulerTick | None) -> QueueWaits:
    """How long the oldest job that could run has waited, by the latest tick's wait reasons.

    A job that can never run as asked (no host carries its labels, a pinned host lacks them:
    the queue's red reasons) waits forever and would make the oldest wait meaningless; it is
    counted apart (docs/ui.md#pages).
    """
    queued = Job.objects.queued().order_by("created_at", "id").select_related("host")
    impossible, oldest_impossible = 0, None
    for start in range(0, WAIT_SCAN_MAX, WAIT_SCAN_BATCH):
        jobs = list(queued[start : start + WAIT_SCAN_BATCH])
        reasons = selectors.wait_reasons_for(jobs, tick) if tick is not None else {}
        for job in jobs:
            waited = (now - job.created_at).total_seconds()
            if badges.wait_tone(reasons.get(job.pk)) != "red":
                return QueueWaits(waited, impossible, oldest_impossible, True)
            impossible += 1
            oldest_impossible = oldest_impossible or waited
        if len(jobs) < WAIT_SCAN_BATCH:
            return QueueWaits(None, impossible, oldest_impossible, True)
    return QueueWaits(None, impossible, oldest_impossible, False)


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
            # The tick's figure counts every queued job, those that can never run too; the
            # Queued jobs card says the oldest runnable wait (queue_waits).
            title="Oldest wait, any job",
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
    ticks = selectors.recent_ticks(limit=CHART_TICKS)
    last_tick = ticks[-1] if ticks else None
    # The free hosts, and whether the queue is long enough to estimate, as the last tick left
    # them (selectors.dashboard_counts).
    counts = selectors.dashboard_counts(now=now, tick=last_tick)
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
        "last_tick": last_tick,
        "waits": queue_waits(now, last_tick) if counts["jobs_queued"] else None,
        "provisions": selectors.provision_stats(now=now),
        "suite_rows": rows,
        "suites_total": suites_total,
        "live_url": request.path,
    }
    return page_or_fragment(request, "dashboard.html", "partials/dashboard_panels.html", context)
