"""A repair_failed host that queued jobs need gets its automatic round sooner
(REPAIR_FAILED_DEMAND_SECONDS, docs/health.md#sooner-when-jobs-need-it)."""

from __future__ import annotations

import re
from datetime import datetime, timedelta

import pytest
from django.utils import timezone

from hosts import services as host_services
from hosts.choices import EventKind, HostStatus
from hosts.models import Host
from jobs.choices import JobKind, JobStatus
from jobs.recovery import repair_failed_demand_wait, sooner_repair_at
from jobs.scheduling import maintenance
from tests import factories as f
from tests.api.conftest import token_client
from tests.factories import run, tick
from tests.jobs import test_repair_failed_retry as retry
from tests.jobs.test_repair_failed_retry import HOUR, break_h1, fail_the_round, h1, repairs

pytestmark = pytest.mark.django_db

HALF = timedelta(minutes=30)


rack = retry.rack  # rack-1 with h1 and h2 (board:x), 2 tries a round, no backoff, 4 h waits


@pytest.fixture(autouse=True)
def demand(settings) -> None:
    settings.REPAIR_FAILED_DEMAND_SECONDS = 1800


@pytest.fixture
def busy(monkeypatch) -> None:
    """The lab is never idle for a host: every worker's slots are wanted (the demand rule
    alone; the idle rule is tested below with real capacity)."""
    monkeypatch.setattr(maintenance, "idle_slots", lambda ids, **kw: dict.fromkeys(ids, 0))


def h2() -> Host:
    return Host.objects.get(hostname="h2")


def last_move(host: Host) -> str:
    """The message of the host's last move to needs_repair."""
    moves = host.events.filter(kind=EventKind.STATUS, new_status=HostStatus.NEEDS_REPAIR)
    return moves.order_by("-id").first().message


def waiting_for_h1(at: datetime, n: int = 1) -> None:
    """n test jobs only h1 can take, submitted at `at`."""
    for i in range(n):
        job = f.job(f"needs-h1-{i}", host=h1())
        type(job).objects.filter(pk=job.pk).update(submitted_at=at, created_at=at)


def test_jobs_that_waited_half_an_hour_for_it_bring_its_round_forward(rack):
    failed_at = break_h1(timezone.now(), rack)
    waiting_for_h1(failed_at, n=3)
    host = h1()
    assert host.next_repair_at == failed_at + 4 * HOUR  # the ordinary time, shown as before
    assert sooner_repair_at(host.repair_rounds, host.next_repair_at) == failed_at + HALF

    tick(failed_at + HALF - timedelta(seconds=1), rack)
    assert h1().status == HostStatus.REPAIR_FAILED and len(repairs()) == 2

    tick(failed_at + HALF, rack)
    host = h1()
    assert (host.status, host.repair_rounds, host.repair_attempts) == (
        HostStatus.REPAIRING,
        1,
        0,
    )
    assert host.next_repair_at is None
    moved = host.events.filter(kind=EventKind.STATUS, new_status=HostStatus.NEEDS_REPAIR)
    moved = moved.order_by("-id").first()
    assert moved.actor == "scheduler"
    assert moved.message.startswith("automatic repair, sooner: 3 queued test jobs that fit it")
    assert "waited 30 min or more (REPAIR_FAILED_DEMAND_SECONDS" in moved.message
    assert f"its next_repair_at was {failed_at + 4 * HOUR:%Y-%m-%d %H:%M} UTC" in moved.message
    queued = host.events.filter(kind=EventKind.UPDATED, job_id=repairs()[-1].pk).get()
    assert "sooner" in queued.message


def test_a_job_that_fits_by_its_labels_counts_when_no_other_host_takes_it(rack):
    failed_at = break_h1(timezone.now(), rack)
    host_services.host_lock(host=h2(), by="sam", reason="bench work")
    job = f.job("any-x")  # board:x: h1 or h2, and h2 is locked
    type(job).objects.filter(pk=job.pk).update(submitted_at=failed_at)

    tick(failed_at + HALF, rack)
    assert h1().status == HostStatus.REPAIRING
    assert "1 queued test job that fit it" in last_move(h1())


def test_no_sooner_round_when_no_waiting_job_needs_it(rack, busy):
    failed_at = break_h1(timezone.now(), rack)
    other = f.job("other-board", labels=["board:y"])  # fits no host of the lab
    type(other).objects.filter(pk=other.pk).update(submitted_at=failed_at)
    served = f.job("any-x")  # board:x: h2 takes it, so it does not wait
    type(served).objects.filter(pk=served.pk).update(submitted_at=failed_at)
    tick(failed_at + timedelta(seconds=1), rack)
    assert served.leases.get().host == h2()

    for at in (failed_at + HALF, failed_at + 2 * HOUR, failed_at + 4 * HOUR - timedelta(seconds=1)):
        tick(at, rack)
        assert h1().status == HostStatus.REPAIR_FAILED
    tick(failed_at + 4 * HOUR, rack)  # the ordinary round, at its time
    assert h1().status == HostStatus.REPAIRING
    assert "automatic repair: its next_repair_at came" in last_move(h1())


def test_a_job_that_has_not_waited_half_an_hour_does_not_count(rack, busy):
    failed_at = break_h1(timezone.now(), rack)
    waiting_for_h1(failed_at + 10 * timedelta(minutes=1))  # submitted 10 min after the give-up

    tick(failed_at + HALF, rack)  # the host's half hour has passed, the job's not
    assert h1().status == HostStatus.REPAIR_FAILED
    tick(failed_at + HALF + 10 * timedelta(minutes=1), rack)
    assert h1().status == HostStatus.REPAIRING


def test_a_locked_host_is_left_alone_however_many_jobs_wait(rack):
    failed_at = break_h1(timezone.now(), rack)
    waiting_for_h1(failed_at, n=5)
    host_services.host_lock(host=h1(), by="sam", reason="on the bench")

    tick(failed_at + 2 * HOUR, rack)
    host = h1()
    assert host.status == HostStatus.REPAIR_FAILED and len(repairs()) == 2
    assert host.next_repair_at == failed_at + 4 * HOUR


def test_a_sooner_round_that_fails_doubles_the_wait_like_the_ordinary_one(rack):
    failed_at = break_h1(timezone.now(), rack)
    waiting_for_h1(failed_at)
    at = fail_the_round(failed_at + HALF, rack)  # the sooner round (30 min), both tries fail
    host = h1()
    assert (host.status, host.repair_rounds) == (HostStatus.REPAIR_FAILED, 1)
    assert host.next_repair_at == at + 8 * HOUR  # the ordinary wait doubled
    assert sooner_repair_at(1, host.next_repair_at) == at + HOUR  # and the sooner one too

    tick(at + HOUR - timedelta(seconds=1), rack)
    assert h1().status == HostStatus.REPAIR_FAILED
    tick(at + HOUR, rack)
    assert (h1().status, h1().repair_rounds) == (HostStatus.REPAIRING, 2)
    assert "automatic repair, sooner" in last_move(h1())


def test_the_sooner_wait_doubles_until_it_meets_the_ordinary_one(settings):
    settings.REPAIR_FAILED_RETRY_SECONDS = 4 * 3600
    settings.REPAIR_FAILED_DEMAND_SECONDS = 1800
    waits = [repair_failed_demand_wait(rounds) for rounds in range(9)]
    hours = [w and w.total_seconds() / 3600 for w in waits]
    # A host no repair mends, wanted all along: 7 sooner rounds, then only the ordinary 48 h.
    assert hours == [0.5, 1, 2, 4, 8, 16, 32, None, None]


@pytest.mark.parametrize(("demand", "retry"), [(0, 4 * 3600), (1800, 0), (4 * 3600, 4 * 3600)])
def test_the_rule_is_off_with_its_setting_at_0_or_no_sooner_than_the_ordinary(
    settings, demand, retry
):
    settings.REPAIR_FAILED_RETRY_SECONDS = retry
    settings.REPAIR_FAILED_DEMAND_SECONDS = demand
    assert repair_failed_demand_wait(0) is None
    assert sooner_repair_at(0, timezone.now()) is None


def test_with_the_setting_at_0_the_wanted_host_waits_its_ordinary_time(rack, settings):
    settings.REPAIR_FAILED_DEMAND_SECONDS = 0
    failed_at = break_h1(timezone.now(), rack)
    waiting_for_h1(failed_at, n=3)
    tick(failed_at + 2 * HOUR, rack)
    assert h1().status == HostStatus.REPAIR_FAILED
    tick(failed_at + 4 * HOUR, rack)
    assert "its next_repair_at came" in last_move(h1())


def test_only_the_head_of_the_queue_is_read(rack, busy, monkeypatch):
    failed_at = break_h1(timezone.now(), rack)
    monkeypatch.setattr(maintenance, "DEMAND_SCAN", 2)
    for name in ("a", "b"):  # two higher-priority jobs no host has, ahead in the queue
        job = f.job(name, labels=["board:y"], priority=90)
        type(job).objects.filter(pk=job.pk).update(submitted_at=failed_at)
    waiting_for_h1(failed_at)

    tick(failed_at + HALF, rack)
    assert h1().status == HostStatus.REPAIR_FAILED  # the job for h1 is third: not read
    monkeypatch.setattr(maintenance, "DEMAND_SCAN", 3)
    tick(failed_at + HALF + timedelta(seconds=1), rack)
    assert h1().status == HostStatus.REPAIRING


def test_a_repaired_host_serves_the_waiting_jobs(rack):
    failed_at = break_h1(timezone.now(), rack)
    waiting_for_h1(failed_at)
    tick(failed_at + HALF, rack)
    (repair,) = [j for j in repairs() if j.status == JobStatus.LEASED]
    run(repair, JobStatus.PASSED, at=failed_at + HALF + timedelta(seconds=5))
    host = h1()
    assert (host.status, host.repair_rounds) == (HostStatus.READY, 0)
    tick(failed_at + HALF + timedelta(seconds=10), rack)
    lease = host.leases.active().get()
    assert lease.job.kind == JobKind.TEST and lease.job.name == "needs-h1-0"


def test_the_host_page_says_when_it_may_come_sooner_and_counts_rounds(rack, sam, client):
    failed_at = break_h1(timezone.now(), rack)
    client.force_login(sam)
    page = re.sub(r"\s+", " ", client.get("/hosts/h1/").content.decode())
    sooner = timezone.localtime(failed_at + HALF)
    hint = "if queued jobs need it or the lab is idle for it"
    assert f"sooner, from {sooner:%Y-%m-%d %H:%M} {sooner.tzname()}, {hint}" in page
    assert re.search(r"Automatic rounds</dt> ?<dd[^>]*>0", page)


def test_the_api_counts_the_automatic_rounds_beside_next_repair_at(rack, sam):
    failed_at = break_h1(timezone.now(), rack)
    body = token_client(sam).get("/api/hosts/h1/").json()
    assert (body["status"], body["repair_rounds"]) == ("repair_failed", 0)
    at = fail_the_round(failed_at + 4 * HOUR, rack)  # the ordinary round fails
    body = token_client(sam).get("/api/hosts/h1/").json()
    assert (body["status"], body["repair_rounds"]) == ("repair_failed", 1)
    assert datetime.fromisoformat(body["next_repair_at"].replace("Z", "+00:00")) == at + 8 * HOUR
    listed = token_client(sam).get("/api/hosts/?status=repair_failed").json()["results"]
    assert [h["repair_rounds"] for h in listed] == [1]


def test_the_tick_looks_for_waiting_jobs_only_once_a_host_may_have_its_round_sooner(rack):
    failed_at = break_h1(timezone.now(), rack)
    tick(failed_at + timedelta(seconds=1), rack)  # h2 verified and ready: nothing else to do
    host_services.worker_heartbeat(worker=rack, at=failed_at + HALF)  # its worker is up
    assert not maintenance._anything_to_do(now=failed_at + HALF - timedelta(seconds=1))
    assert maintenance._anything_to_do(now=failed_at + HALF)
    host_services.host_lock(host=h1(), by="sam", reason="on the bench")
    assert not maintenance._anything_to_do(now=failed_at + HALF)


# The lab idle for it: its worker has a slot no queued test job waits for.


def test_an_idle_lab_gives_the_host_its_round_after_half_an_hour_without_any_job(rack):
    failed_at = break_h1(timezone.now(), rack)  # rack-1 has no capacity limit: always a slot
    tick(failed_at + HALF - timedelta(seconds=1), rack)
    assert h1().status == HostStatus.REPAIR_FAILED and len(repairs()) == 2

    tick(failed_at + HALF, rack)
    host = h1()
    assert (host.status, host.repair_rounds) == (HostStatus.REPAIRING, 1)
    message = last_move(host)
    assert message.startswith("automatic repair, sooner: the lab is idle for it (its worker has")
    assert "a free slot no queued test job waits for; 30 min or more since the give-up" in message
    assert f"its next_repair_at was {failed_at + 4 * HOUR:%Y-%m-%d %H:%M} UTC" in message


def test_no_idle_round_while_the_workers_capacity_is_taken_then_one_when_it_frees(rack, settings):
    settings.LEASE_TTL = 4 * 3600  # the test below keeps its lease without heartbeats
    failed_at = break_h1(timezone.now(), rack)
    host_services.worker_update(worker=rack, by="sam", max_jobs=1)
    busy = f.job("any-x")  # board:x: h2 takes it, and with it rack-1's one slot
    tick(failed_at + timedelta(seconds=1), rack)
    assert busy.leases.get().host == h2()

    tick(failed_at + HALF, rack)
    tick(failed_at + 2 * HALF, rack)
    assert h1().status == HostStatus.REPAIR_FAILED and len(repairs()) == 2

    run(busy, JobStatus.PASSED, at=failed_at + 2 * HALF + timedelta(seconds=1))
    tick(failed_at + 2 * HALF + timedelta(seconds=2), rack)
    assert h1().status == HostStatus.REPAIRING
    assert "the lab is idle for it" in last_move(h1())


def test_a_queued_job_for_a_free_host_of_the_worker_wants_its_slot(rack):
    failed_at = break_h1(timezone.now(), rack)
    tick(failed_at + timedelta(seconds=1), rack)  # h2 verified: ready and free
    assert h2().status == HostStatus.READY
    now = failed_at + timedelta(seconds=2)  # rack-1 online: its hosts in service
    assert maintenance.idle_slots({rack.pk}, now=now) == {rack.pk: None}  # no limit
    host_services.worker_update(worker=rack, by="sam", max_jobs=1)
    assert maintenance.idle_slots({rack.pk}, now=now) == {rack.pk: 1}
    f.job("any-x")  # fits h2, free and ready: it will take the one slot
    assert maintenance.idle_slots({rack.pk}, now=now) == {rack.pk: 0}
    f.job("other-board", labels=["board:y"])  # fits no host of rack-1: wants none of it
    assert maintenance.idle_slots({rack.pk}, now=now) == {rack.pk: 0}


def test_a_failed_idle_round_doubles_the_wait_to_the_next(rack):
    failed_at = break_h1(timezone.now(), rack)
    at = fail_the_round(failed_at + HALF, rack)  # the idle round (30 min), both tries fail
    host = h1()
    assert (host.status, host.repair_rounds) == (HostStatus.REPAIR_FAILED, 1)
    assert host.next_repair_at == at + 8 * HOUR

    tick(at + HOUR - timedelta(seconds=1), rack)
    assert h1().status == HostStatus.REPAIR_FAILED
    tick(at + HOUR, rack)  # 30 min doubled
    assert (h1().status, h1().repair_rounds) == (HostStatus.REPAIRING, 2)
    assert "the lab is idle for it" in last_move(h1())


def test_an_idle_lab_leaves_a_locked_host_alone(rack):
    failed_at = break_h1(timezone.now(), rack)
    host_services.host_lock(host=h1(), by="sam", reason="on the bench")
    tick(failed_at + 2 * HOUR, rack)
    host = h1()
    assert host.status == HostStatus.REPAIR_FAILED and len(repairs()) == 2
    assert host.next_repair_at == failed_at + 4 * HOUR


@pytest.mark.parametrize("setting", ["REPAIR_FAILED_RETRY_SECONDS", "REPAIR_FAILED_DEMAND_SECONDS"])
def test_no_idle_round_with_either_setting_at_0(rack, settings, setting):
    failed_at = break_h1(timezone.now(), rack)
    setattr(settings, setting, 0)
    tick(failed_at + 2 * HOUR, rack)
    assert h1().status == HostStatus.REPAIR_FAILED and len(repairs()) == 2
