"""The dashboard: the lab's counts, charts over the recent ticks and the suites in progress."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from datetime import datetime, tzinfo
from functools import partial

from django.http import HttpRequest, HttpResponse
from django.template.loader import render_to_string
from django.utils import timezone
from django.utils.safestring import SafeString
from django.views.decorators.http import require_GET

from hosts.models import Host
from jobs import badges, selectors
from jobs.models import Job, Lease
from jobs.scheduling import snapshot
from jobs.selectors import TickPoint
from schedsite.links import route_url
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


@dataclass(frozen=True)
class WaitScan:
    """What a scan of the oldest queued jobs found, by the jobs' creation times: the waits are
    counted from them at each request."""

    runnable_at: datetime | None
    impossible: int
    impossible_oldest_at: datetime | None
    scanned_all: bool
    # The soonest end of a retry's backoff among the jobs scanned: until then such a job waits
    # for its own reason (never red), after it for its class's, which may be red.
    valid_until: datetime | None

    def waits(self, now: datetime) -> QueueWaits:
        def waited(at: datetime | None) -> float | None:
            return None if at is None else (now - at).total_seconds()

        return QueueWaits(
            waited(self.runnable_at),
            self.impossible,
            waited(self.impossible_oldest_at),
            self.scanned_all,
        )


# The latest scan, under the tick whose reasons it read ((id, start): a test database refilled
# may give a new tick an old id). One entry: only the latest tick's is ever asked for.
_scans: dict[tuple[int, datetime], WaitScan] = {}


def queue_waits(now: datetime, tick: TickPoint | None, *, queue_written: bool) -> QueueWaits:
    """How long the oldest job that could run has waited, by the latest tick's wait reasons.

    A job that can never run as asked (no host carries its labels, a pinned host lacks them:
    the queue's red reasons) waits forever and would make the oldest wait meaningless; it is
    counted apart (docs/ui.md#pages).

    The scan reads the queue's oldest jobs and their reasons; both stay as they are until a job
    is written (a queued job's every write is in the change log) or a tick writes the reasons
    (a new tick row), so it is made once per tick while `queue_written` is False: no statement
    wrote a job since that tick took the change log.
    """
    key = (tick.id, tick.started_at) if tick is not None else None
    kept = _scans.get(key) if key is not None and not queue_written else None
    if kept is not None and (kept.valid_until is None or now < kept.valid_until):
        return kept.waits(now)
    scan = scan_queue_waits(now, tick)
    if key is not None and not queue_written:
        _scans.clear()
        _scans[key] = scan
    return scan.waits(now)


def scan_queue_waits(now: datetime, tick: TickPoint | None) -> WaitScan:
    """Read the oldest queued jobs, WAIT_SCAN_BATCH at a time, until one could run."""
    queued = Job.objects.queued().order_by("created_at", "id").select_related("host")
    impossible, oldest_impossible = 0, None
    backoff_ends: list[datetime] = []
    for start in range(0, WAIT_SCAN_MAX, WAIT_SCAN_BATCH):
        jobs = list(queued[start : start + WAIT_SCAN_BATCH])
        reasons = selectors.wait_reasons_for(jobs, tick) if tick is not None else {}
        for job in jobs:
            if job.not_before is not None and job.not_before > now:
                backoff_ends.append(job.not_before)
            if badges.wait_tone(reasons.get(job.pk)) != "red":
                return WaitScan(
                    job.created_at,
                    impossible,
                    oldest_impossible,
                    True,
                    min(backoff_ends, default=None),
                )
            impossible += 1
            oldest_impossible = oldest_impossible or job.created_at
        if len(jobs) < WAIT_SCAN_BATCH:
            return WaitScan(
                None, impossible, oldest_impossible, True, min(backoff_ends, default=None)
            )
    return WaitScan(None, impossible, oldest_impossible, False, min(backoff_ends, default=None))


def dashboard_charts(ticks: list[TickPoint], tz: tzinfo) -> list[Chart]:
    """Queue length, hosts leased and oldest wait over the recent ticks, the time in `tz`."""
    chart = partial(line_chart, times=[t.started_at for t in ticks], tz=tz)
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


def capacity_chart(ticks: list[TickPoint], chart: partial[Chart]) -> Chart:
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


@functools.lru_cache(maxsize=4)
def charts_html(ticks: tuple[TickPoint, ...], tz: tzinfo) -> SafeString:
    """The charts, drawn once per process for each set of tick figures and timezone: every
    request between two ticks would draw the same four SVGs (docs/performance.md)."""
    return render_to_string(
        "partials/dashboard_charts.html", {"charts": dashboard_charts(list(ticks), tz)}
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
    # What was written since the last tick took the change log, in one read: the free hosts,
    # whether the queue is long enough to estimate, and the oldest waits are as it left them
    # while their tables were not (selectors.dashboard_counts, queue_waits).
    written = (
        snapshot.tables_written_since_last_take(
            [Host._meta.db_table, Lease._meta.db_table, Job._meta.db_table]
        )
        if last_tick is not None
        else None
    )
    counts = selectors.dashboard_counts(now=now, tick=last_tick, written=written)
    suites, suites_total = selectors.suites_in_progress(limit=SUITES_ON_DASHBOARD)
    ids = [s.pk for s in suites]
    job_counts = selectors.suite_job_counts(ids)
    held = selectors.suite_hosts_held(ids)
    suite_url = route_url("jobs:suite_detail")
    rows = [
        {
            "suite": s,
            "url": suite_url(s.pk),
            "counts": job_counts.get(s.pk, {}),
            "held": held.get(s.pk, 0),
        }
        for s in suites
    ]
    total = counts["hosts_total"]
    context = {
        "now": now,
        "counts": counts,
        "utilization": round(100 * counts["hosts_leased"] / total) if total else 0,
        "repair_failed": repair_failed_callout(counts),
        "charts": charts_html(tuple(ticks), timezone.get_current_timezone()),
        "last_tick": last_tick,
        "waits": (
            queue_waits(now, last_tick, queue_written=Job._meta.db_table in (written or ()))
            if counts["jobs_queued"]
            else None
        ),
        "provisions": selectors.provision_stats(now=now),
        "suite_rows": rows,
        "suites_total": suites_total,
        "live_url": request.path,
    }
    return page_or_fragment(request, "dashboard.html", "partials/dashboard_panels.html", context)
