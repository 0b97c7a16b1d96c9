"""The lab's history and a board's page in a real browser (docs/ui.md#history-and-label-pages): the
dashboard's History section loads from the stats app and changes range without a reload; a
label chip leads to the board's page; a malformed label is a clear 400 page, DEBUG on or off."""

from __future__ import annotations

import math
from datetime import timedelta

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from stats.models import LabHour, LabMinute
from stats.rollup import floor_hour, floor_minute, histogram
from tests import factories as f
from tests.stats.conftest import broken_twice  # noqa: F401 - a fixture
from tests.ui.browser.conftest import assert_not_reloaded, mark_page, screenshot, sign_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def figures(i: int, hosts: int) -> dict:
    """A day's rhythm: busy hours and quiet ones, a queue that follows, waits that grow."""
    busy = 0.5 + 0.4 * math.sin(i / 9)
    queued = max(0, round(12 * math.sin(i / 7) + 6))
    waits = [20 + 30 * queued * (k + 1) for k in range(3)]
    return {
        "hosts": {"ready": hosts - 1, "needs_repair": 1},
        "hosts_total": hosts,
        "leased": round(hosts * busy),
        "held": i % 11 == 0,
        "queued": {"40": queued},
        "queued_total": queued,
        "waits": histogram(waits),
        "wait_p50_s": waits[1],
        "wait_p95_s": waits[2],
        "finished": {"passed": 3 + i % 4, "failed": i % 3 == 0},
    }


@pytest.fixture
def history(broken_twice):  # noqa: ANN001, ANN201, F811
    """An hour of minutes and a week of hours, for the lab and for board:x."""
    now = timezone.now()
    for label, hosts in (("", 12), ("board:x", 2)):
        LabMinute.objects.bulk_create(
            LabMinute(
                bucket=floor_minute(now) - timedelta(minutes=60 - i),
                label=label,
                **figures(i, hosts),
            )
            for i in range(60)
        )
        LabHour.objects.bulk_create(
            LabHour(
                bucket=floor_hour(now) - timedelta(hours=168 - i),
                label=label,
                samples=60,
                **figures(i, hosts),
            )
            for i in range(168)
        )


@pytest.mark.usefixtures("history")
def test_the_dashboard_history_and_a_boards_page(page, alice):  # noqa: ANN001
    f.job("waits-for-a-camera", ["board:x", "cam:yes"], priority=60)
    sign_in(page, "alice", "alice-pass")
    page.goto("/")
    section = page.locator("#lab-history")
    expect(section.get_by_role("heading", name="History of the lab")).to_be_visible()
    expect(section.locator("#history-hosts-title")).to_have_text("Hosts leased")
    mark_page(page)
    section.get_by_role("link", name="7 days").click()
    expect(page.locator('#lab-history a[aria-current="page"]')).to_have_text("7 days")
    expect(page.locator("#lab-history")).to_contain_text("per hour, kept 400 days")
    assert_not_reloaded(page)
    page.locator("#lab-history").scroll_into_view_if_needed()
    screenshot(page, "dashboard-history")

    page.goto("/queue/")
    page.get_by_role("link", name="board:x").first.click()
    expect(page.get_by_role("heading", name="board:x", level=1)).to_be_visible()
    expect(page.locator("#label-waiting")).to_contain_text("waits-for-a-camera")
    expect(page.locator("#label-worst tbody th").first).to_have_text("h1")
    page.get_by_role("link", name="7 days").click()
    expect(page.locator("#label-failures")).to_contain_text("7 days")
    screenshot(page, "label-page", full_page=True)


@pytest.mark.usefixtures("history")
def test_a_boards_page_fits_a_phone(page, alice):  # noqa: ANN001
    page.set_viewport_size({"width": 390, "height": 844})
    sign_in(page, "alice", "alice-pass")
    page.goto("/labels/board:x/?range=1h")
    expect(page.get_by_role("heading", name="board:x", level=1)).to_be_visible()
    expect(page.locator("#history-queue-title")).to_be_visible()
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    screenshot(page, "label-page-390", full_page=True)


def test_a_malformed_label_is_a_clear_400_page(page, alice, debug):  # noqa: ANN001
    sign_in(page, "alice", "alice-pass")
    response = page.goto("/labels/board x/")
    assert response.status == 400
    expect(page.get_by_text("is not a label")).to_be_visible()
    response = page.goto("/labels/board:nowhere/")
    assert response.status == 404
    expect(page.get_by_text("No host carries the label")).to_be_visible()
