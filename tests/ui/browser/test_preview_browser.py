"""The submit form's Preview: what the next tick would do with the suite, saved nowhere."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from hosts import services as host_services
from jobs.models import Suite
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
