"""What the end of a job means for its host and for a retry (docs/health.md).

Shared by the runner protocol (a job completed) and the tick (a lease expired): a job whose
host failed under it gets another try elsewhere, a host that fails every test goes to repair,
and the result of a verify or repair job moves its host along the health loop.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

from django.conf import settings
from django.contrib.postgres.expressions import ArraySubquery
from django.db import connection
from django.db.models import OuterRef, QuerySet
from django.db.models.functions import JSONObject

from hosts import audit
from hosts.audit import SCHEDULER, Actor
from hosts.choices import EventKind, HostStatus
from hosts.models import Host
from jobs import transitions
from jobs.choices import JobKind, JobStatus, ReleaseReason
from jobs.models import Job, Lease
from jobs.transitions import Mover


def retry_backoff(attempts: int) -> timedelta:
    """How long a job waits before its next try, after `attempts` tries (doubling, capped)."""
    base = max(0, settings.RETRY_BACKOFF)
    return timedelta(seconds=min(base * 2 ** max(0, attempts - 1), settings.RETRY_BACKOFF_MAX))


def repair_backoff(failed_repairs: int) -> timedelta:
    """How long a host waits before its next repair, after `failed_repairs` in a row."""
    base = max(0, settings.REPAIR_BACKOFF)
    return timedelta(seconds=base * 2 ** max(0, failed_repairs - 1))


def repair_failed_retry(rounds: int) -> timedelta | None:
    """How long a repair_failed host waits for its automatic repair, or None (turned off).

    REPAIR_FAILED_RETRY_SECONDS after the round that gave up, doubling with each automatic
    repair round that failed since (`rounds`, Host.repair_rounds), capped.
    """
    base = settings.REPAIR_FAILED_RETRY_SECONDS
    if base <= 0:
        return None
    rounds = min(max(0, rounds), 32)
    return timedelta(seconds=min(base * 2**rounds, max(base, settings.REPAIR_FAILED_RETRY_MAX)))


def repair_failed_demand_wait(rounds: int) -> timedelta | None:
    """How long a repair_failed host waits for its automatic repair when queued jobs need it,
    or None (the rule is off, or the round is not sooner).

    REPAIR_FAILED_DEMAND_SECONDS after the round that gave up, doubling with each failed
    automatic round like the ordinary wait (`repair_failed_retry`) and never longer than it: a
    host no repair mends is not tried much more often for being wanted.
    """
    ordinary = repair_failed_retry(rounds)
    base = settings.REPAIR_FAILED_DEMAND_SECONDS
    if ordinary is None or base <= 0:
        return None
    rounds = min(max(0, rounds), 32)
    wait = min(timedelta(seconds=base * 2**rounds), ordinary)
    return wait if wait < ordinary else None


def sooner_repair_at(rounds: int, next_at: datetime | None) -> datetime | None:
    """From when a repair_failed host whose automatic repair is at `next_at` gets it sooner if
    queued jobs need it (None: it does not). The give-up's time is `next_at` less the ordinary
    wait: next_repair_at is set once, when the host goes repair_failed."""
    ordinary, sooner = repair_failed_retry(rounds), repair_failed_demand_wait(rounds)
    if next_at is None or ordinary is None or sooner is None:
        return None
    return next_at - ordinary + sooner


def sooner_gaps() -> dict[int, timedelta]:
    """By count of automatic rounds (the last key standing for that many or more): how much
    sooner than next_repair_at a wanted host's round may come; rounds absent are never sooner.
    What lets SQL ask which hosts may have their round sooner now (jobs.scheduling.maintenance)."""
    gaps = {}
    for rounds in range(33):  # repair_failed_retry's doubling stops at 32 rounds
        ordinary, sooner = repair_failed_retry(rounds), repair_failed_demand_wait(rounds)
        if ordinary is not None and sooner is not None:
            gaps[rounds] = ordinary - sooner
    return gaps


def next_repair_at(rounds: int, *, at: datetime) -> datetime | None:
    """When a host reaching repair_failed at `at` gets its automatic repair (None: never)."""
    wait = repair_failed_retry(rounds)
    return at + wait if wait is not None else None


def fresh_repair_round() -> dict[str, object]:
    """The host fields a new round of REPAIR_MAX_ATTEMPTS repairs starts from.

    The one rule for staff's Repair now (jobs.services.health.host_repair_now) and the
    automatic repair of a repair_failed host (jobs.scheduling.maintenance.retry_repair_failed):
    the count of failed repairs in a row starts again and the repair is due at once.
    """
    return {"repair_attempts": 0, "repair_not_before": None}


def next_try_words(when: datetime | None) -> str:
    """How the status event, the notification and the call-out say it."""
    if when is None:
        return "no automatic repair (REPAIR_FAILED_RETRY_SECONDS is 0): staff press Repair now"
    return f"next automatic try at {when.astimezone(UTC):%Y-%m-%d %H:%M} UTC"


def retry_or_end(
    leases: Sequence[Lease],
    *,
    end_as: str,
    mover: Mover,
    at: datetime,
    why: str,
    by: Actor = SCHEDULER,
) -> tuple[list[int], list[int]]:
    """Jobs whose hosts failed under them (leases already released): retry them, or end them.

    `leases`: the leases whose hosts failed; a multi-host job may have several, and is
    retried (or ended) once. A job with tries left goes back to the queue after its backoff
    and prefers other hosts; the others end `end_as`. Each retry is also an event on each host
    it broke on, so a host's history shows the jobs it cost. Returns (retried job ids, ended
    job ids).
    """
    Lease.objects.filter(pk__in=[lease.pk for lease in leases]).update(host_failed=True)
    by_job: dict[int, list[Lease]] = {}
    for lease in leases:
        by_job.setdefault(lease.job_id, []).append(lease)
    retried, ended, events = [], [], []
    for failed in by_job.values():
        job = failed[0].job
        assert job is not None
        names = ", ".join(lease.host.hostname for lease in failed)
        host = f"host{'s' if len(failed) > 1 else ''} {names}"
        if job.attempts <= job.max_retries:
            wait = retry_backoff(job.attempts)
            message = f"retry {job.attempts} of {job.max_retries} after {host} broke ({why})"
            transitions.move_jobs(
                [job.pk],
                to=JobStatus.QUEUED,
                mover=mover,
                at=at,
                not_before=at + wait if wait else None,
                message=message,
            )
            text = f"job {job.name}: {message}"
            events += [
                transitions.lease_event(EventKind.RETRIED, lease, by=by, at=at, message=text)
                for lease in failed
            ]
            retried.append(job.pk)
        else:
            tries = "no retries left"
            transitions.move_jobs(
                [job.pk], to=end_as, mover=mover, at=at, message=f"{host} broke ({why}); {tries}"
            )
            ended.append(job.pk)
    audit.record_many(events)
    return retried, ended


def with_earlier_results(leases: QuerySet[Lease]) -> QuerySet[Lease]:
    """The leases, each with its host's last completed job leases before it read along.

    For `check_failure_streak` after the lease completes: the runner protocol reads its lease in
    one query, and a failed test's streak then costs no statement of its own. PostgreSQL only
    (elsewhere the check reads them itself).
    """
    streak = settings.HOST_FAILURE_STREAK
    if streak <= 0 or connection.vendor != "postgresql":
        return leases
    row = JSONObject(
        kind="job__kind", status="job__status", suite="job__suite_id", job="job_id",
        released_at="released_at", id="id",
    )  # fmt: skip
    earlier = (
        _completed_job_leases()
        .filter(host_id=OuterRef("host_id"))
        .exclude(pk=OuterRef("pk"))
        .values(row=row)[:streak]
    )
    return leases.annotate(earlier_results=ArraySubquery(earlier))


def _completed_job_leases() -> QuerySet[Lease]:
    completed = Lease.objects.filter(job__isnull=False, release_reason=ReleaseReason.COMPLETED)
    return completed.order_by("-released_at", "-id")


def _last_results(host: Host, streak: int, lease: Lease | None) -> list[tuple]:
    """(kind, status, suite id, job id) of the host's last `streak` completed job leases."""
    earlier = getattr(lease, "earlier_results", None)
    if lease is None or earlier is None or lease.active:
        rows = _completed_job_leases().filter(host=host)
        columns = ("job__kind", "job__status", "job__suite_id", "job_id")
        return list(rows.values_list(*columns)[:streak])
    # The lease just completed, and those its host completed before, as read with it: ordered
    # as the query would order them now, its own job's status as it is now (a job can come back
    # to a host it failed on before).
    job = lease.job
    rows = [(lease.released_at, lease.pk, job.kind, job.status, job.suite_id, job.pk)]
    for row in earlier:
        status = job.status if row["job"] == job.pk else row["status"]
        at = datetime.fromisoformat(row["released_at"])
        rows.append((at, row["id"], row["kind"], status, row["suite"], row["job"]))
    rows.sort(key=lambda row: (row[0], row[1]), reverse=True)
    return [row[2:] for row in rows[:streak]]


def check_failure_streak(
    host: Host, *, by: Actor, at: datetime, lease: Lease | None = None
) -> bool:
    """Send a host to repair when its last test jobs all failed, from two suites or more.

    Runners do not always notice a broken DUT; every test failing on it, whoever submitted
    them, is the sign. A verify or repair in between breaks the streak. `lease`: the job lease
    that just completed, read `with_earlier_results` or not.
    """
    streak = settings.HOST_FAILURE_STREAK
    if streak <= 0:
        return False
    last = _last_results(host, streak, lease)
    if len(last) < streak or any(
        kind != JobKind.TEST or status != JobStatus.FAILED for kind, status, _s, _j in last
    ):
        return False
    suites = {suite if suite is not None else f"job {job}" for _k, _s, suite, job in last}
    if len(suites) < 2:
        return False
    return bool(
        transitions.mark_needs_repair(
            [host.pk],
            mover=Mover.RUNNER,
            by=by,
            why=f"{streak} test jobs in a row from {len(suites)} suites failed on it",
            at=at,
        )
    )


def maintenance_ended(
    job: Job, *, host: Host, passed: bool | None, mover: Mover, by: Actor, at: datetime
) -> None:
    """Move a host on after its verify or repair job: passed, failed, or (None) vanished."""
    outcome = _verify_outcome if job.kind == JobKind.VERIFY else _repair_outcome
    to, why, fields = outcome(job, host=host, passed=passed, at=at)
    transitions.move_hosts([host.pk], to=to, mover=mover, by=by, at=at, why=why, **fields)


Outcome = tuple[str, str, dict[str, object]]  # the host's new status, why, fields it sets


def _verify_outcome(job: Job, *, host: Host, passed: bool | None, at: datetime) -> Outcome:
    if passed:
        return HostStatus.READY, "verify passed", {"last_verified_at": at}
    if passed is None:
        why = "its verify job's runner stopped heartbeating: verify again"
        return HostStatus.NEEDS_VERIFY, why, {}
    why = f"verify failed: {brief(job.message)}"
    return HostStatus.NEEDS_REPAIR, why, {"repair_not_before": None}


def _repair_outcome(job: Job, *, host: Host, passed: bool | None, at: datetime) -> Outcome:
    if passed:
        reset = {**fresh_repair_round(), "repair_rounds": 0, "last_verified_at": at}
        return HostStatus.READY, "repair passed", reset
    if passed is None and not _repairs_keep_vanishing(host):
        # Its runner was killed or its worker died: that says nothing of the DUT, so it costs
        # no try (a killed runner would otherwise give up on repairable hosts); repaired again.
        why = "its repair job's runner stopped heartbeating: repair again (not a failed try)"
        return HostStatus.NEEDS_REPAIR, why, {"repair_not_before": None}
    failures = host.repair_attempts + 1
    what = "its runner stopped heartbeating" if passed is None else brief(job.message)
    if failures >= settings.REPAIR_MAX_ATTEMPTS:
        when = next_repair_at(host.repair_rounds, at=at)
        why = f"repair failed {failures} times in a row; {next_try_words(when)}; last: {what}"
        return (
            HostStatus.REPAIR_FAILED,
            why,
            {"repair_attempts": failures, "repair_not_before": None, "next_repair_at": when},
        )
    wait = repair_backoff(failures)
    why = (
        f"repair {failures} of {settings.REPAIR_MAX_ATTEMPTS} failed: {what}; "
        f"next try in {int(wait.total_seconds())} s"
    )
    return (
        HostStatus.NEEDS_REPAIR,
        why,
        {"repair_attempts": failures, "repair_not_before": at + wait},
    )


def _repairs_keep_vanishing(host: Host) -> bool:
    """The host's last REPAIR_MAX_ATTEMPTS repairs all lost their runner (this one included).

    A repair that kills its runner every time would be repaired again for ever: from the
    REPAIR_MAX_ATTEMPTS-th in a row, a vanished repair counts as a failed one.
    """
    n = max(1, settings.REPAIR_MAX_ATTEMPTS)
    ended = Job.objects.filter(kind=JobKind.REPAIR, host=host, finished_at__isnull=False)
    last = list(ended.order_by("-finished_at", "-id").values_list("status", flat=True)[:n])
    return len(last) == n and all(status == JobStatus.ERROR for status in last)


def brief(message: str) -> str:
    """A message cut to one line of at most 200 characters (its end, where output ends)."""
    text = " ".join((message or "").split())
    return (text[-200:] if len(text) > 200 else text) or "no message"
