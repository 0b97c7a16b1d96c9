"""Host health in a real browser: the staff buttons, the status filter and the policies page."""

from __future__ import annotations

import re

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from hosts import services as host_services
from hosts.choices import HostStatus
from hosts.models import HealthPolicy, Host
from jobs import services
from jobs.choices import JobKind, JobStatus
from jobs.models import Job
from jobs.scheduling.maintenance import create_maintenance_jobs
from tests import factories as f
from tests.ui.browser.conftest import assert_not_reloaded, mark_page, screenshot, sign_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def failed_repairs(host: Host) -> None:
    Host.objects.filter(pk=host.pk).update(status=HostStatus.REPAIR_FAILED, repair_attempts=3)


def health_card(page):  # noqa: ANN001, ANN201
    return page.locator("#host-health")


def test_staff_repair_verify_and_retire_hosts_from_their_pages(page, sam, lab):
    failed_repairs(lab.h1)
    sign_in(page, "sam", "sam-pass")

    page.goto("/hosts/h1.lab/")
    mark_page(page)
    card = health_card(page)
    expect(card).to_contain_text("Repair failed")
    expect(card).to_contain_text("3 of 3 failed in a row")
    expect(card.get_by_role("button", name="Verify now")).to_have_count(0)
    screenshot(page, "health-host-repair-failed", full_page=True)
    card.get_by_role("button", name="Repair now").click()
    expect(page.locator("#toast")).to_contain_text("Repair job queued for h1.lab")
    expect(health_card(page)).to_contain_text("0 of 3")
    assert_not_reloaded(page)
    assert Job.objects.filter(host=lab.h1, kind=JobKind.REPAIR).exists()

    page.goto("/hosts/h2.lab/")
    health_card(page).get_by_role("button", name="Verify now").click()
    expect(page.locator("#toast")).to_contain_text("Verify job queued for h2.lab")
    expect(health_card(page)).to_contain_text("A verify or repair job is queued or running")
    assert Job.objects.filter(host=lab.h2, kind=JobKind.VERIFY).exists()

    page.once("dialog", lambda dialog: dialog.accept())
    health_card(page).get_by_role("button", name="Retire").click()
    expect(page.locator("#toast")).to_contain_text("Retired h2.lab")
    expect(page.locator("#host-detail .page-head")).to_contain_text("Retired")
    expect(health_card(page).get_by_role("button")).to_have_count(0)
    assert Host.objects.get(pk=lab.h2.pk).status == HostStatus.RETIRED
    screenshot(page, "health-host-retired", full_page=True)


def test_retiring_a_leased_host_says_why_not_in_the_card(page, sam, lab):
    f.job("busy", ["board:kevin"])
    services.scheduler_tick()  # h3.lab holds the lease
    sign_in(page, "sam", "sam-pass")
    page.goto("/hosts/h3.lab/")

    # Said before anyone is asked to confirm a retire that would be refused.
    expect(health_card(page).locator("#retire-blocked")).to_contain_text(
        "not while it is leased — end the lease first"
    )
    expect(health_card(page).get_by_role("button", name="Retire")).to_have_count(0)
    assert Host.objects.get(pk=lab.h3.pk).status == HostStatus.READY
    screenshot(page, "health-retire-refused", full_page=True)


def test_staff_filter_the_hosts_list_by_repair_failed(page, sam, lab):
    failed_repairs(lab.h3)
    sign_in(page, "sam", "sam-pass")
    page.get_by_role("link", name="Hosts", exact=True).click()

    page.get_by_label("Repair failed").check()

    expect(page).to_have_url(re.compile(r"/hosts/\?.*status=repair_failed"))
    rows = page.locator("#hosts-table tbody tr")
    expect(rows).to_have_count(1)
    expect(rows.first).to_contain_text("h3.lab")
    expect(rows.first.locator(".badge.tone-red")).to_have_text("Repair failed")
    screenshot(page, "health-hosts-repair-failed")


def test_staff_add_a_policy_after_fixing_a_bad_value(page, sam, lab):
    sign_in(page, "sam", "sam-pass")
    page.get_by_text("Lab setup").click()  # the navigation's drop-down
    page.get_by_role("link", name="Health policies").click()
    expect(page.get_by_role("heading", name="Health policies")).to_be_visible()
    mark_page(page)

    page.get_by_label("Name").fill("eve daily")
    page.get_by_label("Labels").fill("board:eve")
    page.get_by_label("Every N hours").fill("0")
    page.get_by_role("button", name="Add policy").click()

    error = page.locator("#id_every_hours-error")
    expect(error).to_contain_text("Every N hours: a whole number from 1 to 100000")
    expect(page.get_by_label("Name")).to_have_value("eve daily")  # what was typed is kept
    assert not HealthPolicy.objects.exists()
    screenshot(page, "health-policy-error", full_page=True)

    page.get_by_label("Every N hours").fill("24")
    page.get_by_role("button", name="Add policy").click()

    expect(page.locator("#toast")).to_contain_text("Added health policy eve daily")
    row = page.locator("#policies tbody tr").first
    expect(row).to_contain_text("eve daily")
    expect(row).to_contain_text("board:eve")
    expect(row.locator("td.num").last).to_have_text("2")  # h1.lab and h2.lab carry board:eve
    assert_not_reloaded(page)
    assert HealthPolicy.objects.get().every_hours == 24
    screenshot(page, "health-policies", full_page=True)


def run_maintenance(host: Host, result: str, message: str) -> None:
    """Let the tick lease the host's waiting verify or repair job; its runner reports result."""
    services.scheduler_tick()
    job = Job.objects.get(host=host, status=JobStatus.LEASED)
    services.job_complete(job=job, result=result, by="runner-1", message=message)


def test_the_host_page_tells_a_hosts_health_story(page, sam, lab, settings):
    """The screenshot of docs/ui.md: a host that failed a verify, was repaired, then tested."""
    settings.REPAIR_BACKOFF = 0
    create_maintenance_jobs([(lab.h1, JobKind.VERIFY)], now=timezone.now(), why="staff")
    run_maintenance(lab.h1, JobStatus.FAILED, "verify: ssh to the DUT timed out after 30 s")
    run_maintenance(lab.h1, JobStatus.FAILED, "repair: servo did not answer; reflash skipped")
    run_maintenance(lab.h1, JobStatus.PASSED, "repair: reflashed R120 over servo, DUT back")
    for name in ("platform_Boot", "graphics_Idle"):
        f.job(name, ["board:eve", "pool:cq"])
        services.scheduler_tick()
        job = Job.objects.get(name=name)
        services.job_complete(job=job, result=JobStatus.PASSED, by="runner-1")
    policy = {"labels": ["board:eve"], "every_jobs": 50, "every_hours": 24}
    host_services.health_policy_create(by="sam", name="eve daily", **policy)
    sign_in(page, "sam", "sam-pass")

    page.goto("/hosts/h1.lab/")

    card = health_card(page)
    expect(card).to_contain_text("Ready")
    expect(card).to_contain_text("After 48 more jobs or in 23h")
    expect(card.get_by_role("link", name="eve daily")).to_be_visible()
    history = page.locator("#host-maintenance tbody tr")
    expect(history).to_have_count(3)
    expect(history.first).to_contain_text("Passed")
    expect(history.last).to_contain_text("ssh to the DUT timed out")
    screenshot(page, "host-health")
    screenshot(page, "health-host-story", full_page=True)
