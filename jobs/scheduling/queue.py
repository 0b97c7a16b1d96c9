"""The queue as people see it: queued jobs in the scheduler's order, filtered and one page loaded.

The web page and the API both show it through these two functions, so a filter keeps each job's
position in the whole queue in both, and a page costs the same queries in both.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from django.db.models import QuerySet

from jobs import selectors
from jobs.models import Job


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
