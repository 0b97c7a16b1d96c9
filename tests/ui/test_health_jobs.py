"""Maintenance jobs and queue expiry as testers and staff see them in the pages."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from jobs import services
from jobs.models import Job, Suite
from jobs.scheduling.maintenance import create_maintenance_jobs
from tests import factories as f
from tests.ui.conftest import HTMX
from tests.ui.test_submit import form

pytestmark = pytest.mark.django_db


def test_a_suite_submitted_with_an_expiry_gives_it_to_its_jobs(alice_client, lab):
    response = alice_client.post("/suites/new/", form(expires_after="600"), headers=HTMX)

    assert response.status_code == 200, response.content.decode()
    assert Suite.objects.get().expires_after == 600
    assert set(Job.objects.values_list("expires_after", flat=True)) == {600}


def test_an_expiry_below_one_second_is_shown_next_to_its_field(alice_client, lab):
    response = alice_client.post("/suites/new/", form(expires_after="0"), headers=HTMX)

    assert response.status_code == 400
    assert 'id="id_expires_after-error"' in response.content.decode()
    assert not Suite.objects.exists()


def test_the_queue_shows_a_waiting_maintenance_job_by_its_kind(alice_client, lab):
    f.job("busy", ["board:kevin"])
    services.scheduler_tick()  # h3.lab runs "busy", so a verify for it has to wait
    create_maintenance_jobs([(lab.h3, "verify")], now=timezone.now(), why="staff asked")

    html = alice_client.get("/queue/").content.decode()

    assert '<span class="badge tone-amber"' in html and ">verify</span>" in html
    assert "maintenance · scheduler" in html


def test_the_lease_list_names_a_maintenance_lease_by_its_kind(sam_client, lab):
    create_maintenance_jobs([(lab.h1, "verify")], now=timezone.now(), why="staff asked")
    services.scheduler_tick()

    html = sam_client.get("/leases/").content.decode()

    assert ">verify</span>" in html and "maintenance job" in html


def test_an_expired_job_shows_its_status_on_its_suites_page(alice_client, lab):
    t0 = timezone.now()
    suite = f.suite("S", [["board:none"]], expires_after=60)
    services.scheduler_tick(now=t0 + timedelta(seconds=61))

    html = alice_client.get(f"/suites/{suite.pk}/").content.decode()

    assert "tone-amber" in html and "Expired" in html
