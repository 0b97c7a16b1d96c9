"""The dashboard's figures that come from the last scheduler tick: free hosts, and whether the
queue is long enough to be estimated. Each follows the next tick."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model

from hosts import services as host_services
from jobs import services
from jobs.models import Job, SchedulerTick
from schedsite import counting
from tests import factories as f

pytestmark = pytest.mark.django_db

FREE = r'<div class="label">Free hosts</div>\s*<div class="value">{}</div>'
QUEUED = r'<div class="label">Queued jobs</div>\s*<div class="value">{}</div>'


def lab_user():  # noqa: ANN201
    return get_user_model().objects.get_or_create(username="tess")[0]


def shown(client, pattern: str, value: str) -> bool:  # noqa: ANN001
    return bool(re.search(pattern.format(value), client.get("/").content.decode()))


def test_free_hosts_are_counted_live_until_the_scheduler_has_ticked(alice_client, lab):
    assert not SchedulerTick.objects.exists()
    assert shown(alice_client, FREE, "3")
    host_services.host_lock(host=lab.h3, by="sam", reason="debugging")
    assert shown(alice_client, FREE, "2")


def test_free_hosts_follow_a_lock_before_the_next_tick_and_the_tick_after_it(alice_client, lab):
    f.job("J1", ["board:eve"])
    services.scheduler_tick()
    assert shown(alice_client, FREE, "2")  # one of three hosts leased at the tick

    host_services.host_lock(host=lab.h3, by="sam", reason="debugging")
    assert shown(alice_client, FREE, "1")  # a host written since the tick: counted live
    services.scheduler_tick()
    assert shown(alice_client, FREE, "1")

    host_services.host_unlock(host=lab.h3, by="sam")
    assert shown(alice_client, FREE, "2")
    services.scheduler_tick()
    assert shown(alice_client, FREE, "2")


@pytest.mark.postgres
def test_free_hosts_are_the_last_ticks_while_no_host_or_lease_was_written_since(alice_client, lab):
    services.scheduler_tick()
    tick = SchedulerTick.objects.latest("id")
    assert shown(alice_client, FREE, "3")
    # The figure comes from the tick's row (no scan of the hosts) until a host is written.
    SchedulerTick.objects.filter(pk=tick.pk).update(hosts_schedulable=7)
    assert shown(alice_client, FREE, "7")
    services.lease_reserve(
        host=lab.h1, holder=lab_user(), duration=timedelta(hours=1), reason="firmware"
    )
    assert shown(alice_client, FREE, "2")  # the reservation's lease: counted live


def test_a_tick_recorded_before_ticks_counted_capacity_leaves_the_free_hosts_counted_live(
    alice_client,
    lab,
):
    services.scheduler_tick()
    SchedulerTick.objects.update(hosts_schedulable=None)  # as the capacity migration left them
    host_services.host_lock(host=lab.h3, by="sam", reason="debugging")
    assert shown(alice_client, FREE, "2")


@pytest.mark.postgres
def test_a_queue_the_tick_found_long_is_estimated_and_counted_again_once_it_is_short(
    alice_client,
    lab,
    monkeypatch,
):
    jobs = [f.job(f"solo-{i}", ["board:none"]) for i in range(12)]  # no host can run them
    monkeypatch.setattr(counting, "EXACT_COUNT_LIMIT", 5)
    services.scheduler_tick()
    assert SchedulerTick.objects.latest("id").queued_after == 12  # over twice the limit
    assert shown(alice_client, QUEUED, r'<span class="approx">about </span>\d+')

    for job in jobs[:10]:
        services.job_abort(job=job, by="sam")
    services.scheduler_tick()
    assert Job.objects.queued().count() == 2
    assert shown(alice_client, QUEUED, "2")  # exact again, not an estimate
