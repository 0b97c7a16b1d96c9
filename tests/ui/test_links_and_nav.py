"""Where things link: label chips to the hosts carrying them, a host's job to the job's page,
the delivery log from the navigation; and a busy ready host says it is busy."""

from __future__ import annotations

import re

import pytest
from django.urls import set_script_prefix

from jobs import services
from tests import factories as f

pytestmark = pytest.mark.django_db

CHIP = re.compile(
    r'<a class="chip" href="/labels/board:eve/" title="board:eve: its hosts, queue and history">'
    r"board:eve</a>"
)


def test_every_label_chip_links_to_the_labels_page(alice_client):
    rack = f.worker("rack-1")
    host = f.host("dut1", ["board:eve"], worker=rack)
    job = f.job("waits", ["board:eve"])
    suite = f.suite("nightly", [["board:eve"]])
    pages = ["/queue/", f"/jobs/{job.pk}/", f"/suites/{suite.pk}/", "/hosts/", f"/hosts/{host}/"]
    for page in pages:
        assert CHIP.search(alice_client.get(page).content.decode()), page
    # And the page answers.
    assert alice_client.get("/labels/board:eve/").status_code == 200


def test_the_hosts_list_links_a_running_job_to_its_page_and_its_suite_under_it(alice_client):
    f.host("dut1", ["board:eve"])
    suite = f.suite("nightly", [["board:eve"]])
    services.scheduler_tick()
    job = suite.jobs.get()

    html = alice_client.get("/hosts/").content.decode()

    assert f'<a href="/jobs/{job.pk}/">{job.name}</a>' in html
    assert f'<a href="/suites/{suite.pk}/">nightly</a>' in html
    # Its status is its health (ready); beside it, that it is busy.
    assert 'Ready</span> <span class="badge tone-indigo"' in html and "busy: a job" in html


def test_a_free_host_is_not_called_busy(alice_client):
    f.host("dut1", ["board:eve"])
    assert "busy:" not in alice_client.get("/hosts/").content.decode()


def test_staff_find_the_delivery_log_in_the_navigation(sam_client, alice_client):
    assert 'href="/notifications/deliveries/"' in sam_client.get("/queue/").content.decode()
    assert 'href="/notifications/deliveries/"' not in alice_client.get("/queue/").content.decode()


def test_the_navigation_links_follow_the_sites_script_prefix(alice_client):
    # Its links are reversed once per prefix (schedsite_ui.nav_link): a site served under a
    # path gets its own, and the root site keeps its.
    assert '<a href="/queue/"' in alice_client.get("/").content.decode()
    set_script_prefix("/lab/")  # as the WSGI handler sets it for a site served under /lab
    try:
        html = alice_client.get("/").content.decode()
    finally:
        set_script_prefix("/")
    assert '<a href="/lab/queue/"' in html
    assert '<a href="/queue/"' not in html
    assert '<a href="/queue/"' in alice_client.get("/").content.decode()
