"""A fan-out suite's page in a real browser: its hosts done, pending and skipped, kept live."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from hosts import services as host_services
from jobs import services
from jobs import services as job_services
from jobs.models import Job
from tests import factories as f
from tests.ui.browser.conftest import screenshot, sign_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.mark.parametrize("debug", [True, False], ids=["DEBUG=1", "DEBUG=0"])
def test_the_suite_page_counts_the_fanout_hosts_and_follows_the_lab(page, alice, settings, debug):
    settings.DEBUG = debug  # pytest-django forces it off; the live server reads it per request
    w1 = f.worker("w1")
    f.host("a.lab", ["bluetooth"], worker=w1)
    doomed = f.host("b.lab", ["bluetooth"], worker=w1)
    host_services.host_lock(host=doomed, by="sam", reason="debugging")
    suite = services.suite_submit(
        owner=alice, name="bt everywhere", fanout_labels=["bluetooth"], fanout_name="bt_Pair"
    )
    services.scheduler_tick()
    services.job_complete(job=suite.jobs.get(host__hostname="a.lab"), result="passed", by="r")
    job_services.host_delete(host=doomed, by="sam")  # retired: its job is skipped
    f.host("c.lab", ["bluetooth"], worker=w1)  # joins: it gets a job
    services.scheduler_tick()

    sign_in(page, "alice", "alice-pass")
    page.goto(f"/suites/{suite.pk}/")

    hosts = page.locator("#fanout-hosts")
    expect(hosts).to_have_text("1 done · 1 pending · 1 skipped")
    expect(page.locator("#fanout-until")).to_have_text("added while the suite is open")
    row = page.locator("tr", has_text="bt_Pair@b.lab")
    expect(row.locator(".badge")).to_have_text("Skipped")
    expect(row).to_contain_text("host b.lab was retired")
    expect(page.locator("tr", has_text="bt_Pair@c.lab").locator(".badge")).to_have_text("Leased")
    expect(page.locator(".bar-legend")).to_contain_text("1 skipped")
    screenshot(page, f"fanout-suite-{'debug' if debug else 'prod'}", full_page=True)

    # The last host finishes while the page is open: the live refresh closes the fan-out.
    services.job_complete(job=Job.objects.get(host__hostname="c.lab"), result="passed", by="r")
    expect(hosts).to_have_text("2 done · 0 pending · 1 skipped")
    expect(page.locator("#fanout-until")).to_have_text("no longer added: the suite has finished")
