"""The inventory pages in a real browser: add and edit a host, import a file, add a worker."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from hosts.models import Host, Worker
from tests.ui.browser.conftest import screenshot, sign_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def shot(page, name: str) -> None:  # noqa: ANN001
    screenshot(page, name, full_page=True)


def test_staff_add_a_host_with_label_suggestions_then_edit_it(page, sam, lab, debug):
    sign_in(page, "sam", "sam-pass")
    page.goto("/hosts/")
    page.get_by_role("link", name="Add host").click()
    expect(page.get_by_role("heading", name="Add a host", level=1)).to_be_visible()

    page.get_by_label("Hostname").fill("bad name")
    page.get_by_role("button", name="Add host").click()
    expect(page.locator(".field-error")).to_contain_text("Use letters")
    assert not Host.objects.filter(hostname="bad name").exists()

    page.get_by_label("Hostname").fill("h7.lab")
    page.get_by_label("Worker").select_option("w2")
    labels = page.get_by_role("textbox", name="Labels")
    labels.fill("boa")
    page.get_by_role("button", name="board:eve").click()  # a suggestion of the labels in use
    expect(labels).to_have_value("board:eve ")
    labels.press_sequentially("wifi")
    page.get_by_label("Build").fill("R120-1")
    if debug:
        shot(page, "host-add-form")
    page.get_by_role("button", name="Add host").click()

    expect(page.get_by_role("heading", name="h7.lab", level=1)).to_be_visible()
    expect(page.get_by_text("Added host h7.lab.")).to_be_visible()
    host = Host.objects.get(hostname="h7.lab")
    assert (host.worker.name, host.label_names) == ("w2", ["board:eve", "wifi"])

    page.get_by_role("link", name="Edit h7.lab").click()
    expect(page.get_by_role("textbox", name="Labels")).to_have_value("board:eve wifi")
    page.get_by_label("Build").fill("R121-2")
    if debug:
        shot(page, "host-edit-form")
    page.get_by_role("button", name="Save").click()
    expect(page.get_by_text("Saved host h7.lab.")).to_be_visible()
    expect(page.locator("#host-detail")).to_contain_text("R121-2")
    expect(page.locator("#host-detail")).to_contain_text("build R120-1 → R121-2")  # timeline


def test_staff_preview_an_import_fix_it_and_apply_it(page, sam, lab, debug):
    sign_in(page, "sam", "sam-pass")
    page.goto("/hosts/")
    page.get_by_role("link", name="Import").click()
    text = page.get_by_label("Or paste it")
    text.fill(
        "hostname,worker,labels,build\n"
        "h1.lab,w2,board:eve;pool:cq,\n"
        "h2.lab,w1,board:eve pool:bvt,\n"
        "h8.lab,w1,board:eve wifi,R1\n"
        "h9.lab,ghost,board:eve,\n"
    )
    page.get_by_role("button", name="Preview").click()
    preview = page.locator("#import-preview")
    expect(preview).to_contain_text("1 with errors")
    expect(page.locator(".import-error")).to_contain_text("unknown worker 'ghost'")
    expect(page.locator(".import-changed")).to_contain_text("worker w1 → w2")
    expect(page.locator(".import-unchanged")).to_contain_text("h2.lab")
    expect(page.get_by_role("button", name="Import 2 hosts")).to_have_count(0)
    if debug:
        shot(page, "host-import-preview-errors")
    assert not Host.objects.filter(hostname="h8.lab").exists()

    page.get_by_label("Or paste it").fill(
        "hostname,worker,labels,build\nh1.lab,w2,board:eve;pool:cq,\nh8.lab,w1,board:eve wifi,R1\n"
    )
    page.get_by_role("button", name="Preview").click()
    expect(preview).to_contain_text("1 new")
    if debug:
        shot(page, "host-import-preview")
        page.set_viewport_size({"width": 390, "height": 800})
        shot(page, "host-import-preview-390")
        page.set_viewport_size({"width": 1280, "height": 800})
    page.get_by_role("button", name="Import 2 hosts").click()
    expect(page.get_by_text("Imported 1 new and 1 changed hosts.")).to_be_visible()
    assert Host.objects.get(hostname="h1.lab").worker.name == "w2"
    assert Host.objects.get(hostname="h8.lab").label_names == ["board:eve", "wifi"]


def test_staff_add_a_worker_and_rename_it(page, sam, lab, debug):
    sign_in(page, "sam", "sam-pass")
    page.goto("/workers/")
    page.get_by_role("link", name="Add worker").click()
    page.get_by_label("Name").fill("rack9")
    page.get_by_role("button", name="Add worker").click()
    expect(page.get_by_role("heading", name="rack9", level=1)).to_be_visible()
    page.get_by_role("link", name="Edit rack9").click()
    page.get_by_role("textbox", name="New name").fill("w1")
    page.get_by_role("button", name="Save").click()
    expect(page.locator(".field-error")).to_contain_text("Worker w1 already exists")
    if debug:
        shot(page, "worker-rename-form")
    page.get_by_role("textbox", name="New name").fill("rack10")
    page.get_by_role("button", name="Save").click()
    expect(page.get_by_text("Restart its runner with --worker rack10")).to_be_visible()
    assert Worker.objects.filter(name="rack10").exists()


def test_a_tester_has_no_inventory_buttons_and_is_refused_the_pages(page, alice, lab, debug):
    sign_in(page, "alice", "alice-pass")
    page.goto("/hosts/")
    expect(page.get_by_role("link", name="CSV")).to_be_visible()  # export is for everyone
    expect(page.get_by_role("link", name="Add host")).to_have_count(0)
    expect(page.get_by_role("link", name="Import")).to_have_count(0)
    page.goto("/hosts/h1.lab/")
    expect(page.get_by_role("link", name="Edit h1.lab")).to_have_count(0)
    response = page.goto("/hosts/new/")
    assert response.status == 403
    expect(page.get_by_text("Only lab staff can add hosts.")).to_be_visible()


def test_the_hosts_list_on_a_phone(page, sam, lab):
    sign_in(page, "sam", "sam-pass")
    page.set_viewport_size({"width": 390, "height": 800})
    page.goto("/hosts/")
    expect(page.get_by_role("link", name="Add host")).to_be_visible()
    shot(page, "hosts-list-390")
    page.set_viewport_size({"width": 1280, "height": 800})
    page.reload()
    shot(page, "hosts-list")
