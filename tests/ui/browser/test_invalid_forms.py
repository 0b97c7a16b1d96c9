"""A refused form shows its error in place, the page styled and live, with DEBUG on or off."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from hosts.models import Host, Worker
from jobs.models import Suite
from tests.ui.browser.conftest import assert_not_reloaded, mark_page, sign_in

# `make run` serves with DEBUG=1, production with DEBUG=0: a 400 must read the same in both.
pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True),
    pytest.mark.parametrize("debug", [True, False], ids=["DEBUG=1", "DEBUG=0"]),
]


@pytest.fixture(autouse=True)
def _debug(settings, debug: bool) -> None:  # noqa: ANN001
    # pytest-django forces DEBUG off; the live server reads the setting on every request.
    settings.DEBUG = debug


def open_as(page, username: str, path: str) -> None:  # noqa: ANN001
    """Sign in as the user and open the page, marked so that a reload would show."""
    sign_in(page, username, f"{username}-pass")
    page.goto(path)
    mark_page(page)


def assert_still_the_styled_page(page) -> None:  # noqa: ANN001
    """The error was swapped into the page: the stylesheet and the top bar are still there."""
    expect(page.locator("header.topbar")).to_be_visible()
    assert page.evaluate("document.styleSheets.length") >= 1
    assert_not_reloaded(page)


def test_locking_a_host_without_a_reason_is_refused_in_place(page, sam, lab, debug):
    open_as(page, "sam", "/hosts/")
    row = page.locator(f"#host-{lab.h1.pk}")
    row.get_by_text("Lock…").click()
    row.get_by_role("button", name="Lock", exact=True).click()
    expect(row.locator(".field-error")).to_contain_text("A reason is required")
    assert_still_the_styled_page(page)
    assert not Host.objects.get(pk=lab.h1.pk).locked


def test_pausing_a_worker_without_a_reason_is_refused_in_place(page, sam, lab, debug):
    open_as(page, "sam", f"/workers/{lab.w1.name}/")
    page.get_by_role("button", name="Pause", exact=True).click()
    expect(page.locator("#detail-pause-error")).to_contain_text("A reason is required")
    assert_still_the_styled_page(page)
    assert not Worker.objects.get(pk=lab.w1.pk).paused


def test_a_suite_without_a_name_is_refused_in_place(page, alice, lab, debug):
    open_as(page, "alice", "/suites/new/")
    page.locator(".job-row").first.get_by_label("Test name").fill("camera_Capture")
    page.get_by_role("button", name="Submit suite").click()
    expect(page.locator("#id_name-error")).to_be_visible()
    expect(page.locator("#form-errors")).to_contain_text("The suite was not submitted")
    expect(page.locator("#id_name")).to_be_focused()
    assert_still_the_styled_page(page)
    assert not Suite.objects.exists()
