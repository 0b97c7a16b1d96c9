"""Reads of what jobs did: one job's attempts with their hosts and events, and suites' results.

An attempt is one of the job's leases (docs/states.md#lease); its events are the host's audit
rows written while the lease held the host. Nothing here writes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db.models import Count, Max, Q
from django.utils import timezone

from hosts.choices import EventKind
from hosts.models import HostEvent
from jobs.choices import ACTIVE_JOB_STATUSES, TERMINAL_JOB_STATUSES, JobStatus, ReleaseReason
from jobs.models import Job, Lease, Suite
from jobs.querysets import unfinished_jobs

# A job counts as failed for its suite when it ended without passing for a reason of its own:
# the test failed, its host broke with no retries left, or it waited past its expiry.
FAILED_STATUSES = (JobStatus.FAILED, JobStatus.ERROR, JobStatus.EXPIRED)

# The event that ends a lease, by kind: its message says why the attempt ended.
ENDING_EVENTS = (EventKind.COMPLETED, EventKind.RELEASED, EventKind.EXPIRED, EventKind.TIMED_OUT)

# Events carry the time their service was given; a second either side of the lease keeps the
# ones written in the same step as the lease's start or end.
SLACK = timedelta(seconds=1)


@dataclass(frozen=True)
class Attempt:
    """One try of a job: the lease it ran under, what came of it and what its host saw."""

    number: int  # 1 = the first try
    lease: Lease
    started_at: datetime | None  # when the runner said the test began (its `started` event)
    result: str  # a job status while it holds the job or ended it, else how the lease ended
    message: str  # the job's output if this try ended the job, else the ending event's message
    retried_because: str  # why the job went back to the queue after this try ("" if it did not)
    events: list[HostEvent]  # oldest first
    ended_job: bool  # this try gave the job its final status: `message` is its whole output
    # Every lease of the try, by slot: a multi-host job's one per host; `lease` is the one that
    # ended it (whose host failed), else its slot 0's.
    leases: tuple[Lease, ...] = ()


def _tries(leases: list[Lease]) -> list[list[Lease]]:
    """The leases grouped by try: a multi-host job's leases of one attempt together, by slot."""
    tries: dict[object, list[Lease]] = {}
    for lease in leases:
        key = ("attempt", lease.attempt) if lease.attempt is not None else ("lease", lease.pk)
        tries.setdefault(key, []).append(lease)
    return [sorted(group, key=lambda lease: (lease.slot, lease.pk)) for group in tries.values()]


def job_attempts(job: Job, *, now: datetime | None = None) -> list[Attempt]:
    """Every try of the job, oldest first, with its leases and events: two queries however
    many."""
    now = now or timezone.now()
    leases = list(
        Lease.objects.filter(job=job).select_related("host__worker").order_by("acquired_at", "id")
    )
    if not leases:
        return []
    events = _events_by_lease(leases, now=now)
    tries = _tries(leases)
    last = tries[-1]
    attempts = []
    for number, group in enumerate(tries, start=1):
        lease = next((each for each in group if each.host_failed), group[0])
        mine = sorted(
            {e.pk: e for each in group for e in events.get(each.pk, [])}.values(),
            key=lambda e: (e.created_at, e.pk),
        )
        ended_job = (
            group is last
            and job.status in TERMINAL_JOB_STATUSES
            and not lease.active
            # The job's final move and the lease's release are one step with one time; a job
            # requeued and then aborted or expired in the queue ended after its last lease.
            and job.finished_at == lease.released_at
        )
        went_back = not lease.active and not ended_job
        ending = next((e for e in mine if e.kind in ENDING_EVENTS and e.lease_id == lease.pk), None)
        retried = next((e for e in mine if e.kind == EventKind.RETRIED), None)
        attempts.append(
            Attempt(
                number=number,
                lease=lease,
                started_at=next((e.created_at for e in mine if e.kind == EventKind.STARTED), None),
                result=_result(job, lease, ended_job=ended_job),
                message=job.message if ended_job else (ending.message if ending else ""),
                retried_because=_retried_because(
                    lease, retried=retried, ending=ending, went_back=went_back
                ),
                events=mine,
                ended_job=ended_job,
                leases=tuple(group),
            )
        )
    return attempts


def _result(job: Job, lease: Lease, *, ended_job: bool) -> str:
    if lease.active:
        return job.status if job.status in ACTIVE_JOB_STATUSES else JobStatus.LEASED
    if ended_job:
        return job.status
    # A completed try the job went on from: the runner reported the test failed on a broken
    # host, and the job was retried (docs/health.md#retries-after-an-infrastructure-failure).
    completed = lease.release_reason == ReleaseReason.COMPLETED
    return JobStatus.FAILED if completed else lease.release_reason


def _retried_because(
    lease: Lease, *, retried: HostEvent | None, ending: HostEvent | None, went_back: bool
) -> str:
    if retried is not None:
        return retried.message
    if not went_back:
        return ""
    # Requeued by hand, handed back by a stopping runner, or expired with tries left.
    return ending.message if ending else f"its lease ended ({lease.get_release_reason_display()})"


def _events_by_lease(leases: list[Lease], *, now: datetime) -> dict[int, list[HostEvent]]:
    """Each lease's events: its own, and its host's untagged ones while it held the host."""
    windows: dict[int, tuple[datetime, datetime]] = {}
    where = Q()
    for lease in leases:
        start, end = lease.acquired_at - SLACK, (lease.released_at or now) + SLACK
        windows[lease.pk] = (lease.acquired_at, lease.released_at or now)
        # By host and time, which the (host, -created_at) index answers; a stopping worker's
        # event names its worker and the lease but no host.
        where |= Q(host_id=lease.host_id, created_at__range=(start, end))
        if lease.host.worker_id:
            where |= Q(
                host__isnull=True,
                worker_id=lease.host.worker_id,
                lease_id=lease.pk,
                created_at__range=(start, end),
            )
    out: dict[int, list[HostEvent]] = {lease.pk: [] for lease in leases}
    by_host: dict[int, list[Lease]] = {}
    for lease in leases:
        by_host.setdefault(lease.host_id, []).append(lease)
    for event in HostEvent.objects.filter(where).order_by("created_at", "id"):
        if event.lease_id is not None:
            if event.lease_id in out:
                out[event.lease_id].append(event)
            continue
        for lease in by_host.get(event.host_id, []):
            start, end = windows[lease.pk]
            if start <= event.created_at <= end:
                out[lease.pk].append(event)
    return out


def last_leases_by_job(job_ids: list[int]) -> dict[int, Lease]:
    """The latest lease of each job (the active one, or the one it last ran under), one query."""
    if not job_ids:
        return {}
    # Ids grow with acquisition, and a job holds one active lease at most: its highest id is
    # its active lease when it has one.
    latest = (
        Lease.objects.filter(job_id__in=job_ids)
        .order_by()
        .values("job_id")
        .annotate(last=Max("id"))
        .values("last")
    )
    leases = Lease.objects.filter(pk__in=latest).select_related("host")
    return {lease.job_id: lease for lease in leases}


# --- suites ---------------------------------------------------------------------------------


def suite_outcome(counts: Mapping[str, int]) -> dict[str, int]:
    """A suite's jobs by how they came out, from its job counts by status (no query)."""
    return {
        "passed": counts.get(JobStatus.PASSED, 0),
        "failed": sum(counts.get(status, 0) for status in FAILED_STATUSES),
        "aborted": counts.get(JobStatus.ABORTED, 0),
        "skipped": counts.get(JobStatus.SKIPPED, 0),
        "unfinished": unfinished_jobs(counts),
    }


@dataclass(frozen=True)
class NameResults:
    """How the jobs of one test name in a suite came out."""

    name: str
    passed: int
    failed: int
    other: int  # aborted, skipped, or not finished yet


def suite_results_by_name(suite: Suite) -> list[NameResults]:
    """Passed, failed and other counts per job name, failing names first: one query.

    A fan-out suite's jobs are named NAME@HOSTNAME; they count under NAME.
    """
    rows = (
        Job.objects.filter(suite=suite)
        .order_by()
        .values("name")
        .annotate(
            passed=Count("id", filter=Q(status=JobStatus.PASSED)),
            failed=Count("id", filter=Q(status__in=FAILED_STATUSES)),
            total=Count("id"),
        )
    )
    merged: dict[str, list[int]] = {}
    for row in rows:
        name = row["name"].rsplit("@", 1)[0] if suite.fanout_labels else row["name"]
        counts = merged.setdefault(name, [0, 0, 0])
        counts[0] += row["passed"]
        counts[1] += row["failed"]
        counts[2] += row["total"] - row["passed"] - row["failed"]
    results = [NameResults(name, *counts) for name, counts in merged.items()]
    return sorted(results, key=lambda r: (-r.failed, -r.other, r.name))
