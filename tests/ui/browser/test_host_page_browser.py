"""The host page in a real browser: lock and unlock, reservations, who waits, older events."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from hosts.models import Host
from tests.ui.browser.conftest import sign_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
DEBUG_ON_OFF = pytest.mark.parametrize("debug", [True, False], ids=["DEBUG=1", "DEBUG=0"])


@DEBUG_ON_OFF
def test_unlocking_a_host_on_its_page_leaves_no_locked_banner(page, sam, lab, settings, debug):
    settings.DEBUG = debug  # pytest-django forces it off; the live server reads it per request
    sign_in(page, "sam", "sam-pass")
    page.goto(f"/hosts/{lab.h1.hostname}/")
    page.get_by_label("Lock it for debugging — why?").fill("servo flaky")
    # A plain form post, as before htmx has loaded: the page comes back with a message banner.
    page.locator("form[action$='/lock/']").evaluate("form => form.submit()")
    expect(page.locator(".messages")).to_contain_text("Locked h1.lab: servo flaky")
    head = page.locator(".page-head")
    expect(head).to_contain_text("Locked")
    page.screenshot(path="/tmp/shots-rough/locked.png", full_page=True)
    page.get_by_role("button", name=f"Unlock {lab.h1.hostname}").click()
    expect(page.locator("#toast")).to_contain_text(f"Unlocked {lab.h1.hostname}")
    page.screenshot(path="/tmp/shots-rough/unlocked.png", full_page=True)
    expect(head).not_to_contain_text("Locked")
    expect(page.locator(".messages")).not_to_contain_text("Locked")
    expect(page.get_by_text("Locked by")).to_have_count(0)
    assert not Host.objects.get(pk=lab.h1.pk).locked
