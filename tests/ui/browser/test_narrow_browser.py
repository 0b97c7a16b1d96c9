"""List tables on a 390 px phone: each row a card, every cell labelled and within the screen."""

from __future__ import annotations

from datetime import timedelta

import pytest
from playwright.sync_api import expect

from jobs import services
from tests import factories as f
from tests.ui.browser.conftest import screenshot, sign_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PHONE = {"width": 390, "height": 844}
DESKTOP = {"width": 1280, "height": 800}


def within_width(locator, width: int) -> None:  # noqa: ANN001
    """The element is fully inside a window `width` wide: no scrolling sideways to find it."""
    expect(locator).to_be_visible()
    box = locator.bounding_box()
    assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= width, box


@pytest.fixture
def busy_lab(lab, sam, alice):  # noqa: ANN001, ANN201
    """A reservation, a running suite and a job that waits for a label no host has."""
    services.lease_reserve(
        host=lab.h2, holder=sam, duration=timedelta(hours=2), reason="flashing firmware"
    )
    f.suite("nightly", 1, owner=alice, labels=["board:kevin"])
    f.job("camera_Capture", ["board:sarien"], owner=alice)
    services.scheduler_tick()
    return lab


@pytest.mark.parametrize("debug", [True, False], ids=["DEBUG=1", "DEBUG=0"])
def test_on_a_phone_the_wait_reason_and_lock_button_are_on_screen(page, busy_lab, settings, debug):
    settings.DEBUG = debug  # pytest-django forces it off; the live server reads it per request
    page.set_viewport_size(PHONE)
    sign_in(page, "sam", "sam-pass")
    page.goto("/queue/")
    row = page.locator("#queue-table tbody tr", has_text="camera_Capture")
    reason = row.locator("td[data-label='Why it waits']")
    expect(reason).to_contain_text("board:sarien")
    within_width(reason.locator(".reason-text"), PHONE["width"])
    assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
    screenshot(page, "queue-390")
    screenshot(page, "queue-390-full", full_page=True)

    page.goto("/hosts/")
    lock = page.locator(f"#host-{busy_lab.h1.pk}").get_by_text("Lock…")
    within_width(lock, PHONE["width"])
    within_width(page.locator(f"#host-{busy_lab.h1.pk} td[data-label='Lease']"), PHONE["width"])
    assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
    lock.click()
    page.get_by_label(f"Why lock {busy_lab.h1.hostname}?").fill("servo cable loose")
    page.get_by_role("button", name="Lock", exact=True).click()
    expect(page.locator(f"#host-{busy_lab.h1.pk}")).to_contain_text("servo cable loose")
    screenshot(page, "hosts-390", full_page=True)
    for path in ("/leases/", "/suites/"):
        page.goto(path)
        assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
        screenshot(page, f"{path.strip('/')}-390", full_page=True)


def test_on_a_desktop_the_tables_keep_their_columns(page, busy_lab):
    page.set_viewport_size(DESKTOP)
    sign_in(page, "sam", "sam-pass")
    for path, header in (("/queue/", "Why it waits"), ("/hosts/", "Lock"), ("/leases/", "Ends")):
        page.goto(path)
        expect(page.get_by_role("columnheader", name=header, exact=True)).to_be_visible()
        screenshot(page, f"{path.strip('/')}-1280", full_page=True)
    # The cells sit side by side in one table row, as before.
    row = page.locator("#leases-table tbody tr").first
    cells = row.locator("td")
    first, last = cells.first.bounding_box(), cells.last.bounding_box()
    assert abs(first["y"] - last["y"]) < 2 and last["x"] > first["x"]


def test_the_host_page_lists_who_waits_for_it(page, busy_lab):
    f.job("eve_smoke", ["board:eve"], priority=70)
    f.job("eve_power", ["board:eve", "pool:cq"], priority=20)
    sign_in(page, "sam", "sam-pass")
    page.goto(f"/hosts/{busy_lab.h1.hostname}/")
    waiting = page.locator("section", has=page.locator("#host-waiters-title"))
    expect(waiting).to_contain_text("2 queued jobs could run here")
    expect(waiting.locator("li").first).to_contain_text("eve_smoke")
    expect(waiting.locator("li").last).to_contain_text("eve_power")
    screenshot(page, "host-waiters")
    screenshot(page, "host-waiters-1280", full_page=True)
    page.set_viewport_size(PHONE)
    assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
    screenshot(page, "host-waiters-390", full_page=True)
