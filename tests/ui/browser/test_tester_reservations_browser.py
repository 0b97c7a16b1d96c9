"""A tester's reservations on the leases page in a real browser: "Reserve a host" takes a free
one now, "Reserve the next free one" waits in line, and she leaves the line."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from jobs.models import Reservation
from tests import factories as f
from tests.ui.browser.conftest import (
    assert_not_reloaded,
    mark_page,
    one_eve_host_reserved,
    screenshot,
    sign_in,
)

# Each test twice, DEBUG on and off (the debug fixture).
pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("debug"),
]


def test_a_tester_reserves_a_host_then_waits_in_line_for_the_next_free_one(page, alice, sam):
    one_eve_host_reserved(sam)
    sign_in(page, "alice", "alice-pass")
    page.goto("/leases/")
    mark_page(page)
    card = page.locator("#reservation-card")

    page.get_by_label("Labels").fill("board:eve")
    page.get_by_label("Reason").first.fill("debugging a flaky wifi test")
    card.get_by_role("button", name="Reserve a host").click()
    expect(page.locator("#toast")).to_contain_text("Reserved e1 until")
    expect(card.locator("#reservations-table")).to_contain_text("Holds e1")

    page.get_by_label("Labels").fill("board:eve")
    page.get_by_label("Reason").first.fill("second board for a pairing test")
    card.get_by_role("button", name="Reserve the next free one").click()
    expect(page.locator("#toast")).to_contain_text("you wait in line")
    row = card.locator("tr", has_text="Waiting")
    expect(row).to_contain_text("place 1 in line")
    expect(row).to_contain_text("none of the 2 hosts that fit")
    screenshot(page, "tester-reservations", full_page=True)
    page.set_viewport_size({"width": 390, "height": 844})
    screenshot(page, "tester-reservations-phone", full_page=True)
    page.set_viewport_size({"width": 1280, "height": 800})

    row.get_by_role("button", name="Leave the line").click()
    expect(page.locator("#toast")).to_contain_text("left the line")
    expect(card.locator("tr", has_text="Waiting")).to_have_count(0)
    assert_not_reloaded(page)
    assert list(Reservation.objects.values_list("status", flat=True).order_by("id")) == [
        "active",
        "cancelled",
    ]


def test_a_refused_reservation_says_why_next_to_the_form(page, alice):
    f.host("e1", ["board:eve"])
    sign_in(page, "alice", "alice-pass")
    page.goto("/leases/")
    card = page.locator("#reservation-card")
    page.get_by_label("Labels").fill("board:eve")
    card.get_by_role("button", name="Reserve a host").click()  # no reason
    expect(card.locator("#tester-error")).to_contain_text("A reason is required")
    expect(page.get_by_label("Labels")).to_have_value("board:eve")
    assert not Reservation.objects.exists()
