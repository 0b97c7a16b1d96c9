"""The queue as people see it: queued jobs in the scheduler's order, filtered, one page read.

The order (docs/scheduling.md#order-of-consideration) has three parts: queued maintenance jobs
by id, then the quota phase's candidates, then every other queued test job by (priority desc,
submitted_at, id). The first two are few and read whole (`queue_head`); the third is the order
of the partial index `job_queue_order`, read one page at a time. A page costs what its place
in the queue costs, not what the queue costs (docs/performance.md#the-queue-pages).

The web page and the API both show it through these functions, so a filter keeps each job's
position in the whole queue in both, and a page costs the same queries in both.

Under scheduler settings that order by size or age (docs/scheduling.md#policies), no index
holds the order: the head is then the whole queue, ordered by the planner's own functions on
every queued job (`_policy_head`), O(queue) per page (docs/performance.md#the-queue-pages).
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from django.db import connection
from django.db.models import Count, F, OuterRef, Q, QuerySet, Subquery, Window
from django.db.models.functions import Coalesce, RowNumber
from django.utils import timezone
from django.utils.functional import cached_property

from hosts.models import Host
from hosts.rules import job_fits_host
from jobs import selectors
from jobs.choices import ACTIVE_JOB_STATUSES, JobKind
from jobs.models import Job, Lease, SchedulerSettings, Suite, decode_labels
from jobs.scheduling import planner
from schedsite import counting
from schedsite.counting import RowCount, bounded_count, estimated_count, planner_rows

# The main phase's order, as the partial index job_queue_order stores it.
QUEUE_ORDER = ("-priority", "submitted_at", "id")
OrderKey = tuple[int, datetime, int]  # (-priority, submitted_at, id): ascending in that order


@dataclass(frozen=True)
class QueueHead:
    """The start of the order that no index gives: maintenance jobs, then quota candidates."""

    ids: list[int]  # in consideration order
    quota_ids: frozenset[int]
    # Every head job's index key, sorted: how many of them a main-phase job's index rank counts.
    keys: list[OrderKey] = field(repr=False)
    policy: planner.Policy = planner.DEFAULT_POLICY
    now: datetime | None = None
    complete: bool = False  # the whole queue, in order: nothing left to read from the index

    @cached_property
    def places(self) -> dict[int, int]:
        return {job_id: i for i, job_id in enumerate(self.ids, start=1)}


def queue_head() -> QueueHead:
    """Read the head of the queue: three queries, four when a suite is short of its quota."""
    policy = SchedulerSettings.load().policy()
    if policy.ordering != "fifo" or policy.aging_minutes > 0 or policy.fair_share:
        return _policy_head(policy, timezone.now())
    queued = Job.objects.queued()
    # Maintenance jobs first: the tick leases them before any test job.
    maintenance = list(
        queued.exclude(kind=JobKind.TEST)
        .order_by("id")
        .values_list("id", "priority", "submitted_at")
    )
    rows = [*maintenance, *quota_candidates()]
    ids = [job_id for job_id, _priority, _at in rows]
    return QueueHead(
        ids=ids,
        quota_ids=frozenset(ids[len(maintenance) :]),
        keys=sorted((-priority, at, job_id) for job_id, priority, at in rows),
    )


def _policy_head(policy: planner.Policy, now: datetime) -> QueueHead:
    """The whole queue in the order the tick takes it under a size, aging or fair-share order:
    the planner's own order on every queued job (selectors.queue_order_ids), not an
    approximation of it in SQL."""
    order = selectors.queue_order_ids(policy=policy, now=now)
    return QueueHead(
        ids=order.ids,
        quota_ids=order.quota_ids,
        keys=[],
        policy=policy,
        now=now,
        complete=True,
    )


@dataclass(frozen=True)
class Aging:
    """What aging did to one job's priority: the effective priority and why."""

    priority: int  # effective
    bonus: int
    waited_minutes: int
    step: int  # aging_minutes


def aging_of(job: Job, head: QueueHead) -> Aging | None:
    """The job's effective priority under the head's policy; None when aging is off."""
    policy, now = head.policy, head.now
    if policy.aging_minutes <= 0 or now is None or job.kind != JobKind.TEST:
        return None
    waited = (now - job.submitted_at).total_seconds()
    bonus = planner.aging_bonus(policy, waited)
    return Aging(
        priority=job.priority + bonus,
        bonus=bonus,
        waited_minutes=int(waited // 60),
        step=policy.aging_minutes,
    )


def quota_candidates() -> list[tuple[int, int, datetime]]:
    """(id, priority, submitted_at) of the quota phase's candidates, as planner.quota_candidates
    picks them from every queued job: a short suite's first `min(min_duts, max_duts) - held`
    queued test jobs by id, suites by (priority desc, created_at, id)."""
    queued_tests = Job.objects.queued().filter(kind=JobKind.TEST)
    # A job holds an active lease exactly while leased or running (docs/states.md): the status
    # index finds a suite's few active jobs instead of every job it ever ran.
    held = (
        Lease.objects.active()
        .filter(job__suite=OuterRef("pk"), job__status__in=ACTIVE_JOB_STATUSES)
        .order_by()
        .values("job__suite")
        .annotate(n=Count("pk"))
        .values("n")
    )
    suites = (
        Suite.objects.filter(min_duts__gt=0)
        .filter(pk__in=queued_tests.values("suite_id"))
        .annotate(held=Coalesce(Subquery(held), 0))
        .order_by("-priority", "created_at", "id")
        .values_list("id", "min_duts", "max_duts", "held")
    )
    wants = []
    for suite_id, min_duts, max_duts, held_now in suites:
        want = min(min_duts, max_duts if max_duts is not None else min_duts) - held_now
        if want > 0:
            wants.append((suite_id, want))
    if not wants:
        return []
    want = dict(wants)
    # Each short suite's queued jobs ranked by id; only the first `want` of each are kept.
    ranked = (
        queued_tests.filter(suite_id__in=list(want))
        .annotate(rank=Window(RowNumber(), partition_by=F("suite_id"), order_by=F("id").asc()))
        .filter(rank__lte=max(want.values()))
        .values_list("suite_id", "rank", "id", "priority", "submitted_at")
    )
    order = {suite_id: i for i, (suite_id, _want) in enumerate(wants)}
    kept = sorted(row for row in ranked if row[1] <= want[row[0]])
    kept.sort(key=lambda row: order[row[0]])  # stable: by id within a suite
    return [(job_id, priority, at) for _suite, _rank, job_id, priority, at in kept]


class QueueIds:
    """The ids a filter keeps, in consideration order: the head's in memory, the rest read from
    the index one slice at a time. Sliced and counted as Django's and DRF's paginators do."""

    def __init__(self, head_ids: list[int], tail: QuerySet[Job]) -> None:
        self.head_ids = head_ids
        self.tail = tail.order_by(*QUEUE_ORDER)
        self.offsets: dict[int, int] = {}  # id -> index in this sequence, for the slices read

    @cached_property
    def row_count(self) -> RowCount:
        return RowCount(len(self.head_ids)) + bounded_count(self.tail)

    def count(self) -> int:
        return self.row_count.n

    def __len__(self) -> int:
        return self.row_count.n

    def __getitem__(self, index: slice) -> list[int]:
        if not isinstance(index, slice) or index.step not in (None, 1):
            raise TypeError("the queue is read in slices")
        start, stop = index.start or 0, index.stop
        head = len(self.head_ids)
        ids = self.head_ids[start:stop]
        tail_start = max(start - head, 0)
        tail_stop = None if stop is None else max(stop - head, 0)
        if tail_stop is None or tail_stop > tail_start:
            ids += self.tail.values_list("id", flat=True)[tail_start:tail_stop]
        self.offsets.update((job_id, i) for i, job_id in enumerate(ids, start=start))
        return ids


@dataclass(frozen=True)
class QueueSelection:
    """The queued jobs a filter keeps, in consideration order, and where each stands."""

    head: QueueHead
    ids: QueueIds  # the ids the filter keeps, in order
    whole: bool  # no filter: `ids` is the whole queue

    @property
    def quota_ids(self) -> frozenset[int]:
        return self.head.quota_ids

    @cached_property
    def total(self) -> RowCount:
        """How many jobs the whole queue holds."""
        return self.ids.row_count if self.whole else bounded_count(Job.objects.queued())

    def positions(self, page_ids: Sequence[int]) -> dict[int, int]:
        """Each of these jobs' place in the whole queue, from 1 (a job no longer queued: none)."""
        head = self.head.places
        out = {job_id: head[job_id] for job_id in page_ids if job_id in head}
        rest = [job_id for job_id in page_ids if job_id not in head]
        if self.whole:  # the whole queue read in order: a job stands where its slice put it
            out.update((job_id, self.ids.offsets[job_id] + 1) for job_id in rest)
            rest = [job_id for job_id in rest if job_id not in out]
        if self.head.complete:  # every queued job is in the head: the rest are no longer queued
            return out
        return {**out, **main_phase_positions(self.head, rest)}


def queue_select(filtered: QuerySet[Job] | None = None) -> QueueSelection:
    """Queued jobs in the scheduler's order, kept to those in `filtered` (None: all of them)."""
    head = queue_head()
    tail = Job.objects.none() if head.complete else Job.objects.queued().filter(kind=JobKind.TEST)
    kept = head.ids
    if filtered is not None:
        tail = tail if head.complete else filtered.filter(kind=JobKind.TEST)
        wanted = set(filtered.filter(pk__in=head.ids).values_list("pk", flat=True)) if kept else ()
        kept = [job_id for job_id in head.ids if job_id in wanted]
    if head.quota_ids:
        tail = tail.exclude(pk__in_array=head.quota_ids)
    return QueueSelection(head=head, ids=QueueIds(kept, tail), whole=filtered is None)


def main_phase_positions(head: QueueHead, job_ids: Sequence[int]) -> dict[int, int]:
    """The places of these main-phase jobs in the whole queue, in one query.

    A job's place is the head's length plus its rank in the index order among queued jobs not
    in the head. The rank is counted over the index from the highest priority down to the
    lowest priority among these jobs: O(jobs ahead of them), not O(queue) for jobs near the
    front, and at worst the queue for a job at its very end.
    """
    if not job_ids:
        return {}
    table = Job._meta.db_table
    if len(job_ids) == 1:
        return _main_phase_position(head, job_ids[0])
    marks = ", ".join(["%s"] * len(job_ids))
    lowest = f"(SELECT min(priority) FROM {table} WHERE id IN ({marks}))"
    sql = (
        f"SELECT id, rank, priority, submitted_at FROM (SELECT id, priority, submitted_at, "  # noqa: S608 — names from the model, values as parameters
        "row_number() OVER (ORDER BY priority DESC, submitted_at, id) AS rank "
        f"FROM {table} WHERE status = 'queued' AND priority >= {lowest}) ranked "
        f"WHERE id IN ({marks})"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [*job_ids, *job_ids])
        rows = cursor.fetchall()
    places = {}
    for job_id, rank, priority, at in rows:
        ahead_in_head = bisect_right(head.keys, (-priority, at, job_id))
        places[job_id] = len(head.ids) + rank - ahead_in_head
    return places


def _main_phase_position(head: QueueHead, job_id: int) -> dict[int, int]:
    """`main_phase_positions` of one job: its rank is one more than the queued jobs ahead of
    it in the index order, counted over the index (job_queue_order) in two ranges, those of
    higher priority and those of its own before it, without ordering the rest of the queue."""
    table = Job._meta.db_table
    sql = (
        "SELECT j.priority, j.submitted_at, "  # noqa: S608 — names from the model, values as parameters
        f"(SELECT count(*) FROM {table} q WHERE q.status = 'queued' AND q.priority > j.priority)"
        f" + (SELECT count(*) FROM {table} q WHERE q.status = 'queued' "
        "AND q.priority = j.priority AND (q.submitted_at, q.id) < (j.submitted_at, j.id)) "
        f"FROM {table} j WHERE j.id = %s AND j.status = 'queued'"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [job_id])
        row = cursor.fetchone()
    if row is None:
        return {}
    priority, at, ahead = row
    return {job_id: len(head.ids) + ahead + 1 - bisect_right(head.keys, (-priority, at, job_id))}


def queue_place(job: Job) -> tuple[int | None, RowCount, bool]:
    """Where one queued job stands in the whole queue (None: no longer queued), the queue's
    length, and whether the place is an estimate.

    The place is [bounded](docs/performance.md#counts) as the queue's length is: exact while
    at most EXACT_COUNT_LIMIT jobs are ahead of it, else PostgreSQL's estimate of the jobs
    ahead (never below the limit, never past the queue's end). Counting every job ahead of
    the last of 100,000 was 30 ms of its page's 45-55.
    """
    head = queue_head()
    place = head.places.get(job.pk)
    queued = Job.objects.queued()
    if place is not None or head.complete:
        return place, bounded_count(queued), False
    if connection.vendor != "postgresql":
        return main_phase_positions(head, [job.pk]).get(job.pk), bounded_count(queued), False
    found = _bounded_main_phase_position(head, job.pk, limit=counting.EXACT_COUNT_LIMIT)
    if found is None:
        return None, bounded_count(queued), False
    place, estimated = found
    if not estimated:
        return place, bounded_count(queued), False
    # More than the limit ahead of it: the queue is longer than the limit, and bounded_count
    # would read limit + 1 rows only to say so; its estimate is read directly.
    length = estimated_count(queued)
    return min(place, length.n), length, True


def _bounded_main_phase_position(
    head: QueueHead, job_id: int, *, limit: int
) -> tuple[int, bool] | None:
    """`_main_phase_position`, counting at most `limit` + 1 jobs in each range: above `limit`
    jobs ahead, the planner's estimate of them (two EXPLAINs, nothing read) and True."""
    key = (
        Job.objects.queued()
        .filter(pk=job_id, kind=JobKind.TEST)
        .values_list("priority", "submitted_at")
        .first()
    )
    if key is None:
        return None
    priority, at = key
    # The job's own priority and time as values, not a join: the planner then knows how many
    # rows each range holds and reads a short one through job_queue_order. The second range is
    # read only when the first leaves room under the limit.
    queued = Job.objects.queued().order_by()
    higher = queued.filter(priority__gt=priority)
    same = queued.filter(priority=priority).filter(
        Q(submitted_at__lt=at) | Q(submitted_at=at, pk__lt=job_id)
    )
    # When the planner reckons the higher priorities alone hold more than counting.SKIP_COUNT_MARGIN
    # times the limit, the exact count (limit + 1 rows read to learn there are more) is
    # skipped: it would end in the same estimate unless the statistics were off that much.
    higher_guess = planner_rows(higher)
    if higher_guess <= counting.SKIP_COUNT_MARGIN * limit:
        ahead = higher[: limit + 1].count()
        if ahead <= limit:
            ahead += same[: limit + 1 - ahead].count()
        if ahead <= limit:
            place = len(head.ids) + ahead + 1 - bisect_right(head.keys, (-priority, at, job_id))
            return place, False
    # Ties on submitted_at (jobs submitted together) count as ahead: the job considered last
    # is then placed at the end rather than before its own batch.
    guess = higher_guess + planner_rows(queued.filter(priority=priority, submitted_at__lte=at))
    ahead = max(limit + 1, guess)
    return len(head.ids) + ahead + 1 - bisect_right(head.keys, (-priority, at, job_id)), True


def queue_jobs(page_ids: Sequence[int]) -> list[Job]:
    """The jobs of one page, in the page's order, with what a queue row shows, in one query."""
    queued = Job.objects.queued()
    by_id = queued.select_related("suite", "host__worker", "owner").in_bulk(list(page_ids))
    # A job leased since the order was read drops out of the page rather than failing.
    return [by_id[job_id] for job_id in page_ids if job_id in by_id]


@dataclass(frozen=True)
class HostWaiters:
    """The queued jobs that could run on one host, in queue order: the first few, and how many."""

    jobs: list[Job]  # the first `limit`, loaded like queue rows
    positions: dict[int, int]  # job id → place in the whole queue, from 1
    count: int  # every queued job that fits the host

    @property
    def more(self) -> int:
        """How many fit the host beyond those listed."""
        return self.count - len(self.jobs)


def host_waiters(host: Host, *, limit: int) -> HostWaiters:
    """Queued jobs the host could run (its labels cover theirs; unpinned or pinned to it)."""
    # Read the first few in queue order, as the queue page reads a page.
    fitting = fitting_jobs(Job.objects.queued(), host_id=host.pk, host_labels=host.label_names)
    if fitting.query.is_empty():
        return HostWaiters(jobs=[], positions={}, count=0)
    selection = queue_select(fitting)
    jobs = queue_jobs(selection.ids[:limit])
    positions = selection.positions([job.pk for job in jobs])
    return HostWaiters(jobs=jobs, positions=positions, count=selection.ids.count())


def fitting_jobs(jobs: QuerySet[Job], *, host_id: int, host_labels: Iterable[str]) -> QuerySet[Job]:
    """The jobs that fit a host: the SQL twin of hosts.rules.job_fits_host.

    The host carries all their labels (decided by the rule itself, once per distinct label
    set: a lab has hundreds of sets and may queue 100,000 jobs), and they are unpinned or
    pinned to it (in SQL). tests/hosts/test_rules.py holds it to the rule's cases.
    """
    carried = frozenset(host_labels)
    keys = jobs.values_list("label_key", flat=True).distinct().order_by()
    fitting = [
        key
        for key in keys
        if job_fits_host(
            labels=frozenset(decode_labels(key)),
            pinned_host_id=None,  # the pin is the SQL below
            host_id=host_id,
            host_labels=carried,
        )
    ]
    if not fitting:
        return jobs.none()
    return jobs.filter(Q(host__isnull=True) | Q(host_id=host_id), label_key__in=fitting)
