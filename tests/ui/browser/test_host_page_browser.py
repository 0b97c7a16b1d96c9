"""The host page in a real browser: lock and unlock, reservations, who waits, older events."""

from __future__ import annotations

from datetime import timedelta

import pytest
from playwright.sync_api import expect

from hosts.models import Host, HostEvent
from jobs.models import Lease
from tests.ui.browser.conftest import assert_not_reloaded, mark_page, screenshot, sign_in
from tests.ui.conftest import expiry

# Each test twice, DEBUG on and off (the debug fixture).
pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("debug"),
]


def test_unlocking_a_host_on_its_page_leaves_no_locked_banner(page, sam, lab):
    sign_in(page, "sam", "sam-pass")
    page.goto(f"/hosts/{lab.h1.hostname}/")
    page.get_by_label("Lock it for debugging — why?").fill("servo flaky")
    # A plain form post, as before htmx has loaded: the page comes back with a message banner.
    page.locator("form[action$='/lock/']").evaluate("form => form.submit()")
    expect(page.locator(".messages")).to_contain_text("Locked h1.lab: servo flaky")
    head = page.locator(".page-head")
    expect(head).to_contain_text("Locked")
    screenshot(page, "host-locked", full_page=True)
    page.get_by_role("button", name=f"Unlock {lab.h1.hostname}").click()
    expect(page.locator("#toast")).to_contain_text(f"Unlocked {lab.h1.hostname}")
    screenshot(page, "host-unlocked", full_page=True)
    expect(head).not_to_contain_text("Locked")
    expect(page.locator(".messages")).not_to_contain_text("Locked")
    expect(page.get_by_text("Locked by")).to_have_count(0)
    assert not Host.objects.get(pk=lab.h1.pk).locked


def test_the_holder_extends_then_ends_her_reservation_on_the_host_page(page, alices):
    before = expiry(alices)
    sign_in(page, "alice", "alice-pass")
    page.goto("/hosts/h1.lab/")
    mark_page(page)
    held = page.locator("section", has=page.locator("#host-lease-title"))
    expect(held).to_contain_text("alice")
    expect(held).to_contain_text("flashing firmware")
    page.get_by_label("Extend the reservation by").select_option(label="2 hours")
    page.get_by_role("button", name="Extend", exact=True).click()
    expect(page.locator("#toast")).to_contain_text("Extended the reservation of h1.lab until")
    assert expiry(alices) == before + timedelta(hours=2)
    screenshot(page, "host-reservation")
    screenshot(page, "host-reservation-full", full_page=True)
    page.get_by_role("button", name="End reservation").click()
    expect(held).to_contain_text("No lease: the host is not held by anyone.")
    assert_not_reloaded(page)
    assert Lease.objects.get(pk=alices.pk).released_by == "alice"


def test_another_tester_sees_who_holds_the_host_but_no_controls(page, alices, bob):
    sign_in(page, "bob", "bob-pass")
    page.goto("/hosts/h1.lab/")
    expect(page.locator("#host-detail")).to_contain_text("Reserved by")
    expect(page.get_by_role("button", name="Extend", exact=True)).to_have_count(0)
    expect(page.get_by_role("button", name="End reservation")).to_have_count(0)


def test_staff_extend_and_end_a_reservation_from_the_leases_page(page, alices, sam):
    before = expiry(alices)
    sign_in(page, "sam", "sam-pass")
    page.goto("/leases/")
    mark_page(page)
    row = page.locator(f"#lease-{alices.pk}")
    row.get_by_text("Extend or end…").click()
    row.get_by_label("Extend by").select_option(label="30 minutes")
    row.get_by_role("button", name="Extend", exact=True).click()
    expect(page.locator(f"#lease-{alices.pk}")).to_contain_text("Extended the reservation")
    assert expiry(alices) == before + timedelta(minutes=30)
    row = page.locator(f"#lease-{alices.pk}")
    row.get_by_text("Extend or end…").click()
    row.get_by_label("Note").fill("needed for the release")
    row.get_by_role("button", name="End reservation").click()
    expect(page.locator(f"#lease-{alices.pk}")).to_contain_text("Ended the reservation of h1.lab")
    assert_not_reloaded(page)
    assert Lease.objects.get(pk=alices.pk).released_by == "sam"


def test_load_older_reaches_the_hosts_first_event(page, lab, sam):
    HostEvent.objects.bulk_create(
        HostEvent(host=lab.h1, kind="updated", actor="sam", message=f"note {i:03d}")
        for i in range(75)
    )
    sign_in(page, "sam", "sam-pass")
    page.goto("/hosts/h1.lab/")
    timeline = page.locator(".timeline")
    expect(timeline.locator("li", has_text="note 074")).to_have_count(1)
    expect(timeline).not_to_contain_text("labels: board:eve")
    page.get_by_role("link", name="Load older events").click()
    expect(timeline).to_contain_text("labels: board:eve")  # the host's first event
    expect(page.get_by_role("link", name="Load older events")).to_have_count(0)
    expect(timeline.locator("li")).to_have_count(76)  # 75 notes and "created": every event
    # Live updates hold off while older entries are on show, so they do not vanish.
    expect(page.locator(".live-dot")).to_contain_text("Live")
    page.wait_for_timeout(2500)  # two poll periods (UI_REFRESH_SECONDS is 1 here)
    expect(timeline).to_contain_text("labels: board:eve")
