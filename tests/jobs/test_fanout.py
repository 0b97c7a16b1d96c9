"""A fan-out suite follows the lab: hosts that join get their job, hosts that go are skipped."""

from __future__ import annotations

import threading
from datetime import datetime, timedelta

import pytest
from django.db import IntegrityError, connection, transaction
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from hosts import services as host_services
from hosts.choices import HostStatus
from jobs import selectors, services
from jobs import services as job_services
from jobs.choices import JobStatus
from jobs.models import Job, Lease, Suite
from jobs.scheduling import fanout
from jobs.scheduling import tick as tick_module
from tests import factories as f
from tests.threads import race

pytestmark = pytest.mark.django_db


def fanout_suite(labels=("bluetooth",), name="bt_Pair", **options) -> Suite:  # noqa: ANN001, ANN003
    return services.suite_submit(
        owner="alice", name="bt everywhere", fanout_labels=list(labels), fanout_name=name, **options
    )


def jobs_by_host(suite: Suite) -> dict[str, str]:
    """hostname -> status of its latest job of the suite."""
    rows = suite.jobs.order_by("id").values_list("host__hostname", "status")
    return dict(rows)


def status_of(suite: Suite) -> str:
    return suite.status_from_counts(selectors.suite_job_counts([suite.pk])[suite.pk])


def locked(hostname: str, labels: list[str], worker: object) -> object:
    """A host in the lab that takes no job for now (staff are debugging it)."""
    host = f.host(hostname, labels, worker=worker)
    return host_services.host_lock(host=host, by="sam", reason="debugging")


@pytest.fixture
def w1():  # noqa: ANN201
    return f.worker("w1")


def test_a_host_added_after_submission_gets_its_job_at_the_next_tick_and_is_leased(w1):
    busy = f.host("a.lab", ["bluetooth"], worker=w1)
    suite = fanout_suite()
    services.scheduler_tick()  # a.lab takes its job; the suite stays open while it runs
    assert Lease.objects.active().get().host == busy

    f.host("b.lab", ["bluetooth", "board:eve"], worker=w1)
    f.host("c.lab", ["board:eve"], worker=w1)  # lacks the label: no job
    summary = services.scheduler_tick()

    assert jobs_by_host(suite) == {"a.lab": "leased", "b.lab": "leased"}
    added = suite.jobs.get(host__hostname="b.lab")
    assert added.name == "bt_Pair@b.lab" and added.fanout and added.priority == suite.priority
    assert added.submitted_at == suite.created_at  # it keeps the suite's place in the queue
    assert [lease["host"] for lease in summary.leases] == ["b.lab"]


def test_a_host_whose_labels_start_matching_gets_its_job(w1):
    locked("a.lab", ["bluetooth"], w1)  # its job waits
    later = f.host("b.lab", ["board:eve"], worker=w1)
    suite = fanout_suite()
    services.scheduler_tick()
    assert jobs_by_host(suite) == {"a.lab": "queued"}

    host_services.host_update(host=later, by="sam", labels=["board:eve", "bluetooth"])
    services.scheduler_tick()

    assert jobs_by_host(suite) == {"a.lab": "queued", "b.lab": "leased"}


def test_a_retired_host_gets_its_job_skipped_with_the_reason_and_the_suite_finishes(w1):
    doomed = locked("a.lab", ["bluetooth"], w1)
    f.host("b.lab", ["bluetooth"], worker=w1)
    suite = fanout_suite()
    services.scheduler_tick()
    running = suite.jobs.get(host__hostname="b.lab")
    services.job_start(job=running, by="runner")
    services.job_complete(job=running, result="passed", by="runner")
    assert status_of(suite) == "running"  # a.lab's job waits while it is locked

    job_services.host_delete(host=doomed, by="sam")  # retired: it has history
    services.scheduler_tick()

    skipped = suite.jobs.get(host__hostname="a.lab")
    assert skipped.status == JobStatus.SKIPPED and skipped.finished_at is not None
    assert "host a.lab was retired" in skipped.message
    assert status_of(suite) == "completed"
    counts = selectors.fanout_host_counts([suite])[suite.pk]
    assert counts == {"done": 1, "pending": 0, "skipped": 1}


def test_repair_failed_skips_the_job_and_a_host_back_while_the_suite_is_open_runs_a_new_one(w1):
    broken = f.host("a.lab", ["bluetooth"], worker=w1)
    locked("b.lab", ["bluetooth"], w1)  # keeps it open
    suite = fanout_suite()
    job_services.host_set_status(host=broken, status=HostStatus.REPAIR_FAILED, by="sam")
    services.scheduler_tick()

    first = suite.jobs.get(host__hostname="a.lab")
    assert first.status == JobStatus.SKIPPED
    assert "host a.lab is repair_failed: its repairs gave up" in first.message
    assert selectors.fanout_host_counts([suite])[suite.pk]["skipped"] == 1

    job_services.host_set_status(host=broken, status=HostStatus.READY, by="sam")
    services.scheduler_tick()

    again = suite.jobs.filter(host__hostname="a.lab").order_by("id")
    assert [j.status for j in again] == [JobStatus.SKIPPED, JobStatus.LEASED]
    # The host counts once, by its new job.
    assert selectors.fanout_host_counts([suite])[suite.pk] == {
        "done": 0,
        "pending": 2,
        "skipped": 0,
    }


def test_a_host_that_no_longer_carries_the_labels_gets_its_queued_job_skipped(w1):
    moved = locked("a.lab", ["bluetooth"], w1)
    suite = fanout_suite()
    host_services.host_update(host=moved, by="sam", labels=["board:eve"])
    services.scheduler_tick()
    job = suite.jobs.get()
    assert job.status == JobStatus.SKIPPED
    assert "host a.lab no longer carries bluetooth" in job.message


def test_until_stops_adding_hosts_that_join_after_it(w1):
    locked("a.lab", ["bluetooth"], w1)
    now = timezone.now()
    suite = fanout_suite(fanout_until=now + timedelta(minutes=10))
    locked("b.lab", ["bluetooth"], w1)
    services.scheduler_tick(now=now + timedelta(minutes=5))
    assert set(jobs_by_host(suite)) == {"a.lab", "b.lab"}

    f.host("c.lab", ["bluetooth"], worker=w1)
    services.scheduler_tick(now=now + timedelta(minutes=11))

    assert set(jobs_by_host(suite)) == {"a.lab", "b.lab"}


def test_a_finished_or_aborted_fanout_adds_no_host(w1):
    f.host("a.lab", ["bluetooth"], worker=w1)
    finished = fanout_suite()
    services.scheduler_tick()
    ran = finished.jobs.get()
    services.job_complete(job=ran, result="passed", by="runner")
    aborted = fanout_suite()
    services.suite_abort(suite=aborted, by="alice")

    f.host("b.lab", ["bluetooth"], worker=w1)
    services.scheduler_tick()

    assert set(jobs_by_host(finished)) == {"a.lab"} and status_of(finished) == "completed"
    assert set(jobs_by_host(aborted)) == {"a.lab"}


def test_the_phase_is_one_query_when_no_fanout_suite_is_open(w1):
    for i in range(20):
        f.host(f"h{i}.lab", ["bluetooth"], worker=w1)
    f.suite("plain", 3)
    done = fanout_suite()
    Job.objects.filter(suite=done).update(status=JobStatus.PASSED)

    with CaptureQueriesContext(connection) as queries:
        result = fanout.fanout_phase(now=timezone.now())

    assert (result.added, result.skipped) == (0, 0)
    assert len(queries) == 1


def test_the_database_refuses_a_second_unskipped_job_for_one_host():
    host = f.host("a.lab", ["bluetooth"])
    suite = fanout_suite()
    job = suite.jobs.get()
    duplicate = dict(suite=suite, host=host, name=job.name, fanout=True, label_key="bluetooth")
    with pytest.raises(IntegrityError), transaction.atomic():
        Job.objects.create(**duplicate)
    # Beside a skipped one it is allowed: the host came back.
    Job.objects.filter(pk=job.pk).update(status=JobStatus.SKIPPED)
    Job.objects.create(**duplicate)
    assert suite.jobs.count() == 2


def test_a_retire_is_no_longer_refused_for_a_queued_fanout_job_but_is_for_other_pins(w1):
    pinned = locked("a.lab", ["bluetooth"], w1)
    fanout_suite()
    assert job_services.host_delete(host=pinned, by="sam").status == HostStatus.RETIRED

    other = locked("b.lab", ["board:eve"], w1)
    f.job("pinned", ["board:eve"], host=other)
    with pytest.raises(Exception, match="abort them first"):
        job_services.host_delete(host=other, by="sam")


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_two_phases_racing_past_the_tick_lock_add_each_host_once():
    assert connection.vendor == "postgresql"
    first = f.host("a.lab", ["bluetooth"])
    host_services.host_lock(host=first, by="sam", reason="debugging")  # its job waits
    suite = fanout_suite()
    for name in ("b.lab", "c.lab", "d.lab"):
        f.host(name, ["bluetooth"])
    both_read = threading.Barrier(2)

    def phase() -> int:
        # The tick holds an advisory lock; this runs the phase's two steps without it, both
        # reading the same joined hosts before either inserts.
        with transaction.atomic():
            labels = ["bluetooth"]
            joined = fanout.joined_hosts(suite, labels)
            assert [hostname for _, hostname in joined] == ["b.lab", "c.lab", "d.lab"]
            both_read.wait(10)
            return fanout.add_joined(suite, joined, labels, now=timezone.now())

    results = race(phase, phase)

    assert sorted(results) == [0, 3], results  # one added all three, the other none
    assert sorted(jobs_by_host(suite)) == ["a.lab", "b.lab", "c.lab", "d.lab"]
    assert suite.jobs.count() == 4


@pytest.mark.postgres
def test_a_tick_with_nothing_changed_skips_the_phase_and_a_join_still_counts(monkeypatch):
    # The phase reads only what the change log covers (docs/performance.md#what-was-changed).
    first = f.host("a.lab", ["bluetooth"])
    host_services.host_lock(host=first, by="sam", reason="debugging")  # its job waits: open
    suite = fanout_suite()
    for _ in range(3):
        if services.scheduler_tick().unchanged:
            break
    ran: list[fanout.FanoutResult] = []

    def counted_phase(*, now: datetime) -> fanout.FanoutResult:
        ran.append(result := fanout.fanout_phase(now=now))
        return result

    monkeypatch.setattr(tick_module, "fanout_phase", counted_phase)
    assert services.scheduler_tick().unchanged
    assert ran == []

    f.host("b.lab", ["bluetooth"])
    summary = services.scheduler_tick()

    assert ran == [fanout.FanoutResult(added=1, skipped=0)]
    assert [lease["host"] for lease in summary.leases] == ["b.lab"]
    assert sorted(jobs_by_host(suite)) == ["a.lab", "b.lab"]
