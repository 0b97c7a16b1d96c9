"""The queue page gives every wait reason its badge, the three the table once lacked too."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from hosts.models import Host, Worker
from jobs import services
from jobs.choices import JobKind
from jobs.models import Job
from tests import factories as f

pytestmark = pytest.mark.django_db


def waiting_three_new_ways(lab) -> None:  # noqa: ANN001
    """A lab with one queued job per code the badge table once lacked."""
    # pinned_host_at_capacity: w1 may run one job; `wide` takes h1, so `pinned` waits for h2.
    Worker.objects.filter(pk=lab.w1.pk).update(max_jobs=1)
    f.job("wide", ["pool:cq", "board:eve"], priority=70)
    f.job("pinned", ["board:eve"], host=lab.h2)
    # retry_backoff: a job told to wait until later.
    backoff = f.job("retried", ["board:kevin"])
    later = timezone.now() + timedelta(minutes=5)
    Job.objects.filter(pk=backoff.pk).update(not_before=later, message="retry 1 of 2")
    # maintenance_waiting: a verify job whose host is locked.
    Host.objects.filter(pk=lab.h3.pk).update(locked=True, lock_reason="fan broken")
    Job.objects.create(kind=JobKind.VERIFY, name="verify h3.lab", host=lab.h3, priority=100)
    services.scheduler_tick()


def test_the_queue_shows_the_badges_once_missing(alice_client, lab):
    waiting_three_new_ways(lab)

    html = alice_client.get("/queue/").content.decode()

    assert '<span class="badge tone-blue">Worker full</span>' in html
    assert "Pinned host h2.lab is on worker w1 at capacity (1 of 1)" in html
    assert '<span class="badge tone-slate">Retry backoff</span>' in html
    assert '<span class="badge tone-slate">Maintenance</span>' in html
    assert "its host is locked: fan broken" in html
