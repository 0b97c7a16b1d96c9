"""Reads of suites, jobs, leases and the scheduler's state, shared by the API, UI and tick."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from django.db import connection
from django.db.models import (
    Count,
    F,
    IntegerField,
    OuterRef,
    Prefetch,
    Q,
    QuerySet,
    Subquery,
)
from django.db.models.expressions import RawSQL
from django.db.models.functions import Coalesce
from django.utils import timezone

from hosts.choices import HostStatus
from hosts.models import Host, Label, Worker
from hosts.querysets import online_cutoff, seen_online
from jobs.choices import JobStatus
from jobs.models import Job, Lease, SchedulerTick, Suite, decode_labels
from jobs.scheduler import planner


@dataclass
class Snapshot:
    """Everything the planner needs, read with a fixed number of queries."""

    hosts: list[planner.HostState]
    jobs: list[planner.JobState]
    suites: list[planner.SuiteState]
    suite_names: dict[int, str]
    leased_count: int
    hosts_by_id: dict[int, planner.HostState] = field(default_factory=dict)
    jobs_by_id: dict[int, planner.JobState] = field(default_factory=dict)


def scheduler_snapshot(*, now: datetime) -> Snapshot:
    """Read hosts, queued jobs and suites as plain planner data.

    Every host, schedulable or not, with the facts the planner's `host_is_schedulable`
    decides on: a pinned job's wait reason names what keeps its host from it.
    """
    workers = {
        wid: (paused, not seen_online(last_seen, now))
        for wid, paused, last_seen in Worker.objects.values_list("id", "paused", "last_seen")
    }
    labels: dict[int, set[str]] = {}
    for host_id, name in Host.labels.through.objects.values_list("host_id", "label__name"):
        labels.setdefault(host_id, set()).add(name)
    lease_rows = list(
        Lease.objects.active().values_list("host_id", "job_id", "job__priority", "job__suite_id")
    )
    leased = {host_id: (job_id, prio) for host_id, job_id, prio, _suite in lease_rows}
    held = Counter(suite_id for _h, _j, _p, suite_id in lease_rows if suite_id is not None)

    # Hosts of one class share one frozenset: less memory, and the planner's dict lookups
    # on label sets compare by identity first.
    label_sets: dict[frozenset[str], frozenset[str]] = {}
    hosts: list[planner.HostState] = []
    for hid, hostname, status, locked, lock_reason, build, worker_id in Host.objects.values_list(
        "id", "hostname", "status", "locked", "lock_reason", "current_build", "worker_id"
    ):
        paused, offline = workers.get(worker_id, (False, False)) if worker_id else (False, False)
        lease = leased.get(hid)
        host_labels = frozenset(labels.get(hid, ()))
        hosts.append(
            planner.HostState(
                id=hid,
                hostname=hostname,
                labels=label_sets.setdefault(host_labels, host_labels),
                current_build=build,
                ready=status == HostStatus.READY,
                locked=locked,
                lock_reason=lock_reason,
                worker_paused=paused,
                worker_offline=offline,
                leased=lease is not None,
                lease_priority=lease[1] if lease and lease[0] is not None else None,
            )
        )

    jobs = _queued_job_states()
    suites = _suite_states({j.suite_id for j in jobs if j.suite_id is not None}, held=held)
    return Snapshot(
        hosts=hosts,
        jobs=jobs,
        suites=suites,
        suite_names={suite.id: suite.name for suite in suites},
        leased_count=len(lease_rows),
        hosts_by_id={h.id: h for h in hosts},
        jobs_by_id={j.id: j for j in jobs},
    )


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _suite_states(suite_ids: Iterable[int], *, held: Mapping[int, int]) -> list[planner.SuiteState]:
    """Read the given suites as planner.SuiteState, with the hosts each holds."""
    suite_ids = list(suite_ids)
    if not suite_ids:
        return []
    return [
        planner.SuiteState(
            id=sid,
            name=name,
            priority=prio,
            created_at=created,
            min_duts=min_duts,
            max_duts=max_duts,
            held=held.get(sid, 0),
            build=build,
        )
        for sid, name, prio, created, min_duts, max_duts, build in Suite.objects.filter(
            pk__in=id_list(suite_ids)
        ).values_list("id", "name", "priority", "created_at", "min_duts", "max_duts", "build")
    ]


def _queued_job_states() -> list[planner.JobState]:
    """Read every queued job as a planner.JobState, lean enough for 100,000 of them."""
    queued = Job.objects.queued()
    fields = ("id", "name", "suite_id", "priority", "label_key", "host_id")
    moments: dict[object, datetime] = {}  # one datetime per distinct submission time
    if connection.vendor == "postgresql":
        # Parsing 100,000 timestamptz values costs more than the rest of the snapshot: read
        # microseconds since the epoch instead (exact, unlike a float) and build one datetime
        # per distinct value, since the jobs of a suite share its created_at.
        epoch_us = RawSQL(
            f'(EXTRACT(EPOCH FROM "{Job._meta.db_table}"."submitted_at") * 1000000)::bigint', ()
        )
        rows = queued.annotate(submitted_us=epoch_us).values_list(*fields, "submitted_us")

        def moment(us: object) -> datetime:
            return _EPOCH + timedelta(microseconds=us)  # type: ignore[arg-type]
    else:
        rows = queued.values_list(*fields, "submitted_at")

        def moment(at: object) -> datetime:
            return at  # type: ignore[return-value]

    # Decode each distinct label key once: a lab has hundreds of label sets, not 100,000.
    label_sets: dict[str, frozenset[str]] = {}
    jobs = []
    for jid, name, suite_id, priority, key, pinned, submitted in rows:
        job_labels = label_sets.get(key)
        if job_labels is None:
            job_labels = label_sets[key] = frozenset(decode_labels(key))
        at = moments.get(submitted)
        if at is None:
            at = moments[submitted] = moment(submitted)
        jobs.append(
            planner.JobState(
                id=jid,
                name=name,
                suite_id=suite_id,
                priority=priority,
                submitted_at=at,
                labels=job_labels,
                pinned_host_id=pinned,
            )
        )
    return jobs


def id_list(ids: Iterable[int]) -> list[int] | RawSQL:
    """Return ids for a `pk__in=` filter: one array parameter on PostgreSQL, not one per id.

    A tick that leases 10,000 hosts filters by 10,000 ids several times; as separate
    placeholders each statement costs tens of milliseconds just to build and parse.
    """
    ids = list(ids)
    if connection.vendor == "postgresql":
        return RawSQL("SELECT unnest(%s::bigint[])", (ids,))
    return ids


FINGERPRINT_VERSION = "1"


def lab_fingerprint(*, now: datetime) -> str | None:
    """Digest everything the plan depends on, in one query; None where it cannot be computed.

    Two equal digests mean the planner would get the same input, so the tick can keep the
    previous plan. Rows are summed as order-free hashes of their id and `xmin` (the id of the
    transaction that last wrote the row), so ANY write to a queued job, a host, a label or a
    suite with queued jobs changes the digest, whichever code path made it; no service has to
    remember to bump a version. Workers are the exception: runners heartbeat them every few
    seconds, so they count by content (paused, and online at this tick's cutoff, which also
    catches a worker going offline with no write at all). Active leases count by content too,
    because heartbeats rewrite them; their expiry is handled before the digest is taken.
    A write can at worst make an unneeded plan (e.g. a no-op save), never hide a change.
    """
    if connection.vendor != "postgresql":
        return None

    def digest(source: str, value: str, where: str = "TRUE") -> str:
        # count and sum: a multiset hash that needs no ORDER BY over 100,000 rows.
        return f"(SELECT count(*) || ':' || coalesce(sum({value}), 0) FROM {source} WHERE {where})"

    by_write = "hashint8extended(t.id, t.xmin::text::bigint)"
    job, lease = Job._meta.db_table, Lease._meta.db_table
    parts = [
        digest(f"{job} t", by_write, "t.status = 'queued'"),
        digest(f"{Host._meta.db_table} t", by_write),
        digest(
            f"{Host.labels.through._meta.db_table} t", "hashint8extended(t.host_id, t.label_id)"
        ),
        digest(f"{Label._meta.db_table} t", by_write),
        digest(
            f"{Suite._meta.db_table} t",
            by_write,
            f"t.id IN (SELECT suite_id FROM {job} WHERE status = 'queued')",
        ),
        # The job holding a host gives its priority to the wait reasons ("running priority")
        # and its suite to the suite's count of hosts held.
        digest(
            f"{lease} l LEFT JOIN {job} j ON j.id = l.job_id",
            "hashint8extended(l.id, hashint8extended(l.host_id, hashint8extended("
            "coalesce(l.job_id, 0), coalesce(j.suite_id, 0) * 128 + coalesce(j.priority, 0))))",
            "l.released_at IS NULL",
        ),
        digest(
            f"{Worker._meta.db_table} t",
            "hashint8extended(t.id, t.paused::int * 2 + "
            "(t.last_seen IS NOT NULL AND t.last_seen >= %s)::int)",
        ),
    ]
    sql = "SELECT md5(concat_ws('|', " + ", ".join(parts) + "))"
    with connection.cursor() as cursor:
        cursor.execute(sql, [online_cutoff(now)])
        (value,) = cursor.fetchone()
    return f"{FINGERPRINT_VERSION}:{value}"


# --- wait reasons ---------------------------------------------------------------------------


def latest_tick() -> SchedulerTick | None:
    return SchedulerTick.objects.order_by("-id").first()


def _job_state(job: Job) -> planner.JobState:
    return planner.JobState(
        id=job.pk,
        name=job.name,
        suite_id=job.suite_id,
        priority=job.priority,
        submitted_at=job.submitted_at,
        labels=frozenset(job.labels),
        pinned_host_id=job.host_id,
    )


def wait_reasons_for(jobs: list[Job], tick: SchedulerTick | None = None) -> dict[int, dict]:
    """Resolve each queued job's wait reason from the latest tick's per-class record."""
    tick = tick if tick is not None else latest_tick()
    table = tick.wait_reasons if tick else {}
    out: dict[int, dict] = {}
    for job in jobs:
        if job.status != JobStatus.QUEUED:
            continue
        reason = None
        if tick is not None and job.created_at <= tick.started_at:
            reason = table.get(planner.class_key(_job_state(job)))
        out[job.pk] = reason or {
            "code": "pending_tick",
            "message": "Waiting for the next scheduler tick.",
            "details": {},
        }
    return out


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


def suite_hosts_held(suite_ids: list[int]) -> dict[int, int]:
    return Counter(
        Lease.objects.active()
        .filter(job__suite_id__in=suite_ids)
        .values_list("job__suite_id", flat=True)
    )


# --- reads for the REST API -----------------------------------------------------------------


def _count_of(queryset: QuerySet) -> Coalesce:
    """A correlated subquery counting the rows of `queryset` (already filtered by OuterRef)."""
    counted = queryset.order_by().values("worker_id").annotate(n=Count("pk")).values("n")
    return Coalesce(Subquery(counted, output_field=IntegerField()), 0)


def workers_with_host_counts(*, now: datetime | None = None) -> QuerySet[Worker]:
    """Workers annotated with hosts_total, hosts_leased and hosts_schedulable, in one query."""
    now = now or timezone.now()
    mine = Host.objects.filter(worker=OuterRef("pk"))
    return Worker.objects.select_related("runner", "paused_by").annotate(
        hosts_total=_count_of(mine),
        hosts_leased=_count_of(mine.leased()),
        hosts_schedulable=_count_of(mine.schedulable(now)),
    )


def active_lease_prefetch(to_attr: str = "active_leases") -> Prefetch:
    """Prefetch each row's active lease (a list of at most one) with its host and job."""
    return Prefetch(
        "leases",
        queryset=Lease.objects.active().select_related("host", "job", "holder"),
        to_attr=to_attr,
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


def runner_leases(*, worker: Worker) -> QuerySet[Lease]:
    """A worker's active job leases, with what its runner needs to run each job."""
    return (
        Lease.objects.active()
        .filter(job__isnull=False, host__worker=worker)
        .select_related("host", "job", "job__suite")
        .prefetch_related("host__labels")
        .order_by("acquired_at", "id")
    )


# --- reads for the web UI -------------------------------------------------------------------


def dashboard_counts(*, now: datetime) -> dict[str, int]:
    """Count hosts, workers, jobs and leases for the dashboard in a fixed number of queries."""
    hosts = Host.objects.with_leased().aggregate(
        hosts_total=Count("id"),
        hosts_locked=Count("id", filter=Q(locked=True)),
        hosts_leased=Count("id", filter=Q(is_leased=True)),
        **{f"hosts_{status}": Count("id", filter=Q(status=status)) for status in HostStatus.values},
    )
    workers = Worker.objects.aggregate(
        workers_total=Count("id"),
        workers_paused=Count("id", filter=Q(paused=True)),
        workers_online=Count("id", filter=Q(last_seen__gte=online_cutoff(now))),
    )
    jobs = {
        f"jobs_{row['status']}": row["n"]
        for row in Job.objects.values("status").annotate(n=Count("id")).order_by()
    }
    counts: dict[str, int] = {**hosts, **workers}
    for status in JobStatus.values:
        counts[f"jobs_{status}"] = jobs.get(f"jobs_{status}", 0)
    counts["hosts_free"] = Host.objects.schedulable(now).count()
    counts["reservations"] = Lease.objects.active().filter(job__isnull=True).count()
    counts["workers_offline"] = counts["workers_total"] - counts["workers_online"]
    counts["jobs_active"] = counts["jobs_leased"] + counts["jobs_running"]
    return counts


def recent_ticks(*, limit: int = 120) -> list[SchedulerTick]:
    """The latest ticks, oldest first, without their (large) wait-reason tables."""
    rows = list(SchedulerTick.objects.defer("wait_reasons").order_by("-id")[:limit])
    rows.reverse()
    return rows


def suites_in_progress(*, limit: int = 10) -> tuple[list[Suite], int]:
    """Unfinished suites (priority first, then age) and how many there are in all."""
    live = Job.objects.unfinished().values("suite_id")
    qs = Suite.objects.filter(aborted_at__isnull=True, pk__in=live).select_related("owner")
    return list(qs.order_by("-priority", "created_at", "id")[:limit]), qs.count()


@dataclass(frozen=True)
class QueueOrder:
    """Queued job ids in consideration order, and which of them the quota phase takes first."""

    ids: list[int]
    quota_ids: frozenset[int]


# One consideration order per process, keyed by the digest of what it depends on: the queue
# pages read it on every request, and recomputing it costs O(queued jobs) (about 0.1 s at
# 10,000 queued, over 1 s at 100,000), while the digest is one SQL pass with no Python per row.
_queue_order_cache: tuple[str, QueueOrder] | None = None


def queue_order_digest() -> str | None:
    """Digest the inputs of consideration_order by content, in one query; None off PostgreSQL.

    By content, not `xmin`: a transaction that rewrites a job twice keeps its xmin, and the
    order depends on few columns (labels do not change it). Queued jobs by (id, suite,
    priority, submission time); their suites by (id, priority, created_at, min/max_duts);
    active leases of suite jobs by (id, suite), which give each suite's hosts held.
    """
    if connection.vendor != "postgresql":
        return None
    job, lease, suite = Job._meta.db_table, Lease._meta.db_table, Suite._meta.db_table

    def digest(source: str, value: str, where: str) -> str:
        return f"(SELECT count(*) || ':' || coalesce(sum({value}), 0) FROM {source} WHERE {where})"

    def us(column: str) -> str:
        return f"(extract(epoch FROM {column}) * 1000000)::bigint"

    parts = [
        digest(
            f"{job} t",
            f"hashint8extended(t.id, hashint8extended({us('t.submitted_at')}, "
            "coalesce(t.suite_id, 0)::bigint * 128 + t.priority))",
            "t.status = 'queued'",
        ),
        digest(
            f"{suite} t",
            f"hashint8extended(t.id, hashint8extended({us('t.created_at')}, "
            "(t.priority::bigint * 65536 + t.min_duts) * 65536 + coalesce(t.max_duts, 65535)))",
            f"t.id IN (SELECT suite_id FROM {job} WHERE status = 'queued')",
        ),
        digest(
            f"{lease} l JOIN {job} j ON j.id = l.job_id",
            "hashint8extended(l.id, j.suite_id)",
            "l.released_at IS NULL AND j.suite_id IS NOT NULL",
        ),
    ]
    with connection.cursor() as cursor:
        cursor.execute("SELECT md5(concat_ws('|', " + ", ".join(parts) + "))")
        (value,) = cursor.fetchone()
    return value


def queue_order_ids() -> QueueOrder:
    """Every queued job id in consideration order; recomputed only when its inputs changed."""
    global _queue_order_cache
    key = queue_order_digest()
    cached = _queue_order_cache
    if key is not None and cached is not None and cached[0] == key:
        return cached[1]
    # Digest first, then the rows: the order cached under a digest is never older than it.
    order = _queue_order_ids_uncached()
    if key is not None:
        _queue_order_cache = (key, order)
    return order


def _queue_order_ids_uncached() -> QueueOrder:
    """Every queued job id in consideration order, read lean (no model instances)."""
    states = _queued_job_states()
    suite_ids = {s.suite_id for s in states if s.suite_id is not None}
    suites = _suite_states(suite_ids, held=suite_hosts_held(list(suite_ids)) if suite_ids else {})
    return QueueOrder(
        ids=planner.consideration_order(jobs=states, suites=suites),
        quota_ids=frozenset(planner.quota_candidates(jobs=states, suites=suites)),
    )


def active_leases_by_job(job_ids: list[int]) -> dict[int, Lease]:
    """The active lease of each of the given jobs, with its host, in one query."""
    leases = Lease.objects.active().filter(job_id__in=job_ids).select_related("host")
    return {lease.job_id: lease for lease in leases}


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
