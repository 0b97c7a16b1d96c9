"""A job's Priority and Abort in a real browser: on its page and in its queue row."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from jobs import services
from jobs.models import Job
from tests import factories as f
from tests.ui.browser.conftest import assert_not_reloaded, mark_page, screenshot, sign_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_the_owner_raises_a_job_then_a_tick_leases_it_and_a_second_change_is_refused_inline(
    page, alice, debug
):
    job = f.job("power_Resume", ["board:eve"], owner=alice)
    sign_in(page, "alice", "alice-pass")
    page.goto(f"/jobs/{job.pk}/")
    mark_page(page)

    page.get_by_label("Priority").select_option("60")
    page.get_by_role("button", name="Set priority").click()
    result = page.locator("#job-action-result")
    expect(result).to_contain_text("priority default 40 → pfq 60")
    expect(page.locator(".page-head .prio")).to_contain_text("pfq")
    screenshot(page, "job-priority-set", full_page=True)

    # Meanwhile a host appears and the tick leases the job: the form on screen is stale.
    f.host("eve1", ["board:eve"])
    services.scheduler_tick()
    page.get_by_label("Priority").select_option("70")
    page.get_by_role("button", name="Set priority").click()
    expect(result).to_contain_text("only a queued job's priority can change")
    expect(result).to_have_class("banner err")
    assert_not_reloaded(page)  # a 409 is an answer in the page, under DEBUG too
    assert Job.objects.get(pk=job.pk).priority == 60
    screenshot(page, "job-priority-refused", full_page=True)


def test_the_owner_aborts_a_job_from_the_queue_after_confirming(page, alice, bob, debug):
    mine = f.job("login_Smoke", ["board:none"], owner=alice)
    f.job("bobs_test", ["board:none"], owner=bob)
    sign_in(page, "alice", "alice-pass")
    page.goto("/queue/")
    row = page.locator(f"#queued-{mine.pk}")
    expect(row.get_by_role("button", name="Abort")).to_be_visible()
    expect(page.locator("#queue-table tbody tr").nth(1).get_by_role("button")).to_have_count(0)
    screenshot(page, "queue-actions", full_page=True)
    mark_page(page)

    page.once("dialog", lambda dialog: dialog.accept())
    row.get_by_role("button", name="Abort").click()

    expect(page.locator("#job-action-result")).to_contain_text(f"Aborted job {mine.pk}")
    expect(page.locator(f"#queued-{mine.pk}")).to_have_count(0)
    assert_not_reloaded(page)
    assert Job.objects.get(pk=mine.pk).status == "aborted"


def test_staff_add_a_label_to_the_ticked_hosts_from_the_bulk_bar(page, sam, debug):
    for name in ("dut1", "dut2", "dut3"):
        f.host(name, ["board:eve"])
    sign_in(page, "sam", "sam-pass")
    page.goto("/hosts/")
    mark_page(page)
    page.get_by_label("Select dut1").check()
    page.get_by_label("Select dut2").check()
    page.get_by_label("Labels to add to or remove from the selected hosts").fill("rack:7")
    page.get_by_role("button", name="Add labels").click()

    expect(page.locator("#hosts-table .banner")).to_have_text("Labels added to 2 hosts.")
    assert_not_reloaded(page)
    expect(page.locator("#hosts-table")).to_contain_text("rack:7")
    screenshot(page, "hosts-bulk-labels", full_page=True)
