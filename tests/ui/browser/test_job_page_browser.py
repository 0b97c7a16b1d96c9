"""The job page in a real browser: from the suite page to a job, its attempts, its output."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from jobs import services
from jobs.models import Job
from tests import factories as f
from tests.ui.browser.conftest import screenshot, sign_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

OUTPUT = "".join(f"step {i:03d}: ok\n" for i in range(1, 121)) + "PASS power_Resume\n"


def run(job: Job, result: str, *, host_ok: bool = True, message: str = "") -> None:
    services.scheduler_tick()
    job.refresh_from_db()
    services.job_start(job=job, by="runner-1")
    services.job_complete(job=job, result=result, by="runner-1", host_ok=host_ok, message=message)


@pytest.mark.parametrize("debug", [True, False], ids=["DEBUG=1", "DEBUG=0"])
def test_a_tester_goes_from_the_suite_to_a_retried_job_and_downloads_its_output(
    page, alice, lab, settings, debug, tmp_path
):
    settings.DEBUG = debug
    settings.RETRY_BACKOFF = 0
    suite = f.suite("nightly", [["board:eve"], ["board:kevin"]], owner=alice, max_retries=1)
    job, other = suite.jobs.order_by("id")
    job.name = "power_Resume"
    job.save(update_fields=["name"])
    run(job, "failed", host_ok=False, message="servo: no response from DUT")
    run(job, "passed", message=OUTPUT)
    services.job_complete(job=other, result="failed", by="runner-1", message="FAIL audio")
    first, second = job.leases.order_by("id").values_list("host__hostname", flat=True)

    sign_in(page, "alice", "alice-pass")
    page.goto("/suites/")
    expect(page.locator("#suites-table tbody tr").first).to_contain_text("completed · 1 failed")
    page.get_by_role("link", name="nightly").click()
    expect(page.locator(".page-head .badge").first).to_have_text("completed · 1 failed")
    screenshot(page, "suite-page", full_page=True)
    row = page.locator(f"#job-{job.pk}")
    expect(row.get_by_role("link", name=second)).to_be_visible()  # the host it passed on
    row.get_by_role("link", name="power_Resume").click()

    expect(page).to_have_url(f"{page.url.split('/jobs/')[0]}/jobs/{job.pk}/")
    expect(page.get_by_role("heading", name="power_Resume", level=1)).to_be_visible()
    attempt1, attempt2 = page.locator("#attempt-1"), page.locator("#attempt-2")
    expect(attempt1.get_by_role("link", name=first)).to_be_visible()
    expect(attempt1).to_contain_text(f"retry 1 of 1 after host {first} broke")
    expect(attempt1).to_contain_text("failed")
    expect(attempt2.get_by_role("link", name=second)).to_be_visible()
    expect(attempt2).to_contain_text("passed")
    output = page.get_by_label("Output of power_Resume")
    expect(output).to_have_value(OUTPUT)
    # Long output scrolls inside its box rather than stretching the page.
    assert output.evaluate("box => box.scrollHeight > box.clientHeight")
    screenshot(page, f"job-page-{'debug' if debug else 'prod'}")
    screenshot(page, f"job-page-{'debug' if debug else 'prod'}-full", full_page=True)

    # At phone width the output and the attempts scroll in their own boxes, not the page.
    page.set_viewport_size({"width": 390, "height": 844})
    assert page.evaluate("document.documentElement.scrollWidth - window.innerWidth") <= 0
    screenshot(page, f"job-page-narrow-{'debug' if debug else 'prod'}")
    page.set_viewport_size({"width": 1280, "height": 800})

    with page.expect_download() as download:
        page.get_by_role("link", name="Download as text").click()
    saved = tmp_path / "output.txt"
    download.value.save_as(saved)
    assert download.value.suggested_filename == f"job-{job.pk}-output.txt"
    assert saved.read_text() == OUTPUT

    # The host of the first attempt is one click away.
    attempt1.get_by_role("link", name=first).click()
    expect(page.get_by_role("heading", name=first, level=1)).to_be_visible()


def test_a_queued_job_says_where_it_stands_and_why(page, alice, lab):
    f.job("ahead", ["board:nope"], priority=60, owner=alice)
    job = f.job("nobody-can-run", ["board:nope"], owner=alice)
    services.scheduler_tick()

    sign_in(page, "alice", "alice-pass")
    page.goto("/queue/")
    page.get_by_role("link", name="nobody-can-run").click()

    expect(page.get_by_role("heading", name="nobody-can-run", level=1)).to_be_visible()
    waiting = page.locator("#job-wait-title").locator("xpath=..")
    expect(waiting).to_contain_text("#2 of 2")
    expect(waiting).to_contain_text("No such host")
    screenshot(page, "job-queued", full_page=True)
    assert job.pk
