"""The runner protocol: start, heartbeat, complete; by job and by the lease a runner holds."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import Required, TypedDict, Unpack

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from hosts import audit
from hosts import services as host_services
from hosts.audit import Actor
from hosts.choices import EventKind, HostStatus
from hosts.models import Host, Worker
from jobs import provisioning, recovery, transitions
from jobs.choices import JobKind, JobStatus, ReleaseReason
from jobs.models import Job, Lease
from jobs.querysets import ACTIVE_LEASE_SQL
from jobs.services.common import active_lease_for, active_leases_for, lock_attempt
from jobs.services.staff import job_abort
from jobs.transitions import Mover
from schedsite.errors import Conflict, Forbidden, InvalidInput
from schedsite.transactions import atomic_retry

RUNNER = Mover.RUNNER
COMPLETED, RELEASED, FAILED = ReleaseReason.COMPLETED, ReleaseReason.RELEASED, JobStatus.FAILED

# The status a host waits in for the maintenance job of each kind.
WAITS_FOR = {JobKind.VERIFY: HostStatus.NEEDS_VERIFY, JobKind.REPAIR: HostStatus.NEEDS_REPAIR}


@atomic_retry
def job_start(*, job: Job, by: Actor, at: datetime | None = None) -> Job:
    """Mark a leased job running (the runner has begun the test)."""
    lease = active_lease_for(job)
    if lease is None:
        raise Conflict(f"job {job.pk} holds no active lease (status {job.status})")
    lease.job = job
    _start(lease, by=by, at=at or timezone.now())
    job.refresh_from_db()
    return job


def _start(
    lease: Lease,
    *,
    by: Actor,
    at: datetime,
    build: str | None = None,
    provision_seconds: float | None = None,
) -> Job:
    """Move the lease's job to running; the lease first, as every call by lease does.

    A multi-host job is started once, through any of its leases: each of its hosts gets a
    `started` event. With `build`, the runner put that build on the attempt's hosts first:
    they carry it from now (docs/api.md#provisioning), in the same transaction as the start."""
    if build is not None:  # checked before anything changes: a 400 leaves all as it was
        build = provisioning.check_build(build)
        provision_seconds = provisioning.check_seconds(provision_seconds)
    elif provision_seconds is not None:
        raise InvalidInput("provision_seconds goes with build", field="provision_seconds")
    _extend(lease, at=at, unexpired=False)  # `start` counts as a heartbeat
    job = lease.job
    transitions.move_job(job, to=JobStatus.RUNNING, mover=Mover.RUNNER, at=at)
    said = f"job {job.name} started"
    leases = attempt_leases(lease)
    if build is not None:
        provisioning.hosts_provisioned(leases, build=build, seconds=provision_seconds, by=by, at=at)
    audit.record_many(
        [
            transitions.lease_event(EventKind.STARTED, each, by=by, at=at, message=said)
            for each in leases
        ]
    )
    return job


def attempt_leases(lease: Lease) -> list[Lease]:
    """The active leases of the lease's job, by slot: the lease itself for a one-host job (no
    query), all its hosts' for a multi-host one, each with its host."""
    job = lease.job
    if job is None or not job.roles:
        return [lease]
    leases = list(
        Lease.objects.active().filter(job_id=job.pk).select_related("host").order_by("slot", "pk")
    )
    for each in leases:
        each.job = job  # the instance the caller read and moves
    return [lease if each.pk == lease.pk else each for each in leases] or [lease]


def _broken_hosts(
    leases: Sequence[Lease], *, host_ok: bool, hosts_ok: Mapping[str, bool] | None
) -> list[Lease]:
    """The leases whose hosts the runner found broken: all (host_ok false), or those
    `hosts_ok` says false of; InvalidInput naming a hostname that is not one of the job's."""
    names = {lease.host.hostname for lease in leases}
    unknown = sorted(name for name in (hosts_ok or {}) if name not in names)
    if unknown:
        raise InvalidInput(
            f"hosts_ok names {', '.join(unknown)}, not a host of this job's attempt "
            f"({', '.join(sorted(names))})",
            field="hosts_ok",
        )
    if not host_ok:
        return list(leases)
    return [lease for lease in leases if (hosts_ok or {}).get(lease.host.hostname) is False]


def lease_heartbeat(*, lease: Lease, by: Actor = None, at: datetime | None = None) -> Lease:
    """Extend an active lease by LEASE_TTL and mark its worker seen."""
    at = at or timezone.now()
    ttl = timedelta(seconds=settings.LEASE_TTL)
    # Compare-and-set: a heartbeat for a released (or already expired) lease changes nothing.
    # A job's lease extends every lease of its attempt (a multi-host job's hosts).
    if lease.job_id is not None:
        changed = lease.pk in _extend_attempt(lease.pk, at=at, unexpired=True)
    else:
        changed = bool(
            Lease.objects.active()
            .filter(pk=lease.pk, expires_at__gte=at)
            .update(heartbeat_at=at, expires_at=at + ttl)
        )
    if not changed:
        raise Conflict(f"lease {lease.pk} is no longer active")
    lease.heartbeat_at, lease.expires_at = at, at + ttl
    _mark_worker_seen(lease, at=at)
    return lease


def _mark_worker_seen(lease: Lease, *, at: datetime) -> None:
    # A worker whose runner handed leases back is stopping (last_seen cleared): the jobs it
    # still finishes do not bring it back online; only its runner's own heartbeat does.
    # The host's worker is read in the same statement, as it is now.
    worker_of_host = Host.objects.filter(pk=lease.host_id).values("worker_id")
    Worker.objects.filter(pk__in=worker_of_host, last_seen__isnull=False).update(last_seen=at)


@atomic_retry
def job_complete(*, job: Job, by: Actor, **report: Unpack[Report]) -> Job:
    """Record a job's result and release its lease, then act on what it says of the host."""
    _check_result(report["result"])
    lease = active_lease_for(job)
    if lease is None:
        raise Conflict(f"job {job.pk} holds no active lease (status {job.status})")
    job.refresh_from_db()
    lease.job = job
    _complete(lease, by=by, **report)
    job.refresh_from_db()
    return job


def _complete(
    lease: Lease,
    *,
    result: str,
    by: Actor,
    message: str = "",
    host_ok: bool = True,
    hosts_ok: Mapping[str, bool] | None = None,
    provision_failed: bool = False,
    provision_seconds: float | None = None,
    at: datetime | None = None,
) -> Job:
    """Release the job's leases with its result, then act on what it says of the hosts.

    A test that failed on a host the runner found broken is retried elsewhere while it has
    tries left; the host goes to repair. A multi-host job is completed once, through any of
    its leases: every lease of its attempt is released, each host the runner found broken
    (`host_ok` false: all of them; `hosts_ok`: those it says false of) goes to repair, the
    others are free again. A verify or repair job moves its host along the health loop
    (docs/health.md).
    """
    at = at or timezone.now()
    job = lease.job
    message = (message or "")[:10000]
    is_test = job.kind == JobKind.TEST
    leases = attempt_leases(lease)
    broken = _broken_hosts(leases, host_ok=host_ok, hosts_ok=hosts_ok) if is_test else []
    unprovisioned = _provision_failures(
        job, leases, broken, result=result, said=provision_failed, seconds=provision_seconds
    )
    done = f"{'job' if is_test else job.kind + ' job'} {job.name} {result}"
    done += f": {message[:200]}" if message else ""
    # The leases first: their compare-and-set locks the rows before the job's, in the order the
    # tick's expiry takes them, and a lease that ended meanwhile fails the whole call.
    try:
        transitions.release_leases(
            leases, reason=COMPLETED, mover=RUNNER, by=by, at=at, message=done,
            trigger="job completed",
        )  # fmt: skip
    except Conflict:
        raise _ended(lease) from None
    if unprovisioned:
        provisioning.hosts_provision_failed(
            unprovisioned, message=message, seconds=provision_seconds, by=by, at=at
        )
    if not (broken and result == JobStatus.FAILED):
        transitions.move_job(job, to=result, mover=Mover.RUNNER, at=at, message=message)
    if not is_test:
        passed = result == JobStatus.PASSED
        recovery.maintenance_ended(job, host=lease.host, passed=passed, mover=RUNNER, by=by, at=at)
    elif broken:
        if result == JobStatus.FAILED:
            why = f"the runner reported it broken; {recovery.brief(message)}"
            recovery.retry_or_end(broken, end_as=FAILED, mover=RUNNER, at=at, why=why, by=by)
            job.refresh_from_db()  # retried or ended by the recovery, not by move_job
        why = f"runner reported the host broken after job {job.name}"
        transitions.mark_needs_repair(
            [each.host_id for each in broken], mover=RUNNER, by=by, why=why, at=at
        )
    elif result == JobStatus.FAILED:
        for each in leases:
            recovery.check_failure_streak(each.host, by=by, at=at, lease=each)
    return job


def _provision_failures(
    job: Job,
    leases: Sequence[Lease],
    broken: Sequence[Lease],
    *,
    result: str,
    said: bool,
    seconds: float | None,
) -> list[Lease]:
    """The leases whose provisioning failed, by what the runner reports (docs/api.md#provisioning).

    `said` (provision_failed): those of the hosts it found broken (all, if it named none), each
    to its provision_to or the job's build; InvalidInput if the job had started or the result is
    not failed. Unsaid: a test that never started, failed with its hosts broken, whose leases
    asked to provision: provisioning is what it was doing.
    """
    if said:
        if result != JobStatus.FAILED:
            raise InvalidInput("provision_failed goes with result failed", field="provision_failed")
        if job.status != JobStatus.LEASED:
            raise InvalidInput(
                f"provision_failed: job {job.pk} is {job.status}; provisioning comes before "
                "the start",
                field="provision_failed",
            )
        seconds = provisioning.check_seconds(seconds)
        return list(broken or leases)
    if seconds is not None:
        raise InvalidInput(
            "provision_seconds goes with provision_failed", field="provision_seconds"
        )
    if result != JobStatus.FAILED or job.status != JobStatus.LEASED:
        return []
    return [lease for lease in broken if lease.provision_to]


# --- the runner protocol addressed by lease (what the REST API calls) -----------------------
#
# The lease is what a runner holds. Each call is a compare-and-set on it being active, taken
# before the job is touched, so a runner whose lease expired (and whose job was leased again
# elsewhere) cannot act on the new lease. The lease comes with its job and host read.


def _ended(lease: Lease) -> Conflict:
    """The conflict of acting on a lease that is not an active job lease, saying why."""
    row = Lease.objects.released().filter(pk=lease.pk).values("release_reason").first()
    if row is not None:
        why = f" ({row['release_reason']})" if row["release_reason"] else ""
        return Conflict(f"lease {lease.pk} is no longer active{why}")
    if lease.job_id is None:
        return Conflict(f"lease {lease.pk} is a manual reservation, not a job's lease")
    return Conflict(f"lease {lease.pk} is no longer active")


def _extend(lease: Lease, *, at: datetime, unexpired: bool) -> None:
    """Heartbeat an active job lease, and every other active lease of its job (a multi-host
    job's attempt), in one compare-and-set, which also locks their rows.

    With `unexpired`, an attempt with a lease past its expiry that no tick has released yet is
    refused too: the tick is about to end it.
    """
    if lease.pk not in _extend_attempt(lease.pk, at=at, unexpired=unexpired):
        raise _ended(lease)
    lease.heartbeat_at, lease.expires_at = at, at + timedelta(seconds=settings.LEASE_TTL)


def _extend_attempt(lease_id: int, *, at: datetime, unexpired: bool) -> list[int]:
    """Extend the active leases of the job of an active job lease; return the ids extended.

    All of them or none: with `unexpired`, none if one of them is past its expiry. The rows
    are locked in id order first (the order the tick's expiry takes them in, skipping what is
    locked), so two heartbeats of one job, or a heartbeat and the tick, never deadlock.
    """
    expires_at = at + timedelta(seconds=settings.LEASE_TTL)
    if connection.vendor == "postgresql":
        table = Lease._meta.db_table
        live = "AND NOT EXISTS (SELECT 1 FROM locked WHERE expires_at < %s) " if unexpired else ""
        sql = (
            f"WITH me AS (SELECT job_id FROM {table} WHERE id = %s AND {ACTIVE_LEASE_SQL} "  # noqa: S608 - the model's table
            "AND job_id IS NOT NULL), "
            f"locked AS (SELECT l.id, l.expires_at FROM {table} l WHERE l.job_id = "
            f"(SELECT job_id FROM me) AND l.{ACTIVE_LEASE_SQL} ORDER BY l.id FOR UPDATE) "
            f"UPDATE {table} SET heartbeat_at = %s, expires_at = %s "
            f"WHERE id IN (SELECT id FROM locked) {live}RETURNING id"
        )
        params: list[object] = [lease_id, at, expires_at] + ([at] if unexpired else [])
        with connection.cursor() as cursor:
            cursor.execute(sql, params)
            return [row[0] for row in cursor.fetchall()]
    with transaction.atomic():
        job_id = (
            Lease.objects.active()
            .filter(pk=lease_id, job__isnull=False)
            .values_list("job_id", flat=True)
            .first()
        )
        if job_id is None:
            return []
        rows = list(
            Lease.objects.active()
            .filter(job_id=job_id)
            .select_for_update()
            .order_by("pk")
            .values_list("pk", "expires_at")
        )
        if unexpired and any(until < at for _pk, until in rows):
            return []
        ids = [pk for pk, _until in rows]
        Lease.objects.filter(pk__in=ids).update(heartbeat_at=at, expires_at=expires_at)
        return ids


def _lock_job_lease(lease: Lease) -> Lease:
    """Lock and read an active job lease, for the calls that act on more than its row; with the
    other active leases of its job (a multi-host job's), in id order."""
    locked = next((each for each in lock_attempt(lease.pk) if each.pk == lease.pk), None)
    if locked is None or not locked.active or locked.job_id is None:
        raise _ended(locked or lease)
    return locked


@atomic_retry
def lease_job_start(
    *,
    lease: Lease,
    by: Actor,
    at: datetime | None = None,
    build: str | None = None,
    provision_seconds: float | None = None,
) -> Job:
    """Start the job of a lease the runner holds; with `build`, the build it put on the host
    (and how long that took), which the host carries from now."""
    return _start(
        lease, by=by, at=at or timezone.now(), build=build, provision_seconds=provision_seconds
    )


class Report(TypedDict, total=False):
    """What a runner reports of a finished job: `job_complete`'s arguments past job and by."""

    result: Required[str]  # passed or failed
    message: str  # the output's tail
    host_ok: bool  # False: the runner found the host (a multi-host job: every host) broken
    hosts_ok: Mapping[str, bool] | None  # a multi-host job's hosts by hostname: False, broken
    provision_failed: bool  # provisioning the host failed before the test started
    provision_seconds: float | None  # how long the failed provisioning ran
    at: datetime | None


def _check_result(result: str) -> None:
    if result not in (JobStatus.PASSED, JobStatus.FAILED):
        raise InvalidInput("result must be 'passed' or 'failed'", field="result")


@atomic_retry
def lease_job_complete(*, lease: Lease, by: Actor, **report: Unpack[Report]) -> Job:
    """Report the result of the job of a lease the runner holds, and release the lease."""
    _check_result(report["result"])  # a bad result is a 400 even on a lease that has ended
    if lease.job_id is None:
        raise _ended(lease)
    return _complete(lease, by=by, **report)


def lease_job_heartbeat(*, lease: Lease, by: Actor, at: datetime | None = None) -> Lease:
    """Heartbeat a job's lease; manual reservations are extended instead, never heartbeated."""
    # A heartbeat sets expires_at to now + LEASE_TTL, which would cut a reservation short.
    # No transaction: the compare-and-set is one statement, and marking the worker seen is
    # true whether or not the lease was extended (the runner is alive). The hottest call of the
    # protocol saves a BEGIN and a COMMIT.
    at = at or timezone.now()
    _extend(lease, at=at, unexpired=True)
    _mark_worker_seen(lease, at=at)
    return lease


def worker_leases_heartbeat(
    *,
    worker: Worker,
    leases: Sequence[int] = (),
    at: datetime | None = None,
    concurrency: int | None = None,
) -> list[int]:
    """Mark the worker seen and extend the active job leases it names; return those gone.

    Gone: released, past their expiry, a manual reservation, not on this worker's hosts, or
    no such lease. Two statements however many leases are named, each atomic by itself: the
    worker is seen whatever becomes of the leases. `concurrency`: the runner's --concurrency,
    stored with the worker's last_seen.
    """
    at = at or timezone.now()
    host_services.worker_heartbeat(worker=worker, at=at, concurrency=concurrency)
    wanted = sorted(set(leases))
    if not wanted:
        return []
    kept = set(_extend_many(wanted, worker=worker, at=at))
    return [pk for pk in wanted if pk not in kept]


def _extend_many(ids: list[int], *, worker: Worker, at: datetime) -> list[int]:
    """Heartbeat the jobs of those of the leases that are active job leases of the worker's
    runner: on its hosts, or of a multi-host job whose slot 0 host is on them (the job it
    runs). Each such job's active leases are all extended, or none if one is past its expiry;
    returns the ids extended."""
    expires_at = at + timedelta(seconds=settings.LEASE_TTL)
    if connection.vendor == "postgresql":
        # One statement: the named leases' jobs, their active leases locked in id order (as
        # the tick's expiry and a single heartbeat lock them), and the UPDATE … RETURNING of
        # the jobs none of whose leases is past its expiry. The locks re-read each row as it
        # is now, so a lease released meanwhile is left out.
        lease, host = Lease._meta.db_table, Host._meta.db_table
        with connection.cursor() as cursor:
            cursor.execute(
                f"WITH mine AS MATERIALIZED (SELECT id FROM {host} WHERE worker_id = %s), "  # noqa: S608 - the models' tables
                f"asked AS MATERIALIZED (SELECT id, job_id, host_id FROM {lease} WHERE "
                f"id = ANY(%s) AND {ACTIVE_LEASE_SQL} AND job_id IS NOT NULL), "
                "named AS MATERIALIZED (SELECT a.job_id FROM asked a WHERE a.host_id IN "
                f"(SELECT id FROM mine) UNION SELECT a.job_id FROM asked a JOIN {lease} m "
                f"ON m.job_id = a.job_id AND m.slot = 0 AND m.{ACTIVE_LEASE_SQL} "
                "WHERE m.host_id IN (SELECT id FROM mine)), "
                f"locked AS (SELECT l.id, l.job_id, l.expires_at FROM named JOIN {lease} l "
                f"ON l.job_id = named.job_id WHERE l.{ACTIVE_LEASE_SQL} ORDER BY l.id FOR UPDATE), "
                "live AS (SELECT job_id FROM locked GROUP BY job_id HAVING min(expires_at) >= %s) "
                f"UPDATE {lease} SET heartbeat_at = %s, expires_at = %s WHERE id IN "
                "(SELECT id FROM locked WHERE job_id IN (SELECT job_id FROM live)) RETURNING id",
                [worker.pk, ids, at, at, expires_at],
            )
            return [row[0] for row in cursor.fetchall()]
    with transaction.atomic():
        named = Lease.objects.active().filter(pk__in=ids, job__isnull=False)
        jobs = set(named.filter(host__worker=worker).values_list("job_id", flat=True))
        jobs |= set(
            Lease.objects.active()
            .filter(job_id__in=named.values("job_id"), slot=0, host__worker=worker)
            .values_list("job_id", flat=True)
        )
        rows = list(
            Lease.objects.active()
            .filter(job_id__in=jobs)
            .select_for_update(of=("self",))
            .order_by("pk")
            .values_list("pk", "job_id", "expires_at")
        )
        dead = {job for _pk, job, until in rows if until < at}
        held = [pk for pk, job, _until in rows if job not in dead]
        Lease.objects.filter(pk__in=held).update(heartbeat_at=at, expires_at=expires_at)
    return held


@atomic_retry
def lease_job_abort(
    *, lease: Lease, by: Actor, reason: str = "", at: datetime | None = None
) -> Job:
    """Abort the job of a lease the runner holds (the runner is shutting down)."""
    lease = _lock_job_lease(lease)
    return job_abort(job=lease.job, by=by, reason=reason, at=at, mover=Mover.RUNNER)


@atomic_retry
def lease_hand_back(*, lease: Lease, by: Actor, reason: str, at: datetime | None = None) -> Lease:
    """Give back a lease its stopping runner never started; the job is queued again.

    The hand-back uses no try (attempts go back down). A test job's host is left alone; a
    verify or repair job's host goes back to waiting for it (`needs_verify`, `needs_repair`),
    its repair attempts untouched, since nothing was tried. The worker is marked stopping,
    offline until its runner heartbeats the worker again, so the job does not bounce back to a
    runner that will not take it (docs/health.md#runners).
    """
    at = at or timezone.now()
    lease = _lock_job_lease(lease)
    job = Job.objects.select_for_update().get(pk=lease.job_id)
    if job.status != JobStatus.LEASED:
        raise Forbidden(f"job {job.pk} is {job.status}: only a job not started can be handed back")
    text = (reason or "").strip()[:500] or "runner stopping"
    back = f"job {job.name} handed back: {text}"
    leases = [lease]
    if job.roles:  # a multi-host job is handed back whole: every host of it
        leases = [lease if each.pk == lease.pk else each for each in active_leases_for(job)]
    transitions.release_leases(
        leases, reason=RELEASED, mover=RUNNER, by=by, at=at, message=back, trigger="handed back"
    )
    transitions.move_jobs(
        [job.pk],
        to=JobStatus.QUEUED,
        mover=Mover.RUNNER,
        at=at,
        attempts=max(job.attempts - 1, 0),
        message=f"handed back by its runner: {text}",
    )
    if job.kind in WAITS_FOR:
        transitions.move_hosts(
            [lease.host_id], to=WAITS_FOR[job.kind], mover=Mover.RUNNER, by=by, at=at,
            why=f"its {job.kind} job was handed back unstarted: {text}",
        )  # fmt: skip
    worker = lease.host.worker
    if worker is not None and worker.last_seen is not None:
        Worker.objects.filter(pk=worker.pk).update(last_seen=None)
        audit.record(
            EventKind.UPDATED,
            actor=by,
            worker=worker,
            lease_id=lease.pk,
            job_id=job.pk,
            message=f"worker stopping: its runner handed back job {job.name}",
            at=at,
        )
    lease.refresh_from_db()
    return lease
