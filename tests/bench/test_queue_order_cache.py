"""The cached queue order is always the planner's consideration order, at a flat query count."""

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
from tests.bench.support import queries

# PostgreSQL only: the digest keying the cache is SQL; elsewhere every read recomputes.
pytestmark = [pytest.mark.django_db, pytest.mark.postgres]

SMALL = LabShape(20, 80, 4, 8, seed=5, pinned=0.05, quota=0.5, capped=0.3)
BIG = LabShape(300, 1500, 30, 30, seed=5, pinned=0.05, quota=0.5, capped=0.3)


def assert_fresh() -> None:
    """The (possibly cached) order equals one computed from the database now."""
    cached = selectors.queue_order_ids()
    fresh = selectors._queue_order_ids_uncached()
    assert cached.ids == fresh.ids
    assert cached.quota_ids == fresh.quota_ids


def load(shape: LabShape) -> None:
    dbload.load(generate(shape), now=timezone.now(), analyze=False)
    services.scheduler_tick()  # leases, so that suites hold hosts


def release_a_suite_lease() -> None:
    """End one suite job's lease with a bare update, as an admin edit would."""
    active = Lease.objects.filter(released_at__isnull=True, job__suite__isnull=False)
    Lease.objects.filter(pk=active.order_by("id").first().pk).update(
        released_at=timezone.now(), release_reason="released"
    )


def test_every_input_of_the_order_changed_behind_the_services_back_is_seen() -> None:
    load(SMALL)
    assert_fresh()
    queued = Job.objects.filter(status=JobStatus.QUEUED).order_by("id")
    last = queued.last()
    # Every write below happens in the test's one transaction: rows keep the same xmin, so
    # only a digest by content can notice them.
    changes: list[Callable[[], object]] = [
        lambda: queued.filter(pk=last.pk).update(priority=100),
        lambda: queued.filter(pk=last.pk).update(priority=1),  # the same row, once more
        lambda: queued.filter(pk=queued.first().pk).update(
            submitted_at=timezone.now() + timedelta(days=1)
        ),
        lambda: queued.filter(pk=last.pk, suite__isnull=False).update(suite=None),
        lambda: Suite.objects.filter(pk__in=queued.values("suite_id")).update(min_duts=3),
        lambda: Suite.objects.filter(pk=queued.exclude(suite=None).first().suite_id).update(
            priority=99, max_duts=1
        ),
        release_a_suite_lease,  # a suite holds one host fewer
        lambda: services.job_submit(
            owner="alice",
            spec=services.JobSpec(name="late", labels=["board:none"], priority=90),
            allow_unmatched=True,
        ),
        lambda: queued.filter(pk=queued.first().pk).update(status=JobStatus.ABORTED),
        services.scheduler_tick,
    ]
    for change in changes:
        selectors.queue_order_ids()  # cache the order as it stands
        change()
        assert_fresh()


def test_a_read_with_nothing_changed_reuses_the_order_in_one_query() -> None:
    load(SMALL)
    first = selectors.queue_order_ids()
    n, again = queries(selectors.queue_order_ids)
    assert again is first
    assert n == 1  # the digest alone


def wipe() -> None:
    for model in (HostEvent, Lease, Job, Suite, SchedulerTick, Host, Label, Worker):
        model.objects.all().delete()


def test_query_counts_do_not_grow_with_the_queue() -> None:
    counts = {}
    for name, shape in (("small", SMALL), ("big", BIG)):
        wipe()
        load(shape)
        miss, _ = queries(selectors.queue_order_ids)
        hit, _ = queries(selectors.queue_order_ids)
        counts[name] = (miss, hit)
    assert counts["small"] == counts["big"]
    assert counts["big"][1] == 1
