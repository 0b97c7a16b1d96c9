"""The page frame: one row of navigation at 1280 px with the setup pages in one drop-down,
one Menu button on a phone (docs/ui.md#navigation), and the dashboard's cards in even rows."""

from __future__ import annotations

import pytest
from playwright.sync_api import Locator, expect

from tests.ui.browser.conftest import screenshot, sign_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PHONE = {"width": 390, "height": 844}
DESKTOP = {"width": 1280, "height": 800}


@pytest.mark.parametrize("debug", [True, False], ids=["DEBUG=1", "DEBUG=0"])
def test_at_1280_px_every_entry_is_on_one_row_and_lab_setup_opens(page, lab, sam, settings, debug):
    settings.DEBUG = debug
    page.set_viewport_size(DESKTOP)
    sign_in(page, "sam", "sam-pass")  # lab staff: the longest menu
    page.goto("/queue/")
    nav = page.get_by_role("navigation", name="Main")
    entries = nav.locator(":scope > ul > li")
    tops = {round(entries.nth(i).bounding_box()["y"]) for i in range(entries.count())}
    assert len(tops) == 1, f"the navigation wraps onto {len(tops)} rows"
    assert page.evaluate("document.documentElement.scrollWidth") <= DESKTOP["width"]
    expect(nav.get_by_role("link", name="Queue")).to_have_attribute("aria-current", "page")
    expect(nav.get_by_role("link", name="Scheduler settings")).to_be_hidden()

    nav.get_by_text("Lab setup").click()
    for name in ("Scheduler settings", "Health policies", "Pool targets", "Deliveries"):
        expect(nav.get_by_role("link", name=name)).to_be_visible()
    screenshot(page, "nav-1280-lab-setup")
    page.keyboard.press("Escape")
    expect(nav.get_by_role("link", name="Health policies")).to_be_hidden()

    nav.get_by_text("Lab setup").click()
    nav.get_by_role("link", name="Health policies").click()
    page.wait_for_url("**/health-policies/")
    expect(page.get_by_role("heading", level=1)).to_contain_text("Health polic")
    # The drop-down's summary shows the section one is in.
    summary = nav.locator(".nav-more summary")
    assert summary.evaluate("e => getComputedStyle(e).boxShadow") != "none"


def test_a_tester_sees_no_staff_pages_in_lab_setup(page, lab, alice):
    page.set_viewport_size(DESKTOP)
    sign_in(page, "alice", "alice-pass")
    page.goto("/")
    nav = page.get_by_role("navigation", name="Main")
    nav.get_by_text("Lab setup").click()
    expect(nav.get_by_role("link", name="Scheduler settings")).to_be_visible()
    expect(nav.get_by_role("link", name="Pool targets")).to_have_count(0)
    expect(nav.get_by_role("link", name="Deliveries")).to_have_count(0)


def test_on_a_phone_the_menu_is_one_button(page, lab, sam):
    page.set_viewport_size(PHONE)
    sign_in(page, "sam", "sam-pass")
    page.goto("/hosts/")
    nav = page.get_by_role("navigation", name="Main")
    expect(nav).to_be_hidden()
    header = page.locator("header.topbar").bounding_box()
    assert header["height"] < 120, header  # brand, Menu and the account: no rows of links
    screenshot(page, "nav-390-closed")

    menu = page.get_by_role("button", name="Menu")
    expect(menu).to_have_attribute("aria-expanded", "false")
    menu.click()
    expect(menu).to_have_attribute("aria-expanded", "true")
    for name in ("Dashboard", "Queue", "Reliability", "Submit suite"):
        link = nav.get_by_role("link", name=name)
        expect(link).to_be_visible()
        box = link.bounding_box()
        assert box["x"] >= 0 and box["x"] + box["width"] <= PHONE["width"], (name, box)
    assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
    screenshot(page, "nav-390-open", full_page=True)
    nav.get_by_role("link", name="Queue").click()
    expect(page.get_by_role("heading", level=1)).to_contain_text("Queue")


def test_at_1280_px_the_dashboard_cards_share_one_row(page, lab, sam):
    """Eight cards: none left alone on a second row (it was seven and one)."""
    page.set_viewport_size(DESKTOP)
    sign_in(page, "sam", "sam-pass")
    cards = page.locator("section.stats > *")
    expect(cards).to_have_count(8)
    tops = set(_card_tops(cards))
    assert len(tops) == 1, tops
    screenshot(page, "dashboard-1280-cards")
    page.set_viewport_size({"width": 1000, "height": 800})
    rows: dict[int, int] = {}
    for y in _card_tops(cards):
        rows[y] = rows.get(y, 0) + 1
    assert sorted(rows.values()) == [4, 4], rows


def _card_tops(cards: Locator) -> list[int]:
    """Each card's top, read in one go: the dashboard's polling swaps the cards, and a card
    measured one by one may have left the page between two reads (no box: a failed run)."""
    return cards.evaluate_all("els => els.map(e => Math.round(e.getBoundingClientRect().y))")
