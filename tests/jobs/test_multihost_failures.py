"""A multi-host job's attempt ends whole: expiry, timeout, abort, hand-back, staff release and a
host reported broken release every lease of it."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from hosts.choices import EventKind, HostStatus
from hosts.models import Host, HostEvent
from jobs import services
from jobs.choices import JobStatus, ReleaseReason
from jobs.models import Job, Lease
from schedsite.errors import Conflict, InvalidInput
from tests import factories as f
from tests.multihost import attempt, lease_hosts, multihost_job, role

pytestmark = pytest.mark.django_db


@pytest.fixture
def pair():
    """A bt_Pair job (a dut and a peer, one retry) holding dut1 (slot 0) and peer1 (slot 1)."""
    w1 = f.worker("w1")
    dut, peer = f.host("dut1", ["board:x"], worker=w1), f.host("peer1", ["bt-peer"], worker=w1)
    f.host("dut2", ["board:x"], worker=w1)
    job = multihost_job(
        "bt_Pair", [role("dut", ["board:x"]), role("peer", ["bt-peer"])], max_retries=1
    )
    lease_hosts(job, [("dut", dut), ("peer", peer)])
    job.refresh_from_db()
    return job


# A host whose state is unknown gets a verify job: waiting for it, or (leased in the same tick)
# running it.
VERIFIED = {HostStatus.NEEDS_VERIFY, HostStatus.VERIFYING}


def status_of(hostname: str) -> str:
    return Host.objects.get(hostname=hostname).status


def ends(job: Job) -> dict[str, str]:
    """How each lease of the job ended, by hostname."""
    return dict(Lease.objects.filter(job=job).values_list("host__hostname", "release_reason"))


def test_one_expired_lease_ends_the_whole_attempt_and_the_job_is_retried(pair, settings):
    settings.RETRY_BACKOFF = 60
    dut, peer = attempt(pair)
    now = timezone.now()
    Lease.objects.filter(pk=peer.pk).update(expires_at=now - timedelta(seconds=1))

    summary = services.scheduler_tick(now=now)

    assert summary.expired == 1
    assert attempt(pair) == []  # no lease of it is left active
    assert ends(pair) == {"peer1": ReleaseReason.EXPIRED, "dut1": ReleaseReason.RELEASED}
    # The expired host's state is unknown: verified; the other is free again.
    assert status_of("peer1") in VERIFIED and status_of("dut1") == HostStatus.READY
    pair.refresh_from_db()
    assert (pair.status, pair.attempts) == (JobStatus.QUEUED, 1)
    assert pair.not_before is not None  # the usual backoff
    assert (
        Lease.objects.get(pk=peer.pk).host_failed and not Lease.objects.get(pk=dut.pk).host_failed
    )
    released = HostEvent.objects.get(kind=EventKind.RELEASED, lease_id=dut.pk)
    assert "its attempt ended" in released.message


def test_a_retried_multihost_job_needs_all_its_hosts_again(pair):
    (_dut, peer) = attempt(pair)
    now = timezone.now()
    Lease.objects.filter(job=pair).update(expires_at=now - timedelta(seconds=1))
    services.scheduler_tick(now=now)
    Job.objects.filter(pk=pair.pk).update(not_before=None)
    # Its peer host is being verified: dut1 and dut2 are free, but no peer.
    summary = services.scheduler_tick(now=now + timedelta(seconds=1))

    assert summary.leases == []
    assert Job.objects.get(pk=pair.pk).status == JobStatus.QUEUED
    assert not Lease.objects.active().filter(job=pair).exists()
    assert status_of("peer1") in VERIFIED and peer.pk


def test_out_of_retries_an_expired_attempt_ends_the_job_in_error(pair):
    Job.objects.filter(pk=pair.pk).update(max_retries=0)
    now = timezone.now()
    Lease.objects.filter(job=pair).update(expires_at=now - timedelta(seconds=1))

    services.scheduler_tick(now=now)

    pair.refresh_from_db()
    assert pair.status == JobStatus.ERROR
    assert attempt(pair) == []
    # Both leases ran out (one heartbeat keeps them together): both hosts are verified.
    assert {status_of("dut1"), status_of("peer1")} <= VERIFIED


def test_a_running_multihost_job_past_its_timeout_releases_every_host(pair):
    dut, _peer = attempt(pair)
    services.lease_job_start(lease=dut, by="runner-1")
    Job.objects.filter(pk=pair.pk).update(timeout=timedelta(seconds=1))

    summary = services.scheduler_tick(now=timezone.now() + timedelta(seconds=5))

    assert summary.timed_out == 1
    assert Job.objects.get(pk=pair.pk).status == JobStatus.ABORTED
    assert ends(pair) == {"dut1": ReleaseReason.TIMEOUT, "peer1": ReleaseReason.TIMEOUT}


def test_aborting_a_multihost_job_releases_every_host(pair):
    services.job_abort(job=pair, by="alice")

    assert ends(pair) == {"dut1": ReleaseReason.ABORTED, "peer1": ReleaseReason.ABORTED}
    assert {status_of("dut1"), status_of("peer1")} == {HostStatus.READY}


def test_staff_releasing_one_host_of_the_job_requeue_it_and_free_every_host(pair):
    _dut, peer = attempt(pair)

    services.lease_release(lease=peer, by="sam", requeue=True, reason="rewire")

    assert ends(pair) == {"dut1": ReleaseReason.RELEASED, "peer1": ReleaseReason.RELEASED}
    assert Job.objects.get(pk=pair.pk).status == JobStatus.QUEUED


def test_a_runner_handing_the_job_back_frees_every_host_and_uses_no_try(pair):
    _dut, peer = attempt(pair)

    services.lease_hand_back(lease=peer, by="runner-1", reason="stopping")

    pair.refresh_from_db()
    assert (pair.status, pair.attempts) == (JobStatus.QUEUED, 0)
    assert attempt(pair) == []


def test_complete_through_any_lease_releases_all_and_breaks_only_the_named_host(pair):
    dut, peer = attempt(pair)
    services.lease_job_start(lease=dut, by="runner-1")

    job = services.lease_job_complete(
        lease=peer,
        by="runner-1",
        result="failed",
        message="peer lost BT",
        hosts_ok={"peer1": False},
    )

    assert ends(pair) == {"dut1": ReleaseReason.COMPLETED, "peer1": ReleaseReason.COMPLETED}
    assert (status_of("peer1"), status_of("dut1")) == (HostStatus.NEEDS_REPAIR, HostStatus.READY)
    assert job.status == JobStatus.QUEUED  # retried: its host broke, a retry was left
    assert "host peer1 broke" in job.message
    repair = HostEvent.objects.get(kind=EventKind.STATUS, host__hostname="peer1")
    assert repair.new_status == HostStatus.NEEDS_REPAIR
    with pytest.raises(Conflict):  # once per job: the attempt is over
        services.lease_job_complete(lease=dut, by="runner-1", result="passed")


def test_host_ok_false_breaks_every_host_of_the_job(pair):
    dut, _peer = attempt(pair)

    services.lease_job_complete(lease=dut, by="runner-1", result="passed", host_ok=False)

    assert {status_of("dut1"), status_of("peer1")} == {HostStatus.NEEDS_REPAIR}
    assert Job.objects.get(pk=pair.pk).status == JobStatus.PASSED


def test_hosts_ok_naming_a_host_not_of_the_job_changes_nothing(pair):
    dut, _peer = attempt(pair)

    with pytest.raises(InvalidInput, match="dut2"):
        services.lease_job_complete(
            lease=dut, by="runner-1", result="passed", hosts_ok={"dut2": False}
        )

    assert len(attempt(pair)) == 2
    assert Job.objects.get(pk=pair.pk).status == JobStatus.LEASED


def test_start_is_once_per_job_through_any_lease_and_every_host_records_it(pair):
    dut, peer = attempt(pair)

    services.lease_job_start(lease=peer, by="runner-1")

    assert Job.objects.get(pk=pair.pk).status == JobStatus.RUNNING
    started = HostEvent.objects.filter(kind=EventKind.STARTED, job_id=pair.pk)
    assert sorted(e.lease_id for e in started) == sorted([dut.pk, peer.pk])
    with pytest.raises(Conflict):
        services.lease_job_start(lease=dut, by="runner-1")


def test_a_heartbeat_of_any_lease_extends_every_lease_of_the_attempt(pair, settings):
    settings.LEASE_TTL = 900
    dut, peer = attempt(pair)
    at = timezone.now() + timedelta(seconds=30)

    services.lease_job_heartbeat(lease=peer, by="runner-1", at=at)

    for lease in attempt(pair):
        assert (lease.heartbeat_at, lease.expires_at) == (at, at + timedelta(seconds=900))
    assert dut.pk


def test_a_heartbeat_is_refused_once_a_lease_of_the_attempt_ran_out(pair):
    dut, peer = attempt(pair)
    now = timezone.now()
    Lease.objects.filter(pk=dut.pk).update(expires_at=now - timedelta(seconds=1))

    with pytest.raises(Conflict):
        services.lease_job_heartbeat(lease=peer, by="runner-1", at=now)

    # Nothing extended: the tick ends the attempt whole.
    assert Lease.objects.get(pk=peer.pk).heartbeat_at is None
