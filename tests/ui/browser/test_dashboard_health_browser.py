"""The dashboard tells lab staff which hosts need a person, and draws the lab's capacity."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from hosts.choices import HostStatus
from hosts.models import Worker
from jobs import services
from jobs import services as job_services
from tests import factories as f
from tests.ui.browser.conftest import VIEWPORT, screenshot, sign_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def a_lab_losing_hosts(sam) -> list:  # noqa: ANN001
    """Twelve hosts over half an hour of ticks: some go to repair, two give up."""
    worker = f.worker("rack-1")
    hosts = [f.host(f"dut{i}", ["board:eve"], worker=worker) for i in range(1, 13)]
    start = timezone.now() - timedelta(minutes=30)
    broken = {6: (hosts[3], HostStatus.NEEDS_REPAIR), 12: (hosts[8], HostStatus.NEEDS_VERIFY)}
    broken |= {18: (hosts[11], HostStatus.REPAIR_FAILED), 24: (hosts[3], HostStatus.REPAIR_FAILED)}
    for minute in range(0, 31, 3):
        if minute in broken:
            host, status = broken[minute]
            job_services.host_set_status(host=host, status=status, by=sam)
        Worker.objects.update(last_seen=start + timedelta(minutes=minute))
        services.scheduler_tick(now=start + timedelta(minutes=minute))
    Worker.objects.update(last_seen=timezone.now())
    services.scheduler_tick()
    return hosts


@pytest.mark.parametrize("debug", [True, False], ids=["DEBUG=1", "DEBUG=0"])
def test_staff_see_who_failed_repair_and_the_capacity_chart(page, sam, settings, debug):  # noqa: ANN001
    settings.DEBUG = debug  # pytest-django forces it off; the live server reads it per request
    hosts = a_lab_losing_hosts(sam)
    sign_in(page, "sam", "sam-pass")

    callout = page.locator("#repair-failed-callout")
    # Staff set them repair_failed by hand, so each has its automatic repair ahead of it.
    expect(callout).to_have_text(
        re.compile(
            r"2 hosts failed repair: dut4, dut12 — they need a person; "
            r"next automatic try at \d{4}-\d\d-\d\d \d\d:\d\d UTC\."
        ),
        use_inner_text=True,
    )
    expect(callout).to_be_visible()
    chart = page.locator("figure.chart", has=page.locator("#chart-capacity-title"))
    expect(chart.locator("svg.chart-svg path.line")).to_have_count(3)
    expect(chart.locator(".legend li")).to_have_text(["Free", "In maintenance", "Failed"])
    expect(chart.locator(".chart-now")).to_have_text("9 free now")
    # The legend fits its card: four charts share the row of a 1280-pixel window.
    assert chart.evaluate("fig => fig.scrollWidth <= fig.clientWidth")
    screenshot(page, f"dashboard-health-debug{int(debug)}")
    # At phone width the call-out wraps instead of widening the page.
    page.set_viewport_size({"width": 390, "height": 844})
    assert page.evaluate("document.documentElement.scrollWidth - window.innerWidth") <= 0
    screenshot(page, f"dashboard-health-narrow-debug{int(debug)}")
    page.set_viewport_size(VIEWPORT)

    # The call-out leads to the hosts list, filtered to those hosts.
    callout.get_by_role("link", name="2 hosts failed repair").click()
    expect(page).to_have_url(f"{page.url.split('/hosts/')[0]}/hosts/?status=repair_failed")
    expect(page.get_by_role("link", name="dut4", exact=True)).to_be_visible()
    expect(page.get_by_role("link", name="dut12", exact=True)).to_be_visible()
    expect(page.get_by_role("link", name="dut1", exact=True)).to_have_count(0)

    # Once staff send both back to repair, the live dashboard drops the call-out by itself.
    page.goto("/")
    expect(callout).to_be_visible()
    for host in (hosts[3], hosts[11]):
        job_services.host_set_status(host=host, status=HostStatus.NEEDS_REPAIR, by=sam)
    expect(callout).to_have_count(0)
    expect(page.locator(".banner.err")).to_have_count(0)
    expect(chart.locator("svg.chart-svg path.line")).to_have_count(3)
