"""The host page's "next check" and the tick's verify rule are two copies: they agree."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from hosts.models import HealthPolicy, Host
from jobs.choices import ReleaseReason
from jobs.host_selectors import next_check
from jobs.models import Lease
from jobs.scheduling.maintenance import _policy_due
from tests import factories as f

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    ("every_jobs", "every_hours"), [(2, None), (None, 2), (2, 2)], ids=["jobs", "hours", "both"]
)
def test_the_host_page_says_due_exactly_for_the_hosts_the_tick_would_verify(
    every_jobs, every_hours
):
    now = timezone.now()
    worker = f.worker("w1")
    HealthPolicy.objects.create(
        name="eve", label_key=",board:eve,", every_jobs=every_jobs, every_hours=every_hours
    )
    # Verified when (None: never) and how many test jobs ran on it since.
    shapes = {
        "never": (None, 0),
        "fresh": (now - timedelta(minutes=10), 0),
        "one-run": (now - timedelta(minutes=10), 1),
        "two-runs": (now - timedelta(minutes=10), 2),
        "old": (now - timedelta(hours=3), 0),
        "old-busy": (now - timedelta(hours=3), 3),
    }
    for name, (verified, runs) in shapes.items():
        host = f.host(name, ["board:eve"], worker=worker)
        Host.objects.filter(pk=host.pk).update(last_verified_at=verified)
        for i in range(runs):
            job = f.job(f"{name}-{i}", ["board:eve"])
            at = now - timedelta(minutes=5 - i)
            Lease.objects.create(
                host=host, job=job, acquired_at=at, expires_at=at, released_at=at,
                release_reason=ReleaseReason.COMPLETED,
            )  # fmt: skip
    f.host("kevin", ["board:kevin"], worker=worker)  # no policy selects it

    shown_due = {h.hostname for h in Host.objects.all() if next_check(h, now=now)[0].due}
    tick_due = {h.hostname for h in _policy_due(Host.objects.in_service(now), now=now)}

    assert shown_due == tick_due
    assert "never" in tick_due and "fresh" not in tick_due and "kevin" not in tick_due
