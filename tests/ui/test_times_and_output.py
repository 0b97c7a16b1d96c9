"""Absolute times say their time zone, and a job's output wraps its long lines."""

from __future__ import annotations

import pytest

from jobs import services
from jobs.models import Job
from tests import factories as f

pytestmark = pytest.mark.django_db


def test_the_live_stamp_and_an_attempts_times_name_the_time_zone(alice_client, settings):
    settings.TIME_ZONE = "UTC"
    f.host("dut1", ["board:eve"])
    job = f.job("boots", ["board:eve"])
    services.scheduler_tick()

    html = alice_client.get(f"/jobs/{job.pk}/").content.decode()

    # "Live · updated 20:31:05 UTC", and the attempt's "Leased Nov 27, 20:31:05 UTC".
    assert "UTC</span>" in html.split('class="live-dot"')[1][:60]
    assert " UTC</time>" in html


def test_the_output_box_wraps_long_lines(alice_client):
    job = f.job("long", ["board:none"])
    Job.objects.filter(pk=job.pk).update(status="failed", message="x" * 500)
    html = alice_client.get(f"/jobs/{job.pk}/").content.decode()
    assert 'wrap="soft"' in html and 'wrap="off"' not in html
