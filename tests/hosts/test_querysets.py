"""Which hosts may take work and which workers are online: one rule (hosts.rules), asked six
ways."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

import pytest
from django.utils import timezone

from hosts import rules
from hosts.choices import HostStatus
from hosts.models import Host, Worker
from jobs import selectors
from jobs.api.host_serializers import HostSerializer
from jobs.choices import JobStatus, ReleaseReason
from jobs.models import Job, Lease
from jobs.scheduling import labstate
from jobs.scheduling.planner import host_is_schedulable
from jobs.scheduling.planner.hostindex import host_blocker

pytestmark = pytest.mark.django_db

TIMEOUT = 120  # WORKER_OFFLINE_TIMEOUT in these tests


@dataclass(frozen=True)
class Case:
    status: str = HostStatus.READY
    locked: bool = False
    # None: no worker; else seconds since its runner heartbeated (-1: never), and paused
    worker_seen_ago: int | None = 10
    worker_paused: bool = False
    lease: str = ""  # "", "job", "reservation" or "released"


CASES = {
    "ready, free, worker online": (Case(), True),
    "no worker at all": (Case(worker_seen_ago=None), True),
    "worker heartbeated exactly WORKER_OFFLINE_TIMEOUT ago": (Case(worker_seen_ago=TIMEOUT), True),
    "only released leases in its history": (Case(lease="released"), True),
    "needs repair": (Case(status=HostStatus.NEEDS_REPAIR), False),
    "repairing": (Case(status=HostStatus.REPAIRING), False),
    "repair failed": (Case(status=HostStatus.REPAIR_FAILED), False),
    "locked by staff": (Case(locked=True), False),
    "leased to a job": (Case(lease="job"), False),
    "reserved by hand": (Case(lease="reservation"), False),
    "worker paused": (Case(worker_paused=True), False),
    "worker offline": (Case(worker_seen_ago=TIMEOUT + 1), False),
    "worker never heartbeated": (Case(worker_seen_ago=-1), False),
    "locked, leased and its worker paused": (
        Case(locked=True, lease="job", worker_paused=True),
        False,
    ),
}

# Kept from work by their lease alone: usable once it ends.
FREE_ONCE_RELEASED = (CASES["leased to a job"][0], CASES["reserved by hand"][0])


def build(case: Case, now: datetime) -> Host:
    """One host (and its worker and lease) in the state the case describes."""
    worker = None
    if case.worker_seen_ago is not None:
        seen = None if case.worker_seen_ago < 0 else now - timedelta(seconds=case.worker_seen_ago)
        worker = Worker.objects.create(
            name="w1",
            last_seen=seen,
            paused=case.worker_paused,
            paused_reason="maintenance" if case.worker_paused else "",
        )
    host = Host.objects.create(
        hostname="dut1",
        worker=worker,
        status=case.status,
        locked=case.locked,
        lock_reason="broken fan" if case.locked else "",
    )
    if case.lease:
        job = None
        if case.lease == "job":
            job = Job.objects.create(name="t1", status=JobStatus.LEASED)
        released = case.lease == "released"
        Lease.objects.create(
            host=host,
            job=job,
            expires_at=now + timedelta(hours=1),
            released_at=now if released else None,
            release_reason=ReleaseReason.RELEASED if released else "",
        )
    return host


@pytest.mark.parametrize(("case", "expected"), CASES.values(), ids=CASES.keys())
def test_every_reader_of_the_schedulable_rule_gives_the_same_answer(
    settings, case: Case, expected: bool
):
    settings.WORKER_OFFLINE_TIMEOUT = TIMEOUT
    now = timezone.now()
    host = build(case, now)

    # The SQL rule: counts, filters and the tick's re-check under lock (which reads only the
    # leases of the hosts it re-checks).
    assert Host.objects.schedulable(now).filter(pk=host.pk).exists() is expected
    rechecked = Host.objects.filter(pk__in_array=[host.pk]).schedulable(now, among=[host.pk])
    assert rechecked.exists() is expected
    # The planner's rule, on the facts the tick's snapshot reads.
    assert labstate.scheduler_snapshot(now=now).hosts_by_id[host.pk].schedulable is expected
    # The planner's count of free hosts (hostindex.host_blocker), and preemption's and the
    # what-if plan's "usable once its lease ends" (the same rule, its lease set aside).
    state = labstate.scheduler_snapshot(now=now).hosts_by_id[host.pk]
    assert (host_blocker(state) is None) is expected
    assert state.usable_when_freed is (expected or case in FREE_ONCE_RELEASED)
    # The API's `schedulable` field.
    host = Host.objects.select_related("worker").get(pk=host.pk)
    assert HostSerializer(context={"now": now}).get_schedulable(host) is expected
    # The worker's count of schedulable hosts.
    if host.worker is not None:
        worker = selectors.workers_with_host_counts(now=now).get(pk=host.worker_id)
        assert worker.hosts_schedulable == (1 if expected else 0)


def test_the_planner_rule_refuses_each_reason_on_its_own():
    free = dict(ready=True, locked=False, leased=False, worker_paused=False, worker_offline=False)
    assert host_is_schedulable(**free)
    for reason in ("locked", "leased", "worker_paused", "worker_offline"):
        assert not host_is_schedulable(**{**free, reason: True}), reason
    assert not host_is_schedulable(**{**free, "ready": False})


def test_leased_and_unleased_split_hosts_by_active_lease_or_reservation():
    now = timezone.now()
    free = Host.objects.create(hostname="free")
    was_leased = build(Case(worker_seen_ago=None, lease="released"), now)
    reserved = Host.objects.create(hostname="reserved")
    Lease.objects.create(host=reserved, expires_at=now + timedelta(hours=1))

    assert set(Host.objects.leased()) == {reserved}
    assert set(Host.objects.unleased()) == {free, was_leased}
    flags = dict(Host.objects.with_leased().values_list("hostname", "is_leased"))
    assert flags == {"free": False, "dut1": False, "reserved": True}


def test_a_worker_is_online_within_the_timeout_and_offline_after_or_if_never_seen(settings):
    settings.WORKER_OFFLINE_TIMEOUT = TIMEOUT
    now = timezone.now()
    ago = {"fresh": 0, "edge": TIMEOUT, "stale": TIMEOUT + 1}
    for name, seconds in ago.items():
        Worker.objects.create(name=name, last_seen=now - timedelta(seconds=seconds))
    Worker.objects.create(name="never", last_seen=None)

    online = {w.name for w in Worker.objects.online(now)}
    assert online == {"fresh", "edge"}
    assert {w.name for w in Worker.objects.offline(now)} == {"stale", "never"}
    assert {w.name for w in Worker.objects.all() if w.is_online(now)} == online


def test_the_rule_names_the_most_lasting_cause_first():
    # A pinned job's wait reason and the planner's counts say one cause per host: this one.
    facts = dict(ready=False, locked=True, leased=True, worker_paused=True, worker_offline=True)
    said = []
    for name in ("locked", "worker_paused", "worker_offline", "ready", "leased"):
        said.append(rules.host_blocker(rules.Facts(**facts)))
        facts[name] = name == "ready"
    said.append(rules.host_blocker(rules.Facts(**facts)))
    assert said == ["locked", "paused", "offline", "not_ready", "leased", None]
