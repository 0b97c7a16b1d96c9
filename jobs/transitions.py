"""The job, lease and host state machines as tables, and one compare-and-set function per move.

Each table maps (from, to) to the movers allowed to make that move; docs/states.md is the same
tables for people. A move updates only the rows still in a state the move starts from
(`UPDATE … WHERE status IN (…)`), so a repeat or a race changes nothing; it writes the host's
audit events and asks for a tick when it can free a host. Nothing else writes a job's or a
host's status, creates a lease or releases one (tests/jobs/test_state_writes.py holds the code
to that).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum

from django.conf import settings
from django.db import IntegrityError, connection, transaction
from django.db.models import Max, Q, QuerySet
from django.utils import timezone

from hosts import audit
from hosts.audit import Actor, actor_name
from hosts.choices import EventKind, HostStatus
from hosts.models import Host, HostEvent
from jobs import outbox
from jobs.choices import TERMINAL_JOB_STATUSES, JobStatus, ReleaseReason
from jobs.models import Job, Lease, Suite
from jobs.scheduling.triggers import request_tick
from schedsite.errors import Conflict
from schedsite.pgarrays import bigint_array, text_array
from schedsite.prepared import update_one


class Mover(StrEnum):
    """The path a move comes through; who may take each path is docs/security.md#roles."""

    SCHEDULER = "scheduler"  # the tick: leasing, lease expiry, job timeouts
    RUNNER = "runner"  # the runner protocol: a worker's runner, or staff acting for it
    OWNER = "owner"  # aborting a job or a suite (its owner), ending a reservation (its holder)
    STAFF = "staff"  # staff's tools: a host's status, releasing a lease by hand
    IMPORT = "import_lab"  # a lab file restoring a job it says is running


Moves = Mapping[tuple[str, str], frozenset[Mover]]


@dataclass(frozen=True)
class Machine:
    """One state machine: its states and which mover may make which move."""

    name: str
    states: tuple[str, ...]
    moves: Moves

    def allows(self, old: str, new: str, mover: Mover) -> bool:
        return mover in self.moves.get((old, new), ())

    def sources(self, new: str, mover: Mover) -> tuple[str, ...]:
        """The states `mover` may move a row to `new` from; Conflict if there are none."""
        found = tuple(old for old in self.states if self.allows(old, new, mover))
        if not found:
            raise Conflict(f"the {mover} may not move a {self.name} to {new}")
        return found


def _by(*movers: Mover) -> frozenset[Mover]:
    return frozenset(movers)


SCHEDULER, RUNNER, OWNER, STAFF = Mover.SCHEDULER, Mover.RUNNER, Mover.OWNER, Mover.STAFF
IMPORT = Mover.IMPORT
J = JobStatus
JOB = Machine(
    "job",
    tuple(JobStatus.values),
    {
        (J.QUEUED, J.LEASED): _by(SCHEDULER, IMPORT),
        (J.LEASED, J.RUNNING): _by(RUNNER),
        (J.LEASED, J.PASSED): _by(RUNNER),
        (J.LEASED, J.FAILED): _by(RUNNER),
        (J.RUNNING, J.PASSED): _by(RUNNER),
        (J.RUNNING, J.FAILED): _by(RUNNER),
        # Requeued: released by hand; handed back unstarted, or retried after its host broke
        # (runner); its lease expired with retries left (scheduler).
        (J.LEASED, J.QUEUED): _by(STAFF, RUNNER, SCHEDULER),
        (J.RUNNING, J.QUEUED): _by(STAFF, RUNNER, SCHEDULER),
        # Its lease expired with no retries left, or a maintenance job's lease expired.
        (J.LEASED, J.ERROR): _by(SCHEDULER),
        (J.RUNNING, J.ERROR): _by(SCHEDULER),
        # Aborted; released by hand without requeue; or (running) past its timeout.
        # A queued maintenance job its host no longer needs is dropped by the scheduler.
        (J.QUEUED, J.ABORTED): _by(OWNER, SCHEDULER),
        (J.LEASED, J.ABORTED): _by(OWNER, RUNNER, STAFF),
        (J.RUNNING, J.ABORTED): _by(OWNER, RUNNER, STAFF, SCHEDULER),
        # Waited in the queue longer than its expires_after.
        (J.QUEUED, J.EXPIRED): _by(SCHEDULER),
        # A fan-out job whose host was retired or is repair_failed: it can never run there.
        (J.QUEUED, J.SKIPPED): _by(SCHEDULER),
    },
)

# A lease is active, or released for one of the reasons; a released lease never moves again.
ACTIVE = "active"
R = ReleaseReason
LEASE = Machine(
    "lease",
    (ACTIVE, *ReleaseReason.values),
    {
        (ACTIVE, R.COMPLETED): _by(RUNNER),
        (ACTIVE, R.ABORTED): _by(OWNER, RUNNER),
        # A runner hands back; a holder ends; the tick ends a multi-host job's attempt one of
        # whose leases expired (its other leases are released).
        (ACTIVE, R.RELEASED): _by(STAFF, RUNNER, OWNER, SCHEDULER),
        (ACTIVE, R.EXPIRED): _by(SCHEDULER),
        (ACTIVE, R.TIMEOUT): _by(SCHEDULER),
        (ACTIVE, R.PREEMPTED): _by(SCHEDULER),
    },
)

# Who may create a lease, by its kind; a new lease is `active`, and LEASE's moves end it. The
# tick leases queued jobs, a lab file restores a job it says is running, staff reserve a host.
JOB_LEASE, RESERVATION = "job lease", "reservation"
NEW_LEASE: Mapping[str, frozenset[Mover]] = {
    JOB_LEASE: _by(SCHEDULER, IMPORT),
    # Staff's by hand; a tester's own (owner), served at once or by the tick from the line.
    RESERVATION: _by(STAFF, OWNER, SCHEDULER),
}

# The event a release writes on the host's trail, by its reason.
RELEASE_EVENTS = {
    R.COMPLETED: EventKind.COMPLETED,
    R.ABORTED: EventKind.RELEASED,
    R.RELEASED: EventKind.RELEASED,
    R.EXPIRED: EventKind.EXPIRED,
    R.TIMEOUT: EventKind.TIMED_OUT,
    R.PREEMPTED: EventKind.PREEMPTED,
}

H = HostStatus
# The health loop (docs/health.md): the scheduler leases verify and repair jobs and handles
# their lease expiry; the runner's results move the host on. Staff may set any status but the
# two a maintenance lease stands for (a `verifying` host with no verify job would wait forever).
_SYSTEM_MOVES: dict[tuple[str, str], frozenset[Mover]] = {
    (H.READY, H.VERIFYING): _by(SCHEDULER),
    (H.NEEDS_VERIFY, H.VERIFYING): _by(SCHEDULER),
    (H.NEEDS_REPAIR, H.REPAIRING): _by(SCHEDULER),
    (H.READY, H.NEEDS_VERIFY): _by(SCHEDULER),  # its test job's runner vanished
    # Its verify job's runner vanished, or handed the job back unstarted.
    (H.VERIFYING, H.NEEDS_VERIFY): _by(SCHEDULER, RUNNER),
    (H.VERIFYING, H.READY): _by(RUNNER),
    (H.REPAIRING, H.READY): _by(RUNNER),
    (H.REPAIRING, H.REPAIR_FAILED): _by(RUNNER, SCHEDULER),
    # Found broken: by a runner (host_ok false, a failed verify or repair, a failure streak),
    # or by the scheduler (a repair whose runner vanished).
    (H.READY, H.NEEDS_REPAIR): _by(RUNNER),
    (H.NEEDS_VERIFY, H.NEEDS_REPAIR): _by(RUNNER),
    (H.VERIFYING, H.NEEDS_REPAIR): _by(RUNNER),
    (H.REPAIRING, H.NEEDS_REPAIR): _by(RUNNER, SCHEDULER),
    # A repair_failed host's automatic repair, at its next_repair_at (docs/health.md).
    (H.REPAIR_FAILED, H.NEEDS_REPAIR): _by(SCHEDULER),
}
# Moves the table allows only to a caller that names the source status (`move_hosts(...,
# sources=...)`): the automatic repair starts from repair_failed on purpose, but a move the
# system makes after a job ended (a repair lease expiring, say) must not undo a repair_failed
# that staff set meanwhile.
_NAMED_SOURCE_ONLY: dict[tuple[str, Mover], frozenset[str]] = {
    (H.NEEDS_REPAIR, Mover.SCHEDULER): frozenset({H.REPAIR_FAILED}),
}
HOST = Machine(
    "host",
    tuple(HostStatus.values),
    {
        (old, new): movers
        for old in HostStatus.values
        for new in HostStatus.values
        if old != new
        and (
            movers := _SYSTEM_MOVES.get((old, new), frozenset())
            | (_by(STAFF) if new not in (H.VERIFYING, H.REPAIRING) else frozenset())
        )
    },
)

MACHINES = (JOB, LEASE, HOST)


def _status_in(states: Sequence[str]) -> Q:
    return Q(status=states[0]) if len(states) == 1 else Q(status__in=states)


# --- jobs -----------------------------------------------------------------------------------


def _job_times(new: str, at: datetime) -> dict[str, datetime | None]:
    """The timestamps a move to `new` sets: a requeued job starts afresh."""
    if new == JobStatus.RUNNING:
        return {"started_at": at}
    if new == JobStatus.QUEUED:
        return {"started_at": None}
    if new in TERMINAL_JOB_STATUSES:
        return {"finished_at": at}
    return {}


def move_jobs(
    jobs: QuerySet[Job] | Iterable[int],
    *,
    to: str,
    mover: Mover,
    at: datetime,
    **fields: object,
) -> int:
    """Move the given jobs (a queryset, or ids) that are in a state the move starts from.

    A queryset must not filter on the status: after the move it names the jobs ended.
    """
    return _move_jobs(jobs, to=to, mover=mover, at=at, fields=fields)


def _move_jobs(
    jobs: QuerySet[Job] | Iterable[int],
    *,
    to: str,
    mover: Mover,
    at: datetime,
    fields: dict[str, object],
    known: Sequence[Job] = (),
) -> int:
    # One UPDATE however many rows: the tick leases thousands of jobs at a time.
    ids = None if isinstance(jobs, QuerySet) else list(jobs)
    # The queryset of the ids is built only where it is used: a one-job move needs it only for
    # a job not at hand to find its suite by.
    rows = (lambda: jobs) if ids is None else (lambda: Job.objects.filter(pk__in_array=set(ids)))
    sources = JOB.sources(to, mover)  # Conflict here, outside the block: it undoes nothing
    changes = {"status": to, **_job_times(to, at), **fields}
    # The move and its outbox entry commit together, or neither does (no savepoint: inside a
    # caller's transaction this adds no statement).
    with transaction.atomic(savepoint=False):
        if ids is not None and len(ids) == 1:  # a runner's start or complete: compiled once
            moved = update_one(("job", sources), _jobs_in(sources), ids[0], changes)
        else:
            moved = rows().filter(_status_in(sources)).update(**changes)
        if moved and to in TERMINAL_JOB_STATUSES and outbox.connected():
            outbox.jobs_ended(_suites_of(rows, known, to, at), status=to, at=at, known=known)
    return moved


def _jobs_in(sources: tuple[str, ...]) -> Callable[[], QuerySet[Job]]:
    return lambda: Job.objects.filter(_status_in(sources))


def _suites_of(
    rows: Callable[[], QuerySet[Job]], known: Sequence[Job], to: str, at: datetime
) -> list[int]:
    """The suites of the jobs just ended: from the instances the mover read, or one query."""
    if known:
        return [job.suite_id for job in known if job.suite_id is not None]
    ended = rows().filter(status=to, finished_at=at).exclude(suite_id=None)
    return list(ended.order_by().values_list("suite_id", flat=True).distinct())


def move_job(job: Job, *, to: str, mover: Mover, at: datetime, **fields: object) -> None:
    """Move one job, or raise Conflict saying which status it is in instead.

    The instance is updated to match the row, so a caller can answer without reading it again.
    """
    if _move_jobs([job.pk], to=to, mover=mover, at=at, fields=fields, known=[job]):
        for name, value in {"status": to, **_job_times(to, at), **fields}.items():
            setattr(job, name, value)
        return
    status = Job.objects.filter(pk=job.pk).values_list("status", flat=True).first()
    if status is None:
        raise Conflict(f"job {job.pk} no longer exists")
    if status in TERMINAL_JOB_STATUSES:
        raise Conflict(f"job {job.pk} has already finished")
    raise Conflict(f"job {job.pk} is {status}, not {' or '.join(JOB.sources(to, mover))}")


# --- leases ---------------------------------------------------------------------------------


def _may_create(kind: str, mover: Mover) -> None:
    if mover not in NEW_LEASE[kind]:
        raise Conflict(f"the {mover} may not create a {kind}")


def lease_jobs(
    pairs: Sequence[tuple[int, int]],
    *,
    mover: Mover,
    by: Actor,
    at: datetime,
    subjects: Sequence[str],
    messages: Sequence[str],
    roles: Sequence[str] | None = None,
    slots: Sequence[int] | None = None,
    **fields: object,
) -> dict[int, int]:
    """Lease each queued job to its hosts: (host id, job id) pairs, their rows locked by the
    caller; a multi-host job has one pair per host, with its `roles` and `slots` (by pair).

    One UPDATE moves the jobs to leased (with `fields`, once per job however many hosts it
    gets: `attempts=F("attempts") + 1` counts one attempt), one INSERT creates the leases, each
    stamped with its job's attempts count as it now is (`Lease.attempt`), one INSERT writes a
    `leased` event per host (`subjects` are the hostnames, `messages` say to what). Return
    host id -> lease id. Conflict if a job was not queued: the caller's transaction (the
    tick's) then undoes the leases too.

    A lease and its event are stamped `at`, or when its host's previous lease was released if
    that came later (released while the tick ran): a host's leases never overlap in time.
    """
    _may_create(JOB_LEASE, mover)
    if not pairs:
        return {}
    roles = list(roles) if roles is not None else [""] * len(pairs)
    slots = list(slots) if slots is not None else [0] * len(pairs)
    job_ids = list(dict.fromkeys(j for _h, j in pairs))
    moved = _move_jobs(job_ids, to=JobStatus.LEASED, mover=mover, at=at, fields=fields)
    if moved != len(job_ids):
        raise Conflict(f"{len(job_ids) - moved} of {len(job_ids)} jobs are no longer queued")
    acquired = _insert_leases(pairs, roles=roles, slots=slots, at=at)
    lease_of_host = {h: lease_id for h, (lease_id, _at) in acquired.items()}
    audit.record_alike(
        EventKind.LEASED,
        actor=by,
        at=[acquired[h][1] if h in acquired else at for h, _j in pairs],
        host_ids=[h for h, _j in pairs],
        subjects=subjects,
        messages=messages,
        lease_ids=[lease_of_host.get(h) for h, _j in pairs],
        job_ids=[j for _h, j in pairs],
    )
    return lease_of_host


def _insert_leases(
    pairs: Sequence[tuple[int, int]],
    *,
    roles: Sequence[str],
    slots: Sequence[int],
    at: datetime,
) -> dict[int, tuple[int, datetime]]:
    """Create one job lease per (host id, job id), of the job's current attempt; return host
    id -> (lease id, acquired at).

    Each lease is acquired at `at`, or at its host's last release if later, and expires
    LEASE_TTL after that.
    """
    ttl = timedelta(seconds=settings.LEASE_TTL)
    if connection.vendor != "postgresql":
        # The hosts' builds and last releases in one query, the jobs' attempts and builds in
        # another: as many queries as before the builds were read.
        hosts = {
            pk: (build, last)
            for pk, build, last in Host.objects.filter(pk__in={h for h, _j in pairs})
            .annotate(last=Max("leases__released_at"))
            .values_list("pk", "current_build", "last")
        }
        jobs = {
            pk: (attempts, suite_build if suite_id is not None else build)
            for pk, attempts, suite_id, suite_build, build in Job.objects.filter(
                pk__in={j for _h, j in pairs}
            ).values_list("pk", "attempts", "suite_id", "suite__build", "build")
        }
        leases = Lease.objects.bulk_create(
            [
                Lease(
                    host_id=host_id,
                    job_id=job_id,
                    role=role,
                    slot=slot,
                    attempt=jobs[job_id][0],
                    provision_to=provision_to(jobs[job_id][1], hosts[host_id][0]),
                    reason="scheduled",
                    acquired_at=(start := max(at, hosts[host_id][1] or at)),
                    expires_at=start + ttl,
                )
                for (host_id, job_id), role, slot in zip(pairs, roles, slots, strict=True)
            ]
        )
        return {
            lease.host_id: (lease.pk, lease.acquired_at) for lease in leases if lease.pk is not None
        }
    # One INSERT ... SELECT FROM unnest(arrays): bulk_create spends about a second of a cold
    # tick building and binding 10,000 rows x 7 parameters; a few arrays bind in microseconds.
    # The partial unique constraints still guard every row; the job's attempts are one join.
    # Whether to provision is read in the same statement, from the host's current_build as
    # the caller's lock holds it and the job's build (its suite's, or its own): exact.
    table = connection.ops.quote_name(Lease._meta.db_table)
    jobs = connection.ops.quote_name(Job._meta.db_table)
    suites = connection.ops.quote_name(Suite._meta.db_table)
    host_table = connection.ops.quote_name(Host._meta.db_table)
    columns = _columns(
        Lease, "host", "job", "role", "slot", "attempt", "provision_to", "reason", "acquired_at",
        "expires_at", "release_reason", "released_by",
    )  # fmt: skip
    attempts, suite, job_build = (
        _columns(Job, "attempts"),
        _columns(Job, "suite"),
        _columns(Job, "build"),
    )
    suite_build, host_build = _columns(Suite, "build"), _columns(Host, "current_build")
    hosts, job_ids = bigint_array(h for h, _ in pairs), bigint_array(j for _, j in pairs)
    late = _released_after(hosts, at)
    sql = (
        f"INSERT INTO {table} ({columns}) "  # noqa: S608 - the model's tables and columns, quoted
        "SELECT h, j, r, s, n, CASE WHEN b <> '' AND b <> hb THEN b ELSE '' END, "
        "'scheduled', a, a + %s, '', '' FROM ("
        f"SELECT h, j, r, s, jj.{attempts} AS n, GREATEST(%s, late.t) AS a, "
        f"CASE WHEN jj.{suite} IS NULL THEN jj.{job_build} ELSE ss.{suite_build} END AS b, "
        f"hh.{host_build} AS hb, u.o "
        "FROM unnest(%s::bigint[], %s::bigint[], %s::text[], %s::int[]) "
        "WITH ORDINALITY AS u(h, j, r, s, o) "
        f"JOIN {jobs} AS jj ON jj.id = u.j "
        f"JOIN {host_table} AS hh ON hh.id = u.h "
        f"LEFT JOIN {suites} AS ss ON ss.id = jj.{suite} "
        "LEFT JOIN unnest(%s::bigint[], %s::timestamptz[]) AS late(lh, t) ON late.lh = u.h"
        # The leases' ids in the order of the pairs, whatever order the joins give the rows.
        ") AS v ORDER BY o "
        f"RETURNING {_columns(Lease, 'host', 'id', 'acquired_at')}"
    )
    params = [ttl, at, hosts, job_ids, text_array(roles), bigint_array(slots)]
    params += [[h for h, _t in late], [t for _h, t in late]]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return {h: (lease_id, acquired_at) for h, lease_id, acquired_at in cursor.fetchall()}


def provision_to(build: str, current_build: str) -> str:
    """The build a lease's runner must put on its host first: the job's build when it has one
    and the host carries another; "" when none is needed (docs/api.md#provisioning)."""
    return build if build and build != current_build else ""


def _released_after(hosts: str, at: datetime) -> list[tuple[int, datetime]]:
    """The hosts (an array literal) whose last lease was released after `at`, with that time:
    released while the tick ran, usually none.

    A statement of its own, before the INSERT: as a subquery of the INSERT it was planned as a
    scan of the lease table per row while the INSERT added to it, quadratic on a table whose
    statistics still said empty (0.9 s of a cold tick's 10,000 leases). Here each host is one
    probe of the lease_host_last_released index.
    """
    table = connection.ops.quote_name(Lease._meta.db_table)
    host, released_at = _columns(Lease, "host"), _columns(Lease, "released_at")
    sql = (
        "SELECT u.h, r.t FROM unnest(%s::bigint[]) AS u(h) CROSS JOIN LATERAL ("  # noqa: S608
        f"SELECT l.{released_at} AS t FROM {table} AS l "
        f"WHERE l.{host} = u.h AND l.{released_at} IS NOT NULL "
        f"ORDER BY l.{released_at} DESC LIMIT 1) AS r WHERE r.t > %s"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [hosts, at])
        return cursor.fetchall()


def _columns(model: type, *names: str) -> str:
    return ", ".join(connection.ops.quote_name(model._meta.get_field(n).column) for n in names)


@transaction.atomic  # a job that is not queued leaves no lease behind
def lease_job(
    host: Host, job: Job, *, mover: Mover, by: Actor, at: datetime, reason: str, message: str
) -> Lease:
    """Lease one queued job to its host, as heartbeating at `at`, and write its `leased` event.

    A lab file's job that is already running there: its lease counts from the import.
    """
    _may_create(JOB_LEASE, mover)
    expires = at + timedelta(seconds=settings.LEASE_TTL)
    lease = _create_lease(
        host, job=job, reason=reason, acquired_at=at, heartbeat_at=at, expires_at=expires,
        attempt=1,
    )  # fmt: skip
    move_job(job, to=JobStatus.LEASED, mover=mover, at=at, attempts=1)
    lease_event(EventKind.LEASED, lease, by=by, at=at, message=message).save()
    return lease


def reserve_host(
    host: Host, *, holder: Actor, mover: Mover, at: datetime, until: datetime, reason: str
) -> Lease:
    """Reserve a host for manual work: a lease with no job until `until`, and its event."""
    _may_create(RESERVATION, mover)
    lease = _create_lease(
        host,
        job=None,
        holder=audit.actor_user(holder),
        reason=reason,
        acquired_at=at,
        expires_at=until,
    )
    text = f"reserved until {lease.expires_at:%Y-%m-%d %H:%M} UTC: {reason}"
    lease_event(EventKind.RESERVED, lease, by=holder, at=at, message=text).save()
    return lease


def _create_lease(host: Host, **fields: object) -> Lease:
    """One new active lease on the host; Conflict if the host (or its job) holds one already."""
    try:
        with transaction.atomic():  # a savepoint: the caller's transaction goes on after a refusal
            return Lease.objects.create(host=host, **fields)
    except IntegrityError as exc:  # the partial unique constraints: one active lease per host, job
        raise Conflict(f"host {host.hostname} is already leased") from exc


def release_leases(
    leases: Sequence[Lease],
    *,
    reason: str,
    mover: Mover,
    by: Actor,
    at: datetime,
    message: str | Callable[[Lease], str],
    trigger: str = "",
) -> None:
    """Release active leases and write one event each; Conflict if any has ended already."""
    LEASE.sources(reason, mover)
    if not leases:
        return
    by_name = actor_name(by)
    changes = {"released_at": at, "release_reason": reason, "released_by": by_name}
    if len(leases) == 1:  # a runner's complete: compiled once
        released = update_one("active lease", Lease.objects.active, leases[0].pk, changes)
    else:
        released = (
            Lease.objects.active().filter(pk__in=[lease.pk for lease in leases]).update(**changes)
        )
    # The bulk callers hold the leases' row locks, so none can end between their read and this
    # update; a lease that did end anyway must not get a second ending in its host's trail.
    if released != len(leases):
        if len(leases) == 1:
            raise Conflict(f"lease {leases[0].pk} is no longer active")
        raise Conflict(f"{len(leases) - released} of {len(leases)} leases are no longer active")
    for lease in leases:  # the instances match their rows: callers answer without a re-read
        lease.released_at, lease.release_reason, lease.released_by = at, reason, by_name
    text = message if callable(message) else lambda _lease: message
    kind = RELEASE_EVENTS[reason]
    audit.record_many(
        [lease_event(kind, lease, by=by, at=at, message=text(lease)) for lease in leases]
    )
    # The tick plans right after its own expiries and timeouts: it needs no second tick.
    if mover != Mover.SCHEDULER:
        request_tick(trigger or f"lease {reason}")


def lease_event(kind: str, lease: Lease, *, by: Actor, at: datetime, message: str) -> HostEvent:
    """An audit event about a lease, on its host's trail; unsaved, for `record_many` or save()."""
    fields = {"host": lease.host, "lease_id": lease.pk, "job_id": lease.job_id}
    return audit.entry(kind, actor=by, at=at, message=message, **fields)


# --- hosts ----------------------------------------------------------------------------------


def _leaving(to: str) -> dict[str, object]:
    """What a host's move clears: only a repair_failed host waits for an automatic repair."""
    return {} if to == HostStatus.REPAIR_FAILED else {"next_repair_at": None}


def move_host(
    host: Host,
    *,
    old: str,
    to: str,
    mover: Mover,
    by: Actor,
    why: str = "",
    at: datetime | None = None,
) -> None:
    """Move a host from the status `old` it was read in to `to`, and audit it.

    The instance is updated to match the row, so a caller can answer without reading it again.
    """
    if not HOST.allows(old, to, mover):
        raise Conflict(f"the {mover} may not move host {host.hostname} from {old} to {to}")
    at = at or timezone.now()
    # The move, its audit and its outbox entry commit together (no savepoint: inside a
    # caller's transaction this adds no statement; nothing raises inside it).
    with transaction.atomic(savepoint=False):
        moved = Host.objects.filter(pk=host.pk, status=old).update(status=to, **_leaving(to))
        if moved:
            audit.record(
                EventKind.STATUS,
                actor=by,
                host=host,
                at=at,
                old_status=old,
                new_status=to,
                message=why,
            )
            if to == HostStatus.REPAIR_FAILED:
                outbox.hosts_repair_failed([host.pk], at=at, why=why)
    if not moved:
        raise Conflict(f"host {host.hostname} changed status concurrently; try again")
    host.status = to
    for field, value in _leaving(to).items():
        setattr(host, field, value)
    if to == HostStatus.READY:
        request_tick("host ready")


def move_hosts(
    hosts: Iterable[int],
    *,
    to: str,
    mover: Mover,
    by: Actor,
    why: str,
    at: datetime | None = None,
    sources: Iterable[str] | None = None,
    **fields: object,
) -> list[int]:
    """Move the hosts (ids) in a status the move starts from to `to`; return the ids moved.

    Hosts in another status are left alone: a move made by the system after a job ended
    must not undo what staff set meanwhile. `sources` narrows the statuses it starts from; a
    source in _NAMED_SOURCE_ONLY is taken only when named there.
    """
    at = at or timezone.now()
    allowed = HOST.sources(to, mover)
    if sources is None:
        sources = tuple(set(allowed) - _NAMED_SOURCE_ONLY.get((to, mover), frozenset()))
    else:
        sources = tuple(set(allowed) & set(sources))
    # Locked and read in one statement, in id order like every other host lock, so each
    # event's old status is the one this update replaces.
    moving = list(
        Host.objects.select_for_update()
        .filter(pk__in=list(hosts))
        .filter(_status_in(sources))
        .order_by("pk")
        .values_list("pk", "hostname", "status")
    )
    if not moving:
        return []
    fields = {**_leaving(to), **fields}
    Host.objects.filter(pk__in=[pk for pk, _, _ in moving]).update(status=to, **fields)
    audit.record_many(
        [
            audit.entry(
                EventKind.STATUS,
                actor=by,
                host_id=pk,
                subject=hostname,
                at=at,
                old_status=old,
                new_status=to,
                message=why,
            )
            for pk, hostname, old in moving
        ]
    )
    if to == HostStatus.REPAIR_FAILED:
        outbox.hosts_repair_failed([pk for pk, _, _ in moving], at=at, why=why)
    if to == HostStatus.READY:
        request_tick("host ready")
    return [pk for pk, _, _ in moving]


def mark_needs_repair(
    hosts: Iterable[int], *, mover: Mover, by: Actor, why: str, at: datetime | None = None
) -> int:
    """Send the hosts (ids) to needs_repair, those the mover may; return how many moved."""
    return len(move_hosts(hosts, to=HostStatus.NEEDS_REPAIR, mover=mover, by=by, why=why, at=at))
