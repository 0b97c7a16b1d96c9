"""The reliability pages in a real browser (docs/ui.md#reliability): from the navigation to
the host that broke most, sorted by a click on a column head, narrowed by the range selector,
then the tests with the flaky one marked, without a reload."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.stats.conftest import broken_twice, test_runs  # noqa: F401 - fixtures
from tests.ui.browser.conftest import assert_not_reloaded, mark_page, screenshot, sign_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def hostnames(page) -> list[str]:  # noqa: ANN001
    return page.locator("#reliability-table tbody th").all_inner_texts()


@pytest.mark.usefixtures("broken_twice", "test_runs")
def test_a_tester_finds_the_host_that_broke_most_and_the_flaky_test(page, alice):  # noqa: ANN001
    sign_in(page, "alice", "alice-pass")
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Reliability").click()
    expect(page.get_by_role("heading", name="Host reliability", level=1)).to_be_visible()
    assert hostnames(page) == ["h1", "h2"]
    row = page.locator("#reliability-table tbody tr").first
    expect(row.locator('[data-label="Breaks"]')).to_have_text("2")
    expect(row.locator('[data-label="Out of service"]')).to_have_text("3.0 h")
    screenshot(page, "reliability-hosts")

    mark_page(page)
    # h1 passed 3 of its 6 jobs, h2 1 of its 3: highest first, then a second click reverses.
    page.get_by_role("link", name="Pass rate").click()
    expect(page.locator('th[aria-sort="descending"]')).to_contain_text("Pass rate")
    assert hostnames(page) == ["h1", "h2"]
    expect(page.locator('[data-label="Pass rate"]')).to_have_text(["50%", "33%"])
    page.get_by_role("link", name="Pass rate").click()
    expect(page.locator('th[aria-sort="ascending"]')).to_contain_text("Pass rate")
    assert hostnames(page) == ["h2", "h1"]
    assert "ordering=pass_rate" in page.url
    page.get_by_label("Over the last").select_option("1h")
    expect(page.locator("#reliability-table")).to_contain_text("the last hour")
    expect(page.locator('#reliability-table [data-label="Breaks"]').first).to_have_text("0")
    assert_not_reloaded(page)

    page.get_by_role("link", name="Tests", exact=True).click()
    expect(page.get_by_role("heading", name="Test reliability", level=1)).to_be_visible()
    expect(page.get_by_label("Over the last")).to_have_value("1h")  # the range chosen stays
    page.get_by_label("Over the last").select_option("7d")
    flaky = page.locator("#reliability-table tbody tr", has_text="smoke-t0")
    expect(flaky.locator('[data-label="Flaky"]')).to_have_text("flaky")
    expect(flaky.get_by_role("link", name="h2")).to_be_visible()
    screenshot(page, "reliability-tests")


@pytest.mark.usefixtures("broken_twice", "test_runs")
def test_on_a_phone_each_row_is_a_card_within_the_screen(page, alice):  # noqa: ANN001
    page.set_viewport_size({"width": 390, "height": 844})
    sign_in(page, "alice", "alice-pass")
    for path, first in (
        ("/reliability/hosts/", "h1"),
        ("/reliability/tests/?ordering=name", "boot"),
    ):
        page.goto(path)
        expect(page.locator("#reliability-table tbody th").first).to_contain_text(first)
        rate = page.locator('#reliability-table [data-label="Pass rate"]').first
        box = rate.bounding_box()
        assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= 390, box
        assert page.evaluate("document.documentElement.scrollWidth") <= 390
    screenshot(page, "reliability-tests-390", full_page=True)
