"""The dashboard's queued-jobs card above the exact-count limit: "about N", as the queue page
says it, and the card still fits its row (docs/ui.md#pages, docs/performance.md#counts)."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from schedsite import counting
from tests import factories as f
from tests.ui.browser.conftest import VIEWPORT, overflow, screenshot, sign_in

pytestmark = [pytest.mark.browser, pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


def test_a_queue_past_the_exact_limit_reads_about_n_and_the_card_fits(page, sam, monkeypatch):  # noqa: ANN001
    for i in range(12):
        f.job(f"solo-{i}", ["board:none"])
    sign_in(page, "sam", "sam-pass")
    card = page.locator("a.stat", has=page.locator(".label", has_text="Queued jobs"))
    expect(card.locator(".value")).to_have_text("12")

    # Past the limit the count is PostgreSQL's estimate, never below what was seen.
    monkeypatch.setattr(counting, "EXACT_COUNT_LIMIT", 5)
    page.reload()
    expect(card.locator(".value")).to_have_text(re.compile(r"^about \d+$"))
    assert int(card.locator(".value").inner_text().split()[-1]) >= 6
    # A lab-sized estimate, as at 100,000 queued jobs.
    monkeypatch.setattr(counting, "planner_rows", lambda queryset: 123_456)
    page.reload()
    expect(card.locator(".value")).to_have_text("about 123,456")
    # The card keeps its place in the row of eight at 1280 px, and fits a phone's width.
    screenshot(page, "dashboard-queued-about")
    assert card.evaluate("el => el.scrollWidth <= el.clientWidth")
    page.set_viewport_size({"width": 390, "height": 844})
    assert card.evaluate("el => el.scrollWidth <= el.clientWidth")
    assert overflow(page) <= 0
    screenshot(page, "dashboard-queued-about-narrow")
    page.set_viewport_size(VIEWPORT)
