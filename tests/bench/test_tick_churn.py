"""`bench.tick --churn`: N completions and N submissions, then a tick that leases N hosts."""

from __future__ import annotations

import argparse
from datetime import timedelta

import pytest
from django.utils import timezone

from bench import dbload
from bench import tick as tick_bench
from bench.labgen import LabShape, generate
from hosts import services as host_services
from hosts.models import Host, Worker
from jobs import services
from jobs.models import Job, Lease
from tests import factories as f
from tests.multihost import multihost_job, role

pytestmark = [pytest.mark.django_db, pytest.mark.postgres]


def test_each_churn_size_is_timed_and_leases_the_hosts_its_completions_freed():
    dbload.load(generate(LabShape(30, 300, 4, 6, seed=5)), now=timezone.now(), analyze=False)
    tick_bench._heartbeat_workers()
    services.scheduler_tick()
    submitted = Job.objects.count()

    churn = tick_bench._churn([1, 5], repeats=2)

    assert set(churn) == {"1", "5"}
    assert churn["5"]["leased"] == 5
    assert churn["5"]["runs"] == 2
    assert churn["5"]["queries"] > 0
    assert Job.objects.count() == submitted + 2 * (1 + 5)
    assert Job.objects.filter(status="passed").count() == 2 * (1 + 5)


@pytest.mark.parametrize("text", ["", "0", "1,x", "-3"])
def test_a_churn_list_that_is_not_positive_numbers_is_refused(text):
    with pytest.raises(argparse.ArgumentTypeError):
        tick_bench._sizes(text)


def test_a_churn_list_is_read_in_order():
    assert tick_bench._sizes("1,10,100") == [1, 10, 100]


def test_a_multi_host_share_makes_that_share_of_the_unpinned_jobs_need_2_or_4_hosts():
    lab = generate(LabShape(50, 2000, 10, 8, seed=5, pinned=0.05))
    before = list(lab.jobs)
    made = tick_bench._make_multi_host(lab, 0.05, seed=5)

    multi = [job for job in lab.jobs if job.roles]
    assert len(multi) == made and 60 <= made <= 140  # 5 % of about 1,900 unpinned jobs
    assert all(job.pinned_host_id is None for job in multi)
    assert {job.hosts_needed for job in multi} == {2, 4}
    for job in multi:
        (role,) = job.roles
        assert (role.name, role.labels, role.max) == ("dut", job.labels, role.count)
    # Nothing else about a job changes; the same seed makes the same jobs multi-host.
    assert [(j.id, j.labels, j.priority) for j in lab.jobs] == [
        (j.id, j.labels, j.priority) for j in before
    ]
    again = generate(LabShape(50, 2000, 10, 8, seed=5, pinned=0.05))
    tick_bench._make_multi_host(again, 0.05, seed=5)
    assert [j.roles for j in again.jobs] == [j.roles for j in lab.jobs]
    assert tick_bench._make_multi_host(again, 0.0, seed=5) == 0


def test_the_loaded_multi_host_jobs_carry_roles_as_submission_stores_them():
    lab = generate(LabShape(30, 300, 4, 6, seed=5))
    made = tick_bench._make_multi_host(lab, 0.1, seed=5)
    ids = dbload.load(lab, now=timezone.now(), analyze=False)["job"]

    stored = dict(Job.objects.exclude(roles=[]).values_list("pk", "roles"))
    assert len(stored) == made > 0
    for job in lab.jobs:
        if job.roles:
            count = job.hosts_needed
            assert stored[ids[job.id]] == [
                {"name": "dut", "labels": [], "count": count, "max": count}
            ]


def test_churn_completes_distinct_jobs_when_some_hold_several_hosts():
    lab = generate(LabShape(30, 300, 4, 6, seed=5))
    tick_bench._make_multi_host(lab, 0.2, seed=5)
    dbload.load(lab, now=timezone.now(), analyze=False)
    tick_bench._heartbeat_workers()
    services.scheduler_tick()
    assert Job.objects.filter(status="leased").exclude(roles=[]).exists()
    submitted = Job.objects.count()

    churn = tick_bench._churn([5], repeats=2)

    assert churn["5"]["runs"] == 2 and churn["5"]["leased"] >= 5
    assert Job.objects.count() == submitted + 2 * 5
    assert Job.objects.filter(status="passed").count() == 2 * 5


def test_every_timed_tick_runs_with_its_workers_online_however_long_the_run_took():
    # A slow run: the workers' last heartbeat is older than WORKER_OFFLINE_TIMEOUT by the time
    # the churn's ticks come. The bench heartbeats them before each tick, as runners would.
    dbload.load(generate(LabShape(30, 300, 4, 6, seed=5)), now=timezone.now(), analyze=False)
    services.scheduler_tick()
    stale = timezone.now() - timezone.timedelta(minutes=10)
    Worker.objects.update(last_seen=stale)

    churn = tick_bench._churn([3], repeats=1)

    assert churn["3"]["leased"] == 3
    assert not Worker.objects.filter(last_seen=stale).exists()


def test_the_leases_of_a_run_longer_than_their_ttl_are_kept_alive_as_runners_would(settings):
    # A run of 1,000 memory ticks outlives LEASE_TTL: without heartbeats every lease the cold
    # tick made would expire in one tick, and the run would time the expiry of the whole lab.
    dbload.load(generate(LabShape(30, 300, 4, 6, seed=5)), now=timezone.now(), analyze=False)
    tick_bench._heartbeat_workers()
    services.scheduler_tick()
    running = Lease.objects.active().filter(job__isnull=False)
    leased = running.count()
    soon = timezone.now() + timezone.timedelta(seconds=60)  # under half the TTL left
    running.update(expires_at=soon)

    churn = tick_bench._churn([3], repeats=1)

    assert churn["3"]["leased"] == 3
    assert running.count() == leased  # 3 completed, 3 leased; none expired
    ttl = timezone.timedelta(seconds=settings.LEASE_TTL)
    assert not running.filter(expires_at__lt=timezone.now() + ttl / 2).exists()


def test_a_timed_tick_that_should_lease_and_leases_nothing_stops_the_run_loudly():
    dbload.load(generate(LabShape(30, 300, 4, 6, seed=5)), now=timezone.now(), analyze=False)
    services.scheduler_tick()
    Job.objects.filter(status="queued").delete()  # nothing left to lease

    with pytest.raises(SystemExit, match="churn 1 tick leased nothing"):
        tick_bench._run_tick(
            "churn 1", None, must_lease=frozenset(Host.objects.values_list("id", flat=True))
        )


def test_the_memory_run_ticks_after_each_batch_of_changes_and_samples_the_rss():
    dbload.load(generate(LabShape(30, 300, 4, 6, seed=5)), now=timezone.now(), analyze=False)
    tick_bench._heartbeat_workers()
    services.scheduler_tick()
    submitted = Job.objects.count()

    memory = tick_bench._memory(ticks=4, changes=2)

    # 4 ticks, each after 2 completions and 2 submissions (a tick that leased nothing stops it).
    assert Job.objects.count() == submitted + 4 * 2
    assert Job.objects.filter(status="passed").count() == 4 * 2
    samples = memory["rss_mb_by_tick"]
    assert [tick for tick, _mb in samples] == [0, 1, 2, 3, 4]
    assert all(mb > 0 for _tick, mb in samples)
    assert memory["rss_growth_mb"] == pytest.approx(samples[-1][1] - samples[1][1])
    assert tick_bench._peak_rss_mb() >= max(mb for _tick, mb in samples) - 1
    # The peak so far and Python's allocated blocks, at the same ticks.
    peaks, blocks = memory["peak_rss_mb_by_tick"], memory["allocated_blocks_by_tick"]
    assert [tick for tick, _mb in peaks] == [tick for tick, _n in blocks] == [0, 1, 2, 3, 4]
    assert all(peak >= mb - 1 for (_t, peak), (_u, mb) in zip(peaks, samples, strict=True))
    assert all(n > 0 for _tick, n in blocks)
    # The peak starts again at the first tick (the generation's is reported apart), on Linux.
    assert memory["peak_reset"] is True
    assert memory["peak_rss_mb_before"] >= peaks[0][1] - 1


def test_a_timed_tick_that_holds_the_freed_host_for_a_multi_host_job_is_the_tick_wanted():
    # dut1 runs a job expected to end in 10 minutes; dut2 was locked. A two-dut job waits;
    # unlocking dut2 frees it, and the tick holds it for the two-dut job rather than leasing it
    # (docs/scheduling.md#holds-and-backfill): the run goes on.
    w1 = f.worker("w1")
    dut1 = f.host("dut1", ["board:x"], worker=w1)
    dut2 = f.host("dut2", ["board:x"], worker=w1)
    running = f.job("long", ["board:x"])
    Job.objects.filter(pk=running.pk).update(estimated_duration=timedelta(minutes=10))
    host_services.host_lock(host=dut2, by="sam", reason="cabling")
    services.scheduler_tick()
    job = multihost_job("bt_Pair", [role("dut", ["board:x"], count=2)])
    host_services.host_unlock(host=dut2, by="sam")

    timed = tick_bench._run_tick("churn 1", None, must_lease=frozenset({dut2.pk}))

    assert timed["leased"] == 0
    assert tick_bench._held(frozenset({dut2.pk}))
    assert not tick_bench._held(frozenset({dut1.pk}))
    assert Job.objects.get(pk=job.pk).status == "queued"
