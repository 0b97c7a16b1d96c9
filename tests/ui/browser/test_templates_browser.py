"""Suite templates in a real browser: save a suite as one, dispatch it, give it a cron."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from django_q.models import Schedule
from playwright.sync_api import expect

from jobs import suite_templates
from jobs.models import Suite, SuiteTemplate
from tests import factories as f
from tests.ui.browser.conftest import screenshot, sign_in

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True),
    # `make run` serves with DEBUG=1, production with DEBUG=0: both must work the same.
    pytest.mark.parametrize("debug", [True, False], ids=["DEBUG=1", "DEBUG=0"]),
]


@pytest.fixture(autouse=True)
def _debug(settings, debug: bool) -> None:  # noqa: ANN001
    # pytest-django forces DEBUG off; the live server reads the setting on every request.
    settings.DEBUG = debug


def shot(page, name: str, *, full_page: bool = True) -> None:  # noqa: ANN001
    screenshot(page, name, full_page=full_page)


def test_a_tester_saves_a_suite_as_a_template_and_dispatches_it_with_a_build(
    page, alice, lab, debug
):  # noqa: ANN001
    suite = f.suite("bvt-inline", [["board:eve"], ["board:eve", "pool:cq"]], owner=alice)
    sign_in(page, "alice", "alice-pass")

    page.goto(f"/suites/{suite.pk}/")
    shot(page, f"suite-save-as-template-debug{int(debug)}", full_page=False)
    page.get_by_label("Template name").fill("bvt nightly")
    page.get_by_role("button", name="Save as template").click()

    expect(page.get_by_role("heading", name="bvt nightly", level=1)).to_be_visible()
    expect(page.locator(".messages")).to_contain_text(
        "Saved suite bvt-inline as template bvt nightly"
    )
    template = SuiteTemplate.objects.get()
    shot(page, f"template-detail-new-debug{int(debug)}")

    page.get_by_label("Build").fill("R121-15000.0.0")
    page.get_by_role("button", name="Dispatch").click()

    expect(page.get_by_role("heading", name="bvt-inline", level=1)).to_be_visible()
    new = Suite.objects.exclude(pk=suite.pk).get()
    assert page.url.endswith(f"/suites/{new.pk}/")
    assert (new.build, new.template_id, new.owner) == ("R121-15000.0.0", template.pk, alice)
    expect(page.locator("#suite-detail")).to_contain_text("R121-15000.0.0")

    page.goto(f"/templates/{template.pk}/")
    runs = page.locator("#runs-table")
    expect(runs).to_contain_text("dispatched by alice")
    expect(runs).to_contain_text(f"bvt-inline #{new.pk}")


def test_a_dispatch_that_cannot_run_says_why_in_place(page, alice, lab, debug):  # noqa: ANN001
    body = {"name": "pinned", "jobs": [{"name": "t", "labels": ["board:eve"], "host": "h1.lab"}]}
    template = suite_templates.template_create(by=alice, name="pinned", body=body)
    lab.h1.labels.clear()
    sign_in(page, "alice", "alice-pass")

    page.goto(f"/templates/{template.pk}/")
    page.get_by_role("button", name="Dispatch").click()

    expect(page.locator("#dispatch-form")).to_contain_text("h1.lab lacks board:eve")
    assert not Suite.objects.exists()
    shot(page, f"template-dispatch-refused-debug{int(debug)}")


def test_staff_give_a_template_a_cron_and_the_list_shows_next_and_last_run(
    page, sam, alice, lab, debug
):  # noqa: ANN001
    body = {"name": "nightly", "jobs": [{"name": "t", "labels": ["board:eve"]}]}
    template = suite_templates.template_create(by=alice, name="eve nightly", body=body)
    weekly = suite_templates.template_create(by=sam, name="weekly", body=body, cron="0 3 * * 6")
    suite_templates.template_run(template_id=weekly.pk, slot=datetime(2026, 11, 21, 3, tzinfo=UTC))
    suite_templates.template_run(template_id=weekly.pk, slot=datetime(2026, 11, 28, 3, tzinfo=UTC))
    sign_in(page, "sam", "sam-pass")

    page.goto(f"/templates/{template.pk}/")
    page.get_by_label("Cron").fill("0 25 * * *")
    page.get_by_role("button", name="Save").click()
    expect(page.locator("#template-form")).to_contain_text("is not a cron expression")
    assert not Schedule.objects.filter(func="jobs.tasks.run_template", args=repr(template.pk))

    page.get_by_label("Cron").fill("30 2 * * *")
    page.get_by_role("button", name="Save").click()
    expect(page.get_by_text("Saved template eve nightly.")).to_be_visible()
    expect(page.locator(".page-head")).to_contain_text("At 02:30")
    assert Schedule.objects.get(args=repr(template.pk)).cron == "30 2 * * *"

    page.goto("/templates/")
    row = page.locator(f"#template-{template.pk}")
    expect(row).to_contain_text("30 2 * * *")
    expect(row).to_contain_text("in ")
    weekly_row = page.locator(f"#template-{weekly.pk}")
    expect(weekly_row).to_contain_text("skipped")
    expect(weekly_row).to_contain_text("is unfinished")
    shot(page, f"template-list-debug{int(debug)}")
    page.set_viewport_size({"width": 390, "height": 844})
    shot(page, f"template-list-narrow-debug{int(debug)}")
    page.set_viewport_size({"width": 1280, "height": 800})
    page.goto(f"/templates/{weekly.pk}/")
    shot(page, f"template-detail-runs-debug{int(debug)}")
    page.set_viewport_size({"width": 390, "height": 844})
    shot(page, f"template-detail-narrow-debug{int(debug)}")
    page.set_viewport_size({"width": 1280, "height": 800})
    screenshot(page, "suite-template", full_page=True)


def test_a_tester_reads_another_owners_template_without_its_forms(page, sam, alice, lab, debug):  # noqa: ANN001
    body = {"name": "nightly", "jobs": [{"name": "t", "labels": ["board:eve"]}]}
    template = suite_templates.template_create(by=sam, name="lab nightly", body=body)
    sign_in(page, "alice", "alice-pass")

    page.goto(f"/templates/{template.pk}/")

    expect(page.get_by_role("heading", name="lab nightly", level=1)).to_be_visible()
    expect(page.get_by_role("button", name="Dispatch")).to_have_count(0)
    expect(page.get_by_role("button", name="Delete template")).to_have_count(0)
