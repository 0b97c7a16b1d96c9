"""Re-run and clone in a real browser, as the suite's tester and as lab staff."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from jobs import services
from jobs.models import Suite
from tests import factories as f
from tests.ui.browser.conftest import screenshot, sign_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def finished_with_a_failure(owner: object) -> Suite:
    """A suite of two jobs run to the end: boot passed, wifi failed."""
    suite = f.clonable_suite(
        owner,
        [
            services.JobSpec(name="boot", labels=["board:eve"], max_retries=1),
            services.JobSpec(name="wifi", labels=["board:eve", "pool:cq"], max_retries=1),
        ],
    )
    services.scheduler_tick()
    for job in suite.jobs.order_by("id"):
        services.job_start(job=job, by="runner-1")
        result = "passed" if job.name == "boot" else "failed"
        services.job_complete(job=job, result=result, by="runner-1", message=f"{job.name} done")
    return suite


def shot(page, name: str) -> None:  # noqa: ANN001
    screenshot(page, name, full_page=True)


@pytest.fixture(params=["alice", "sam"], ids=["tester", "staff"])
def user(request: pytest.FixtureRequest) -> str:
    """Who presses the buttons: the suite's tester, or lab staff."""
    return request.param


@pytest.fixture
def original(debug, page, alice, sam, lab, user) -> Suite:  # noqa: ANN001
    """Alice's suite, finished with a failure, open on its page in the browser of `user`."""
    suite = finished_with_a_failure(alice)
    sign_in(page, user, f"{user}-pass")
    page.goto(f"/suites/{suite.pk}/")
    return suite


def test_rerun_failed_jobs_lands_on_the_new_suite(page, original, user, debug):
    expect(page.get_by_text("completed · 1 failed").first).to_be_visible()
    if debug and user == "alice":
        shot(page, "suite-finished-with-rerun-and-clone")
    page.get_by_role("button", name="Re-run failed jobs").click()

    expect(page.get_by_text("Re-running 1 job of nightly R120 that did not pass.")).to_be_visible()
    rerun = Suite.objects.get(rerun_of=original)
    expect(page).to_have_url(re.compile(rf"/suites/{rerun.pk}/$"))
    origin = page.locator("#suite-origin")
    expect(origin).to_contain_text(f"Re-run of #{original.pk} nightly R120")
    expect(page.get_by_role("link", name="wifi")).to_be_visible()
    expect(page.get_by_role("link", name="boot")).to_have_count(0)
    assert rerun.owner.username == user
    if debug and user == "alice":
        shot(page, "suite-rerun")
        page.set_viewport_size({"width": 390, "height": 800})
        page.goto("/suites/")
        expect(page.get_by_text(f"re-run of #{original.pk}")).to_be_visible()
        shot(page, "suite-list-390")
        page.goto(f"/suites/{rerun.pk}/")
        shot(page, "suite-rerun-390")
        page.set_viewport_size({"width": 1280, "height": 800})

    origin.get_by_role("link").click()
    expect(page.locator("#suite-reruns")).to_contain_text(f"#{rerun.pk}")


def test_clone_opens_the_filled_form_and_submits_a_linked_suite(page, original, user, debug):
    page.get_by_role("link", name="Clone").click()

    expect(page).to_have_url(re.compile(rf"/suites/new/\?clone={original.pk}$"))
    expect(page.locator("#clone-note")).to_contain_text(f"A copy of #{original.pk} nightly R120")
    expect(page.locator("#id_name")).to_have_value("nightly R120")
    expect(page.locator("#id_build")).to_have_value("R120-1")
    expect(page.locator("#id_priority")).to_have_value("70")
    expect(page.locator("#id_max_duts")).to_have_value("2")
    expect(page.locator("#id_max_retries")).to_have_value("1")
    names = page.locator('input[name="job_name"]')
    expect(names).to_have_count(2)
    expect(names.nth(0)).to_have_value("boot")
    expect(names.nth(1)).to_have_value("wifi")
    expect(page.locator('input[name="job_labels"]').nth(1)).to_have_value("board:eve pool:cq")
    if debug and user == "alice":
        shot(page, "suite-clone-form")

    page.locator("#id_name").fill("nightly R121")
    page.locator("#id_build").fill("R121-1")
    page.get_by_role("button", name="Submit suite").click()

    expect(page.get_by_text("Suite nightly R121 submitted with 2 jobs.")).to_be_visible()
    clone = Suite.objects.get(cloned_from=original)
    expect(page).to_have_url(re.compile(rf"/suites/{clone.pk}/$"))
    expect(page.locator("#suite-origin")).to_contain_text(f"Clone of #{original.pk} nightly R120")
    assert (clone.name, clone.build, clone.priority, clone.owner.username) == (
        "nightly R121",
        "R121-1",
        70,
        user,
    )
    assert sorted(clone.jobs.values_list("name", "max_retries")) == [("boot", 1), ("wifi", 1)]


def test_another_tester_has_no_rerun_or_clone_button(page, alice, bob, lab):
    original = finished_with_a_failure(alice)
    sign_in(page, "bob", "bob-pass")
    page.goto(f"/suites/{original.pk}/")
    expect(page.get_by_text("completed · 1 failed").first).to_be_visible()
    expect(page.get_by_role("button", name="Re-run failed jobs")).to_have_count(0)
    expect(page.get_by_role("link", name="Clone")).to_have_count(0)
