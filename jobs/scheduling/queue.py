"""The queue as people see it: queued jobs in the scheduler's order, filtered and one page loaded.

The web page and the API both show it through these two functions, so a filter keeps each job's
position in the whole queue in both, and a page costs the same queries in both.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from django.db.models import Q, QuerySet

from hosts.models import Host
from jobs import selectors
from jobs.models import Job, decode_labels


@dataclass(frozen=True)
class QueueSelection:
    """The queued job ids a filter keeps, in consideration order, and where each stands."""

    order: selectors.QueueOrder  # every queued job, and which ones the quota phase takes first
    ids: list[int]  # the ids the filter keeps, in the same order
    positions: dict[int, int]  # job id → place in the whole queue, from 1


def queue_select(filtered: QuerySet[Job] | None = None) -> QueueSelection:
    """Queued job ids in the scheduler's order, kept to those in `filtered` (None: all of them)."""
    # Ids only (cached per queue state): building a model instance per queued job cost about
    # 1 s per request at 10,000 queued. The rows of one page are loaded by queue_jobs.
    order = selectors.queue_order_ids()
    ids = order.ids
    if filtered is not None:
        wanted = set(filtered.values_list("pk", flat=True))
        ids = [job_id for job_id in ids if job_id in wanted]
    positions = {job_id: i for i, job_id in enumerate(order.ids, start=1)}
    return QueueSelection(order=order, ids=ids, positions=positions)


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
    # Decide per distinct label set, not per job: a lab has hundreds of sets and may queue
    # 100,000 jobs. Then the order the queue page shows (cached), so the cost is a few queries.
    queued = Job.objects.queued()
    carried = set(host.label_names)
    keys = queued.values_list("label_key", flat=True).distinct().order_by()
    fitting = [key for key in keys if set(decode_labels(key)) <= carried]
    wanted = set(
        queued.filter(Q(host__isnull=True) | Q(host=host), label_key__in=fitting).values_list(
            "pk", flat=True
        )
    )
    order = selectors.queue_order_ids().ids if wanted else []
    positions = {job_id: i for i, job_id in enumerate(order, start=1) if job_id in wanted}
    ranked = sorted(wanted, key=lambda job_id: positions.get(job_id, len(order) + job_id))
    return HostWaiters(jobs=queue_jobs(ranked[:limit]), positions=positions, count=len(wanted))
