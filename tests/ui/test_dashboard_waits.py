"""The dashboard's oldest wait: of a job that could run, with the impossible ones apart."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from hosts import services as host_services
from jobs import services
from jobs.models import Job
from schedsite.ui.durations import human_duration
from tests import factories as f

pytestmark = pytest.mark.django_db


def _age(job: Job, ago: timedelta) -> None:
    Job.objects.filter(pk=job.pk).update(created_at=timezone.now() - ago)


def _waits(client) -> str:  # noqa: ANN001
    html = client.get("/").content.decode()
    return html.split('id="queue-waits">')[1].split("</div>")[0]


def _scanned(client) -> tuple[bool, str]:  # noqa: ANN001
    """Whether the dashboard read the queue's oldest jobs for its oldest waits, and the waits."""
    with CaptureQueriesContext(connection) as ctx:
        waits = _waits(client)
    oldest_first = 'ORDER BY "jobs_job"."created_at" ASC'
    return any(oldest_first in q["sql"] for q in ctx.captured_queries), waits


def _lab_with_an_impossible_and_a_runnable_job(sam) -> tuple[Job, Job]:  # noqa: ANN001
    host_services.host_lock(host=f.host("eve1", ["board:eve"]), by=sam, reason="usb")
    never = f.job("never", ["board:nope"])
    could = f.job("could", ["board:eve"])
    _age(never, timedelta(days=2))
    _age(could, timedelta(minutes=5))
    return never, could


def test_a_job_that_can_never_run_is_counted_apart_from_the_oldest_runnable_wait(alice_client, sam):
    # The only board:eve host is locked: the job could run once it is unlocked (amber).
    host_services.host_lock(host=f.host("eve1", ["board:eve"]), by=sam, reason="usb")
    never = f.job("never", ["board:nope"])  # no host carries board:nope (red)
    could = f.job("could", ["board:eve"])
    _age(never, timedelta(days=2))
    _age(could, timedelta(minutes=5))
    services.scheduler_tick()

    waits = _waits(alice_client)

    assert waits.startswith("oldest runnable waiting 5")
    assert human_duration(2 * 86400) not in waits.split("<br>")[0]
    assert "1 older can never run as asked (oldest 2" in waits


def test_a_queue_of_only_impossible_jobs_says_so(alice_client):
    f.host("eve1", ["board:eve"])
    f.job("never", ["board:nope"])
    services.scheduler_tick()

    waits = _waits(alice_client)

    assert waits.startswith("none of them can run as asked")
    assert "1 can never run as asked" in waits


def test_an_empty_queue_says_nothing_waits(alice_client):
    f.host("eve1", ["board:eve"])
    services.scheduler_tick()
    assert _waits(alice_client) == "nothing waiting"


@pytest.mark.postgres
def test_the_oldest_waits_are_read_once_a_tick_while_no_job_is_written(alice_client, sam):
    _, could = _lab_with_an_impossible_and_a_runnable_job(sam)
    services.scheduler_tick()

    scanned, first = _scanned(alice_client)
    assert scanned and "1 older can never run as asked" in first
    scanned, again = _scanned(alice_client)
    assert not scanned  # the same tick's reasons, the same queue: counted from the last read
    assert again.split(" waiting ")[0] == first.split(" waiting ")[0]
    assert "1 older can never run as asked" in again

    _age(could, timedelta(days=3))  # a queued job written since the tick: read again
    scanned, now_older = _scanned(alice_client)
    assert scanned and now_older.startswith(f"oldest runnable waiting {human_duration(3 * 86400)}")
    assert "can never run" not in now_older
    services.scheduler_tick()
    assert _scanned(alice_client)[0]  # a new tick, new reasons: read once more
    assert not _scanned(alice_client)[0]


@pytest.mark.postgres
def test_a_retry_whose_backoff_ends_is_weighed_by_its_class_again(alice_client, sam, monkeypatch):
    never, could = _lab_with_an_impossible_and_a_runnable_job(sam)
    # An older job of the same impossible class, waiting out a retry's backoff: until it ends
    # the job waits for its own reason (not red), then its class's.
    retry = f.job("retry", ["board:nope"])
    _age(retry, timedelta(days=3))
    until = timezone.now() + timedelta(minutes=10)
    Job.objects.filter(pk=retry.pk).update(not_before=until)
    services.scheduler_tick()

    assert _waits(alice_client).startswith(f"oldest runnable waiting {human_duration(3 * 86400)}")
    later = until + timedelta(seconds=1)
    monkeypatch.setattr(timezone, "now", lambda: later)
    waits = _waits(alice_client)
    assert waits.startswith("oldest runnable waiting 15")  # could: 5 minutes + 10 since
    assert "2 older can never run as asked" in waits
