"""Preemption on a real database: who is stopped, for whom, and what everyone is told."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from hosts.models import HostEvent
from jobs import services
from jobs.choices import JobStatus, ReleaseReason
from jobs.models import Job, Lease
from schedsite.errors import Conflict
from tests import factories as f

pytestmark = pytest.mark.django_db


def holder(hostname: str) -> str | None:
    lease = Lease.objects.filter(host__hostname=hostname, released_at__isnull=True).first()
    return lease.job.name if lease and lease.job else None


def preemptible_job(name: str, priority: int, **spec: object) -> Job:
    return services.job_submit(
        owner="alice",
        spec=services.JobSpec(
            name=name, labels=["board:x"], priority=priority, preemptible=True, **spec
        ),
    )


def running(job: Job) -> Job:
    return services.job_start(job=Job.objects.get(pk=job.pk), by="runner")


def preemption(on: bool = True, margin: int = 20) -> None:
    services.update_scheduler_settings("sam", preemption=on, preempt_margin=margin)


def test_a_job_far_above_stops_a_preemptible_one_which_is_requeued_without_a_retry() -> None:
    f.host("dut1", ["board:x"])
    low = preemptible_job("soak", 30)
    services.scheduler_tick()
    low = running(low)
    assert low.attempts == 1
    preemption()
    f.job("cq-smoke", priority=70)

    summary = services.scheduler_tick()

    assert summary.preempted == [{"job": "soak", "host": "dut1", "for": "cq-smoke"}]
    low.refresh_from_db()
    assert low.status == JobStatus.QUEUED
    assert low.attempts == 0  # the preemption used no retry
    assert "preempted on dut1 for job cq-smoke" in low.message
    lease = Lease.objects.get(job=low)
    assert lease.release_reason == ReleaseReason.PREEMPTED
    event = HostEvent.objects.get(kind="preempted")
    assert "preempted for job cq-smoke" in event.message and event.host.hostname == "dut1"
    # Its runner learns at its next heartbeat: the lease is gone.
    with pytest.raises(Conflict):
        services.lease_heartbeat(lease=lease, by="runner")

    services.scheduler_tick()  # the follow-up tick the preemption asked for
    assert holder("dut1") == "cq-smoke"


def test_nothing_is_preempted_when_it_is_off_or_the_margin_is_not_met() -> None:
    f.host("dut1", ["board:x"])
    preemptible_job("soak", 40)
    services.scheduler_tick()
    f.job("pfq", priority=59)
    services.scheduler_tick()
    assert holder("dut1") == "soak"  # off by default
    preemption(margin=20)
    assert services.scheduler_tick().preempted == []  # 59 < 40 + 20
    f.job("cq", priority=60)
    assert services.scheduler_tick().preempted == [{"job": "soak", "host": "dut1", "for": "cq"}]


def test_jobs_not_marked_preemptible_maintenance_and_reservations_are_never_stopped(sam) -> None:  # noqa: ANN001
    dut1, dut2 = f.host("dut1", ["board:x"]), f.host("dut2", ["board:x"])
    f.job("plain", priority=10)
    services.scheduler_tick()
    services.lease_reserve(host=dut2, holder=sam, duration=timedelta(hours=1), reason="debugging")
    preemption()
    f.job("cq", priority=90)
    assert services.scheduler_tick().preempted == []
    assert holder("dut1") == "plain"
    assert dut1.pk != dut2.pk


def test_a_suite_keeps_its_min_duts() -> None:
    for i in range(2):
        f.host(f"dut{i}", ["board:x"])
    suite = services.suite_submit(
        owner="alice",
        name="quota",
        priority=20,
        min_duts=2,
        jobs=[
            services.JobSpec(name=f"q{i}", labels=["board:x"], preemptible=True) for i in range(2)
        ],
    )
    services.scheduler_tick()
    assert Lease.objects.filter(job__suite=suite, released_at__isnull=True).count() == 2
    preemption()
    f.job("cq", priority=90)
    assert services.scheduler_tick().preempted == []  # both hosts are its minimum


def test_each_victim_is_stopped_once_for_the_highest_waiting_job() -> None:
    f.host("dut1", ["board:x"])
    preemptible_job("soak", 10)
    services.scheduler_tick()
    preemption()
    f.job("pfq", priority=60)
    f.job("cq", priority=70)
    summary = services.scheduler_tick()
    assert summary.preempted == [{"job": "soak", "host": "dut1", "for": "cq"}]
    services.scheduler_tick()
    assert holder("dut1") == "cq"


def test_the_submit_form_marks_jobs_preemptible_and_the_job_page_says_so(alice) -> None:  # noqa: ANN001
    f.host("dut1", ["board:x"])
    client = f.signed_in(alice)
    form = {
        "name": "soak",
        "priority": "20",
        "min_duts": "0",
        "mode": "jobs",
        "max_retries": "0",
        "preemptible": "on",
        "job_name": ["soak_1"],
        "job_labels": ["board:x"],
        "job_host": [""],
    }
    response = client.post("/suites/new/", form)
    assert response.status_code in (200, 302), response.content[:500]
    job = Job.objects.get(name="soak_1")
    assert job.preemptible
    page = client.get(f"/jobs/{job.pk}/").content.decode()
    assert "Preemptible" in page


def test_the_victims_runner_is_told_its_lease_is_gone_at_its_next_heartbeat(sam) -> None:  # noqa: ANN001
    rack = f.worker("rack-1")
    f.host("dut1", ["board:x"], worker=rack)
    low = preemptible_job("soak", 30)
    f.tick(timezone.now(), rack)
    running(low)
    lease = Lease.objects.get(job=low)
    preemption()
    f.job("cq", priority=70)
    services.scheduler_tick()

    answer = f.signed_in(sam).post(
        "/api/workers/rack-1/heartbeat/", {"leases": [lease.pk]}, content_type="application/json"
    )

    assert answer.status_code == 200, answer.content
    assert answer.json()["gone"] == [lease.pk]  # the runner stops the test (tests/runner)


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("attempt", range(12))
def test_a_victim_completing_while_the_tick_preempts_it_ends_one_way_only(attempt: int) -> None:
    """The runner completes the victim at the moment the tick decides to stop it: the lease
    ends once, as completed or as preempted, and the job's state says the same."""
    import time

    from django.db import connection

    from tests.threads import race

    f.host("dut1", ["board:x"])
    low = preemptible_job("soak", 30)
    services.scheduler_tick()
    running(low)
    preemption()
    f.job("cq", priority=70)
    connection.close()  # each thread opens its own

    def complete() -> object:
        # Later and later, so that the runs cover the tick winning, the runner winning, and
        # the two meeting on the lease's row lock.
        time.sleep(attempt * 0.005)
        job = Job.objects.get(pk=low.pk)
        return services.job_complete(job=job, result="passed", by="runner").status

    def tick() -> object:
        return services.scheduler_tick().preempted

    completed, preempted = race(complete, tick)

    lease = Lease.objects.get(job_id=low.pk)
    job = Job.objects.get(pk=low.pk)
    if lease.release_reason == ReleaseReason.PREEMPTED:
        assert isinstance(completed, Conflict), completed  # the runner is told it lost it
        assert preempted == [{"job": "soak", "host": "dut1", "for": "cq"}]
        assert job.status == JobStatus.QUEUED
    else:
        assert lease.release_reason == ReleaseReason.COMPLETED
        assert completed == JobStatus.PASSED and preempted == []
        assert job.status == JobStatus.PASSED
    assert (
        HostEvent.objects.filter(lease_id=lease.pk, kind__in=["preempted", "completed"]).count()
        == 1
    )
