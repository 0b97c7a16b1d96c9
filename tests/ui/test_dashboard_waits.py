"""The dashboard's oldest wait: of a job that could run, with the impossible ones apart."""

from __future__ import annotations

from datetime import timedelta

import pytest
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
