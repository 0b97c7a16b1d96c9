"""The scheduler tick: expire, snapshot, plan, and apply the plan under row locks."""

from __future__ import annotations

import functools
import gc
import logging
import os
import time
from collections import Counter
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta
from operator import attrgetter

from django.conf import settings
from django.db import IntegrityError, OperationalError, connection, transaction
from django.db.models import Exists, F, Q, QuerySet
from django.utils import timezone
from django_q.tasks import async_task

from hosts.audit import SCHEDULER
from hosts.choices import HostStatus
from hosts.models import Host
from jobs import selectors, transitions
from jobs.choices import JobKind
from jobs.models import IdempotencyKey, Job, SchedulerSettings, SchedulerTick, WaitReasonClass
from jobs.scheduling import labstate, planner, snapshot
from jobs.scheduling.expiry import (
    job_timeout_overdue,
    lease_expire_overdue,
    overdue_leases,
    timed_out_leases,
)
from jobs.scheduling.fanout import fanout_phase
from jobs.scheduling.maintenance import maintenance_phase, maintenance_work
from jobs.scheduling.preemption import preemption_phase
from jobs.scheduling.reservation_line import serve_line, waiting_line
from jobs.scheduling.triggers import TICK_LOCK_KEY
from jobs.transitions import Mover
from schedsite.model_fields import dumps_compact
from schedsite.pgarrays import server_bound_cursor, text_array
from schedsite.prepared import Ids, PreparedQuery

log = logging.getLogger("schedsite.scheduler")


@dataclass
class TickSummary:
    """What one tick did."""

    tick_id: int | None = None
    started_at: datetime | None = None
    duration_ms: float = 0.0
    plan_ms: float = 0.0
    jobs_considered: int = 0
    hosts_free: int = 0
    leases: list[dict] = field(default_factory=list)  # {"job", "suite", "host", "kind"}
    expired: int = 0
    timed_out: int = 0
    jobs_expired: int = 0  # queued jobs past their expires_after
    skipped_assignments: int = 0
    # Jobs stopped for higher ones (docs/scheduling.md#preemption): {"job", "host", "for"}
    preempted: list[dict] = field(default_factory=list)
    unchanged: bool = False  # nothing had changed since the previous tick: its plan stands
    # It refreshed the lab the previous tick read by the rows the change log named, instead of
    # reading it whole (jobs/scheduling/labstate.py).
    refreshed: bool = False

    def as_dict(self) -> dict:
        data = asdict(self)
        data["started_at"] = self.started_at.isoformat() if self.started_at else None
        return data


def fault_point(name: str) -> None:
    """Stop here forever when SCHEDSITE_FAULT_POINT names this point (fault-injection tests)."""
    # Like a failpoint: the reliability tests start a tick in a subprocess, wait for the file
    # that says it reached this point with all its writes made but not committed, and kill -9
    # it, proving that a tick killed mid-apply leaves nothing behind.
    if os.environ.get("SCHEDSITE_FAULT_POINT") != name:
        return
    marker = os.environ.get("SCHEDSITE_FAULT_FILE")
    if marker:
        with open(marker, "w", encoding="utf-8") as fh:
            fh.write(str(os.getpid()))
    while True:
        time.sleep(3600)


def _acquire_tick_lock() -> None:
    # One planner at a time across every process and cluster; released with the transaction.
    # On SQLite the IMMEDIATE transaction already holds the database's write lock.
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(%s)", [TICK_LOCK_KEY])


def scheduler_tick(*, now: datetime | None = None, trigger: str = "") -> TickSummary:
    """Expire overdue leases, plan, and lease free hosts to queued jobs in one transaction."""
    last_error: Exception | None = None
    for _attempt in range(3):
        try:
            with _collector_paused():
                summary = _tick_once(now=now, trigger=trigger)
        except (IntegrityError, OperationalError) as exc:
            # A write that raced the tick (a reservation, a deadlock victim): the whole tick
            # rolled back, so nothing is half-applied; plan again from a fresh snapshot.
            last_error = exc
            log.warning("tick rolled back and retried: %s", exc)
        else:
            _log_tick(summary, trigger=trigger)
            _refresh_statistics(summary)
            return summary
    assert last_error is not None
    raise last_error


@contextmanager
def _collector_paused() -> Iterator[None]:
    """Run without CPython's cyclic garbage collector, as it was before, after.

    A tick allocates enough to set off about 30 young-generation collections and a few older
    ones, and each walks every container still young: the plan's list of 100,000 queued jobs,
    the snapshot's lists and maps (docs/performance.md#the-collector-paused-during-a-tick).
    What a tick allocates is freed by reference counting; the few cycles it leaves (Django's)
    wait for the next collection.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


# A tick that makes this many leases changes the lease table enough to mislead the planner.
ANALYZE_AFTER_LEASES = 1000
ANALYZE_JOBS_FUNC = "jobs.tasks.analyze_jobs"


def _refresh_statistics(summary: TickSummary) -> None:
    """Re-analyse the lease and job tables after a tick that changed them wholesale."""
    # Right after a cold tick leases thousands of hosts, PostgreSQL still believes the lease
    # table is empty until autovacuum gets to it (about a minute), and picks plans that make
    # pages such as the workers list 100× slower meanwhile (docs/performance.md).
    if len(summary.leases) < ANALYZE_AFTER_LEASES or connection.vendor != "postgresql":
        return
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE jobs_lease")
    # The job table, ten times the size, takes about 0.15 s at 100,000 jobs, most of a cold
    # tick's margin: a cluster worker analyses it next instead.
    try:
        async_task(ANALYZE_JOBS_FUNC, task_name="analyze jobs", group="statistics")
    except Exception:  # autovacuum analyses it in time anyway; never fail the tick for it
        log.exception("could not enqueue the job table's ANALYZE")


def _log_tick(summary: TickSummary, *, trigger: str) -> None:
    # One line per tick, idle and unchanged ones included ("is the scheduler alive?"); with
    # LOG_FORMAT=json the extras become fields a log shipper can index.
    leased = len(summary.leases)
    # jobs_considered counts the test jobs the planner saw; the maintenance phase's verify and
    # repair leases are not among them.
    # A multi-host job's several leases are one job.
    tests_leased = len(
        {lease["job_id"] for lease in summary.leases if lease["kind"] == JobKind.TEST}
    )
    queued = summary.jobs_considered - tests_leased
    log.info(
        "tick %s: %d leased, %d expired, %d timed out, %d queued, %.1f ms (plan %.1f ms)",
        summary.tick_id,
        leased,
        summary.expired,
        summary.timed_out,
        queued,
        summary.duration_ms,
        summary.plan_ms,
        extra={
            "tick_id": summary.tick_id,
            "leased": leased,
            "expired": summary.expired,
            "timed_out": summary.timed_out,
            "queued": queued,
            "jobs_considered": summary.jobs_considered,
            "hosts_free": summary.hosts_free,
            "unchanged": summary.unchanged,
            "duration_ms": round(summary.duration_ms, 1),
            "plan_ms": round(summary.plan_ms, 1),
            "trigger": trigger,
        },
    )


_SUBMITTED = attrgetter("submitted_at")


def _tick_once(*, now: datetime | None, trigger: str) -> TickSummary:
    start = time.perf_counter()
    # This process's lab from its last tick; a tick that rolls back does not give it back.
    state = labstate.take()
    written = _take_written()  # likewise the wait-reason table as its last tick wrote it
    with transaction.atomic():
        _acquire_tick_lock()
        now = now or timezone.now()
        summary = TickSummary(started_at=now)
        due = _due_work(now)
        summary.expired = lease_expire_overdue(now=now) if due["overdue"] else 0
        summary.timed_out = job_timeout_overdue(now=now) if due["timed_out"] else 0
        # Expiry and timeouts send hosts to be verified: maintenance work found after the ask.
        maintenance = summary.expired or summary.timed_out or due["maintenance"]
        summary.jobs_expired, summary.leases = maintenance_phase(now=now, due=bool(maintenance))
        if due["reservations"]:
            # Testers waiting in line for a host, before the plan: the plan then sees the hosts
            # they took as reserved (docs/api.md#reservations).
            summary.leases += serve_line(now=now)
        # Taken before the snapshot, so the plan sees at least every change the log held: a
        # write landing in between only makes the next tick plan again, never skip wrongly.
        changes = snapshot.lab_changes(now=now, since=state.take if state else None)
        fingerprint = changes.fingerprint if changes is not None else ""
        if changes is None or changes.written:
            # It reads hosts, their labels and fan-out jobs, all in the change log: with nothing
            # written since the last tick it would find nothing to do.
            fanout = fanout_phase(now=now)
            if changes is not None and (fanout.added or fanout.skipped):
                changes = changes.then(snapshot.lab_changes(now=now))  # the jobs it wrote
        elif _tick_unchanged(summary, fingerprint=fingerprint, trigger=trigger, start=start):
            if state is not None:  # still as of its take: what other ticks took is yet to read
                transaction.on_commit(functools.partial(labstate.keep, state, take=state.take))
            if written is not None:  # the table is as the last planning tick left it
                transaction.on_commit(functools.partial(_keep_written, written))
            return summary
        policy = SchedulerSettings.load().policy()
        if changes is None:  # no change log (SQLite): every tick reads the lab whole
            snap = labstate.scheduler_snapshot(now=now, policy=policy)
        else:
            state, summary.refreshed = labstate.for_tick(state, changes, now=now, policy=policy)
            snap = state.snapshot(now=now, policy=policy)
        plan_start = time.perf_counter()
        result = planner.plan(
            hosts=snap.hosts,
            jobs=snap.jobs,
            suites=snap.suites,
            policy=policy,
            now=now,
            workers=snap.workers,
            usage=snap.usage,
            groups=snap.groups,
            host_index=snap.host_index,
            hosts_by_id=snap.hosts_by_id,
        )
        summary.plan_ms = (time.perf_counter() - plan_start) * 1000
        summary.jobs_considered = len(snap.jobs)
        summary.hosts_free = result.hosts_free
        made = _apply(result.assignments, snap=snap, now=now)
        summary.skipped_assignments = len(result.assignments) - len(made)
        summary.leases += made
        summary.preempted = preemption_phase(
            snap=snap,
            plan=result,
            leased_now={a.host_id for a in result.assignments},
            now=now,
        )
        summary.duration_ms = (time.perf_counter() - start) * 1000
        queued_after = len(snap.jobs) - len({lease["job_id"] for lease in made})
        oldest = snap.oldest_submitted or min(
            map(attrgetter("submitted_at"), snap.jobs), default=None
        )
        # The snapshot's schedulable hosts (one rule with Host.objects.schedulable) less those
        # the plan just leased: the lab as this tick leaves it.
        capacity = _lab_capacity(
            schedulable=summary.hosts_free - len(made), by_status=snap.hosts_by_status
        )
        _record(
            summary,
            trigger=trigger,
            fingerprint=fingerprint,
            plan_ms=summary.plan_ms,
            hosts_total=len(snap.hosts),
            hosts_leased=snap.leased_count + len(made),
            leases_made=len(summary.leases),
            leases_expired=summary.expired,
            jobs_timed_out=summary.timed_out,
            queued_after=queued_after,
            oldest_wait_s=(now - oldest).total_seconds() if oldest and queued_after else 0.0,
            holds=_holds(result),
            **capacity,
        )
        assert summary.tick_id is not None
        _write_reasons(result.class_reasons, tick_id=summary.tick_id, at=now, written=written)
        if changes is not None:
            # Kept for the next tick only if this one commits: a rolled-back tick gave its log
            # rows back, and the state it refreshed from them is wrong.
            transaction.on_commit(functools.partial(labstate.keep, state, take=changes.take))
        fault_point("tick.before_commit")
    return summary


def _due_query(now: datetime) -> QuerySet:
    """One row: whether any lease is overdue, any job past its timeout, and each kind of
    maintenance work (jobs.scheduling.maintenance.maintenance_work). Uncorrelated EXISTS on
    any one host row."""
    work = {
        "overdue": overdue_leases(now),
        "timed_out": timed_out_leases(now),
        "reservations": waiting_line(),
        **maintenance_work(now),
    }
    annotated = Host.objects.annotate(**{name: Exists(qs) for name, qs in work.items()})
    return annotated.values_list(*work).order_by("pk")[:1]


# Compiled once per process and setting (schedsite.prepared): compiling its eight subqueries
# cost more than running them, in a tick with nothing to do that takes 10 ms in all. The
# settings are those the SQL's shape or its distances from `now` depend on.
_DUE = PreparedQuery(
    _due_query,
    datetime,
    variant=lambda: (
        settings.WORKER_OFFLINE_TIMEOUT,
        settings.REPAIR_FAILED_RETRY_SECONDS,
        settings.REPAIR_FAILED_RETRY_MAX,
        settings.REPAIR_FAILED_DEMAND_SECONDS,
    ),
)


def _due_work(now: datetime) -> dict[str, bool]:
    """What the tick must do before it plans: expire leases, time out jobs, maintenance. One
    query; with no host at all, everything is looked at the long way."""
    row = _DUE.first(now)
    if row is None:
        return {"overdue": True, "timed_out": True, "reservations": True, "maintenance": True}
    overdue, timed_out, reservations, *maintenance = row  # type: ignore[misc]
    return {
        "overdue": overdue,
        "timed_out": timed_out,
        "reservations": reservations,
        "maintenance": any(maintenance),
    }


def _tick_unchanged(summary: TickSummary, *, fingerprint: str, trigger: str, start: float) -> bool:
    """Record a tick that keeps the previous plan if the lab is unchanged; True if it did."""
    if summary.expired or summary.timed_out or summary.jobs_expired or summary.leases:
        return False
    previous = SchedulerTick.objects.order_by("-id").first()
    if previous is None or previous.fingerprint != fingerprint:
        return False
    if previous.hosts_schedulable is None:
        return False  # recorded before ticks counted the lab's capacity: nothing to copy
    if previous.holds and not planner.is_plain(SchedulerSettings.load().policy()):
        # Under aging, dynsize or fair share the order moves with time alone: a job may come
        # to rank above the holder and take a held host with nothing written
        # (docs/scheduling.md#holds-and-backfill). Plan again while hosts are held.
        return False
    # The planner is a pure function of what the digest covers, so it would return the same
    # plan, and that plan leased nothing (a lease changes the digest). The previous tick's
    # counts therefore still describe the lab: copy them. The wait-reason table, as the last
    # tick that planned left it, stands unchanged.
    now = summary.started_at
    assert now is not None
    waited = 0.0
    if previous.queued_after:
        waited = previous.oldest_wait_s + (now - previous.started_at).total_seconds()
    summary.unchanged = True
    summary.jobs_considered = previous.jobs_considered
    summary.hosts_free = previous.hosts_free
    # The capacity depends only on what the digest covers (host rows, workers online, active
    # leases), so the previous tick's still holds.
    capacity = {name: getattr(previous, name) for name in CAPACITY_FIELDS}
    summary.duration_ms = (time.perf_counter() - start) * 1000
    _record(
        summary,
        trigger=trigger,
        fingerprint=fingerprint,
        hosts_total=previous.hosts_total,
        hosts_leased=previous.hosts_leased,
        queued_after=previous.queued_after,
        oldest_wait_s=waited,
        holds=previous.holds,  # the same plan holds the same hosts
        unchanged=True,
        **capacity,
    )
    return True


def _record(summary: TickSummary, *, trigger: str, fingerprint: str, **fields: object) -> None:
    """Write the tick's row, what the charts, the pages and the next tick read."""
    tick = SchedulerTick.objects.create(
        started_at=summary.started_at,
        duration_ms=summary.duration_ms,
        jobs_considered=summary.jobs_considered,
        hosts_free=summary.hosts_free,
        trigger=trigger[:50],
        fingerprint=fingerprint,
        **fields,
    )
    summary.tick_id = tick.pk
    _prune_ticks(tick.pk)


CAPACITY_FIELDS = ("hosts_schedulable", "hosts_in_maintenance", "hosts_repair_failed")


def _lab_capacity(*, schedulable: int, by_status: Counter[str] | None) -> dict[str, int]:
    """The tick row's capacity fields: from the hosts by status the lab kept, else one GROUP BY
    over the hosts whatever the lab's size."""
    if by_status is None:
        by_status = selectors.hosts_by_status()
    return {
        "hosts_schedulable": schedulable,
        "hosts_in_maintenance": sum(by_status[s] for s in selectors.MAINTENANCE_STATUSES),
        "hosts_repair_failed": by_status[HostStatus.REPAIR_FAILED],
    }


def _apply(
    assignments: Iterable[planner.Assignment], *, snap: snapshot.Snapshot, now: datetime
) -> list[dict]:
    """Create the planned leases, keeping only those still valid under row locks.

    A multi-host job gets all its planned hosts or none of them: if one of them is no longer
    schedulable at the re-check, the job keeps waiting and its other hosts stay free.
    """
    assignments = list(assignments)
    if not assignments:
        return []
    host_ids = frozenset(a.host_id for a in assignments)
    job_ids = frozenset(a.job_id for a in assignments)
    # The one lock order (docs/architecture.md#lock-order): jobs, then hosts, each in id order.
    # Locking first and re-reading in a new statement means any write that locked these rows
    # before us has committed and is visible now.
    _LOCK_JOBS.all(job_ids)
    _LOCK_HOSTS.all(host_ids)
    ok_hosts = set(_SCHEDULABLE_AMONG.all(host_ids, now, host_ids))
    ok_jobs = set(_QUEUED_AMONG.all(job_ids))
    lost = {a.job_id for a in assignments if a.host_id not in ok_hosts}  # all or nothing
    kept = [a for a in assignments if a.job_id in ok_jobs and a.job_id not in lost]
    if not kept:
        return []
    jobs = snap.jobs_by_id
    hosts = snap.hosts_by_id
    suites = snap.suite_names
    made: list[dict] = []
    messages: list[str] = []
    for a in kept:
        job, host = jobs[a.job_id], hosts[a.host_id]
        suite_name = suites.get(job.suite_id) if job.suite_id else None
        made.append(
            {
                "job": job.name,
                "job_id": job.id,
                "suite": suite_name,
                "host": host.hostname,
                "kind": JobKind.TEST,
                "role": a.role,
            }
        )
        messages.append(
            f"leased to job {job.name}"
            + (f" of suite {suite_name}" if suite_name else "")
            + f" (priority {job.priority})"
            + (f" as its {a.role} (slot {a.slot})" if a.role else "")
        )
    transitions.lease_jobs(
        [(a.host_id, a.job_id) for a in kept],
        mover=Mover.SCHEDULER,
        by=SCHEDULER,
        at=now,
        subjects=[lease["host"] for lease in made],
        messages=messages,
        roles=[a.role for a in kept],
        slots=[a.slot for a in kept],
        attempts=F("attempts") + 1,
        message="",
    )
    return made


# The re-check's four statements, compiled once per process (schedsite.prepared): building
# and compiling them cost more CPU than PostgreSQL spends running them on a hundred rows.
_LOCK_JOBS = PreparedQuery(
    lambda ids: (
        Job.objects.filter(pk__in_array=ids).select_for_update().order_by("pk").values_list("pk")
    ),
    Ids,
)
_LOCK_HOSTS = PreparedQuery(
    lambda ids: (
        Host.objects.filter(pk__in_array=ids).select_for_update().order_by("pk").values_list("pk")
    ),
    Ids,
)
_SCHEDULABLE_AMONG = PreparedQuery(
    lambda ids, now, among: (
        Host.objects.filter(pk__in_array=ids)
        .schedulable(now, among=among)
        .values_list("pk", flat=True)
    ),
    Ids,
    datetime,
    Ids,  # the same ids, for the lease lookup: each value is one parameter
    variant=lambda: settings.WORKER_OFFLINE_TIMEOUT,
)
_QUEUED_AMONG = PreparedQuery(
    lambda ids: Job.objects.filter(pk__in_array=ids).queued().values_list("pk", flat=True), Ids
)


def _holds(plan: planner.Plan) -> dict[str, int]:
    """The plan's held hosts as the tick row stores them: {"<host id>": job id}."""
    return {str(host): job for host, job in sorted(plan.holds.items())}


def _reason_row(reason: planner.WaitReason) -> dict:
    return {"code": reason.code, "message": reason.message, "details": dict(reason.details)}


# The wait-reason table as this process's last planning tick wrote it: that tick's id and
# start, and the reasons by class key. Taken by a tick and given back when it commits, as the
# kept lab is (labstate.take, labstate.keep).
Written = tuple[int, datetime, dict[str, planner.WaitReason]]
_written: Written | None = None


def _take_written() -> Written | None:
    global _written
    written, _written = _written, None
    return written


def _keep_written(written: Written) -> None:
    global _written
    _written = written


def _write_reasons(
    reasons: dict[str, planner.WaitReason],
    *,
    tick_id: int,
    at: datetime,
    written: Written | None,
) -> None:
    """Make the wait-reason table (WaitReasonClass) this plan's: write the classes whose reason
    changed since the table was last written, delete those no job waits in any more.

    The difference is taken from this process's copy of the table, which holds only while the
    tick that wrote it is the latest that planned; after a tick of another process, or with no
    copy (a start, a tick rolled back), the table is written whole.
    """
    if written is not None and _written_is_current(written, tick_id):
        before = written[2]
        # A reason the plan did not word again is the very object it wrote last time.
        changed = {
            key: r for key, r in reasons.items() if (b := before.get(key)) is not r and b != r
        }
        _store_reasons(changed, gone=[key for key in before if key not in reasons])
    else:
        _store_reasons(reasons, gone=None)
    transaction.on_commit(functools.partial(_keep_written, (tick_id, at, reasons)))


def _written_is_current(written: Written, tick_id: int) -> bool:
    """Whether the table is still as the tick `written` names left it: that tick is in the
    history, and every tick after it but before `tick_id` kept its plan and wrote nothing."""
    kept_id, kept_at, _reasons = written
    # The same id and start: a database emptied and refilled (tests) may reuse the id.
    return _PLANNED_SINCE.all(kept_id, tick_id, kept_id) == [(kept_id, kept_at)]


def _planned_since(first: int, before: int, kept: int) -> QuerySet:
    rows = SchedulerTick.objects.filter(pk__gte=first, pk__lt=before)
    rows = rows.filter(Q(pk=kept) | Q(unchanged=False)).order_by("pk")
    return rows.values_list("pk", "started_at")[:2]


_PLANNED_SINCE = PreparedQuery(_planned_since, int, int, int)


def _store_reasons(changed: dict[str, planner.WaitReason], *, gone: list[str] | None) -> None:
    """Upsert the changed classes' rows and delete the `gone` ones (None: every other row)."""
    postgres = connection.vendor == "postgresql"
    table = connection.ops.quote_name(WaitReasonClass._meta.db_table)
    if not postgres:
        rows = WaitReasonClass.objects
        (
            rows.exclude(key__in=list(changed)) if gone is None else rows.filter(key__in=gone)
        ).delete()
        rows.bulk_create(
            [WaitReasonClass(key=k, reason=_reason_row(r)) for k, r in changed.items()],
            update_conflicts=True,
            unique_fields=["key"],
            update_fields=["reason"],
        )
        return
    with connection.cursor() as cursor:
        if gone is None:
            cursor.execute(
                f"DELETE FROM {table} WHERE NOT key = ANY(%s::text[])",  # noqa: S608 - quoted
                [text_array(changed)],
            )
        elif gone:
            cursor.execute(
                f"DELETE FROM {table} WHERE key = ANY(%s::text[])",  # noqa: S608 - quoted
                [text_array(gone)],
            )
        if not changed:
            return
    # One statement with one parameter, a JSON object of the rows (key -> reason), encoded in
    # one pass of orjson (dumps_compact): a cold tick writes a few thousand rows, a tick after 100
    # changes about a thousand (~450 KB), sent apart from the statement. A `json` value's text
    # is kept as sent, so each row stores exactly its reason's encoding.
    with server_bound_cursor(connection) as cursor:
        cursor.execute(
            f"INSERT INTO {table} (key, reason) "  # noqa: S608 - the model's table, quoted
            "SELECT key, value::text FROM json_each(%s::json) "
            "ON CONFLICT (key) DO UPDATE SET reason = EXCLUDED.reason",
            [dumps_compact({key: _reason_row(r) for key, r in changed.items()})],
        )


def _prune_ticks(latest_id: int) -> None:
    if latest_id % 50 == 0:  # prune now and then, not on every tick
        tick_history_prune(latest_id=latest_id)
        idempotency_keys_purge()


def tick_history_prune(*, latest_id: int) -> None:
    """Bound the tick history to the last TICK_HISTORY ticks."""
    keep = settings.TICK_HISTORY
    cutoff = SchedulerTick.objects.order_by("-id").values_list("id", flat=True)[keep : keep + 1]
    cutoff_ids = list(cutoff)
    if cutoff_ids:
        SchedulerTick.objects.filter(id__lte=cutoff_ids[0]).delete()


IDEMPOTENCY_KEY_LIFETIME = timedelta(hours=24)


def idempotency_keys_purge(*, now: datetime | None = None) -> int:
    """Forget Idempotency-Keys older than a day; return how many."""
    cutoff = (now or timezone.now()) - IDEMPOTENCY_KEY_LIFETIME
    deleted, _ = IdempotencyKey.objects.filter(created_at__lte=cutoff).delete()
    return deleted
