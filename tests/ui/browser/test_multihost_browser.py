"""A tester asks for a job with two roles on the submit form and finds it, and its hosts, on
the job page."""

from __future__ import annotations

import re

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from jobs import services
from jobs.models import Job, SchedulerTick
from tests import factories as f
from tests.multihost import lease_hosts
from tests.ui.browser.conftest import (
    VIEWPORT,
    assert_not_reloaded,
    mark_page,
    screenshot,
    sign_in,
)

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def fill_two_roles(page) -> None:  # noqa: ANN001
    """bt_Pair: dut ×3 (bt) — one more than the lab has — and peer (ap), kept by chamber."""
    page.locator("#id_name").fill("bt nightly")
    row = page.locator(".job-row").nth(0)
    row.get_by_label("Test name").fill("bt_Pair")
    row.get_by_label("Labels the host needs").fill("chamber:a")
    row.locator("summary", has_text="More hosts").click()
    add_role, roles = row.get_by_role("button", name="Add a role"), row.locator(".role-row")
    for n in (1, 2):
        add_role.click()
        expect(roles).to_have_count(n)
        # The new row's name field takes the keyboard once htmx has settled it (a moment
        # after it shows): typing before then would land in whichever field had it.
        expect(roles.nth(n - 1).get_by_label("Role name")).to_be_focused()
    roles.nth(0).get_by_label("Role name").fill("dut")
    roles.nth(0).get_by_label("Its own labels").fill("b")
    suggestion = roles.nth(0).locator(".suggestions [data-pick]", has_text="bt")
    expect(suggestion.first).to_be_visible()  # the label suggestions serve role rows too
    roles.nth(0).get_by_label("Its own labels").fill("bt")
    roles.nth(0).get_by_label("Hosts", exact=True).fill("3")  # only two hosts carry bt
    roles.nth(1).get_by_label("Role name").fill("peer")
    roles.nth(1).get_by_label("Its own labels").fill("ap")
    row.get_by_label("Keep together by").fill("chamber")
    for k, (name, labels, count) in enumerate((("dut", "bt", "3"), ("peer", "ap", "1"))):
        expect(roles.nth(k).get_by_label("Role name")).to_have_value(name)
        expect(roles.nth(k).get_by_label("Its own labels")).to_have_value(labels)
        expect(roles.nth(k).get_by_label("Hosts", exact=True)).to_have_value(count)
    expect(page.locator(".suggestions [data-pick]")).to_have_count(0)  # none left open


def refuse_an_unnamed_role(page, mode: str) -> None:  # noqa: ANN001
    """The peer role's name emptied: the refusal says so by that name, in the form's words (not
    the API's path to the field); the name typed again."""
    peer_name = page.locator(".role-row").nth(1).get_by_label("Role name")
    peer_name.fill("")
    page.get_by_role("button", name="Submit suite").click()
    expect(peer_name).to_have_attribute("aria-invalid", "true")
    expect(page.locator(".role-row").nth(1)).to_contain_text("Name is required")
    expect(page.locator("#suite-form")).not_to_contain_text("roles[")
    expect(peer_name).to_be_focused()  # the answer has settled: typing goes where it should
    assert not Job.objects.exists()
    screenshot(page, f"multihost-form-unnamed-role-{mode}", full_page=True)
    peer_name.fill("peer")


def test_a_tester_submits_a_two_role_job_and_sees_its_hosts(page, alice, lab, debug):  # noqa: ANN001
    for host in (lab.h1, lab.h2):
        services.host_update(host=host, by="sam", labels=[*host.label_names, "bt", "chamber:a"])
    ap = f.host("ap1.lab", ["ap", "chamber:a"], worker=lab.w1)
    mode = "debug" if debug else "prod"
    sign_in(page, "alice", "alice-pass")
    page.goto("/suites/new/")
    mark_page(page)
    fill_two_roles(page)
    screenshot(page, f"multihost-form-{mode}", full_page=True)

    page.get_by_role("button", name="Submit suite").click()

    # The refusal names the role, on its row.
    named = page.locator(".role-row").nth(0).get_by_label("Role name")
    expect(named).to_have_attribute("aria-invalid", "true")
    expect(page.locator(".role-row").nth(0)).to_contain_text("Role dut needs 3 hosts")
    assert_not_reloaded(page)
    assert not Job.objects.exists()
    screenshot(page, f"multihost-form-refused-{mode}", full_page=True)
    page.set_viewport_size({"width": 420, "height": 900})  # a phone: role fields stack
    box = page.locator(".role-row").nth(0).get_by_label("Its own labels").bounding_box()
    assert box is not None and box["x"] + box["width"] <= 420
    screenshot(page, f"multihost-form-narrow-{mode}", full_page=True)
    page.set_viewport_size(VIEWPORT)

    page.locator(".role-row").nth(0).get_by_label("Hosts", exact=True).fill("2")
    refuse_an_unnamed_role(page, mode)
    page.get_by_role("button", name="Submit suite").click()
    expect(page).to_have_url(re.compile(r"/suites/\d+/$"))
    job = Job.objects.get()
    assert [r["name"] for r in job.roles] == ["dut", "peer"] and job.together_by == "chamber"

    # The scheduler holds a host for it while it waits: the queue says so.
    SchedulerTick.objects.create(started_at=timezone.now(), holds={str(ap.pk): job.pk})
    page.goto("/queue/")
    queued = page.locator(f"#queued-{job.pk}")
    expect(queued).to_contain_text("3 hosts: dut ×2 (bt), peer (ap)")
    expect(queued).to_contain_text("holding 1 host")
    screenshot(page, f"multihost-queue-{mode}")
    page.goto("/hosts/")
    expect(page.locator(f"#host-{ap.pk}")).to_contain_text(f"held for job {job.pk}")
    screenshot(page, f"multihost-hosts-held-{mode}", full_page=True)

    lease_hosts(job, [("dut", lab.h1), ("dut", lab.h2), ("peer", ap)])  # the tick's apply
    page.goto(f"/jobs/{job.pk}/")
    hosts = page.locator("#job-hosts li")
    expect(hosts).to_have_count(3)
    expect(hosts.nth(0)).to_contain_text("dut h1.lab")
    expect(hosts.nth(0)).to_contain_text("runs the job")
    expect(hosts.nth(2)).to_contain_text("peer ap1.lab")
    expect(page.locator("#job-roles")).to_contain_text("dut: 2 hosts")
    expect(page.locator("#attempt-1-title")).to_contain_text(
        "Attempt 1 on h1.lab (dut), h2.lab (dut), ap1.lab (peer)"
    )
    screenshot(page, f"multihost-job-{mode}", full_page=True)
