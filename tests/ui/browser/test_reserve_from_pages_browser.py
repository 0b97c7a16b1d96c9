"""A tester reserves from a board's page and from a host's page in a real browser
(docs/ui.md#a-testers-reservations): the card answers in place, and neither page overflows a
phone's width."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from jobs.models import Reservation
from tests.ui.browser.conftest import (
    assert_not_reloaded,
    mark_page,
    one_eve_host_reserved,
    overflow,
    screenshot,
    sign_in,
)

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_a_tester_reserves_from_a_boards_page_then_waits_for_the_next(page, alice, sam):
    one_eve_host_reserved(sam)
    sign_in(page, "alice", "alice-pass")
    page.goto("/labels/board:eve/")
    mark_page(page)
    card = page.locator("#label-reserve")
    expect(card).to_contain_text("Reserve a board:eve host to debug on")

    card.get_by_placeholder("Why").fill("debugging a flaky wifi test")
    card.get_by_role("button", name="Reserve a host").click()
    expect(page.locator("#toast")).to_contain_text("Reserved e1 until")
    expect(page.locator("#label-reserve-result")).to_contain_text("Holds e1")

    card = page.locator("#label-reserve")
    card.get_by_placeholder("Why").fill("a second board")
    card.get_by_role("button", name="Reserve the next free one").click()
    expect(page.locator("#label-reserve-result")).to_contain_text("is place 1 in line")
    assert_not_reloaded(page)
    screenshot(page, "label-reserve", full_page=True)
    page.set_viewport_size({"width": 390, "height": 844})
    screenshot(page, "label-reserve-phone", full_page=True)
    assert overflow(page) <= 0
    statuses = Reservation.objects.values_list("status", flat=True).order_by("id")
    assert list(statuses) == ["active", "waiting"]


def test_a_tester_waits_in_line_for_a_busy_host_from_its_page(page, alice, sam):
    one_eve_host_reserved(sam, free_too=False)
    sign_in(page, "alice", "alice-pass")
    page.goto("/hosts/e2/")
    mark_page(page)
    form = page.locator("#host-tester-reserve")
    form.get_by_placeholder("Why").fill("bisecting a kernel")
    form.get_by_role("button", name="Reserve this host when it frees").click()
    expect(page.locator("#toast")).to_contain_text("you wait in line")
    expect(page.locator("#host-my-waiting")).to_contain_text("You wait in line for it")
    expect(page.locator("#host-tester-reserve")).to_have_count(0)
    assert_not_reloaded(page)
    screenshot(page, "host-tester-reserve", full_page=True)
    page.set_viewport_size({"width": 390, "height": 844})
    assert overflow(page) <= 0
    reservation = Reservation.objects.get()
    assert (reservation.status, reservation.host.hostname) == ("waiting", "e2")
