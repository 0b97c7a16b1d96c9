"""A repair_failed host is repaired again by itself after REPAIR_FAILED_RETRY_SECONDS."""

from __future__ import annotations

import re
from datetime import datetime, timedelta

import pytest
from django.utils import timezone

from hosts import services as host_services
from hosts.choices import EventKind, HostStatus
from hosts.models import Host, Worker
from jobs import services
from jobs.choices import JobKind, JobStatus
from jobs.models import Job, Lease
from tests import factories as f
from tests.api.conftest import token_client
from tests.factories import run, tick

pytestmark = pytest.mark.django_db

HOUR = timedelta(hours=1)


@pytest.fixture
def rack(settings) -> Worker:
    settings.REPAIR_MAX_ATTEMPTS = 2
    settings.REPAIR_BACKOFF = 0
    settings.REPAIR_FAILED_RETRY_SECONDS = 4 * 3600
    return f.rack()


@pytest.fixture(autouse=True)
def ordinary_only(settings) -> None:
    """The ordinary round alone: no sooner round, for jobs or an idle lab
    (tests/jobs/test_repair_failed_sooner.py)."""
    settings.REPAIR_FAILED_DEMAND_SECONDS = 0


def h1() -> Host:
    return Host.objects.get(hostname="h1")


def repairs() -> list[Job]:
    return list(Job.objects.filter(kind=JobKind.REPAIR, host__hostname="h1").order_by("id"))


def fail_the_repair(at: datetime) -> None:
    (job,) = [j for j in repairs() if j.status == JobStatus.LEASED]
    run(job, JobStatus.FAILED, at=at)


def break_h1(t0: datetime, rack: Worker) -> datetime:
    """h1 breaks under a test and fails its two repairs; returns when it reached repair_failed."""
    test = f.job("J", host=h1())
    tick(t0, rack)
    run(test, JobStatus.PASSED, host_ok=False, at=t0)
    for n in (1, 2):
        tick(t0 + timedelta(seconds=10 * n), rack)
        fail_the_repair(t0 + timedelta(seconds=10 * n + 1))
    assert h1().status == HostStatus.REPAIR_FAILED
    return t0 + timedelta(seconds=21)


def test_a_host_reaching_repair_failed_is_given_its_next_repair_in_4_hours(rack):
    failed_at = break_h1(timezone.now(), rack)

    host = h1()
    assert host.next_repair_at == failed_at + 4 * HOUR
    event = host.events.filter(kind=EventKind.STATUS).order_by("-id").first()
    assert event.new_status == HostStatus.REPAIR_FAILED
    assert "next automatic try at" in event.message


def test_at_that_time_the_tick_queues_a_repair_and_says_it_is_automatic(rack):
    failed_at = break_h1(timezone.now(), rack)

    tick(failed_at + 4 * HOUR - timedelta(seconds=1), rack)
    assert len(repairs()) == 2 and h1().status == HostStatus.REPAIR_FAILED
    tick(failed_at + 4 * HOUR, rack)

    host = h1()
    assert len(repairs()) == 3
    assert Lease.objects.active().get(host=host).job_id == repairs()[-1].pk
    assert host.status == HostStatus.REPAIRING and host.next_repair_at is None
    moved = host.events.filter(kind=EventKind.STATUS, new_status=HostStatus.NEEDS_REPAIR)
    assert "automatic repair" in moved.order_by("-id").first().message
    queued = host.events.filter(kind=EventKind.UPDATED, job_id=repairs()[-1].pk).get()
    assert queued.actor == "scheduler" and "automatic" in queued.message


def fail_the_round(at: datetime, rack: Worker) -> datetime:
    """The automatic round due at `at` runs its REPAIR_MAX_ATTEMPTS (2) repairs, all failing."""
    tick(at, rack)
    fail_the_repair(at + timedelta(seconds=5))
    tick(at + timedelta(seconds=10), rack)
    fail_the_repair(at + timedelta(seconds=15))
    return at + timedelta(seconds=15)


def test_the_automatic_repair_is_a_fresh_round_of_tries_like_repair_now(rack):
    failed_at = break_h1(timezone.now(), rack)
    at = failed_at + 4 * HOUR
    tick(at, rack)
    host = h1()
    assert (host.status, host.repair_attempts, host.repair_rounds) == (HostStatus.REPAIRING, 0, 1)
    moved = host.events.filter(kind=EventKind.STATUS, new_status=HostStatus.NEEDS_REPAIR)
    moved = moved.order_by("-id").first()
    assert moved.actor == "scheduler" and "a new round of 2 tries" in moved.message

    fail_the_repair(at + timedelta(seconds=5))  # the round's first try: not given up on
    host = h1()
    assert (host.status, host.repair_attempts) == (HostStatus.NEEDS_REPAIR, 1)
    event = host.events.filter(kind=EventKind.STATUS).order_by("-id").first()
    assert event.message.startswith("repair 1 of 2 failed")

    tick(at + timedelta(seconds=10), rack)  # its second try, queued by the repair loop
    assert len(repairs()) == 4 and h1().status == HostStatus.REPAIRING
    fail_the_repair(at + timedelta(seconds=15))
    host = h1()
    assert (host.status, host.repair_attempts) == (HostStatus.REPAIR_FAILED, 2)
    assert "repair failed 2 times in a row" in host.events.order_by("-id").first().message


def test_the_host_page_counts_the_tries_of_the_current_round(rack, sam, client):
    failed_at = break_h1(timezone.now(), rack)
    at = failed_at + 4 * HOUR
    tick(at, rack)
    fail_the_repair(at + timedelta(seconds=5))
    client.force_login(sam)
    page = re.sub(r"\s+", " ", client.get("/hosts/h1/").content.decode())
    assert "1 of 2 failed in a row" in page


def test_each_failed_automatic_round_doubles_the_wait_up_to_48_hours(rack):
    at = break_h1(timezone.now(), rack)
    waits = []
    for _round in range(6):
        wait = h1().next_repair_at - at
        waits.append(wait / HOUR)
        at = fail_the_round(at + wait, rack)
        assert h1().status == HostStatus.REPAIR_FAILED
    assert waits == [4, 8, 16, 32, 48, 48]
    assert len(repairs()) == 2 + 6 * 2


def test_a_passed_automatic_repair_resets_the_wait(rack):
    at = break_h1(timezone.now(), rack)
    at = fail_the_round(h1().next_repair_at, rack)  # the 4 hours round fails
    assert h1().next_repair_at == at + 8 * HOUR
    at = h1().next_repair_at
    tick(at, rack)
    fail_the_repair(at + timedelta(seconds=1))  # the 8 hours round: its second try passes
    tick(at + timedelta(seconds=2), rack)
    (job,) = [j for j in repairs() if j.status == JobStatus.LEASED]
    run(job, JobStatus.PASSED, at=at + timedelta(seconds=3))
    host = h1()
    assert (host.status, host.repair_attempts, host.next_repair_at) == (HostStatus.READY, 0, None)
    assert host.repair_rounds == 0

    at = break_h1(at + HOUR, rack)  # gives up again: 4 hours, not 16
    assert h1().next_repair_at == at + 4 * HOUR


def test_staff_repair_now_after_failed_automatic_rounds_starts_the_wait_again(rack):
    at = break_h1(timezone.now(), rack)
    at = fail_the_round(h1().next_repair_at, rack)
    assert h1().repair_rounds == 1
    services.host_repair_now(host=h1(), by="sam")
    host = h1()
    assert (host.repair_attempts, host.repair_rounds, host.next_repair_at) == (0, 0, None)
    at = fail_the_round(at + timedelta(seconds=30), rack)
    assert h1().next_repair_at == at + 4 * HOUR


def test_a_locked_host_is_left_alone_until_unlocked(rack):
    failed_at = break_h1(timezone.now(), rack)
    host_services.host_lock(host=h1(), by="sam", reason="on the bench")

    tick(failed_at + 5 * HOUR, rack)
    assert len(repairs()) == 2 and h1().status == HostStatus.REPAIR_FAILED
    assert h1().next_repair_at == failed_at + 4 * HOUR  # still shown, waiting for the unlock

    host_services.host_unlock(host=h1(), by="sam")
    tick(failed_at + 5 * HOUR + timedelta(seconds=1), rack)
    assert len(repairs()) == 3 and h1().status == HostStatus.REPAIRING


def test_0_turns_the_automatic_repair_off(rack, settings):
    settings.REPAIR_FAILED_RETRY_SECONDS = 0
    failed_at = break_h1(timezone.now(), rack)
    assert h1().next_repair_at is None
    assert "REPAIR_FAILED_RETRY_SECONDS is 0" in h1().events.order_by("-id").first().message

    tick(failed_at + 100 * HOUR, rack)
    assert len(repairs()) == 2 and h1().status == HostStatus.REPAIR_FAILED


def test_turning_it_off_clears_a_time_already_set(rack, settings):
    failed_at = break_h1(timezone.now(), rack)
    settings.REPAIR_FAILED_RETRY_SECONDS = 0

    tick(failed_at + 5 * HOUR, rack)
    assert h1().next_repair_at is None and len(repairs()) == 2


def test_staff_repair_now_clears_the_time_and_setting_repair_failed_by_hand_sets_it(rack):
    break_h1(timezone.now(), rack)
    services.host_repair_now(host=h1(), by="sam")
    assert h1().next_repair_at is None

    at = timezone.now()
    services.host_set_status(host=h1(), status=HostStatus.REPAIR_FAILED, by="sam")
    assert h1().next_repair_at is not None
    assert abs(h1().next_repair_at - (at + 4 * HOUR)) < timedelta(seconds=30)


# --- where people see it ----------------------------------------------------------------------


def test_the_api_and_the_host_page_show_the_next_automatic_repair(rack, sam, client):
    failed_at = break_h1(timezone.now(), rack)
    when = failed_at + 4 * HOUR

    body = token_client(sam).get("/api/hosts/h1/").json()
    assert datetime.fromisoformat(body["next_repair_at"].replace("Z", "+00:00")) == when
    listed = token_client(sam).get("/api/hosts/?status=repair_failed").json()["results"]
    assert [h["next_repair_at"] for h in listed] == [body["next_repair_at"]]

    client.force_login(sam)
    page = client.get("/hosts/h1/").content.decode()
    shown = re.search(r"<dd data-next-repair>(.*?)</dd>", page, re.S)
    assert shown is not None
    local = timezone.localtime(when)
    assert f"at {local:%Y-%m-%d %H:%M} {local.tzname()}" in shown.group(1)

    host_services.host_lock(host=h1(), by="sam", reason="on the bench")
    page = client.get("/hosts/h1/").content.decode()
    assert "not while the host is locked" in page


def test_the_dashboard_callout_says_when_the_next_automatic_try_is(rack, sam, client):
    failed_at = break_h1(timezone.now(), rack)
    client.force_login(sam)

    page = client.get("/").content.decode()
    callout = re.search(r'id="repair-failed-callout">(.*?)</p>', page, re.S)
    assert callout is not None
    text = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", callout.group(1))).strip()
    local = timezone.localtime(failed_at + 4 * HOUR)
    assert text.endswith(
        f"it needs a person; next automatic try at {local:%Y-%m-%d %H:%M} {local.tzname()}."
    )
