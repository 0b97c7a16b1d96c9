"""Reads of suites, jobs, leases and the scheduler's state, shared by the API and the UI."""

from __future__ import annotations

import functools
import hashlib
import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import NamedTuple

from django.contrib.postgres.expressions import ArraySubquery
from django.contrib.postgres.fields import ArrayField
from django.db import connection
from django.db.models import (
    Case,
    CharField,
    Count,
    Exists,
    Expression,
    F,
    IntegerField,
    Min,
    OuterRef,
    Prefetch,
    Q,
    QuerySet,
    Subquery,
    Value,
    When,
    Window,
)
from django.db.models.functions import Coalesce
from django.utils import timezone

from hosts import rules
from hosts import selectors as host_selectors
from hosts.choices import AWAITING_MAINTENANCE, IN_MAINTENANCE, HostStatus, ProvisionResult
from hosts.models import Host, Label, Provision, Worker
from hosts.querysets import online_cutoff
from jobs.choices import ACTIVE_JOB_STATUSES, JobKind, JobStatus
from jobs.models import Job, Lease, SchedulerSettings, SchedulerTick, Suite, WaitReasonClass
from jobs.querysets import UNFINISHED_JOB_STATUSES
from jobs.scheduling import labstate, planner, snapshot
from schedsite.counting import bounded_count
from schedsite.pgarrays import bigint_array
from schedsite.prepared import PreparedQuery

# --- wait reasons ---------------------------------------------------------------------------


def latest_tick() -> SchedulerTick | None:
    """The latest tick (its wait reasons are read per class by `wait_reasons_for`)."""
    return SchedulerTick.objects.order_by("-id").first()


def tick_provisions(tick: SchedulerTick | None) -> Counter[str]:
    """How many of the latest tick's job leases provision their host first, by build: those
    still active, acquired since it started, with a `provision_to` (one query over the active
    leases; none when it made no lease)."""
    if tick is None or not tick.leases_made:
        return Counter()
    rows = (
        Lease.objects.active()
        .filter(acquired_at__gte=tick.started_at)
        .exclude(provision_to="")
        .order_by()
        .values_list("provision_to")
        .annotate(n=Count("id"))
    )
    return Counter(dict(rows))


def current_holds(tick: SchedulerTick | None = None) -> dict[int, int]:
    """Hosts held idle for a multi-host job as the latest tick left them: host id -> job id
    (docs/scheduling.md#holds-and-backfill)."""
    if tick is None:
        holds = SchedulerTick.objects.order_by("-id").values_list("holds", flat=True).first() or {}
    else:
        holds = tick.holds or {}
    return {int(host): int(job) for host, job in holds.items()}


def _class_reasons(keys: set[str]) -> dict[str, dict]:
    """The wait reasons of these job classes only, as the latest tick that planned left them.

    A busy lab has thousands of classes; a page needs the few its jobs belong to, read by key
    from the wait-reason table (WaitReasonClass).
    """
    if not keys:
        return {}
    return dict(WaitReasonClass.objects.filter(key__in=sorted(keys)).values_list("key", "reason"))


def wait_reasons_for(
    jobs: list[Job], tick: SchedulerTick | TickPoint | None = None
) -> dict[int, dict]:
    """Each queued job's wait reason: its own when it waits for a retry or a maintenance slot,
    else the latest tick's reason for its class."""
    if not any(job.status == JobStatus.QUEUED for job in jobs):
        return {}  # only queued jobs wait: no need to read the latest tick's reasons
    tick = tick if tick is not None else latest_tick()
    now = timezone.now()
    # Whether a maintenance job's host is busy: one query for the page, not one per job.
    hosts = {job.host_id for job in jobs if job.kind != JobKind.TEST and job.host_id}
    busy = (
        set(Lease.objects.active().filter(host_id__in=hosts).values_list("host_id", flat=True))
        if hosts
        else set()
    )
    own: dict[int, dict | None] = {}
    # The keys each job's reason may be stored under, the first present wins: a multi-host
    # job this tick held hosts for has its own, else its class's (planner.reason_keys).
    keys: dict[int, tuple[str, ...]] = {}
    for job in jobs:
        if job.status != JobStatus.QUEUED:
            continue
        own[job.pk] = _own_wait_reason(job, now=now, busy=busy)
        if own[job.pk] is None and tick is not None and job.created_at <= tick.started_at:
            keys[job.pk] = planner.reason_keys(snapshot.job_state(job))
    wanted = {key for job_keys in keys.values() for key in job_keys}
    table = _class_reasons(wanted) if tick is not None else {}
    pending = {
        "code": planner.WaitCode.PENDING_TICK,
        "message": "Waiting for the next scheduler tick.",
    }
    return {
        pk: reason
        or next((table[key] for key in keys.get(pk, ()) if key in table), None)
        or {**pending, "details": {}}
        for pk, reason in own.items()
    }


def _own_wait_reason(job: Job, *, now: datetime, busy: set[int]) -> dict | None:
    """The reasons the planner does not give: a retry's backoff, a maintenance job's host."""
    if job.kind != JobKind.TEST:
        return _maintenance_wait_reason(job, busy=job.host_id in busy)
    if job.not_before is not None and job.not_before > now:
        until = timezone.localtime(job.not_before)
        return {
            "code": planner.WaitCode.RETRY_BACKOFF,
            "message": f"{job.message or 'retry'}; waiting until {until:%H:%M:%S}",
            "details": {"not_before": job.not_before.isoformat()},
        }
    return None


def _maintenance_wait_reason(job: Job, *, busy: bool) -> dict:
    host = job.host
    why = "the next tick leases it"
    if host is None:
        why = "its host is gone"
    else:
        worker = host.worker if host.worker_id else None
        facts = rules.Facts(
            ready=True,  # a verify or repair job runs on a host that is not ready
            locked=host.locked,
            leased=busy,
            worker_paused=worker is not None and worker.paused,
            worker_offline=worker is not None and not worker.is_online(),
        )
        blocker = rules.host_blocker(facts)
        if blocker is not None:
            name = worker.name if worker is not None else ""
            why = {
                rules.LOCKED: f"its host is locked: {host.lock_reason}",
                rules.PAUSED: f"worker {name} is paused",
                rules.OFFLINE: f"worker {name} is offline",
                rules.LEASED: "its host is busy: it runs when the current lease ends",
            }[blocker]
    hostname = host.hostname if host else "?"
    return {
        "code": planner.WaitCode.MAINTENANCE_WAITING,
        "message": f"{job.get_kind_display()} of {hostname} waits: {why}.",
        "details": {"host": hostname},
    }


def suite_job_counts(suite_ids: list[int]) -> dict[int, dict[str, int]]:
    """Job counts by status for each suite, in one query."""
    counts: dict[int, dict[str, int]] = {sid: {} for sid in suite_ids}
    rows = (
        Job.objects.filter(suite_id__in=suite_ids)
        .values("suite_id", "status")
        .annotate(n=Count("id"))
    )
    for row in rows:
        counts[row["suite_id"]][row["status"]] = row["n"]
    return counts


FANOUT_COUNTS = ("done", "pending", "skipped")


def fanout_host_counts(suites: Iterable[Suite]) -> dict[int, dict[str, int]]:
    """For each fan-out suite among `suites`, its hosts done, pending and skipped: one query.

    A host counts once, by its job: done (it ran, whatever the result), pending (queued,
    leased or running), or skipped (retired, repair_failed or no longer matching). A host whose
    job was skipped and that came back to run a new one counts by the new one.
    """
    ids = [suite.pk for suite in suites if suite.fanout_labels]
    counts: dict[int, dict[str, int]] = {pk: dict.fromkeys(FANOUT_COUNTS, 0) for pk in ids}
    if not ids:
        return counts
    skipped = Q(status=JobStatus.SKIPPED)
    again = Job.objects.filter(suite=OuterRef("suite"), host=OuterRef("host"), fanout=True).exclude(
        skipped
    )
    rows = (
        Job.objects.filter(suite_id__in=ids, fanout=True)
        .exclude(skipped & Exists(again))
        .values("suite_id")
        .annotate(
            done=Count("id", filter=~skipped & ~Q(status__in=UNFINISHED_JOB_STATUSES)),
            pending=Count("id", filter=Q(status__in=UNFINISHED_JOB_STATUSES)),
            skipped=Count("host", filter=skipped, distinct=True),
        )
        .order_by()
    )
    for row in rows:
        counts[row["suite_id"]] = {name: row[name] for name in FANOUT_COUNTS}
    return counts


def suite_hosts_held(suite_ids: list[int]) -> dict[int, int]:
    """Hosts each suite's jobs hold now (its jobs' active leases), in one statement.

    A job holds an active lease exactly while leased or running (docs/states.md): the suites'
    few active jobs come from the index on (suite, status), then their leases from the index of
    active leases by job. As a join PostgreSQL read every active lease of the lab (5-6 ms at
    10,000 hosts) to keep those of a page's suites; the job ids as an array (`ARRAY(…)`,
    computed first) make it probe the lease index with them.
    """
    if not suite_ids:
        return Counter()
    if connection.vendor != "postgresql":
        return Counter(
            Lease.objects.active()
            .filter(job__suite_id__in=suite_ids, job__status__in=ACTIVE_JOB_STATUSES)
            .values_list("job__suite_id", flat=True)
        )
    lease, job = Lease._meta.db_table, Job._meta.db_table
    sql = (
        f"SELECT j.suite_id FROM {lease} l JOIN {job} j ON j.id = l.job_id "  # noqa: S608 — names from the models, values as parameters
        "WHERE l.released_at IS NULL AND l.job_id = ANY(ARRAY("
        f"SELECT id FROM {job} WHERE suite_id = ANY(%s::bigint[]) AND status = ANY(%s)))"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [bigint_array(suite_ids), list(ACTIVE_JOB_STATUSES)])
        return Counter(suite_id for (suite_id,) in cursor.fetchall())


# --- reads for the REST API -----------------------------------------------------------------


def _count_of(queryset: QuerySet) -> Coalesce:
    """A correlated subquery counting the rows of `queryset` (already filtered by OuterRef)."""
    counted = queryset.order_by().values("worker_id").annotate(n=Count("pk")).values("n")
    return Coalesce(Subquery(counted, output_field=IntegerField()), 0)


def workers_with_host_counts(*, now: datetime | None = None) -> QuerySet[Worker]:
    """Workers annotated with their host counts and `running` jobs, in one query.

    hosts_total, hosts_leased, hosts_schedulable, and running: the jobs running on the worker
    now, which its capacity counts (a multi-host job once).
    """
    now = now or timezone.now()
    mine = Host.objects.filter(worker=OuterRef("pk"))
    return Worker.objects.select_related("runner", "paused_by").annotate(
        hosts_total=_count_of(mine),
        hosts_leased=_count_of(mine.leased()),
        hosts_schedulable=_count_of(mine.schedulable(now)),
        running=_count_of(mine.taking_capacity()),
    )


def active_lease_prefetch(of: str) -> Prefetch:
    """Prefetch each row's active lease (a list of at most one) with its host, job and holder.

    `of`: what the rows are, "host" or "job". The prefetch sets each row as its lease's host or
    job itself: joining the host table again made PostgreSQL scan all of it for a page of 50,
    and joining the job table again built every job of a page twice.
    """
    related = [name for name in ("host", "job", "holder") if name != of]
    return Prefetch(
        "leases",
        queryset=Lease.objects.active().select_related(*related),
        to_attr="active_leases",
    )


def lease_of_job_for_runner(*, job: Job, user: object) -> Lease | None:
    """The job's latest lease on a host of a worker this user is the runner of, if any."""
    return (
        Lease.objects.filter(job=job, host__worker__runner_id=getattr(user, "pk", None))
        .select_related("host")
        .order_by("-acquired_at", "-id")
        .first()
    )


def lease_of_job(job: Job) -> Lease | None:
    """The job's active lease, or else its latest one."""
    return (
        Lease.objects.filter(job=job)
        .select_related("host__worker")
        .order_by(F("released_at").desc(nulls_first=True), "-acquired_at", "-id")
        .first()
    )


def _runner_lease_rows(worker_id: int) -> QuerySet[Lease]:
    """The leases a worker's runner is shown: its active job leases, less the hosts it holds
    for a multi-host job whose slot 0 host is on the same worker (shown once, by slot 0)."""
    runs_here = Lease.objects.active().filter(
        job=OuterRef("job"), slot=0, host__worker=OuterRef("host__worker")
    )
    return (
        Lease.objects.active()
        .filter(job__isnull=False, host__worker=worker_id)
        .exclude(Q(slot__gt=0) & Exists(runs_here))
    )


def runner_leases(*, worker: Worker) -> QuerySet[Lease]:
    """A worker's active job leases, with what its runner needs to run each job.

    A multi-host job appears once, by its slot 0 lease, on the worker of its slot 0 host (whose
    runner runs it); its other hosts on other workers appear by their own leases there, which
    those runners leave alone (`slot` > 0: held for a job run elsewhere). `with_attempts`
    adds each job's active leases (`job.attempt_leases`), every host of the attempt.
    """
    return (
        _runner_lease_rows(worker.pk)
        .select_related("host", "job", "job__suite")
        .order_by("acquired_at", "id")
    )


def with_attempts(leases: list[Lease]) -> list[Lease]:
    """Each lease's job with its attempt's active leases (`job.attempt_leases`, by slot), and
    each lease's host with its label names (`Host.label_names`, one query of name pairs).

    A one-host job's lease (`role` "") is its attempt: no query. The multi-host jobs' leases
    are read in one query, with their hosts, and none when the page has no multi-host job:
    reading every job's attempt made half the instances of a lab's lease lists. The label
    names likewise: prefetching the labels built a Label per label of every host (about 250 a
    page of 50 leases).
    """
    host_selectors.with_label_names([lease.host for lease in leases])
    multi = {lease.job_id for lease in leases if lease.role}
    found: dict[int, list[Lease]] = {}
    if multi:
        attempts = Lease.objects.active().filter(job__in=multi).select_related("host")
        for lease in attempts.order_by("slot", "id"):
            found.setdefault(lease.job_id, []).append(lease)
    for lease in leases:
        lease.job.attempt_leases = found.get(lease.job_id, []) if lease.role else [lease]
    return leases


class RowVersions(Expression):
    """The rows `paths` reach, each as "id.version", joined by "/" ("-": no row): the version
    is PostgreSQL's `xmin`, the id of the transaction that wrote that version of the row.
    Every committed write of a row (an `UPDATE`, even to the same values) makes a version with
    a newer id than any before it."""

    output_field = CharField()

    def __init__(self, *paths: str) -> None:
        super().__init__()
        self.refs: list = [F(path) for path in paths]

    def get_source_expressions(self) -> list:
        return self.refs

    def set_source_expressions(self, exprs: list) -> None:
        self.refs = list(exprs)

    def as_sql(self, compiler: object, connection: object) -> tuple[str, list]:
        parts = []
        for col in self.refs:
            row = compiler.quote_name_unless_alias(col.alias)
            pk = connection.ops.quote_name(col.target.model._meta.pk.column)
            parts.append(f"coalesce({row}.{pk}::text || '.' || {row}.xmin::text, '-')")
        return "(" + " || '/' || ".join(parts) + ")", []


def _runner_lease_versions(worker_id: int) -> QuerySet[Lease]:
    """What the runner's lease list is made of, as row versions (PostgreSQL's `xmin`): each
    lease with its host, job and suite, its host's label links and labels, and for a
    multi-host job every lease of the attempt with its host."""
    links = Host.labels.through.objects.filter(host=OuterRef("host")).order_by("pk")
    attempt = Lease.objects.active().filter(job=OuterRef("job")).order_by("pk")
    return (
        _runner_lease_rows(worker_id)
        .values_list(
            RowVersions("pk", "host__hostname", "job__name", "job__suite__name"),
            ArraySubquery(links.values_list(RowVersions("pk", "label__name"))),
            Case(
                When(role="", then=Value(None)),  # a one-host job: its lease is its attempt
                default=ArraySubquery(attempt.values_list(RowVersions("pk", "host__hostname"))),
                output_field=ArrayField(CharField()),
            ),
        )
        .order_by("pk")
    )


RUNNER_LEASE_VERSIONS = PreparedQuery(_runner_lease_versions, int)


def runner_leases_version(*, worker: Worker) -> str | None:
    """A fingerprint of everything `runner_leases` shows the worker's runner, in one query:
    the same while no row it reads was written, different after any write (PostgreSQL gives
    every new row version the writing transaction's id, `xmin`, and a lease that joins or
    leaves the list changes the rows read). None on other databases, which have no row
    versions: the caller then fingerprints the answer itself (docs/api.md#conditional-lease-lists).
    """
    if connection.vendor != "postgresql":
        return None
    rows = RUNNER_LEASE_VERSIONS.all(worker.pk)
    return hashlib.blake2b(repr(rows).encode(), digest_size=16).hexdigest()


# --- reads for the web UI -------------------------------------------------------------------

# A host waiting for or running a verify or repair: out of service, coming back by itself.
MAINTENANCE_STATUSES = (*AWAITING_MAINTENANCE, *IN_MAINTENANCE)


def hosts_by_status() -> Counter[str]:
    """How many hosts are in each status (none: 0), in one GROUP BY."""
    return Counter(dict(Host.objects.order_by().values_list("status").annotate(n=Count("id"))))


def repair_failed_hostnames(*, limit: int) -> list[str]:
    """Up to `limit` hosts whose repairs gave up, by name (dut4 before dut12)."""
    names = Host.objects.filter(status=HostStatus.REPAIR_FAILED).values_list("hostname", flat=True)
    return sorted(names.order_by("hostname")[:limit], key=_natural_key)


def repair_failed_next_try() -> datetime | None:
    """The soonest automatic repair of a repair_failed host, for the call-out (None: none)."""
    hosts = Host.objects.filter(status=HostStatus.REPAIR_FAILED, next_repair_at__isnull=False)
    return hosts.aggregate(soonest=Min("next_repair_at"))["soonest"]


def _natural_key(name: str) -> list[tuple[int, int | str]]:
    # Digits compare as numbers, so a lab's numbered DUTs read in order.
    return [(0, int(part)) if part.isdigit() else (1, part) for part in re.split(r"(\d+)", name)]


def _dashboard_counts_sql() -> str:
    """One statement of four one-row aggregates: hosts by status, the active leases, the
    workers, the jobs starting or running. Built from the models' names; the only parameter
    is the online cutoff."""
    host, lease, worker, job = (m._meta.db_table for m in (Host, Lease, Worker, Job))
    by_status = ", ".join(
        f"count(*) FILTER (WHERE status = '{status}') AS hosts_{status}"
        for status in HostStatus.values
    )
    leased, running = JobStatus.LEASED, JobStatus.RUNNING
    return (
        "SELECT h.*, l.*, w.*, j.* FROM "  # noqa: S608 — names and choices from the models
        "(SELECT count(*) AS hosts_total, count(*) FILTER (WHERE locked) AS hosts_locked, "
        f"{by_status} FROM {host}) h, "
        # Hosts an active lease or reservation holds: a host has at most one (the unique
        # index one_active_lease_per_host), so the active leases are counted, not DISTINCT
        # hosts, with the reservations (leases without a job) in the same pass.
        "(SELECT count(*) AS hosts_leased, count(*) FILTER (WHERE job_id IS NULL) "
        f"AS reservations FROM {lease} WHERE released_at IS NULL) l, "
        "(SELECT count(*) AS workers_total, count(*) FILTER (WHERE paused) AS workers_paused, "
        f"count(*) FILTER (WHERE last_seen >= %s) AS workers_online FROM {worker}) w, "
        # The jobs starting or running, counted exactly (a few per host) through the status
        # index; the queue is counted as the queue page counts it (dashboard_counts).
        f"(SELECT count(*) FILTER (WHERE status = '{leased}') AS jobs_leased, "
        f"count(*) FILTER (WHERE status = '{running}') AS jobs_running "
        f"FROM {job} WHERE status IN ('{leased}', '{running}')) j"
    )


def dashboard_counts(
    *,
    now: datetime,
    tick: SchedulerTick | TickPoint | None = None,
    written: frozenset[str] | None = None,
) -> dict[str, int]:
    """Count hosts, workers, jobs and leases for the dashboard in a fixed number of queries.

    The fixed counts are one statement (`_dashboard_counts_sql`): as five ORM aggregates,
    building them in Python cost about as much as PostgreSQL took to answer them. The queue
    is counted as the queue page counts it, exactly up to EXACT_COUNT_LIMIT and estimated
    above ("about"): a GROUP BY over every job of the table was the page's slowest statement
    at 100,000 queued.

    `tick`, the latest tick: the free hosts are the ones it left (`hosts_schedulable`, the
    same rule as `Host.objects.schedulable`) while no host or lease was written since it took
    the change log, not a scan of the host table with a lease probe per ready host
    (docs/performance.md#the-dashboard-and-the-job-page-session-16).
    A queue the tick found far longer than the exact limit is estimated directly
    (`bounded_count`'s `expected`). `written`: the logged tables written since that tick took
    the change log, if the caller has read them (snapshot.tables_written_since_last_take).
    """
    cutoff = connection.ops.adapt_datetimefield_value(online_cutoff(now))
    with connection.cursor() as cursor:
        cursor.execute(_dashboard_counts_sql(), [cutoff])
        names = [column[0] for column in cursor.description]
        counts: dict[str, int] = dict(zip(names, cursor.fetchone(), strict=True))
    # A queue the latest tick left far longer than the exact limit is estimated at once.
    queued = bounded_count(Job.objects.queued(), expected=tick.queued_after if tick else None)
    counts["jobs_queued"] = queued.n
    counts["jobs_queued_estimated"] = queued.estimated
    # A worker paused or gone quiet writes no logged row: its hosts leave the count at the
    # next tick.
    logged = [Host._meta.db_table, Lease._meta.db_table]
    if (
        tick is not None
        and tick.hosts_schedulable is not None
        and not (
            written.intersection(logged)
            if written is not None
            else snapshot.written_since_last_take(logged)
        )
    ):
        counts["hosts_free"] = tick.hosts_schedulable
    else:  # no tick yet, one before capacity was counted, or a host or lease written since
        counts["hosts_free"] = Host.objects.schedulable(now).count()
    counts["workers_offline"] = counts["workers_total"] - counts["workers_online"]
    counts["hosts_in_maintenance"] = sum(counts[f"hosts_{s}"] for s in MAINTENANCE_STATUSES)
    counts["hosts_to_verify"] = counts["hosts_needs_verify"] + counts["hosts_verifying"]
    counts["hosts_to_repair"] = counts["hosts_needs_repair"] + counts["hosts_repairing"]
    counts["jobs_active"] = counts["jobs_leased"] + counts["jobs_running"]
    return counts


PROVISION_STATS_HOURS = 24


@dataclass(frozen=True)
class ProvisionStats:
    """The hosts provisioned over the last PROVISION_STATS_HOURS: how often and for how long."""

    total: int
    failed: int
    seconds: float  # time spent provisioning, of those whose runner said how long

    @property
    def per_hour(self) -> float:
        return self.total / PROVISION_STATS_HOURS

    @property
    def hours(self) -> float:
        return self.seconds / 3600


def provision_stats(*, now: datetime) -> ProvisionStats:
    """Provisionings (Provision rows) of the last PROVISION_STATS_HOURS, in one statement.

    Written out: as an ORM aggregate (two counts and a sum), building it cost several times
    what PostgreSQL takes to answer it, on every dashboard request.
    """
    since = connection.ops.adapt_datetimefield_value(now - timedelta(hours=PROVISION_STATS_HOURS))
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*), count(*) FILTER (WHERE result = %s), "  # noqa: S608 — the model's table
            f"coalesce(sum(seconds), 0.0) FROM {Provision._meta.db_table} WHERE created_at > %s",
            [ProvisionResult.FAILED.value, since],
        )
        total, failed, seconds = cursor.fetchone()
    return ProvisionStats(total=total, failed=failed, seconds=float(seconds))


class TickPoint(NamedTuple):
    """A recent tick's figures that the dashboard shows: its charts and its last tick's line."""

    id: int
    started_at: datetime
    duration_ms: float
    leases_made: int
    queued_after: int
    oldest_wait_s: float
    hosts_total: int
    hosts_leased: int
    hosts_schedulable: int | None
    hosts_in_maintenance: int | None
    hosts_repair_failed: int | None


def recent_ticks(*, limit: int = 120) -> list[TickPoint]:
    """The latest ticks' figures, oldest first: plain tuples, equal when the figures are (the
    dashboard's charts are drawn once per set of them), not models with every field."""
    rows = SchedulerTick.objects.order_by("-id").values_list(*TickPoint._fields)[:limit]
    points = [TickPoint._make(row) for row in rows]
    points.reverse()
    return points


def _suites_in_progress(limit: int) -> QuerySet[Suite]:
    qs = Suite.objects.unfinished().filter(aborted_at__isnull=True).select_related("owner")
    # The count rides on the page's rows (a window over every row kept): finding the unfinished
    # suites is the cost (a probe of the jobs of each suite), paid once rather than twice.
    return qs.annotate(in_all=Window(Count("id"))).order_by("-priority", "created_at", "id")[:limit]


@functools.cache
def _suites_in_progress_query(limit: int) -> PreparedQuery[Suite]:
    # Compiled once per process: building this SQL cost Django three times what running it
    # costs, on every dashboard request.
    return PreparedQuery(functools.partial(_suites_in_progress, limit))


def suites_in_progress(*, limit: int = 10) -> tuple[list[Suite], int]:
    """Unfinished suites (priority first, then age) and how many there are in all."""
    rows = _suites_in_progress_query(limit).all()
    return rows, (rows[0].in_all if rows else 0)


@dataclass(frozen=True)
class QueueOrder:
    """Queued job ids in consideration order, and which of them the quota phase takes first."""

    ids: list[int]
    quota_ids: frozenset[int]


def queue_order_ids(
    *, policy: planner.Policy | None = None, now: datetime | None = None
) -> QueueOrder:
    """Every queued job id in consideration order, computed by the planner from every row.

    O(queued jobs). Under the default policy it is the reference the queue pages' paged reads
    (jobs/scheduling/queue.py) are tested against; under a size, aging or fair-share order no
    index holds the order, and the queue pages read it from here.
    """
    # Maintenance jobs first: the tick leases them before any test job.
    maintenance = Job.objects.queued().exclude(kind=JobKind.TEST).order_by("id")
    policy = policy or SchedulerSettings.load().policy()
    now = now or timezone.now()
    states = labstate.queued_job_states(policy=policy)
    suite_ids = {s.suite_id for s in states if s.suite_id is not None}
    suites = snapshot.suite_states(
        suite_ids, held=suite_hosts_held(list(suite_ids)) if suite_ids else {}
    )
    order = {"jobs": states, "suites": suites, "policy": policy, "now": now}
    usage = (
        snapshot.owner_usage(now=now, half_life_hours=policy.fair_share_half_life_hours)
        if policy.fair_share
        else {}
    )
    # Same-build-first orders by the builds of the free hosts: read them as the tick does.
    free = labstate.free_host_states(now=now) if policy.same_build_first_minutes > 0 else []
    return QueueOrder(
        ids=[
            *maintenance.values_list("id", flat=True),
            *planner.consideration_order(**order, usage=usage, free=free),
        ],
        quota_ids=frozenset(planner.quota_candidates(**order)),
    )


def label_suggestions(*, text: str, limit: int = 8) -> list[tuple[str, int]]:
    """Existing labels containing the text, most used first, with how many hosts carry each."""
    qs = Label.objects.all()
    if text:
        qs = qs.filter(name__icontains=text)
    rows = qs.annotate(n=Count("hosts")).order_by("-n", "name").values_list("name", "n")[:limit]
    return list(rows)


def hosts_with_labels_count(labels: list[str]) -> int:
    """How many hosts carry every one of the labels."""
    return Host.objects.carrying(labels).count()


def suite_derived(suite: Suite, *, limit: int = 20) -> dict[str, list[Suite]]:
    """The newest suites made from this one: its re-runs and its clones (two queries)."""
    made = Suite.objects.order_by("-created_at", "-id")
    return {
        "reruns": list(made.filter(rerun_of=suite)[:limit]),
        "clones": list(made.filter(cloned_from=suite)[:limit]),
    }
