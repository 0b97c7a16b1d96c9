"""Ticks racing each other and API writes on PostgreSQL never double-lease and never fail."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.db.models import Count

from hosts.models import Host
from jobs import services
from jobs.choices import JobStatus
from jobs.models import Job, Lease
from schedsite.errors import Conflict
from tests import factories as f
from tests.threads import race

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


def run_threads(*targets) -> list[BaseException]:  # noqa: ANN002
    """Race the targets; the errors they raised."""
    return [r for r in race(*targets) if isinstance(r, BaseException)]


def assert_invariants() -> None:
    active = Lease.objects.filter(released_at__isnull=True)
    assert not active.values("host").annotate(n=Count("id")).filter(n__gt=1).exists()
    assert (
        not active.exclude(job=None).values("job").annotate(n=Count("id")).filter(n__gt=1).exists()
    )
    leased_jobs = set(
        Job.objects.filter(status__in=[JobStatus.LEASED, JobStatus.RUNNING]).values_list(
            "id", flat=True
        )
    )
    assert leased_jobs == set(active.exclude(job=None).values_list("job_id", flat=True))


def test_two_ticks_racing_for_fifty_rounds_never_double_lease():
    assert connection.vendor == "postgresql"
    for i in range(6):
        f.host(f"h{i}", ["board:x"] + (["bt"] if i % 2 else []))
    rng_labels = [["board:x"], ["board:x", "bt"]]
    total_leased = 0
    for round_no in range(50):
        f.suite(
            f"S{round_no}",
            [rng_labels[(round_no + k) % 2] for k in range(3)],
            priority=(round_no * 7) % 100,
            min_duts=round_no % 3,
        )
        errors = run_threads(services.scheduler_tick, services.scheduler_tick)
        assert errors == []
        assert_invariants()
        # Finish what runs so the next round has free hosts again.
        for job in Job.objects.filter(status=JobStatus.LEASED):
            services.job_start(job=job, by="runner")
            services.job_complete(job=job, result="passed", by="runner")
            total_leased += 1
    assert total_leased >= 100  # the race did real work in most rounds


def test_ticks_racing_reservations_and_releases_keep_every_invariant():
    hosts = [f.host(f"h{i}", ["board:x"]) for i in range(4)]
    f.suite("S", 40)
    conflicts: list[int] = []

    def reserve_and_release() -> None:
        for i in range(20):
            host = Host.objects.get(pk=hosts[i % 4].pk)
            try:
                lease = services.lease_reserve(
                    host=host, holder="sam", duration=timedelta(minutes=5), reason="race"
                )
                services.lease_release(lease=lease, by="sam")
            except Conflict:
                conflicts.append(i)  # the tick got there first: fine, and nothing changed

    def tick_and_finish() -> None:
        for _ in range(20):
            services.scheduler_tick()
            for job in Job.objects.filter(status=JobStatus.LEASED)[:2]:
                try:
                    services.job_start(job=job, by="runner")
                    services.job_complete(job=job, result="passed", by="runner")
                except Conflict:
                    pass

    errors = run_threads(reserve_and_release, tick_and_finish, services.scheduler_tick)
    assert errors == []
    assert_invariants()
