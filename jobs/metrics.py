"""Prometheus /metrics: the lab's state, computed from the database at scrape time."""

from __future__ import annotations

import hmac
import math
import time
from collections.abc import Iterable
from datetime import datetime

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Count, Exists, Min, OuterRef, Q, Sum
from django.db.models.functions import Coalesce
from django.http import HttpRequest, HttpResponse
from django.utils import timezone
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4
from rest_framework.authtoken.models import Token

from hosts.choices import HostStatus, ProvisionResult
from hosts.models import Host, Provision, Worker
from hosts.querysets import seen_online
from jobs.choices import MAINTENANCE_KINDS, JobKind, JobStatus, ReleaseReason
from jobs.models import Job, Lease, SchedulerTick
from jobs.querysets import ACTIVE_LEASE
from schedsite import roles

# Every value is read from PostgreSQL when scraped, so any number of gunicorn workers and
# qcluster processes report the same numbers and nothing is lost on restart: nothing is
# counted in process memory, and the collector below only reads. Counters (…_total) are counts
# of lease rows and finished job rows, which are kept (only purging a host, an admin's shell
# command, removes its leases and maintenance jobs), so they only go up; the tick histograms
# cover the retained SchedulerTick rows (the last TICK_HISTORY ticks), a sliding window, so
# read them without rate().

# generate_latest writes the 0.0.4 text format for names like ours, and prometheus_client's
# own handlers send it under this type unless the scraper asks for 1.0.0 (which is what its
# CONTENT_TYPE_LATEST names since 0.23); Prometheus 2 and 3 both read it.
CONTENT_TYPE = CONTENT_TYPE_PLAIN_0_0_4
# Bucket bounds as they appear in the `le` label (dashboards select on `le="1"`), and parsed
# once for the database filters.
TICK_SECONDS_BUCKETS = (
    "0.005",
    "0.01",
    "0.025",
    "0.05",
    "0.1",
    "0.25",
    "0.5",
    "1",
    "2.5",
    "5",
    "10",
)
# Provisioning takes minutes: a reimage over the network, a flash over USB.
PROVISION_SECONDS_BUCKETS = ("30", "60", "120", "300", "600", "900", "1800", "3600")
TICK_LEASES_BUCKETS = ("0", "1", "2", "5", "10", "20", "50", "100", "200", "500", "1000", "5000")


def _gauge(
    name: str, help_text: str, value: float | None = None, *, labels: Iterable[str] = ()
) -> GaugeMetricFamily:
    return GaugeMetricFamily(f"schedsite_{name}", help_text, value, list(labels) or None)


def _counter(
    name: str, help_text: str, value: float | None = None, *, labels: Iterable[str] = ()
) -> CounterMetricFamily:
    return CounterMetricFamily(f"schedsite_{name}", help_text, value, list(labels) or None)


def _histogram(
    name: str, help_text: str, bounds: Iterable[str], counts: Iterable[int], total: int, sum_: float
) -> HistogramMetricFamily:
    buckets = [*zip(bounds, counts, strict=True), ("+Inf", total)]
    return HistogramMetricFamily(f"schedsite_{name}", help_text, buckets, sum_)


def _age(now: datetime, then: datetime | None) -> float:
    return max((now - then).total_seconds(), 0.0) if then is not None else math.inf


# --- collection: a fixed number of queries, whatever the size of the lab --------------------


def collect(*, now: datetime | None = None) -> list[Metric]:
    """Read every series from the database, from one snapshot (eight queries)."""
    # One snapshot for all eight queries, so that the series agree with each other (hosts
    # leased = active leases) even while the tick and runners write. Inside a caller's
    # transaction (a test's) the snapshot is the caller's.
    snapshot = connection.vendor == "postgresql" and not connection.in_atomic_block
    with transaction.atomic():
        if snapshot:
            with connection.cursor() as cursor:
                cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
        now = now or timezone.now()
        return [
            *_jobs(now),
            *_hosts(now),
            *_workers(now),
            *_leases(now),
            *_ticks(now),
            *_provisions(),
        ]


class LabCollector:
    """The lab's series, read when scraped, and what reading them cost."""

    def collect(self) -> list[Metric]:
        started = time.perf_counter()
        families = collect()
        scrape = _gauge(
            "metrics_scrape_duration_seconds",
            "Time this scrape spent reading the database.",
            time.perf_counter() - started,
        )
        return [*families, scrape]


# A registry of our own, not prometheus_client's global one: importing this module twice (a
# test process, an autoreloader) cannot register the collector twice, and the client's own
# process and platform collectors, per-process numbers, stay out of a lab-wide scrape.
REGISTRY = CollectorRegistry()
REGISTRY.register(LabCollector())


def _jobs(now: datetime) -> list[Metric]:
    rows = Job.objects.order_by().values_list("kind", "status").annotate(n=Count("id"))
    by_kind_status = {(kind, status): n for kind, status, n in rows}
    by_status: dict[str, int] = {}
    for (_kind, status), n in by_kind_status.items():
        by_status[status] = by_status.get(status, 0) + n
    jobs = _gauge("jobs", "Jobs by status (rows kept in the database).", labels=["status"])
    for status in JobStatus.values:
        jobs.add_metric([status], by_status.get(status, 0))

    queued = _gauge(
        "jobs_queued", "Queued jobs by priority (higher runs first).", labels=["priority"]
    )
    oldest: datetime | None = None
    rows = (
        Job.objects.queued()
        .order_by()
        .values_list("priority")
        .annotate(n=Count("id"), oldest=Min("created_at"))
    )
    for priority, n, first in sorted(rows):
        queued.add_metric([str(priority)], n)
        oldest = first if oldest is None or first < oldest else oldest
    wait = _gauge(
        "queue_oldest_wait_seconds",
        "Seconds the oldest queued job has waited since it was submitted (0: queue empty).",
        _age(now, oldest) if oldest is not None else 0.0,
    )
    expired = _counter(
        "jobs_expired_total",
        "Jobs that waited in the queue past their expires_at and ended expired.",
        by_status.get(JobStatus.EXPIRED, 0),
    )
    return [jobs, queued, wait, expired, _maintenance_jobs(by_kind_status)]


# How a verify or repair ends: its runner's verdict, its runner vanished (error), or it was
# timed out, aborted by staff or its runner, or no longer needed (aborted).
MAINTENANCE_RESULTS = (JobStatus.PASSED, JobStatus.FAILED, JobStatus.ERROR, JobStatus.ABORTED)


def _maintenance_jobs(by_kind_status: dict[tuple[str, str], int]) -> Metric:
    ended = _counter(
        "maintenance_jobs_total",
        "Verify and repair jobs that ended, by kind and result.",
        labels=["kind", "result"],
    )
    for kind in MAINTENANCE_KINDS:
        for result in MAINTENANCE_RESULTS:
            ended.add_metric([kind, result], by_kind_status.get((kind, result), 0))
    return ended


def _hosts(now: datetime) -> list[Metric]:
    counts = Host.objects.with_leased().aggregate(
        # Aliases must not shadow field names (`locked`), or the filters would read the aggregates.
        n_locked=Count("id", filter=Q(locked=True)),
        n_leased=Count("id", filter=Q(is_leased=True)),
        # The scheduler's own rule, as a subquery of this one query.
        n_schedulable=Count("id", filter=Q(pk__in=Host.objects.schedulable(now).values("pk"))),
        **{f"status_{s}": Count("id", filter=Q(status=s)) for s in HostStatus.values},
    )
    by_status = _gauge("hosts", "Hosts by status.", labels=["status"])
    for status in HostStatus.values:
        by_status.add_metric([status], counts[f"status_{status}"])
    return [
        by_status,
        _gauge("hosts_locked", "Hosts locked by staff.", counts["n_locked"]),
        _gauge("hosts_leased", "Hosts held by an active lease or reservation.", counts["n_leased"]),
        _gauge(
            "hosts_schedulable",
            "Hosts that could take a lease now: ready, unlocked, free, worker online and running.",
            counts["n_schedulable"],
        ),
    ]


def _workers(now: datetime) -> list[Metric]:
    rows = list(Worker.objects.order_by("name").values_list("name", "paused", "last_seen"))
    age = _gauge(
        "worker_last_seen_age_seconds",
        "Seconds since each worker's runner last heartbeated (+Inf: never).",
        labels=["worker"],
    )
    paused = _gauge("worker_paused", "1 if the worker is paused by staff.", labels=["worker"])
    for name, is_paused, last_seen in rows:
        age.add_metric([name], _age(now, last_seen))
        paused.add_metric([name], 1 if is_paused else 0)
    online = sum(1 for _n, _p, seen in rows if seen_online(seen, now))
    return [
        _gauge("workers", "Workers known to the lab.", len(rows)),
        _gauge(
            "workers_online",
            "Workers whose runner heartbeated within WORKER_OFFLINE_TIMEOUT.",
            online,
        ),
        _gauge("workers_paused", "Workers paused by staff.", sum(1 for r in rows if r[1])),
        age,
        paused,
    ]


def _leases(now: datetime) -> list[Metric]:
    active = ACTIVE_LEASE
    job = Q(job__isnull=False)
    test_host_failed = Q(host_failed=True, job__kind=JobKind.TEST)
    broken = test_host_failed & Q(release_reason=ReleaseReason.COMPLETED)
    vanished = test_host_failed & Q(release_reason=ReleaseReason.EXPIRED)
    later = Lease.objects.filter(job=OuterRef("job"), acquired_at__gt=OuterRef("acquired_at"))
    retried = Q(job__status=JobStatus.QUEUED) | Q(Exists(later))
    counts = Lease.objects.aggregate(
        active_job=Count("id", filter=active & job),
        active_reservation=Count("id", filter=active & ~job),
        made=Count("id", filter=job),
        expired_job=Count("id", filter=Q(release_reason=ReleaseReason.EXPIRED) & job),
        expired_reservation=Count("id", filter=Q(release_reason=ReleaseReason.EXPIRED) & ~job),
        timed_out=Count("id", filter=Q(release_reason=ReleaseReason.TIMEOUT)),
        # A test job's host failed under it: the runner reported the host broken (the lease
        # completed), or the runner vanished (the lease expired).
        host_broken=Count("id", filter=broken),
        runner_vanished=Count("id", filter=vanished),
        oldest_beat=Min(Coalesce("heartbeat_at", "acquired_at"), filter=active & job),
        # Of those, the ones retried: the job ran again, or waits in the queue to. The host
        # failure tests come first, so the EXISTS runs only for the few leases that pass them.
        host_broken_retried=Count("id", filter=broken & retried),
        runner_vanished_retried=Count("id", filter=vanished & retried),
    )
    leases = _gauge(
        "leases_active", "Active leases: a job's lease, or a manual reservation.", labels=["kind"]
    )
    leases.add_metric(["job"], counts["active_job"])
    leases.add_metric(["reservation"], counts["active_reservation"])
    expired = _counter(
        "leases_expired_total",
        "Leases that reached expires_at: kind=job means a runner stopped heartbeating.",
        labels=["kind"],
    )
    expired.add_metric(["job"], counts["expired_job"])
    expired.add_metric(["reservation"], counts["expired_reservation"])
    host_failures = _counter(
        "job_host_failures_total",
        "Test jobs whose host failed under them; each was retried, or ended when it had no "
        "tries left.",
        labels=["cause"],
    )
    retries = _counter(
        "job_retries_total",
        "Test jobs queued again after their host failed under them, by cause.",
        labels=["cause"],
    )
    for cause in ("host_broken", "runner_vanished"):
        host_failures.add_metric([cause], counts[cause])
        retries.add_metric([cause], counts[f"{cause}_retried"])
    beat = counts["oldest_beat"]
    return [
        leases,
        _gauge(
            "lease_oldest_heartbeat_age_seconds",
            "Seconds since the stalest active job lease was heartbeated (0: none active); "
            "it expires at LEASE_TTL.",
            _age(now, beat) if beat is not None else 0.0,
        ),
        _counter("leases_made_total", "Job leases ever granted.", counts["made"]),
        expired,
        _counter(
            "jobs_timed_out_total",
            "Running jobs aborted by the tick for exceeding their timeout.",
            counts["timed_out"],
        ),
        host_failures,
        retries,
    ]


def _ticks(now: datetime) -> list[Metric]:
    secs = {
        f"s{i}": Count("id", filter=Q(duration_ms__lte=float(le) * 1000))
        for i, le in enumerate(TICK_SECONDS_BUCKETS)
    }
    made = {
        f"l{i}": Count("id", filter=Q(leases_made__lte=int(le)))
        for i, le in enumerate(TICK_LEASES_BUCKETS)
    }
    agg = SchedulerTick.objects.aggregate(
        n=Count("id"),
        sum_ms=Coalesce(Sum("duration_ms"), 0.0),
        sum_leases=Coalesce(Sum("leases_made"), 0),
        **secs,
        **made,
    )
    last = (
        SchedulerTick.objects.order_by("-id")
        .values_list("started_at", "duration_ms", "leases_made")
        .first()
    )
    window = f" over the last {settings.TICK_HISTORY} ticks kept (a sliding window: no rate())."
    return [
        _histogram(
            "tick_duration_seconds",
            "Scheduler tick duration" + window,
            TICK_SECONDS_BUCKETS,
            [agg[f"s{i}"] for i in range(len(TICK_SECONDS_BUCKETS))],
            agg["n"],
            agg["sum_ms"] / 1000,
        ),
        _histogram(
            "tick_leases",
            "Leases made per scheduler tick" + window,
            TICK_LEASES_BUCKETS,
            [agg[f"l{i}"] for i in range(len(TICK_LEASES_BUCKETS))],
            agg["n"],
            agg["sum_leases"],
        ),
        _gauge(
            "last_tick_age_seconds",
            "Seconds since the last scheduler tick started (+Inf: none recorded).",
            _age(now, last[0] if last else None),
        ),
        _gauge(
            "last_tick_duration_seconds",
            "Duration of the last scheduler tick.",
            last[1] / 1000 if last else 0.0,
        ),
    ]


def _provisions() -> list[Metric]:
    # Provision rows are kept (a deleted host's too: their host link is set null), so these
    # are lifetime counts that only go up, fit for rate().
    timed = Q(seconds__isnull=False)
    agg = Provision.objects.aggregate(
        **{f"r_{result}": Count("id", filter=Q(result=result)) for result in ProvisionResult},
        n=Count("id", filter=timed),
        sum_s=Coalesce(Sum("seconds", filter=timed), 0.0),
        **{
            f"b{i}": Count("id", filter=Q(seconds__lte=float(le)))
            for i, le in enumerate(PROVISION_SECONDS_BUCKETS)
        },
    )
    total = _counter(
        "provisions_total",
        "Hosts provisioned (a build put on them before a test), by result.",
        labels=["result"],
    )
    for result in ProvisionResult:
        total.add_metric([result.value], agg[f"r_{result}"])
    return [
        total,
        _histogram(
            "provision_seconds",
            "How long each provisioning took, as its runner reported (those that said).",
            PROVISION_SECONDS_BUCKETS,
            [agg[f"b{i}"] for i in range(len(PROVISION_SECONDS_BUCKETS))],
            agg["n"],
            agg["sum_s"],
        ),
    ]


# --- the view -------------------------------------------------------------------------------


def _authorize(request: HttpRequest) -> int:
    """Return 200 to serve, 401 for no or bad credentials, 403 for a user who is not staff."""
    header = request.headers.get("Authorization", "")
    if header:
        scheme, _, credential = header.partition(" ")
        scheme, credential = scheme.lower(), credential.strip()
        if scheme == "bearer":
            expected = settings.METRICS_TOKEN
            # Constant-time compare: the token is a shared secret in a scraper's config.
            ok = bool(expected) and hmac.compare_digest(credential.encode(), expected.encode())
            return 200 if ok else 401
        if scheme == "token" and credential:
            token = Token.objects.select_related("user").filter(key=credential).first()
            # A deleted token (revoked in the admin or the profile page) no longer works.
            if token is None or not token.user.is_active:
                return 401
            return 200 if roles.is_staff(token.user) else 403
        return 401
    if not request.user.is_authenticated:
        return 401
    return 200 if roles.is_staff(request.user) else 403


@never_cache
@require_GET
def metrics(request: HttpRequest) -> HttpResponse:
    """Serve the lab's metrics to lab staff, a staff API token or the metrics bearer token."""
    status = _authorize(request)
    if status == 401:
        response = HttpResponse("authentication required\n", status=401, content_type="text/plain")
        response["WWW-Authenticate"] = 'Bearer realm="schedsite metrics"'
        return response
    if status == 403:
        return HttpResponse("lab staff only\n", status=403, content_type="text/plain")
    return HttpResponse(generate_latest(REGISTRY), content_type=CONTENT_TYPE)
