"""The runner protocol: start, heartbeat, complete; by job and by the lease a runner holds."""

from __future__ import annotations

from collections.abc import Sequence
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
from jobs import recovery, transitions
from jobs.choices import JobKind, JobStatus, ReleaseReason
from jobs.models import Job, Lease
from jobs.querysets import ACTIVE_LEASE_SQL
from jobs.services.common import active_lease_for
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


def _start(lease: Lease, *, by: Actor, at: datetime) -> Job:
    """Move the lease's job to running; the lease first, as every call by lease does."""
    _extend(lease, at=at, unexpired=False)  # `start` counts as a heartbeat
    job = lease.job
    transitions.move_job(job, to=JobStatus.RUNNING, mover=Mover.RUNNER, at=at)
    transitions.lease_event(
        EventKind.STARTED, lease, by=by, at=at, message=f"job {job.name} started"
    ).save()
    return job


def lease_heartbeat(*, lease: Lease, by: Actor = None, at: datetime | None = None) -> Lease:
    """Extend an active lease by LEASE_TTL and mark its worker seen."""
    at = at or timezone.now()
    ttl = timedelta(seconds=settings.LEASE_TTL)
    # Compare-and-set: a heartbeat for a released (or already expired) lease changes nothing.
    # Two single-row statements, each atomic by itself; neither reads first.
    changed = (
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
    at: datetime | None = None,
) -> Job:
    """Release the job's lease with its result, then act on what it says of the host.

    A test that failed on a host the runner found broken is retried elsewhere while it has
    tries left; the host goes to repair. A verify or repair job moves its host along the
    health loop (docs/health.md).
    """
    at = at or timezone.now()
    job = lease.job
    message = (message or "")[:10000]
    is_test = job.kind == JobKind.TEST
    host_broke = is_test and not host_ok
    done = f"{'job' if is_test else job.kind + ' job'} {job.name} {result}"
    done += f": {message[:200]}" if message else ""
    # The lease first: its compare-and-set locks the row before the job's, in the order the
    # tick's expiry takes them, and a lease that ended meanwhile fails the whole call.
    try:
        transitions.release_leases(
            [lease], reason=COMPLETED, mover=RUNNER, by=by, at=at, message=done,
            trigger="job completed",
        )  # fmt: skip
    except Conflict:
        raise _ended(lease) from None
    if not (host_broke and result == JobStatus.FAILED):
        transitions.move_job(job, to=result, mover=Mover.RUNNER, at=at, message=message)
    if not is_test:
        passed = result == JobStatus.PASSED
        recovery.maintenance_ended(job, host=lease.host, passed=passed, mover=RUNNER, by=by, at=at)
    elif host_broke:
        if result == JobStatus.FAILED:
            why = f"the runner reported it broken; {recovery.brief(message)}"
            recovery.retry_or_end([lease], end_as=FAILED, mover=RUNNER, at=at, why=why, by=by)
            job.refresh_from_db()  # retried or ended by the recovery, not by move_job
        why = f"runner reported the host broken after job {job.name}"
        transitions.mark_needs_repair([lease.host_id], mover=RUNNER, by=by, why=why, at=at)
    elif result == JobStatus.FAILED:
        recovery.check_failure_streak(lease.host, by=by, at=at, lease=lease)
    return job


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
    """Heartbeat an active job lease in one compare-and-set, which also locks its row.

    With `unexpired`, a lease past its expiry that no tick has released yet is refused too.
    """
    expires_at = at + timedelta(seconds=settings.LEASE_TTL)
    rows = Lease.objects.active().filter(pk=lease.pk, job__isnull=False)
    if unexpired:
        rows = rows.filter(expires_at__gte=at)
    if not rows.update(heartbeat_at=at, expires_at=expires_at):
        raise _ended(lease)
    lease.heartbeat_at, lease.expires_at = at, expires_at


def _lock_job_lease(lease: Lease) -> Lease:
    """Lock and read an active job lease, for the calls that act on more than its row."""
    locked = Lease.objects.select_for_update().filter(pk=lease.pk).first()
    if locked is None or not locked.active or locked.job_id is None:
        raise _ended(locked or lease)
    return locked


@atomic_retry
def lease_job_start(*, lease: Lease, by: Actor, at: datetime | None = None) -> Job:
    """Start the job of a lease the runner holds."""
    return _start(lease, by=by, at=at or timezone.now())


class Report(TypedDict, total=False):
    """What a runner reports of a finished job: `job_complete`'s arguments past job and by."""

    result: Required[str]  # passed or failed
    message: str  # the output's tail
    host_ok: bool  # False: the runner found the host broken
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
    """Heartbeat those of the leases that are active job leases on the worker's hosts."""
    expires_at = at + timedelta(seconds=settings.LEASE_TTL)
    if connection.vendor == "postgresql":
        # One UPDATE … RETURNING: the compare-and-set answers which rows it extended. The
        # lease's own conditions sit on the UPDATE, not in a subquery, so a lease released
        # meanwhile is re-checked as it is now (an ORM update with a join would not be).
        lease, host = Lease._meta.db_table, Host._meta.db_table
        with connection.cursor() as cursor:
            cursor.execute(
                f"UPDATE {lease} SET heartbeat_at = %s, expires_at = %s "
                f"WHERE id = ANY(%s) AND {ACTIVE_LEASE_SQL} AND job_id IS NOT NULL "
                f"AND expires_at >= %s AND host_id IN (SELECT id FROM {host} WHERE worker_id = %s) "
                "RETURNING id",
                [at, expires_at, ids, at, worker.pk],
            )
            return [row[0] for row in cursor.fetchall()]
    with transaction.atomic():
        held = list(
            Lease.objects.active()
            .filter(pk__in=ids, job__isnull=False, expires_at__gte=at, host__worker=worker)
            .select_for_update(of=("self",))
            .values_list("pk", flat=True)
        )
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
    transitions.release_leases(
        [lease], reason=RELEASED, mover=RUNNER, by=by, at=at, message=back, trigger="handed back"
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
