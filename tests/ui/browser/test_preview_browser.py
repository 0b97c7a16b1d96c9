"""The submit form's Preview: what the next tick would do with the suite, saved nowhere."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from hosts import services as host_services
from hosts.models import Host
from jobs.models import Suite
from tests import factories as f
from tests.ui.browser.conftest import assert_not_reloaded, mark_page, screenshot, sign_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_a_tester_previews_a_suite_then_submits_it(page, alice, lab, debug):  # noqa: ANN001
    host_services.host_lock(host=lab.h3, by="sam", reason="flaky servo")  # the only kevin
    sign_in(page, "alice", "alice-pass")
    page.goto("/suites/new/")
    mark_page(page)
    page.locator("#id_name").fill("camera nightly")
    rows = page.locator(".job-row")
    rows.nth(0).get_by_label("Test name").fill("camera_Capture")
    rows.nth(0).get_by_label("Labels the host needs").fill("board:eve")
    rows.nth(1).get_by_label("Test name").fill("camera_Kevin")
    rows.nth(1).get_by_label("Labels the host needs").fill("board:kevin")

    page.get_by_role("button", name="Preview").click()

    preview = page.locator("#suite-preview")
    expect(preview).to_contain_text("1 of your 2 jobs would start now; 1 wait:")
    expect(preview).to_contain_text("locked")
    assert_not_reloaded(page)
    assert not Suite.objects.exists()
    screenshot(page, f"suite-preview-{'debug' if debug else 'prod'}", full_page=True)

    page.get_by_role("button", name="Submit suite").click()
    expect(page).to_have_url(re.compile(r"/suites/\d+/$"))
    assert Suite.objects.get().jobs.count() == 2


def test_staff_see_what_locking_a_host_would_strand_before_locking_it(page, sam, lab, debug):  # noqa: ANN001
    f.job("kevin-1", ["board:kevin"])
    sign_in(page, "sam", "sam-pass")
    page.goto(f"/hosts/{lab.h3.hostname}/")
    mark_page(page)

    page.locator("#detail-lock-reason").click()

    impact = page.locator("#detail-lock-impact")
    expect(impact).to_contain_text("1 queued job would lose its only matching host")
    assert_not_reloaded(page)
    assert not Host.objects.get(pk=lab.h3.pk).locked
    screenshot(page, f"lock-impact-{'debug' if debug else 'prod'}")
