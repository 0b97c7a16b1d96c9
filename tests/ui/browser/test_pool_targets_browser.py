"""The pool targets pages in a real browser (docs/ui.md#pool-targets): staff add a target with
a refusal next to its field, see the pool short with its warning, the balancer's swaps and
members, change and delete it; a tester is refused."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from hosts.choices import HostStatus
from hosts.models import Host, PoolTarget
from jobs.services import balancer
from tests import factories as f
from tests.ui.browser.conftest import assert_not_reloaded, mark_page, screenshot, sign_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def set_status(hostname: str, status: str) -> None:
    Host.objects.filter(hostname=hostname).update(status=status)


@pytest.fixture
def cq(db):  # noqa: ANN001, ANN201
    """pool:cq: cq1 ready, cq2 (eve) repair_failed, cq3 (kevin) needs repair; sp1 an eve spare."""
    w = f.worker("w1")
    for name, labels in [
        ("cq1", ["board:eve", "pool:cq"]),
        ("cq2", ["board:eve", "pool:cq"]),
        ("cq3", ["board:kevin", "pool:cq"]),
        ("sp1", ["board:eve", "pool:spare"]),
    ]:
        f.host(name, labels, worker=w)
    set_status("cq2", HostStatus.REPAIR_FAILED)
    set_status("cq3", HostStatus.NEEDS_REPAIR)


def test_staff_add_a_pool_target_and_see_it_short_with_its_warning(page, sam, cq):  # noqa: ANN001
    sign_in(page, "sam", "sam-pass")

    nav = page.get_by_role("navigation", name="Main")
    nav.get_by_text("Lab setup").click()
    nav.get_by_role("link", name="Pool targets").click()
    expect(page.get_by_role("heading", name="Pool targets", level=1)).to_be_visible()
    mark_page(page)
    form = page.locator("#pool-form")
    form.get_by_label("Pool label").fill("pool:cq")
    form.get_by_label("Spare label").fill("pool:cq")
    form.get_by_label("Hosts in service, at least").fill("3")
    form.get_by_role("button", name="Add target").click()
    expect(page.locator("#id_spare-error")).to_contain_text("Spare: must differ from pool")
    expect(page.get_by_label("Spare label")).to_have_value("pool:cq")  # what was typed stays
    assert not PoolTarget.objects.exists()
    screenshot(page, "pool-targets-refused", full_page=True)

    page.get_by_label("Spare label").fill("pool:spare")
    page.locator("#pool-form").get_by_role("button", name="Add target").click()
    expect(page.locator("#toast")).to_contain_text("Added the pool target for pool:cq")
    assert_not_reloaded(page)
    target = PoolTarget.objects.get()
    row = page.locator(f"#pool-{target.pk}")
    expect(row).to_contain_text("1 of 3 hosts")
    expect(row).to_contain_text("2 short")
    expect(row).to_contain_text("1 swap due")
    expect(row).to_contain_text(
        "Cannot be met: no ready spare pool:spare with board:kevin to replace cq3"
    )
    screenshot(page, "pool-targets-list", full_page=True)


def test_staff_see_a_pools_members_and_swaps_then_change_and_delete_it(page, sam, cq):  # noqa: ANN001
    target = balancer.pool_target_create(
        by="sam", pool="pool:cq", spare="pool:spare", min_ready=3, same=["board"]
    )
    balancer.pools_balance()  # as its periodic task does: sp1 in for cq2
    sign_in(page, "sam", "sam-pass")
    page.goto("/pool-targets/")
    page.locator(f"#pool-{target.pk}").get_by_role("link", name="pool:cq").click()
    expect(page.get_by_role("heading", name="pool:cq", level=1)).to_be_visible()
    now = page.locator("#balancer-now")
    expect(now).to_contain_text(
        "Cannot be met: no ready spare pool:spare with board:kevin to replace cq3"
    )
    members = page.get_by_role("table", name="Hosts carrying pool:cq")
    expect(members.get_by_role("link")).to_have_text(["cq1", "cq3", "sp1"])
    swaps = page.get_by_role("table", name="The balancer's last swaps of pool:cq")
    expect(swaps).to_contain_text("labels pool:spare → pool:cq: swapped in for cq2")
    expect(swaps).to_contain_text("labels pool:cq → pool:spare: swapped out for sp1")
    screenshot(page, "pool-target-detail", full_page=True)

    page.get_by_role("link", name="Change").click()
    page.get_by_label("Hosts in service, at least").fill("-2")
    page.get_by_role("button", name="Save").click()
    expect(page.locator("#id_min_ready-error")).to_contain_text("a whole number from 0 to")
    page.get_by_label("Hosts in service, at least").fill("2")
    page.get_by_role("button", name="Save").click()
    expect(page.get_by_role("heading", name="pool:cq", level=1)).to_be_visible()
    expect(page.locator("main")).to_contain_text("2 of 2 wanted in service")
    assert PoolTarget.objects.get().min_ready == 2

    page.once("dialog", lambda dialog: dialog.accept())
    page.get_by_role("button", name="Delete").click()
    expect(page.get_by_role("heading", name="Pool targets", level=1)).to_be_visible()
    expect(page.locator("main")).to_contain_text("No pool target")
    assert not PoolTarget.objects.exists()


def test_a_tester_is_refused_the_pool_targets_page(page, alice):  # noqa: ANN001
    sign_in(page, "alice", "alice-pass")
    expect(page.get_by_role("navigation", name="Main")).not_to_contain_text("Pool targets")
    response = page.goto("/pool-targets/")
    assert response.status == 403
    expect(page.locator("main")).to_contain_text("Only lab staff can see pool targets.")
    screenshot(page, "pool-targets-tester-refused")
