"""The tick's snapshot: hosts, queued jobs and suites read as the planner's plain values."""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from django.db import connection
from django.db.models import OuterRef, QuerySet, Subquery
from django.db.models.expressions import RawSQL

from hosts.models import Host, Worker
from hosts.querysets import online_cutoff
from jobs.choices import JobKind, JobStatus
from jobs.models import Job, Lease, OwnerUsage, Suite
from jobs.scheduling import planner
from jobs.scheduling.planner.types import RoleNeed
from schedsite.prepared import Ids, PreparedQuery


@dataclass
class Snapshot:
    """Everything the planner needs, read with a fixed number of queries."""

    hosts: list[planner.HostState]
    jobs: list[planner.JobState]
    suites: list[planner.SuiteState]
    suite_names: dict[int, str]
    leased_count: int
    policy: planner.Policy = planner.DEFAULT_POLICY
    now: datetime | None = None
    workers: dict[str, planner.WorkerLoad] = field(default_factory=dict)  # with a capacity
    usage: dict[int, float] = field(default_factory=dict)  # owner -> host-seconds (fair share)
    hosts_by_id: dict[int, planner.HostState] = field(default_factory=dict)
    jobs_by_id: dict[int, planner.JobState] = field(default_factory=dict)
    # The jobs as planner.group_jobs groups them, where the reader keeps them (planner.plan).
    groups: dict[planner.JobGroupKey, list[planner.JobState]] | None = None
    host_index: planner.HostIndex | None = None  # the hosts as planner.HostIndex counts them
    hosts_by_status: Counter[str] | None = None  # every host, counted by status
    # When the longest-waiting job of `jobs` was submitted, where the reader keeps it.
    oldest_submitted: datetime | None = None


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


# Every tick that plans reads the suites of the queued jobs, a few hundred: compiled once.
_SUITE_ROWS = PreparedQuery(
    lambda ids: Suite.objects.filter(pk__in_array=ids).values_list(
        "id", "name", "priority", "created_at", "min_duts", "max_duts", "build"
    ),
    Ids,
)


def suite_states(suite_ids: Iterable[int], *, held: Mapping[int, int]) -> list[planner.SuiteState]:
    """Read the given suites as planner.SuiteState, with the hosts each holds."""
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
        for sid, name, prio, created, min_duts, max_duts, build in _SUITE_ROWS.all(
            frozenset(suite_ids)
        )
    ]


def job_columns(
    queued: QuerySet[Job], *, sized: bool, with_not_before: bool = False
) -> tuple[
    QuerySet[Job], list[str], Callable[[object], datetime], Callable[[object], float | None]
]:
    """The columns a JobState is read from, and how to turn the raw values into its fields.

    On PostgreSQL, parsing 100,000 timestamptz values costs more than the rest of the snapshot:
    submission times are read as microseconds since the epoch (exact, unlike a float) and one
    datetime is built per distinct value, since the jobs of a suite share its created_at.
    Estimates are read as seconds for the same reason.
    """
    fields = ["id", "name", "suite_id", "priority", "label_key", "host_id", "owner_id"]
    if connection.vendor != "postgresql":
        fields += ["roles", "together_by"]
        fields.append("submitted_at")
        if sized:
            fields.append("estimated_duration")
        if with_not_before:
            fields.append("not_before")
        fields.append("build")  # a standalone job's own (docs/scheduling.md#provisioning)
        return (queued, fields, *job_converters())
    table = Job._meta.db_table
    # A multi-host job's roles as JSON text, parsed once per distinct text by the reader; a
    # one-host job's empty list as NULL, parsed not at all.
    roles = RawSQL(f"""NULLIF("{table}"."roles"::text, '[]')""", ())
    epoch_us = RawSQL(f'(EXTRACT(EPOCH FROM "{table}"."submitted_at") * 1000000)::bigint', ())
    queued = queued.annotate(roles_text=roles, submitted_us=epoch_us)
    fields += ["roles_text", "together_by", "submitted_us"]
    if sized:
        estimate = RawSQL(f'EXTRACT(EPOCH FROM "{table}"."estimated_duration")::float', ())
        queued = queued.annotate(estimate_s=estimate)
        fields.append("estimate_s")
    if with_not_before:
        not_before = RawSQL(f'(EXTRACT(EPOCH FROM "{table}"."not_before") * 1000000)::bigint', ())
        queued = queued.annotate(not_before_us=not_before)
        fields.append("not_before_us")
    fields.append("build")  # a standalone job's own (docs/scheduling.md#provisioning)
    return (queued, fields, *job_converters())


def job_converters() -> tuple[Callable[[object], datetime], Callable[[object], float | None]]:
    """How `job_columns`'s raw submission (or not-before) time and estimate become a datetime
    and seconds, on this database."""
    if connection.vendor != "postgresql":
        return lambda at: at, lambda d: d.total_seconds() if d else None  # type: ignore[attr-defined,return-value]
    return (
        lambda us: _EPOCH + timedelta(microseconds=us),  # type: ignore[arg-type]
        lambda value: value,  # type: ignore[return-value]
    )


RUN_HISTORY = 20  # finished runs a job name's median run time is taken over
FINISHED_RUN_STATUSES = (JobStatus.PASSED, JobStatus.FAILED)


def run_time_medians(names: Iterable[str]) -> dict[str, float]:
    """Median seconds of the last RUN_HISTORY finished (passed or failed) runs, per job name."""
    names = sorted(names)
    if not names:
        return {}
    finished = Job.objects.filter(
        status__in=FINISHED_RUN_STATUSES, started_at__isnull=False, finished_at__isnull=False
    )
    runs: dict[str, list[float]] = {}
    if connection.vendor == "postgresql":
        table = Job._meta.db_table
        sql = (
            "SELECT n.name, r.seconds FROM unnest(%s::text[]) AS n(name) CROSS JOIN LATERAL ("  # noqa: S608 — the table from the model, values as parameters
            "SELECT EXTRACT(EPOCH FROM j.finished_at - j.started_at)::float AS seconds "
            f"FROM {table} j WHERE j.name = n.name AND j.status IN ('passed', 'failed') "
            "AND j.started_at IS NOT NULL AND j.finished_at IS NOT NULL "
            "ORDER BY j.finished_at DESC LIMIT %s) r"
        )
        with connection.cursor() as cursor:
            cursor.execute(sql, [names, RUN_HISTORY])
            for name, seconds in cursor.fetchall():
                runs.setdefault(name, []).append(seconds)
    else:
        for name, started, ended in (
            finished.filter(name__in=names)
            .order_by("name", "-finished_at")
            .values_list("name", "started_at", "finished_at")
        ):
            if len(runs.setdefault(name, [])) < RUN_HISTORY:
                runs[name].append((ended - started).total_seconds())
    return {name: statistics.median(values) for name, values in runs.items() if values}


def owner_usage(*, now: datetime, half_life_hours: int) -> dict[int, float]:
    """Host-seconds each owner's test jobs held, halved every `half_life_hours`, as of now.

    What ended is kept per owner by a trigger (jobs.models.OwnerUsage) and decayed here to now;
    what runs now counts from its lease's start, undecayed. Two queries whatever the history.
    Off PostgreSQL (no trigger) only what runs now counts.
    """
    half_life = half_life_hours * 3600.0
    usage: dict[int, float] = {}
    for owner, seconds, at in OwnerUsage.objects.values_list("owner_id", "host_seconds", "at"):
        usage[owner] = seconds * 0.5 ** (max((now - at).total_seconds(), 0.0) / half_life)
    running = Lease.objects.active().filter(job__kind=JobKind.TEST, job__owner__isnull=False)
    for owner, acquired in running.values_list("job__owner_id", "acquired_at"):
        usage[owner] = usage.get(owner, 0.0) + max((now - acquired).total_seconds(), 0.0)
    return usage


def hosts_last_used(ids: Iterable[int] | None = None) -> dict[int, datetime]:
    """When each host's (or these hosts') last lease ended, for `host_choice: spread`: one
    query, one probe of the index `lease_host_last_released` per host, whatever the lease
    history's length."""
    last = (
        Lease.objects.released()
        .filter(host=OuterRef("pk"))
        .order_by("-released_at")
        .values("released_at")[:1]
    )
    hosts = Host.objects.order_by() if ids is None else Host.objects.filter(pk__in_array=ids)
    rows = hosts.annotate(last=Subquery(last)).values_list("pk", "last")
    return {host_id: at for host_id, at in rows if at is not None}


_FAILED_ROWS = PreparedQuery(
    lambda: Lease.objects.filter(host_failed=True, job__status=JobStatus.QUEUED).values_list(
        "job_id", "host_id"
    )
)


def failed_hosts_of_queued_jobs() -> dict[int, frozenset[int]]:
    """The hosts each queued (retried) job failed on before, by job id (read every tick)."""
    failed: dict[int, set[int]] = {}
    for job_id, host_id in _FAILED_ROWS.all():
        failed.setdefault(job_id, set()).add(host_id)
    return {job_id: frozenset(hosts) for job_id, hosts in failed.items()}


FINGERPRINT_VERSION = "4"
# Written by the triggers of jobs/migrations/0004_queue_indexes_and_change_log.py.
LAB_CHANGE_TABLE = "scheduler_lab_change"


def written_since_last_take(tables: Iterable[str]) -> bool:
    """Whether a statement wrote one of these logged tables since the latest tick took the
    change log (`lab_changes`): what that tick counted of them may be out of date. True where
    there is no change log (not PostgreSQL)."""
    return bool(tables_written_since_last_take(tables))


def tables_written_since_last_take(tables: Iterable[str]) -> frozenset[str]:
    """Which of these logged tables a statement wrote since the latest tick took the change
    log, in one read of the log's untaken rows; all of them where there is no change log (not
    PostgreSQL)."""
    tables = sorted(set(tables))
    if connection.vendor != "postgresql":
        return frozenset(tables)
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT source FROM {LAB_CHANGE_TABLE} "  # noqa: S608 - a constant name
            "WHERE taken IS NULL AND source = ANY(%s) GROUP BY source",
            [tables],
        )
        return frozenset(source for (source,) in cursor.fetchall())


# Taken log rows are kept this many takes (about one a tick) for the scheduler processes whose
# lab is older; one further behind reads the lab whole.
LOG_KEPT_TAKES = 1000


@dataclass(frozen=True)
class LabChanges:
    """What the tick knows, without reading the queue, about whether its input changed."""

    written: bool  # a statement wrote what the plan reads since the last tick looked
    fingerprint: str  # what changes with no write at all: workers going offline, backoffs ending
    take: int = 0  # this take's number: the log rows it took are stamped with it
    # Per logged table, the rows named by the statements taken now and, for a lab as of an
    # earlier take (`since`), by those other ticks took since (host ids for a host's labels and
    # leases); None where one named none (a TRUNCATE, a label, a suite: re-read it whole).
    changed: Mapping[str, frozenset[int] | None] = field(default_factory=dict)

    def then(self, later: LabChanges) -> LabChanges:
        """These changes and those taken `later` in the same tick, with this fingerprint."""
        changed = dict(self.changed)
        for source, rows in later.changed.items():
            before = changed.get(source, frozenset())
            changed[source] = None if rows is None or before is None else before | rows
        return LabChanges(
            written=self.written or later.written,
            fingerprint=self.fingerprint,
            take=max(self.take, later.take),
            changed=changed,
        )


def lab_changes(*, now: datetime, since: int | None = None) -> LabChanges | None:
    """Whether the planner's input may have changed since the last tick; None if unknown here.

    Triggers log every statement that writes a host, a label, a suite, a job while or when it
    is queued (or the priority, suite and estimate of one holding a host), and a lease taken,
    moved or released: whichever code path made it, no service has to remember to bump a
    version.
    The tick takes the log's new rows with one UPDATE that stamps them with its take number:
    each row is either committed before that statement (taken now, and its write is visible to
    the snapshot read after it) or committed later (left for the next tick, which plans again).
    So a write can at worst make an unneeded plan, never hide a change. Heartbeats write none of
    these. Each row names the rows its statement changed, so that the tick re-reads only those
    (labstate.LabState); `since`, the take a process's lab is as of, adds the rows other ticks
    took after it. Rows taken LOG_KEPT_TAKES takes ago are dropped.

    Two things change with no write: a worker going offline (runners heartbeat their worker
    every few seconds, so workers are compared by content: paused, online at this tick's
    cutoff, and their capacity, which a heartbeat may report changed; a lab has hundreds),
    and a retry's backoff ending (the queued jobs still waiting one are counted through a
    small partial index).
    """
    if connection.vendor != "postgresql":
        return None
    job = Job._meta.db_table
    log = LAB_CHANGE_TABLE
    # One statement: every part sees the log as it was before it, so `seen` holds only rows
    # earlier ticks took and `taken` only those no tick had.
    sql = (
        "WITH take AS (SELECT nextval('scheduler_lab_take') AS n), "
        f"taken AS (UPDATE {log} SET taken = (SELECT n FROM take) WHERE taken IS NULL "
        "RETURNING source, ids), "
        f"seen AS (SELECT source, ids FROM {log} WHERE taken > %s), "
        f"dropped AS (DELETE FROM {log} WHERE taken <= (SELECT n FROM take) - %s), "
        "rows AS (SELECT source, ids, true AS new FROM taken "
        "UNION ALL SELECT source, ids, false FROM seen), "
        "by_source AS (SELECT source, bool_or(new) AS new, bool_or(ids IS NULL) AS whole, "
        "array_agg(DISTINCT x) FILTER (WHERE x IS NOT NULL) AS named "
        "FROM rows LEFT JOIN LATERAL unnest(rows.ids) AS x ON true GROUP BY source) "
        "SELECT b.source, b.new, b.whole, b.named, f.digest, (SELECT n FROM take) "
        "FROM (SELECT md5(concat_ws('|', "
        f"(SELECT count(*) FROM {job} WHERE status = 'queued' AND not_before > %s), "
        "(SELECT count(*) || ':' || coalesce(sum(hashint8extended(t.id, t.paused::int * 2 + "
        "(t.last_seen IS NOT NULL AND t.last_seen >= %s)::int + 4 * hashtext("
        "coalesce(t.max_jobs, -1) || '/' || coalesce(t.runner_concurrency, -1))::bigint)), 0) "
        f"FROM {Worker._meta.db_table} t))) AS digest) f LEFT JOIN by_source b ON true"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [since, LOG_KEPT_TAKES, now, online_cutoff(now)])
        rows = cursor.fetchall()
    changed = {
        source: None if whole else frozenset(named or ())
        for source, _new, whole, named, _digest, _take in rows
        if source is not None
    }
    return LabChanges(
        written=any(new for _source, new, *_rest in rows),
        fingerprint=f"{FINGERPRINT_VERSION}:{rows[0][4]}",
        take=rows[0][5],
        changed=changed,
    )


def role_needs(roles: Iterable[Mapping], labels: frozenset[str]) -> tuple[RoleNeed, ...]:
    """A multi-host job's roles (Job.roles, normalized at submission) as the planner's
    RoleNeeds: each role's labels with the job's own `labels`."""
    return tuple(
        RoleNeed(
            name=role["name"],
            labels=labels | frozenset(role.get("labels") or ()),
            count=int(role.get("count", 1)),
            max=int(role.get("max") or role.get("count", 1)),
        )
        for role in roles
    )


def job_state(job: Job) -> planner.JobState:
    """Read one job as a planner.JobState, to find its wait-reason class (`planner.class_key`)."""
    return planner.JobState(
        id=job.pk,
        name=job.name,
        suite_id=job.suite_id,
        priority=job.priority,
        submitted_at=job.submitted_at,
        labels=(labels := frozenset(job.labels)),
        pinned_host_id=job.host_id,
        roles=role_needs(job.roles or (), labels),
        together_by=job.together_by,
        build=job.build,
    )
