"""The hosts table's bulk bar beyond lock and unlock: verify, repair, add and remove labels."""

from __future__ import annotations

import pytest

from hosts import services as host_services
from hosts.choices import EventKind, HostStatus
from hosts.models import Host, HostEvent
from jobs.choices import JobKind
from jobs.models import Job
from tests.ui.conftest import HTMX

pytestmark = pytest.mark.django_db


def _labels(hostname: str) -> list[str]:
    return Host.objects.get(hostname=hostname).label_names


def test_staff_verify_the_ticked_hosts_and_a_host_that_needs_repair_is_reported(sam_client, lab):
    Host.objects.filter(pk=lab.h2.pk).update(status=HostStatus.NEEDS_REPAIR)
    response = sam_client.post(
        "/hosts/", {"action": "verify", "hosts": ["h1.lab", "h2.lab"]}, headers=HTMX
    )
    html = response.content.decode()
    assert response.status_code == 200
    assert "Verify queued for 1 host. 1 not changed: host h2.lab needs repair: use repair." in html
    assert "banner err" in html  # a host refused for a reason of its own is red
    verifies = Job.objects.filter(kind=JobKind.VERIFY)
    assert list(verifies.values_list("host__hostname", flat=True)) == ["h1.lab"]


def test_staff_send_the_ticked_hosts_to_repair(sam_client, lab):
    response = sam_client.post(
        "/hosts/", {"action": "repair", "hosts": ["h1.lab", "h3.lab"]}, headers=HTMX
    )
    assert response.status_code == 200
    assert '<p class="banner ok" role="status">Repair queued for 2 hosts.</p>' in (
        response.content.decode()
    )
    statuses = dict(Host.objects.values_list("hostname", "status"))
    assert statuses["h1.lab"] == statuses["h3.lab"] == HostStatus.NEEDS_REPAIR
    assert statuses["h2.lab"] == HostStatus.READY
    assert Job.objects.filter(kind=JobKind.REPAIR).count() == 2


def test_staff_add_a_label_to_the_ticked_hosts_each_audited(sam_client, lab):
    response = sam_client.post(
        "/hosts/",
        {"action": "label_add", "hosts": ["h1.lab", "h2.lab"], "labels": "rack:7 pool:cq"},
        headers=HTMX,
    )
    html = response.content.decode()
    assert response.status_code == 200
    assert "Labels added to 2 hosts." in html
    assert _labels("h1.lab") == ["board:eve", "pool:cq", "rack:7"]
    assert _labels("h2.lab") == ["board:eve", "pool:bvt", "pool:cq", "rack:7"]
    assert _labels("h3.lab") == ["board:kevin", "pool:cq"]
    event = HostEvent.objects.filter(host=lab.h1, kind=EventKind.UPDATED).get()
    assert event.actor == "sam"
    assert event.message == "labels board:eve, pool:cq → board:eve, pool:cq, rack:7"


def test_removing_a_label_a_host_lacks_is_neutral_news(sam_client, lab):
    response = sam_client.post(
        "/hosts/",
        {"action": "label_remove", "hosts": ["h1.lab", "h2.lab"], "labels": "pool:cq"},
        headers=HTMX,
    )
    html = response.content.decode()
    assert response.status_code == 200
    assert (
        '<p class="banner info" role="status">Labels removed from 1 host, 1 already without them.'
        in html
    )
    assert _labels("h1.lab") == ["board:eve"]
    assert _labels("h2.lab") == ["board:eve", "pool:bvt"]


@pytest.mark.parametrize("labels", ["", "bad label!"])
def test_a_missing_or_malformed_label_is_a_400_that_keeps_the_selection(sam_client, lab, labels):
    response = sam_client.post(
        "/hosts/",
        {"action": "label_add", "hosts": ["h1.lab"], "labels": labels},
        headers=HTMX,
    )
    html = response.content.decode()
    assert response.status_code == 400
    assert 'id="bulk-error"' in html
    assert _labels("h1.lab") == ["board:eve", "pool:cq"]


def test_a_retired_host_is_not_relabelled(sam_client, lab):
    host_services.host_lock(host=lab.h3, by="sam", reason="x")
    Host.objects.filter(pk=lab.h3.pk).update(status=HostStatus.RETIRED)
    response = sam_client.post(
        "/hosts/?status=retired",
        {"action": "label_add", "hosts": ["h3.lab"], "labels": "rack:1"},
        headers=HTMX,
    )
    assert response.status_code == 409
    assert "host h3.lab is retired: it is not edited" in response.content.decode()
    assert _labels("h3.lab") == ["board:kevin", "pool:cq"]


@pytest.mark.parametrize("action", ["verify", "repair", "label_add", "label_remove"])
def test_a_tester_is_refused_every_bulk_action(alice_client, lab, action):
    response = alice_client.post(
        "/hosts/", {"action": action, "hosts": ["h1.lab"], "labels": "pool:cq"}, headers=HTMX
    )
    assert response.status_code == 403
    assert _labels("h1.lab") == ["board:eve", "pool:cq"]
    assert not Job.objects.exists()


def test_the_bulk_bar_offers_the_new_actions_to_staff_only(sam_client, alice_client, lab):
    staff = sam_client.get("/hosts/").content.decode()
    for value in ("verify", "repair", "label_add", "label_remove"):
        assert f'name="action" value="{value}"' in staff
    assert 'name="action"' not in alice_client.get("/hosts/").content.decode()
