"""The inventory pages: staff add, edit, import and export hosts and add or rename workers.

Testers get no buttons and a 403; a refused form shows its errors and changes nothing.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.core import signing
from django.core.files.uploadedfile import SimpleUploadedFile

from hosts.models import Host, HostEvent, Worker
from jobs import host_inventory as inventory
from jobs import services as job_services
from tests.hosts.test_inventory_services import rows

pytestmark = pytest.mark.django_db

STAFF_PAGES = [
    ("get", "/hosts/new/"),
    ("post", "/hosts/new/"),
    ("get", "/hosts/h1.lab/edit/"),
    ("post", "/hosts/h1.lab/edit/"),
    ("get", "/workers/new/"),
    ("post", "/workers/new/"),
    ("get", "/workers/w1/rename/"),
    ("post", "/workers/w1/rename/"),
    ("get", "/hosts/import/"),
    ("post", "/hosts/import/"),
]


@pytest.mark.parametrize(("method", "url"), STAFF_PAGES)
def test_a_tester_is_refused_every_inventory_page(alice_client, lab, method, url):
    before = rows()
    data = {"hostname": "x1", "name": "w9", "text": "hostname\nx1\n", "labels": "a"}
    response = getattr(alice_client, method)(url, data if method == "post" else None)
    assert response.status_code == 403
    assert "Only lab staff" in response.content.decode()
    assert rows() == before


def test_a_tester_sees_no_inventory_buttons_but_can_export(alice_client, lab):
    hosts = alice_client.get("/hosts/").content.decode()
    assert "/hosts/new/" not in hosts and "/hosts/import/" not in hosts
    assert "/hosts/export.csv" in hosts
    assert "/hosts/h1.lab/edit/" not in alice_client.get("/hosts/h1.lab/").content.decode()
    assert "/workers/new/" not in alice_client.get("/workers/").content.decode()
    assert "/rename/" not in alice_client.get("/workers/w1/").content.decode()
    assert alice_client.get("/hosts/export.csv").status_code == 200


def test_staff_see_the_inventory_links(sam_client, lab):
    hosts = sam_client.get("/hosts/").content.decode()
    assert "/hosts/new/" in hosts and "/hosts/import/" in hosts
    assert "/hosts/h1.lab/edit/" in sam_client.get("/hosts/h1.lab/").content.decode()
    assert "/workers/new/" in sam_client.get("/workers/").content.decode()
    assert "/workers/w1/rename/" in sam_client.get("/workers/w1/").content.decode()


# --- add and edit ---------------------------------------------------------------------------


def test_staff_add_a_host_and_land_on_its_page(sam_client, lab):
    response = sam_client.post(
        "/hosts/new/",
        {"hostname": "h7.lab", "worker": "w2", "labels": "board:eve  wifi", "current_build": "R5"},
        follow=True,
    )
    assert response.redirect_chain[-1][0] == "/hosts/h7.lab/"
    assert "Added host h7.lab." in response.content.decode()
    host = Host.objects.get(hostname="h7.lab")
    assert (host.worker.name, host.label_names, host.current_build) == (
        "w2",
        ["board:eve", "wifi"],
        "R5",
    )
    assert HostEvent.objects.filter(host=host, kind="created", actor="sam").exists()


@pytest.mark.parametrize(
    ("data", "error"),
    [
        ({"hostname": "h1.lab"}, "Host h1.lab already exists"),
        ({"hostname": "bad name"}, "Use letters"),
        ({"hostname": ""}, "Use letters"),
        ({"hostname": "h8", "labels": "ok bad,"}, None),  # a comma separates: both fine
        ({"hostname": "h8", "labels": "b@d"}, "Labels &#x27;b@d&#x27;: Use letters"),
        ({"hostname": "h8", "worker": "ghost"}, "Select a valid choice"),
    ],
)
def test_a_bad_new_host_shows_the_error_on_the_form(sam_client, lab, data, error):
    before = rows()
    response = sam_client.post("/hosts/new/", data)
    if error is None:
        assert response.status_code == 302
        return
    assert response.status_code in (400, 409)
    assert error in response.content.decode()
    assert 'aria-invalid="true"' in response.content.decode()
    assert rows() == before


def test_staff_edit_a_host_and_the_event_has_old_and_new(sam_client, lab):
    page = sam_client.get("/hosts/h1.lab/edit/").content.decode()
    version = inventory.inventory_version(lab.h1)
    assert f'value="{version}"' in page and 'value="board:eve pool:cq"' in page
    response = sam_client.post(
        "/hosts/h1.lab/edit/",
        {"version": version, "worker": "w2", "labels": "board:eve", "current_build": "R7"},
    )
    assert response.status_code == 302 and response["Location"] == "/hosts/h1.lab/"
    event = HostEvent.objects.get(host=lab.h1, kind="updated")
    assert (
        event.message == "labels board:eve, pool:cq → board:eve; worker w1 → w2; build (none) → R7"
    )


def test_an_edit_over_someone_elses_change_is_refused(sam_client, lab):
    version = inventory.inventory_version(lab.h1)
    sam_client.post(
        "/hosts/h1.lab/edit/", {"version": version, "worker": "w1", "labels": "pool:cq"}
    )
    before = rows()
    response = sam_client.post(
        "/hosts/h1.lab/edit/", {"version": version, "worker": "w1", "labels": "board:x"}
    )
    assert response.status_code == 409
    assert "changed by someone else" in response.content.decode()
    assert 'value="board:x"' in response.content.decode()  # what they typed is kept
    assert rows() == before


# --- workers --------------------------------------------------------------------------------


def test_staff_add_and_rename_a_worker(sam_client, lab):
    response = sam_client.post("/workers/new/", {"name": "rack9"})
    assert response["Location"] == "/workers/rack9/"
    response = sam_client.post("/workers/rack9/rename/", {"name": "rack10"}, follow=True)
    assert response.redirect_chain[-1][0] == "/workers/rack10/"
    assert "Restart its runner with --worker rack10" in response.content.decode()
    worker = Worker.objects.get(name="rack10")
    assert HostEvent.objects.get(worker=worker, kind="updated").message == "renamed rack9 → rack10"


@pytest.mark.parametrize(("name", "error"), [("w2", "Worker w2 already exists"), ("a b", "Use")])
def test_a_rename_to_a_bad_or_used_name_is_refused(sam_client, lab, name, error):
    before = rows()
    response = sam_client.post("/workers/w1/rename/", {"name": name})
    assert response.status_code in (400, 409)
    assert error in response.content.decode()
    assert rows() == before


# --- import and export ----------------------------------------------------------------------

CSV = "hostname,worker,labels,build\nh1.lab,w2,board:eve;pool:cq,\nh4.lab,w1,board:eve,R1\n"


def preview(client, text: str, **extra: str):  # noqa: ANN001, ANN201
    return client.post("/hosts/import/", {"text": text, "format": "auto", **extra})


def payload_of(html: str) -> str:
    return html.split('name="payload" value="')[1].split('"')[0]


def test_the_preview_shows_each_row_and_saves_nothing(sam_client, lab):
    before = rows()
    response = preview(sam_client, CSV)
    html = response.content.decode()
    assert response.status_code == 200
    assert "1 new" in html and "1 changed" in html and "worker w1 → w2" in html
    assert "Import 2 hosts" in html
    assert rows() == before


def test_applying_the_preview_imports_it(sam_client, lab):
    payload = payload_of(preview(sam_client, CSV).content.decode())
    response = sam_client.post("/hosts/import/", {"payload": payload}, follow=True)
    assert "Imported 1 new and 1 changed hosts." in response.content.decode()
    assert Host.objects.get(hostname="h1.lab").worker.name == "w2"
    assert Host.objects.get(hostname="h4.lab").label_names == ["board:eve"]


def test_a_preview_with_errors_offers_no_import(sam_client, lab):
    response = preview(sam_client, CSV + "h5.lab,ghost,,\n")
    html = response.content.decode()
    assert response.status_code == 400
    assert "unknown worker &#x27;ghost&#x27;" in html and "1 with errors" in html
    assert 'name="payload"' not in html


def test_a_tampered_preview_is_refused(sam_client, lab):
    payload = payload_of(preview(sam_client, CSV).content.decode())
    data = signing.loads(payload, salt="hosts.import")
    data["entries"][0]["labels"] = ["evil"]
    forged = signing.dumps(data, salt="wrong", compress=True)
    before = rows()
    response = sam_client.post("/hosts/import/", {"payload": forged})
    assert response.status_code == 400 and "altered" in response.content.decode()
    assert rows() == before


def test_a_preview_overtaken_by_an_edit_is_shown_again(sam_client, lab):
    payload = payload_of(preview(sam_client, CSV).content.decode())
    inventory.host_edit(
        host=lab.h1,
        by="bob",
        version=inventory.inventory_version(lab.h1),
        labels=["board:eve"],
        worker=lab.w1,
        current_build="",
    )
    before = rows()
    response = sam_client.post("/hosts/import/", {"payload": payload})
    html = response.content.decode()
    assert response.status_code == 409 and "changed since the preview" in html
    assert "labels board:eve → board:eve, pool:cq" in html  # the new preview
    assert rows() == before


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("", "Choose a file or paste the hosts"),
        ("hostname,colour\nh1,red\n", "unknown column colour"),
        ("hosts: [unclosed", "not valid YAML"),
        ("just words", "hosts: list"),
    ],
)
def test_an_unreadable_file_is_refused_on_the_form(sam_client, lab, text, error):
    response = preview(sam_client, text)
    assert response.status_code == 400
    assert error in response.content.decode()


def test_an_uploaded_yaml_file_is_previewed(sam_client, lab):
    upload = SimpleUploadedFile("lab.yaml", b"hosts:\n- {hostname: h4.lab, worker: w1}\n")
    response = sam_client.post("/hosts/import/", {"file": upload, "format": "auto"})
    assert "(YAML)" in response.content.decode() and "1 new" in response.content.decode()


@pytest.mark.parametrize("fmt", ["csv", "yaml"])
def test_the_export_honours_the_filters_and_imports_back_unchanged(sam_client, lab, fmt):
    response = sam_client.get(f"/hosts/export.{fmt}?label=pool:cq")
    assert response["Content-Disposition"] == f'attachment; filename="hosts.{fmt}"'
    text = response.content.decode()
    assert "h1.lab" in text and "h3.lab" in text and "h2.lab" not in text
    html = preview(sam_client, text, format=fmt).content.decode()
    assert "2 unchanged" in html and "0 new" in html and "0 changed" in html
    assert "Nothing to import" in html


def test_a_bad_export_filter_is_a_400(sam_client, lab):
    assert sam_client.get("/hosts/export.csv?status=sleepy").status_code == 400


def test_an_empty_post_says_what_is_missing(sam_client, lab):
    response = sam_client.post("/hosts/new/", {})
    assert response.status_code == 400
    assert "Hostname &#x27;&#x27;: Use letters" in response.content.decode()
    response = sam_client.post("/workers/new/", {})
    assert (
        response.status_code == 400
        and "Name &#x27;&#x27;: Use letters" in response.content.decode()
    )


def test_the_export_links_follow_the_hosts_list_filters(alice_client, lab):
    html = alice_client.get("/hosts/?label=pool:cq", headers={"HX-Request": "true"}).content
    assert b'href="/hosts/export.yaml?label=pool%3Acq"' in html


def test_the_edit_page_of_a_leased_host_says_the_lease_carries_on(sam_client, lab):
    job_services.lease_reserve(
        host=lab.h1, holder="alice", duration=timedelta(hours=1), reason="debugging"
    )
    html = sam_client.get("/hosts/h1.lab/edit/").content.decode()
    assert "It keeps its lease: new labels count from the host" in html
