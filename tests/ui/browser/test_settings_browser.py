"""The scheduler settings page in a browser: staff change a policy, bad input stays in the form."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from jobs.models import SchedulerSettings, SchedulerSettingsChange
from tests.ui.browser.conftest import assert_not_reloaded, mark_page, screenshot, sign_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_staff_turn_aging_on_and_see_it_in_the_history(page, sam, debug):  # noqa: ANN001
    sign_in(page, "sam", "sam-pass")
    page.goto("/scheduler/settings/")
    mark_page(page)

    page.get_by_label("Ordering").select_option("dynsize")
    page.get_by_label("Aging (minutes per level)").fill("5")
    page.get_by_label("Reason").fill("weekly suites waited all day")
    page.get_by_role("button", name="Save settings").click()

    history = page.locator("#scheduler-settings")
    expect(history).to_contain_text("weekly suites waited all day")
    expect(history).to_contain_text("Version 1")
    assert_not_reloaded(page)
    settings = SchedulerSettings.load()
    assert (settings.ordering, settings.aging_minutes) == ("dynsize", 5)
    assert SchedulerSettingsChange.objects.get().changes["aging_minutes"] == [0, 5]
    screenshot(page, f"scheduler-settings-{'debug' if debug else 'prod'}", full_page=True)


def test_a_bad_value_is_shown_next_to_its_field_and_changes_nothing(page, sam, debug):  # noqa: ANN001
    sign_in(page, "sam", "sam-pass")
    page.goto("/scheduler/settings/")
    mark_page(page)

    page.get_by_label("Aging cap").fill("500")
    page.get_by_role("button", name="Save settings").click()

    expect(page.locator(".field-error")).to_contain_text("100")
    assert_not_reloaded(page)  # under DEBUG too: the htmx debug handler must not take the page
    assert SchedulerSettings.load().aging_cap == 20
