"""The UI in a real browser (Debian Chromium via Playwright) against a live server."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from hosts import services as host_services
from hosts.models import Host, Worker
from jobs import services
from jobs.choices import JobStatus
from jobs.models import Job, Lease, Suite
from tests import factories as f
from tests.ui.browser.conftest import assert_not_reloaded, mark_page, screenshot, sign_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def host_row(page, host: Host):  # noqa: ANN001, ANN201
    return page.locator(f"#host-{host.pk}")


def release_in_row(page, row, button: str, done: str, hold_again: str) -> None:  # noqa: ANN001
    """Unlock or resume from a table row: the row says so and offers the hold again, in place."""
    row.get_by_role("button", name=button).click()
    expect(row).to_contain_text(done)
    expect(row.get_by_text(hold_again)).to_be_visible()
    assert_not_reloaded(page)


def test_staff_filters_by_label_then_locks_and_unlocks_a_host_in_place(page, sam, lab):
    sign_in(page, "sam", "sam-pass")
    page.get_by_role("link", name="Hosts", exact=True).click()
    mark_page(page)

    label = page.get_by_label("Label (each one must match)")
    label.fill("pool:c")
    page.get_by_role("button", name=re.compile(r"^pool:cq")).click()  # a suggested label
    expect(page).to_have_url(re.compile(r"/hosts/\?.*label=pool%3Acq"))
    expect(page.locator("#hosts-table tbody tr")).to_have_count(2)
    expect(page.locator(".chip-filter")).to_have_text(re.compile(r"pool:cq"))
    expect(host_row(page, lab.h2)).to_have_count(0)  # pool:bvt

    row = host_row(page, lab.h1)
    row.get_by_text("Lock…").click()
    row.get_by_label("Why lock h1.lab?").fill("flaky USB hub, debugging")
    row.get_by_role("button", name="Lock", exact=True).click()
    expect(row).to_contain_text("Locked")
    expect(row).to_contain_text("flaky USB hub, debugging")
    expect(page.locator("#toast")).to_contain_text("Locked h1.lab: flaky USB hub, debugging")
    assert_not_reloaded(page)
    assert Host.objects.get(pk=lab.h1.pk).locked
    screenshot(page, "hosts-after-lock")

    release_in_row(page, row, "Unlock h1.lab", "Unlocked h1.lab", "Lock…")
    assert not Host.objects.get(pk=lab.h1.pk).locked


def test_the_hosts_table_refreshes_itself_and_keeps_its_filters(page, sam, lab):
    sign_in(page, "sam", "sam-pass")
    page.goto("/hosts/?label=pool:cq")
    mark_page(page)
    expect(host_row(page, lab.h3)).not_to_contain_text("Locked")
    host_services.host_lock(host=lab.h3, by="bob", reason="changed elsewhere")  # another user
    expect(host_row(page, lab.h3)).to_contain_text("changed elsewhere")
    expect(host_row(page, lab.h2)).to_have_count(0)  # still filtered by pool:cq
    assert_not_reloaded(page)


def test_a_host_can_be_locked_with_the_keyboard_alone(page, sam, lab):
    sign_in(page, "sam", "sam-pass")
    page.goto("/hosts/")
    row = host_row(page, lab.h2)
    row.get_by_text("Lock…").focus()
    page.keyboard.press("Enter")  # opens the disclosure
    page.keyboard.press("Tab")
    expect(row.get_by_label("Why lock h2.lab?")).to_be_focused()
    page.keyboard.type("servo cable loose")
    page.keyboard.press("Enter")
    expect(row).to_contain_text("servo cable loose")
    assert Host.objects.get(pk=lab.h2.pk).lock_reason == "servo cable loose"


def test_staff_locks_several_hosts_at_once_and_sees_which_were_skipped(page, sam, lab):
    host_services.host_lock(host=lab.h2, by="bob", reason="bob's bench")
    sign_in(page, "sam", "sam-pass")
    page.goto("/hosts/")
    mark_page(page)
    for host in ("h1.lab", "h2.lab", "h3.lab"):
        page.get_by_label(f"Select {host}").check()
    expect(page.locator("[data-selected-count]")).to_have_text("3 hosts selected")
    page.get_by_label("Reason for locking the selected hosts").fill("rack move")
    page.get_by_role("button", name="Lock selected", exact=True).click()
    banner = page.locator("#hosts-table .banner")
    expect(banner).to_have_text("Locked 2 hosts, 1 already locked.")
    # Neutral news, not a red error: the batch did what was asked everywhere.
    expect(banner).to_have_class(re.compile(r"\binfo\b"))
    expect(page.locator("#toast .toast")).to_have_class(re.compile(r"\btoast-info\b"))
    expect(host_row(page, lab.h2)).to_contain_text("already locked")
    expect(host_row(page, lab.h3)).to_contain_text("rack move")
    assert_not_reloaded(page)
    assert list(Host.objects.order_by("hostname").values_list("lock_reason", flat=True)) == [
        "rack move",
        "bob's bench",
        "rack move",
    ]


def test_staff_pauses_a_worker_with_a_reason_and_resumes_it(page, sam, lab):
    sign_in(page, "sam", "sam-pass")
    page.get_by_role("link", name="Workers", exact=True).click()
    mark_page(page)
    row = page.locator(f"#worker-{lab.w1.pk}")
    row.get_by_text("Pause…").click()
    row.get_by_role("button", name="Pause", exact=True).click()  # no reason yet
    expect(row.locator(".field-error")).to_contain_text("A reason is required to pause a worker")
    expect(row.get_by_label("Why pause w1?")).to_be_focused()
    page.keyboard.type("kernel upgrade")
    row.get_by_role("button", name="Pause", exact=True).click()
    expect(row).to_contain_text("Paused")
    expect(row).to_contain_text("kernel upgrade")
    assert Worker.objects.get(pk=lab.w1.pk).paused
    screenshot(page, "workers-after-pause")

    release_in_row(page, row, "Resume w1", "Resumed w1", "Pause…")
    assert not Worker.objects.get(pk=lab.w1.pk).paused


def test_staff_releases_a_lease_and_its_job_goes_back_to_the_queue(page, sam, lab):
    job = f.job("login_Smoke", ["board:kevin"])
    services.scheduler_tick()
    lease = Lease.objects.get(job=job)
    sign_in(page, "sam", "sam-pass")
    page.get_by_role("link", name="Leases", exact=True).click()
    mark_page(page)
    row = page.locator(f"#lease-{lease.pk}")
    expect(row).to_contain_text("login_Smoke")
    row.get_by_text("Release…").click()
    row.get_by_label("Reason").fill("runner stuck")
    row.get_by_role("button", name="Release, requeue job").click()
    expect(row).to_contain_text("Released h3.lab; job login_Smoke requeued.")
    expect(row.get_by_text("Release…")).to_have_count(0)
    assert_not_reloaded(page)
    assert Job.objects.get(pk=job.pk).status == JobStatus.QUEUED
    assert Lease.objects.get(pk=lease.pk).released_by == "sam"


def test_staff_reserves_a_host_from_its_page(page, sam, lab):
    sign_in(page, "sam", "sam-pass")
    page.goto("/hosts/h1.lab/")
    mark_page(page)
    page.get_by_label("For how long").select_option(label="4 hours")
    page.get_by_role("button", name="Reserve").click()  # no reason: refused in place
    expect(page.locator("#detail-reserve-error")).to_contain_text("A reason is required")
    page.get_by_label("Why", exact=True).fill("flashing firmware")
    page.get_by_role("button", name="Reserve").click()
    held = page.locator("section", has=page.locator("#host-lease-title"))
    expect(held).to_contain_text(re.compile(r"Reserved by\s*sam"))
    expect(held).to_contain_text(re.compile(r"Why\s*flashing firmware"))
    expect(page.get_by_role("button", name="End reservation")).to_be_visible()
    assert_not_reloaded(page)
    assert Lease.objects.get(host=lab.h1, released_at=None).reason == "flashing firmware"


def test_a_tester_submits_a_suite_fixing_an_error_in_place_and_sees_it_wait(page, alice, lab):
    sign_in(page, "alice", "alice-pass")
    page.get_by_role("link", name="Submit suite", exact=True).click()
    mark_page(page)
    page.locator("#id_name").fill("camera R121")
    page.get_by_label("Priority").select_option(label="cq (70)")
    page.locator("#id_min_duts").fill("3")
    page.locator("#id_max_duts").fill("2")

    rows = page.locator(".job-row")
    first = rows.nth(0)
    first.get_by_label("Test name").fill("camera_Capture")
    labels = first.get_by_label("Labels the host needs")
    labels.fill("board:ev")
    expect(first.locator(".suggest-summary")).to_have_count(0)
    first.get_by_role("button", name=re.compile(r"^board:eve")).click()
    expect(labels).to_have_value("board:eve ")
    expect(first.locator(".suggest-summary")).to_contain_text("2 hosts carry board:eve")
    page.keyboard.press("Escape")

    page.get_by_role("button", name="Add a job").click()
    expect(rows).to_have_count(3)
    expect(rows.nth(2).get_by_label("Test name")).to_be_focused()
    rows.nth(2).get_by_label("Test name").fill("camera_Stress")
    rows.nth(2).get_by_label("Labels the host needs").fill("board:sarien")
    rows.nth(1).get_by_role("button", name="Remove this job").click()
    expect(rows).to_have_count(2)

    page.get_by_role("button", name="Submit suite").click()
    expect(page.locator("#id_min_duts-error")).to_contain_text("Must not exceed max DUTs (2).")
    expect(page.locator("#id_min_duts")).to_be_focused()
    expect(rows.nth(1).get_by_label("Test name")).to_have_value("camera_Stress")  # rows kept
    assert_not_reloaded(page)
    assert not Suite.objects.exists()
    screenshot(page, "submit-suite-error")

    page.locator("#id_min_duts").fill("1")
    page.get_by_role("button", name="Submit suite").click()
    # No host carries board:sarien: refused on its row, until the tester says to wait for one.
    expect(rows.nth(1)).to_contain_text("No host in the lab carries label board:sarien")
    assert not Suite.objects.exists()
    page.get_by_label("Wait for such hosts").check()
    page.get_by_role("button", name="Submit suite").click()
    expect(page.get_by_role("heading", name="camera R121")).to_be_visible()
    expect(page.get_by_text("Suite camera R121 submitted with 2 jobs.")).to_be_visible()
    suite = Suite.objects.get()
    assert (suite.priority, suite.min_duts, suite.max_duts, suite.owner_id) == (70, 1, 2, alice.pk)
    assert [(j.name, j.labels) for j in suite.jobs.order_by("id")] == [
        ("camera_Capture", ["board:eve"]),
        ("camera_Stress", ["board:sarien"]),
    ]

    page.get_by_role("link", name="Queue", exact=True).click()
    row = page.locator("#queue-table tr", has_text="camera_Stress")
    expect(row).to_contain_text("Waiting for the next scheduler tick.")
    expect(row).to_contain_text("cq 70")
    services.scheduler_tick()  # the scheduler runs; the queue page notices by itself
    expect(row).to_contain_text("No host has label board:sarien")
    expect(page.locator("#queue-table tr", has_text="camera_Capture")).to_have_count(0)  # leased
    screenshot(page, "queue-with-wait-reason")


def test_a_tester_sees_no_staff_controls_and_a_forged_staff_post_is_refused(page, alice, lab):
    f.job("login_Smoke", ["board:kevin"])
    services.scheduler_tick()
    sign_in(page, "alice", "alice-pass")
    for path in ("/hosts/", "/hosts/h3.lab/", "/workers/", "/workers/w1/", "/leases/"):
        page.goto(path)
        expect(page.get_by_role("heading", level=1)).to_be_visible()
        for control in ("Lock…", "Unlock", "Pause…", "Release…", "Lock it", "Reserve"):
            expect(page.get_by_text(control, exact=True)).to_have_count(0)
        expect(page.locator("input[name=hosts], #bulk-form, #reserve-form")).to_have_count(0)

    csrf = next(c["value"] for c in page.context.cookies() if c["name"] == "csrftoken")
    forged = page.request.post(
        "/hosts/h1.lab/lock/",
        form={"reason": "forged"},
        headers={"X-CSRFToken": csrf, "HX-Request": "true"},
    )
    assert forged.status == 403
    assert "Only lab staff can lock hosts." in forged.text()
    assert not Host.objects.get(pk=lab.h1.pk).locked

    # The same refusal, sent from the page itself, is told to the user.
    page.goto("/workers/")
    page.evaluate(
        "htmx.ajax('POST', '/workers/w1/pause/', {source: document.body, values: {reason: 'x'}})"
    )
    expect(page.locator("#toast")).to_contain_text("Only lab staff can pause workers.")
    expect(page.get_by_role("heading", name="Workers")).to_be_visible()  # page left as it was
    assert not Worker.objects.get(pk=lab.w1.pk).paused


def test_a_tester_aborts_her_suite_after_confirming(page, alice, lab):
    suite = f.suite("mine", 3, labels=["board:eve"], owner=alice)
    services.scheduler_tick()
    sign_in(page, "alice", "alice-pass")
    page.goto(f"/suites/{suite.pk}/")
    mark_page(page)
    page.once("dialog", lambda dialog: dialog.accept())
    page.get_by_role("button", name="Abort suite").click()
    expect(page.locator("#suite-detail")).to_contain_text("aborted")
    expect(page.get_by_role("button", name="Abort suite")).to_have_count(0)
    expect(page.locator("#toast")).to_contain_text("3 unfinished jobs stopped")
    assert_not_reloaded(page)
    assert not Lease.objects.filter(released_at=None).exists()
