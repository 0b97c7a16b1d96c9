"""The demo lab that `make run` seeds moves: jobs get leased, run and finish."""

from __future__ import annotations

import random

import pytest

from jobs import demo, services
from jobs.choices import JobStatus
from jobs.models import Job, Lease

pytestmark = pytest.mark.django_db


def test_the_demo_lab_leases_runs_and_finishes_jobs(monkeypatch):
    demo.seed()
    services.scheduler_tick()
    assert Lease.objects.filter(released_at__isnull=True).count() >= 10
    rng = random.Random(1)
    monkeypatch.setattr(rng, "uniform", lambda a, b: -1)  # every running job is "done"
    demo.simulate_step(rng=rng)  # start
    demo.simulate_step(rng=rng)  # finish
    finished = Job.objects.filter(status__in=[JobStatus.PASSED, JobStatus.FAILED]).count()
    assert finished >= 10
    services.scheduler_tick()
    assert Lease.objects.filter(released_at__isnull=True, job__status="leased").exists()
