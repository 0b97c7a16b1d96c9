"""A pool's or board's page (/labels/<label>/) and the history section of the dashboard
(docs/ui.md#history-and-label-pages)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from hosts.models import Host
from jobs import services
from jobs.choices import JobStatus
from stats.rollup import lab_rollup
from tests import factories as f
from tests.stats.conftest import host_of

pytestmark = pytest.mark.django_db

HTMX = {"HX-Request": "true"}
alice_client = f.client_fixture("alice", f.signed_in)


def test_a_boards_page_shows_its_hosts_its_waiting_jobs_and_why_and_its_breaks(
    broken_twice, alice_client
):
    f.host("h3", ["board:other"])
    waiting = f.job("needs-two", ["board:x", "cam:yes"], priority=60)
    services.scheduler_tick(now=timezone.now())
    lab_rollup(now=timezone.now())

    html = alice_client.get("/labels/board:x/?range=24h").content.decode()

    assert "<h1>board:x</h1>" in html
    assert '<div class="value">2</div>' in html  # h1 and h2; not h3
    assert "2 ready" in html
    # The job asking for it, and why it waits (the queue's reason: no host has cam:yes).
    assert f'href="/jobs/{waiting.pk}/">needs-two</a>' in html
    assert "No such host" in html
    # h1 broke twice ten hours ago, one repair failed: the least reliable host first.
    assert 'id="label-failures"' in html and ">2</div>" in html
    assert 'href="/hosts/h1/">h1</a>' in html.split('id="label-worst"')[1]
    assert 'href="/hosts/h2/"' not in html.split('id="label-worst"')[1]
    # Its history, from the rollup just written, with the API address of the same figures.
    assert 'id="history-hosts-title"' in html
    assert 'href="/api/stats/lab/?range=24h&amp;label=board%3Ax"' in html


def test_the_range_narrows_the_reliability_figures(broken_twice, alice_client):
    html = alice_client.get("/labels/board:x/?range=1h").content.decode()

    assert "None of its 2 hosts broke over the last hour." in html
    assert '<a href="/labels/board:x/?range=1h" aria-current="page">hour</a>' in html


def test_a_label_no_host_carries_is_a_404_and_a_malformed_one_a_400(alice_client):
    f.host("h1", ["board:x"])

    missing = alice_client.get("/labels/board:nope/")
    malformed = alice_client.get("/labels/board x,y/")
    bad_range = alice_client.get("/labels/board:x/?range=2d")

    assert missing.status_code == 404 and "No host carries the label" in missing.content.decode()
    assert malformed.status_code == 400 and "is not a label" in malformed.content.decode()
    assert bad_range.status_code == 400 and "Range must be one of" in bad_range.content.decode()


def test_a_label_with_a_slash_has_its_page(alice_client):
    f.host("h1", ["rack/3"])

    html = alice_client.get("/labels/rack/3/").content.decode()

    assert "<h1>rack/3</h1>" in html
    assert "History is kept for pool: and board: labels" in html


def test_the_dashboard_loads_the_history_from_the_stats_app(alice_client):
    rack = f.rack()
    job = f.job("boot")
    f.tick(timezone.now(), rack)
    f.run(Host.objects.get(hostname=host_of(job)).leases.get().job, JobStatus.PASSED)
    lab_rollup(now=timezone.now() + timedelta(minutes=1))

    page = alice_client.get("/").content.decode()
    assert 'hx-get="/history/?range=24h" hx-trigger="load"' in page

    section = alice_client.get("/history/?range=1h", headers=HTMX).content.decode()
    assert section.lstrip().startswith('<section id="lab-history"')
    assert "History of the lab" in section and 'id="history-finished-title"' in section
    assert 'hx-get="/history/?range=7d"' in section  # the range tabs reload the section
    # A week reads hour rows: none yet, and it says why.
    week = alice_client.get("/history/?range=7d", headers=HTMX).content.decode()
    assert "No history over the last 7d yet" in week
