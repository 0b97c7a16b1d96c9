"""The tick's query count does not grow with the lab: 20 hosts and 400 hosts take the same."""

from __future__ import annotations

import pytest
from django.db import connection
from django.utils import timezone
from django.utils.module_loading import import_string

from bench import dbload
from bench.labgen import LabShape, generate
from hosts.models import Host, HostEvent, Label, Worker
from jobs import services
from jobs.models import Job, Lease, SchedulerTick, Suite
from jobs.scheduling import tick as tick_module
from tests.bench.support import queries

# PostgreSQL, the production database: SQLite splits bulk writes into batches of 999
# parameters, so there the count grows with the lab by design.
pytestmark = [pytest.mark.django_db, pytest.mark.postgres]

SMALL = LabShape(20, 80, 4, 8, seed=3, pinned=0.05, quota=0.5, capped=0.3)
BIG = LabShape(400, 2400, 40, 40, seed=3, pinned=0.05, quota=0.5, capped=0.3)


def tick_query_counts(shape: LabShape) -> dict[str, int]:
    """Load the lab, then count the queries of a cold, a steady and an event-driven tick."""
    dbload.load(generate(shape), now=timezone.now(), analyze=False)
    counts: dict[str, int] = {}

    counts["cold"], cold = queries(services.scheduler_tick)
    assert cold.leases, "the cold tick leases hosts"  # type: ignore[attr-defined]
    counts["replan"], replan = queries(services.scheduler_tick)  # the cold tick changed the lab
    assert not replan.leases and not replan.unchanged  # type: ignore[attr-defined]
    counts["steady"], steady = queries(services.scheduler_tick)
    assert steady.unchanged  # type: ignore[attr-defined]

    # An event: a job completes and an urgent job for its host arrives; the tick leases it.
    lease = Lease.objects.filter(released_at__isnull=True).select_related("job", "host").first()
    assert lease is not None
    services.job_start(job=lease.job, by="runner-1")
    services.job_complete(job=lease.job, result="passed", by="runner-1")
    services.job_submit(
        owner="alice",
        spec=services.JobSpec(name="urgent", labels=lease.host.label_names, priority=100),
    )
    counts["event"], event = queries(services.scheduler_tick)
    assert [made["job"] for made in event.leases] == ["urgent"]  # type: ignore[attr-defined]
    return counts


def wipe() -> None:
    for model in (HostEvent, Lease, Job, Suite, SchedulerTick, Host, Label, Worker):
        model.objects.all().delete()


def test_the_tick_takes_as_many_queries_at_400_hosts_as_at_20(monkeypatch) -> None:  # noqa: ANN001
    # Pruning the tick history runs on every 50th tick id, which depends on what ran before.
    monkeypatch.setattr(tick_module, "_prune_ticks", lambda latest_id: None)
    small = tick_query_counts(SMALL)
    wipe()
    big = tick_query_counts(BIG)
    assert big == small
    # And a fixed, small number: a regression to one query per host or job fails here too.
    # The cold tick also queues and leases repair jobs for the hosts labgen marks broken, and
    # looks for open fan-out suites (one query, on ticks after a write), reads the scheduler
    # settings (one query, on ticks that plan) and the capacity of the workers whose hosts get
    # a maintenance job (one query, when there are such jobs to lease). A tick that leases reads
    # the hosts released while it ran before each lease statement (one query), and a tick that
    # plans checks its copy of the wait-reason table and writes the classes that changed (up
    # to three: the check, the delete, the upsert).
    assert max(big.values()) <= 48


@pytest.mark.postgres
@pytest.mark.django_db
def test_a_tick_that_fills_the_lab_refreshes_the_planner_statistics(monkeypatch):
    """After a tick that makes many leases PostgreSQL knows the lease table is no longer empty."""
    from tests import factories as f

    monkeypatch.setattr(tick_module, "ANALYZE_AFTER_LEASES", 5)
    for i in range(6):
        f.host(f"h{i}", ["board:x"])
    f.suite("S", 6)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE jobs_lease")
        cursor.execute("SELECT reltuples FROM pg_class WHERE relname = 'jobs_lease'")
        before = cursor.fetchone()[0]
        services.scheduler_tick()
        cursor.execute("SELECT reltuples FROM pg_class WHERE relname = 'jobs_lease'")
        after = cursor.fetchone()[0]
    assert before <= 0 and after == 6


@pytest.mark.postgres
@pytest.mark.django_db
def test_the_job_table_is_analysed_by_a_task_after_such_a_tick(monkeypatch):
    """The job table's ANALYZE (about 0.15 s at 100,000 jobs) goes to a cluster worker."""
    from jobs import tasks
    from tests import factories as f

    monkeypatch.setattr(tick_module, "ANALYZE_AFTER_LEASES", 5)
    enqueued = []
    monkeypatch.setattr(tick_module, "async_task", lambda func, **kw: enqueued.append(func))
    for i in range(6):
        f.host(f"h{i}", ["board:x"])
    f.suite("S", 6)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE jobs_job")
        services.scheduler_tick()
        assert enqueued == [tick_module.ANALYZE_JOBS_FUNC]
        cursor.execute("SELECT reltuples FROM pg_class WHERE relname = 'jobs_job'")
        stale = cursor.fetchone()[0]
        f.suite("T", 4)  # more jobs than the statistics know
        import_string(enqueued[0])()
        cursor.execute("SELECT reltuples FROM pg_class WHERE relname = 'jobs_job'")
        fresh = cursor.fetchone()[0]
    assert (stale, fresh) == (6, 10)
    assert tasks.analyze_jobs is import_string(tick_module.ANALYZE_JOBS_FUNC)
