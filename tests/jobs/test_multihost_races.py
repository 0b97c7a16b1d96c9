"""Multi-host jobs under real concurrency (PostgreSQL, threads): two jobs racing for a shared
host never both hold it and never hold part of their hosts; a heartbeat racing the expiry of
its attempt leaves the attempt whole, extended or ended."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db.models import Count
from django.utils import timezone

from jobs import services
from jobs.choices import JobStatus
from jobs.models import Job, Lease
from schedsite.errors import Conflict
from tests import factories as f
from tests.multihost import attempt, lease_hosts, multihost_job, role
from tests.threads import race

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


def assert_whole_attempts() -> None:
    """No host held twice; every leased or running job holds all its hosts, others none."""
    active = Lease.objects.active()
    assert not active.values("host").annotate(n=Count("id")).filter(n__gt=1).exists()
    for job in Job.objects.all():
        held = active.filter(job=job).count()
        needed = sum(r["count"] for r in job.roles) if job.roles else 1
        if job.status in (JobStatus.LEASED, JobStatus.RUNNING):
            assert held == needed, (job.name, job.status, held)
        else:
            assert held == 0, (job.name, job.status, held)


def test_two_multihost_jobs_racing_for_a_shared_host_never_both_hold_it():
    w = f.worker("w1")
    hosts = [f.host(f"h{i}", ["board:x"], worker=w) for i in range(3)]
    for round_no in range(15):
        a = multihost_job(f"A{round_no}", [role("dut", ["board:x"], count=2)])
        b = multihost_job(f"B{round_no}", [role("dut", ["board:x"], count=2)])
        # A wants h0, h1; B wants h1, h2: one of them gets both its hosts, the other none.
        results = race(
            lambda a=a: lease_hosts(a, [("dut", hosts[0]), ("dut", hosts[1])]),
            lambda b=b: lease_hosts(b, [("dut", hosts[1]), ("dut", hosts[2])]),
        )
        assert not [r for r in results if isinstance(r, BaseException)], results
        assert sorted(len(r) for r in results) == [0, 2]
        assert_whole_attempts()
        for job in (a, b):
            services.job_abort(job=job, by="alice")
        assert not Lease.objects.active().exists()


def test_ticks_racing_over_multihost_and_one_host_jobs_keep_attempts_whole():
    w = f.worker("w1")
    for i in range(6):
        f.host(f"h{i}", ["board:x", f"chamber:{'ab'[i % 2]}"], worker=w)
    for round_no in range(8):
        multihost_job(f"M{round_no}", [role("dut", ["board:x"], count=2)], together_by="chamber")
        f.job(f"S{round_no}", ["board:x"])
        results = race(services.scheduler_tick, services.scheduler_tick)
        assert [r for r in results if isinstance(r, BaseException)] == []
        assert_whole_attempts()
        for job in Job.objects.filter(status=JobStatus.LEASED):
            services.job_start(job=job, by="runner")
            services.job_complete(job=job, result="passed", by="runner")
        assert_whole_attempts()
    assert Job.objects.filter(name__startswith="M", status=JobStatus.PASSED).exists()


def test_a_heartbeat_racing_the_expiry_of_its_attempt_leaves_it_whole(settings):
    settings.LEASE_TTL = 60
    w = f.worker("w1")
    outcomes = set()
    for round_no in range(12):
        # Fresh hosts each round: an expired attempt sends its hosts to verify.
        dut = f.host(f"dut{round_no}", ["board:x", f"n:{round_no}"], worker=w)
        peer = f.host(f"peer{round_no}", ["bt-peer", f"n:{round_no}"], worker=w)
        job = multihost_job(
            f"P{round_no}", [role("dut", ["board:x"]), role("peer", ["bt-peer"])], max_retries=0
        )
        lease_hosts(job, [("dut", dut), ("peer", peer)])
        _dut_lease, peer_lease = attempt(job)
        expiry = timezone.now() + timedelta(seconds=5)
        Lease.objects.filter(job=job).update(expires_at=expiry)

        def beat(lease=peer_lease, at=expiry - timedelta(seconds=1)):  # noqa: ANN001, ANN202
            return services.lease_job_heartbeat(lease=lease, by="runner-1", at=at)

        def tick(at=expiry + timedelta(seconds=1)):  # noqa: ANN001, ANN202
            return services.scheduler_tick(now=at)

        beat_result, _tick_result = race(beat, tick)
        leases = list(Lease.objects.filter(job=job))
        if isinstance(beat_result, Conflict):  # the expiry came first: the attempt ended whole
            assert all(not lease.active for lease in leases)
            assert Job.objects.get(pk=job.pk).status == JobStatus.ERROR
            outcomes.add("expired")
        else:  # the heartbeat came first: every lease extended, none expired
            assert not isinstance(beat_result, BaseException), beat_result
            assert all(lease.active and lease.expires_at > expiry for lease in leases)
            outcomes.add("extended")
            services.job_abort(job=job, by="alice")
        assert_whole_attempts()
    assert outcomes  # each round ended one way or the other, never half
