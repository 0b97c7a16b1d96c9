"""Provisioning as a person sees it in a browser: the dashboard card, a host's build and its
failed provisioning in the timeline, the hosts list."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from hosts.choices import EventKind, ProvisionResult
from hosts.models import Host, HostEvent, Provision
from tests.ui.browser.conftest import screenshot, sign_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_provisioning_shows_on_the_dashboard_the_host_page_and_the_hosts_list(page, sam, lab):
    now = timezone.now()
    Host.objects.filter(pk=lab.h1.pk).update(
        current_build="R121-15662.0.0", provisioned_at=now - timedelta(hours=2)
    )
    for i in range(6):
        Provision.objects.create(
            host=lab.h1, hostname="h1.lab", board="board:eve", build="R121-15662.0.0",
            result=ProvisionResult.OK, seconds=290 + 10 * i, created_at=now - timedelta(hours=i),
        )  # fmt: skip
    Provision.objects.create(
        host=lab.h2, hostname="h2.lab", board="board:eve", build="R121-15662.0.0",
        result=ProvisionResult.FAILED, lease_id=99, created_at=now,
    )  # fmt: skip
    HostEvent.objects.create(
        host=lab.h2, subject="h2.lab", kind=EventKind.PROVISIONED, actor="runner-1", lease_id=99,
        message="provisioning to R121-15662.0.0 failed\n[flash] writing 2.1 GiB...\n"
        "error: DUT did not come back after reboot (ssh timeout 300 s)",
    )  # fmt: skip

    sign_in(page, "sam", "sam-pass")
    card = page.locator("#provision-stats")
    expect(card).to_contain_text("Provisioning")
    expect(card).to_contain_text("7 in 24 h · 0.5 h spent · 1 failed")
    screenshot(page, "provisioning-dashboard", full_page=True)

    page.goto("/hosts/h2.lab/")
    failed = page.locator(".timeline li").first
    expect(failed.locator(".badge")).to_have_text("Provisioning failed")
    expect(failed.locator("pre")).to_contain_text("DUT did not come back after reboot")
    screenshot(page, "provisioning-failed-timeline", full_page=True)

    page.goto("/hosts/h1.lab/")
    expect(page.locator("#host-build")).to_contain_text("R121-15662.0.0 provisioned 2h")
    page.goto("/hosts/")
    row = page.locator(f"#host-{lab.h1.pk}")
    expect(row).to_contain_text("R121-15662.0.0 · provisioned 2h")
    screenshot(page, "provisioning-hosts")
