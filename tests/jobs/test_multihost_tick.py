"""A multi-host job through the tick: one lease per host, one attempt, all or nothing; holds on
the tick row; a multi-host job counting once toward a worker's capacity."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from hosts import services as host_services
from hosts.choices import EventKind
from hosts.models import HostEvent, Worker
from jobs import selectors, services
from jobs.choices import JobStatus
from jobs.models import Job, Lease, SchedulerSettings, SchedulerTick
from jobs.scheduling import labstate
from tests import factories as f
from tests.multihost import attempt, lease_hosts, multihost_job, role

pytestmark = pytest.mark.django_db


@pytest.fixture
def chamber():
    """Worker w1 with dut1, dut2 (board:x) and ap1 (wifi-ap), all in chamber:a."""
    w1 = f.worker("w1")
    return {
        name: f.host(name, [*labels, "chamber:a"], worker=w1)
        for name, labels in (("dut1", ["board:x"]), ("dut2", ["board:x"]), ("ap1", ["wifi-ap"]))
    }


def test_a_two_host_job_gets_one_lease_per_host_of_one_attempt(chamber):
    job = multihost_job("wifi_Roam", [role("dut", ["board:x"]), role("ap", ["wifi-ap"])])

    made = lease_hosts(job, [("dut", chamber["dut1"]), ("ap", chamber["ap1"])])

    job.refresh_from_db()
    assert (job.status, job.attempts) == (JobStatus.LEASED, 1)  # one attempt, counted once
    leases = attempt(job)
    assert [(lease.host.hostname, lease.role, lease.slot, lease.attempt) for lease in leases] == [
        ("dut1", "dut", 0, 1),
        ("ap1", "ap", 1, 1),
    ]
    assert [m["host"] for m in made] == ["dut1", "ap1"]
    events = HostEvent.objects.filter(kind=EventKind.LEASED, job_id=job.pk)
    assert sorted(e.host.hostname for e in events) == ["ap1", "dut1"]
    assert {e.lease_id for e in events} == {lease.pk for lease in leases}


def test_a_retry_is_a_new_attempt_whose_leases_share_its_number(chamber):
    job = multihost_job("bt_Pair", [role("dut", ["board:x"], count=2)], max_retries=1)
    lease_hosts(job, [("dut", chamber["dut1"]), ("dut", chamber["dut2"])])
    first = attempt(job)
    # Started and completed through its second lease; dut2 broke: retried on other hosts.
    services.lease_job_start(lease=first[1], by="runner-1")
    services.lease_job_complete(
        lease=first[1], by="runner-1", result="failed", hosts_ok={"dut2": False}
    )
    Job.objects.filter(pk=job.pk).update(not_before=None)
    dut3 = f.host("dut3", ["board:x"], worker=Worker.objects.get(name="w1"))

    lease_hosts(job, [("dut", chamber["dut1"]), ("dut", dut3)])

    job.refresh_from_db()
    assert job.attempts == 2
    assert [lease.attempt for lease in attempt(job)] == [2, 2]
    assert sorted(Lease.objects.filter(job=job).values_list("attempt", flat=True)) == [1, 1, 2, 2]


def test_a_multihost_job_whose_host_was_taken_meanwhile_gets_none_of_its_hosts(chamber):
    job = multihost_job("wifi_Roam", [role("dut", ["board:x"]), role("ap", ["wifi-ap"])])
    # Between the plan and the apply, staff lock the access point.
    host_services.host_lock(host=chamber["ap1"], by="sam", reason="antenna off")

    made = lease_hosts(job, [("dut", chamber["dut1"]), ("ap", chamber["ap1"])])

    assert made == []
    job.refresh_from_db()
    assert (job.status, job.attempts) == (JobStatus.QUEUED, 0)
    assert not Lease.objects.filter(job=job).exists()
    assert not HostEvent.objects.filter(kind=EventKind.LEASED).exists()


def test_the_tick_leases_a_two_host_job_both_hosts_at_once(chamber):
    job = multihost_job(
        "wifi_Roam", [role("dut", ["board:x"]), role("ap", ["wifi-ap"])], together_by="chamber"
    )

    summary = services.scheduler_tick()

    assert sorted(lease["host"] for lease in summary.leases) == ["ap1", "dut1"]
    leases = attempt(job)
    assert [(lease.role, lease.slot) for lease in leases] == [("dut", 0), ("ap", 1)]
    job.refresh_from_db()
    assert (job.status, job.attempts) == (JobStatus.LEASED, 1)
    assert SchedulerTick.objects.latest("id").queued_after == 0


def test_holds_are_stored_on_the_tick_row_and_an_unchanged_tick_copies_them(chamber):
    # dut1 runs a one-host job expected to end in 10 minutes; the two-dut job waits for it and
    # holds dut2 meanwhile.
    running = f.job("long", ["board:x"])
    Job.objects.filter(pk=running.pk).update(estimated_duration=timedelta(minutes=10))
    host_services.host_lock(host=chamber["dut2"], by="sam", reason="cabling")
    services.scheduler_tick()
    host_services.host_unlock(host=chamber["dut2"], by="sam")
    job = multihost_job("bt_Pair", [role("dut", ["board:x"], count=2)])

    planned = services.scheduler_tick()
    again = services.scheduler_tick()

    tick = SchedulerTick.objects.get(pk=planned.tick_id)
    assert tick.holds == {str(chamber["dut2"].pk): job.pk}
    copy = SchedulerTick.objects.get(pk=again.tick_id)
    if again.unchanged:  # PostgreSQL's change log: nothing changed, the plan (and hold) stand
        assert copy.holds == tick.holds
    assert selectors.current_holds() == {chamber["dut2"].pk: job.pk}
    assert Job.objects.get(pk=job.pk).status == JobStatus.QUEUED


def test_the_lab_reads_roles_and_the_busy_hosts_expected_end(chamber):
    now = timezone.now()
    running = f.job("long", ["board:x"])
    Job.objects.filter(pk=running.pk).update(estimated_duration=timedelta(minutes=10))
    unsized = f.job("unsized", ["wifi-ap"])
    services.scheduler_tick(now=now)
    job = multihost_job(
        "bt_Pair", [role("dut", ["bt"], count=2, max=3), role("peer")], ["board:x"],
        together_by="chamber",
    )  # fmt: skip

    snap = labstate.scheduler_snapshot(now=now)

    (state,) = [j for j in snap.jobs if j.id == job.pk]
    assert state.together_by == "chamber" and state.hosts_needed == 3
    assert [(r.name, sorted(r.labels), r.count, r.max) for r in state.roles] == [
        ("dut", ["board:x", "bt"], 2, 3),
        ("peer", ["board:x"], 1, 1),
    ]
    busy = {h.hostname: h.busy_until for h in snap.hosts}
    leased_on = {lease.job_id: lease for lease in Lease.objects.active()}
    assert busy["dut1"] == leased_on[running.pk].acquired_at + timedelta(minutes=10)
    # No estimate: the policy's default duration (600 s unless the settings say otherwise).
    default = snap.policy.default_duration_s
    assert busy["ap1"] == leased_on[unsized.pk].acquired_at + timedelta(seconds=default)
    assert busy["dut2"] is None


def test_a_multihost_job_counts_once_toward_its_workers_capacity(chamber):
    w1 = Worker.objects.get(name="w1")
    host_services.worker_update(worker=w1, by="sam", max_jobs=2)
    f.host("dut4", ["board:x"], worker=w1)
    job = multihost_job("bt_Pair", [role("dut", ["board:x"], count=2)])
    lease_hosts(job, [("dut", chamber["dut1"]), ("dut", chamber["dut2"])])
    assert Worker.objects.filter(pk=w1.pk).worker_loads()["w1"].running == 1
    assert selectors.workers_with_host_counts().get(pk=w1.pk).running == 1

    solo = f.job("solo", ["board:x"])
    services.scheduler_tick()

    # Two hosts held, one job running: room for one more job under max_jobs 2.
    assert Job.objects.get(pk=solo.pk).status == JobStatus.LEASED
    assert Worker.objects.filter(pk=w1.pk).worker_loads()["w1"].running == 2


def test_a_two_host_job_starts_on_a_worker_with_one_job_slot_left(chamber):
    # docs/scheduling.md#worker-capacity: w1 runs one job of its two; dut1 and dut2 are free.
    # A job needing both starts this tick, and w1 then runs two jobs (it counts once).
    w1 = Worker.objects.get(name="w1")
    host_services.worker_update(worker=w1, by="sam", max_jobs=2)
    lease_hosts(f.job("running", ["wifi-ap"]), [("", chamber["ap1"])])
    assert Worker.objects.filter(pk=w1.pk).worker_loads()["w1"].running == 1
    job = multihost_job("bt_Pair", [role("dut", ["board:x"], count=2)])

    summary = services.scheduler_tick()

    job.refresh_from_db()
    assert job.status == JobStatus.LEASED
    assert sorted(lease.host.hostname for lease in attempt(job)) == ["dut1", "dut2"]
    assert len(summary.leases) == 2
    assert Worker.objects.filter(pk=w1.pk).worker_loads()["w1"].running == 2
    assert selectors.workers_with_host_counts().get(pk=w1.pk).running == 2


def test_a_worker_with_one_job_slot_never_gets_two_different_jobs(chamber):
    # w1 may run one job: the two-dut job takes it (both duts), and the one-host job behind
    # it waits for w1's capacity though ap1 is free.
    w1 = Worker.objects.get(name="w1")
    host_services.worker_update(worker=w1, by="sam", max_jobs=1)
    job = multihost_job("bt_Pair", [role("dut", ["board:x"], count=2)])
    later = f.job("solo", ["wifi-ap"])

    services.scheduler_tick()

    job.refresh_from_db()
    later.refresh_from_db()
    assert (job.status, later.status) == (JobStatus.LEASED, JobStatus.QUEUED)
    assert Worker.objects.filter(pk=w1.pk).worker_loads()["w1"].running == 1
    reason = selectors.wait_reasons_for([later])[later.pk]
    assert "w1 at capacity (1 of 1)" in reason["message"]


def _hold_dut2_for_a_two_dut_job(chamber: dict) -> Job:
    """dut1 runs a job expected to end in 10 minutes; a two-dut job holds dut2 meanwhile."""
    running = f.job("long", ["board:x"])
    Job.objects.filter(pk=running.pk).update(estimated_duration=timedelta(minutes=10))
    host_services.host_lock(host=chamber["dut2"], by="sam", reason="cabling")
    services.scheduler_tick()
    host_services.host_unlock(host=chamber["dut2"], by="sam")
    return multihost_job("bt_Pair", [role("dut", ["board:x"], count=2)])


def test_the_holder_is_told_what_it_holds_and_when_it_is_expected_to_start(chamber):
    job = _hold_dut2_for_a_two_dut_job(chamber)

    services.scheduler_tick()

    reason = selectors.wait_reasons_for([job])[job.pk]
    assert reason["code"] == "holding_hosts"
    assert reason["message"].startswith("Holding 1 of 2 hosts")
    assert "expected start in about" in reason["message"]


@pytest.mark.postgres
def test_a_changed_estimate_of_a_running_job_moves_the_holders_expected_start(chamber):
    # dut1 runs a job expected to take 10 minutes; the two-dut job holds dut2 meanwhile. The
    # running job's estimate becomes 30 minutes: the next tick re-reads its host rather than
    # copying the last plan, and the holder's expected start moves with it.
    job = _hold_dut2_for_a_two_dut_job(chamber)
    services.scheduler_tick()
    services.scheduler_tick()
    before = selectors.wait_reasons_for([job])[job.pk]["details"]["expected_start"]
    running = Job.objects.get(name="long")
    Job.objects.filter(pk=running.pk).update(estimated_duration=timedelta(minutes=30))

    summary = services.scheduler_tick()

    assert not summary.unchanged
    after = selectors.wait_reasons_for([job])[job.pk]["details"]["expected_start"]
    lease = Lease.objects.active().get(job=running)
    assert after == (lease.acquired_at + timedelta(minutes=30)).isoformat() != before


@pytest.mark.postgres
def test_under_aging_a_tick_with_hosts_held_plans_again_rather_than_copying(chamber):
    # Under aging the order moves with time alone, so a hold may change with nothing written:
    # the tick that would copy the last plan plans again.
    SchedulerSettings.objects.update_or_create(pk=1, defaults={"aging_minutes": 5})
    job = _hold_dut2_for_a_two_dut_job(chamber)
    services.scheduler_tick()

    again = services.scheduler_tick()

    assert not again.unchanged
    assert selectors.current_holds() == {chamber["dut2"].pk: job.pk}
    SchedulerSettings.objects.filter(pk=1).update(aging_minutes=0)
    services.scheduler_tick()
    assert services.scheduler_tick().unchanged  # fifo: the same plan, copied
