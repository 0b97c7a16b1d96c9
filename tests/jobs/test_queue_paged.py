"""The queue pages read the planner's consideration order a page at a time, and get it right."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

import pytest
from django.utils import timezone

from bench import dbload
from bench.labgen import LabShape, generate
from hosts.models import Host, HostEvent, Label, Worker
from jobs import selectors, services
from jobs.choices import JobStatus
from jobs.models import Job, Lease, SchedulerTick, Suite
from jobs.scheduling import queue
from tests.bench.support import queries

pytestmark = pytest.mark.django_db

SMALL = LabShape(20, 80, 4, 8, seed=5, pinned=0.05, quota=0.5, capped=0.3)
BIG = LabShape(300, 1500, 30, 30, seed=5, pinned=0.05, quota=0.5, capped=0.3)


def load(shape: LabShape) -> None:
    dbload.load(generate(shape), now=timezone.now(), analyze=False)
    services.scheduler_tick()  # leases, so that suites hold hosts


def paged(selection: queue.QueueSelection, size: int) -> list[int]:
    """Every id of the selection, read page by page as the views read them."""
    ids: list[int] = []
    while page := selection.ids[len(ids) : len(ids) + size]:
        ids += page
    return ids


def assert_the_planners_order() -> None:
    """Pages of the whole queue and of a filter list the planner's order with its positions."""
    reference = selectors.queue_order_ids()
    whole = queue.queue_select()
    assert paged(whole, 7) == reference.ids
    assert whole.quota_ids == reference.quota_ids
    assert whole.ids.count() == len(reference.ids) == whole.total.n
    place = {job_id: i for i, job_id in enumerate(reference.ids, start=1)}
    assert whole.positions(reference.ids) == place
    # One job's place (its page), counted apart: quota jobs, main-phase jobs, the last one.
    for job_id in {*reference.ids[:3], *reference.ids[::37], reference.ids[-1]}:
        assert queue.queue_place(Job(pk=job_id))[0] == place[job_id]
    # A filter keeps each job's place in the whole queue, whatever part of the order it is in.
    every_other = Job.objects.queued().filter(pk__in=reference.ids[::2])
    mine = queue.queue_select(every_other)
    assert paged(mine, 5) == reference.ids[::2]
    assert queue.queue_select(every_other).positions(reference.ids[::2]) == {
        job_id: place[job_id] for job_id in reference.ids[::2]
    }


def release_a_suite_lease() -> None:
    """End one suite job's lease and requeue its job with bare updates, as an admin edit."""
    lease = Lease.objects.filter(released_at__isnull=True, job__suite__isnull=False).first()
    Lease.objects.filter(pk=lease.pk).update(released_at=timezone.now(), release_reason="released")
    Job.objects.filter(pk=lease.job_id).update(status=JobStatus.QUEUED)


def one_short(suite_id: int) -> None:
    """The suite is one host short of its minimum: one quota candidate, its first queued job."""
    held = Lease.objects.active().filter(job__suite_id=suite_id).count()
    Suite.objects.filter(pk=suite_id).update(min_duts=held + 1, max_duts=None, priority=100)
    first = Job.objects.queued().filter(suite_id=suite_id).order_by("id").first()
    assert first.pk in queue.queue_select().quota_ids


@pytest.mark.postgres
def test_every_input_of_the_order_changed_behind_the_services_back_is_seen() -> None:
    load(SMALL)
    assert_the_planners_order()
    queued = Job.objects.filter(status=JobStatus.QUEUED).order_by("id")
    last = queued.last()
    changes: list[Callable[[], object]] = [
        lambda: queued.filter(pk=last.pk).update(priority=100),
        lambda: queued.filter(pk=last.pk).update(priority=1),
        lambda: queued.filter(pk=queued.first().pk).update(
            submitted_at=timezone.now() + timedelta(days=1)
        ),
        lambda: queued.filter(pk=last.pk, suite__isnull=False).update(suite=None),
        lambda: Suite.objects.filter(pk__in=queued.values("suite_id")).update(min_duts=3),
        lambda: Suite.objects.filter(pk=queued.exclude(suite=None).first().suite_id).update(
            priority=99, max_duts=1
        ),
        release_a_suite_lease,  # a suite holds one host fewer, and has one more queued job
        lambda: one_short(queued.exclude(suite=None).last().suite_id),
        lambda: services.job_submit(
            owner="alice",
            spec=services.JobSpec(name="late", labels=["board:none"], priority=90),
            allow_unmatched=True,
        ),
        lambda: services.host_verify_now(host=Host.objects.order_by("id").first(), by="sam"),
        lambda: queued.filter(pk=queued.first().pk).update(status=JobStatus.ABORTED),
        services.scheduler_tick,
    ]
    for change in changes:
        change()
        assert_the_planners_order()


def wipe() -> None:
    for model in (HostEvent, Lease, Job, Suite, SchedulerTick, Host, Label, Worker):
        model.objects.all().delete()


def read_a_page(filtered: bool) -> list[int]:
    """What a queue view reads: the selection, one page of ids, their rows and positions."""
    selection = queue.queue_select(Job.objects.queued().exclude(name="") if filtered else None)
    jobs = queue.queue_jobs(selection.ids[50:100])
    selection.positions([job.pk for job in jobs])
    selection.ids.count()
    return [job.pk for job in jobs]


@pytest.mark.postgres
@pytest.mark.parametrize("filtered", [False, True])
def test_a_page_costs_the_same_queries_for_80_and_1500_queued(filtered: bool) -> None:
    counts = {}
    for name, shape in (("small", SMALL), ("big", BIG)):
        wipe()
        load(shape)
        Suite.objects.update(min_duts=2)  # some suites short of their quota: the third query
        counts[name], page = queries(lambda: read_a_page(filtered))  # noqa: B023
        assert page, "the page is empty"
    assert counts["small"] == counts["big"]
    # The settings row (is the order an index order?), maintenance jobs, quota suites and
    # candidates, the page's ids, rows and places, the count.
    assert counts["big"] <= 9, counts
