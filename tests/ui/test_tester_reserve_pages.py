"""A tester reserves from a host's page ("Reserve this host") and a label's page ("Reserve the
next free one"), through the reservations path and within a tester's limits."""

from __future__ import annotations

from datetime import timedelta

import pytest

from hosts.models import Host
from jobs import services
from jobs.models import Reservation
from tests.ui.conftest import HTMX

pytestmark = pytest.mark.django_db


def host_reserve_form(html: str) -> str:
    """The host page's "Reserve this host" form, or "" when the page has none."""
    if 'id="host-tester-reserve"' not in html:
        return ""
    return html.split('id="host-tester-reserve"')[1].split("</form>")[0]


def reserve_from_host(client, hostname: str, **data):  # noqa: ANN001, ANN201
    body = {"fragment": "host", "host": hostname, "minutes": 60, "reason": "wifi flake"}
    return client.post("/reservations/", {**body, **data}, headers=HTMX)


# --- a host's page ----------------------------------------------------------------------------


def test_a_testers_host_page_offers_reserve_this_host_within_her_longest(
    lab, alice_client, settings
):
    settings.RESERVATION_TESTER_MAX_SECONDS = 8 * 3600
    form = host_reserve_form(alice_client.get("/hosts/h1.lab/").content.decode())
    assert 'action="/reservations/"' in form and 'name="host" value="h1.lab"' in form
    assert ">Reserve this host</button>" in form and 'name="wait" value="0"' in form
    offered = [option.split(">")[1] for option in form.split("<option")[1:]]
    assert offered[-1] == "8 hours</option" and "1 day</option" not in offered


def test_staff_keep_their_own_reserve_form_and_get_no_testers_one(lab, sam_client):
    html = sam_client.get("/hosts/h1.lab/").content.decode()
    assert "Reserve it for manual work" in html and host_reserve_form(html) == ""


def test_a_tester_reserves_a_free_host_from_its_page(lab, alice, alice_client):
    response = reserve_from_host(alice_client, "h1.lab")
    html = response.content.decode()
    assert response.status_code == 200
    assert html.lstrip().startswith('<div id="host-detail"')
    assert "Reserved h1.lab until" in html
    reservation = Reservation.objects.get()
    assert (reservation.owner, reservation.status) == (alice, "active")
    assert reservation.lease.host == lab.h1 and reservation.reason == "wifi flake"
    # Hers now: the page offers extend and end instead of reserving it again.
    assert "End reservation" in html and host_reserve_form(html) == ""


def test_a_busy_host_is_waited_for_in_line_from_its_page(lab, alice, sam, alice_client):
    services.lease_reserve(host=lab.h1, holder=sam, duration=timedelta(hours=1), reason="lab")
    form = host_reserve_form(alice_client.get("/hosts/h1.lab/").content.decode())
    assert ">Reserve this host when it frees</button>" in form and 'value="1"' in form
    response = reserve_from_host(alice_client, "h1.lab", wait="1")
    assert response.status_code == 200
    html = response.content.decode()
    assert "you wait in line" in html
    reservation = Reservation.objects.get()
    assert (reservation.status, reservation.host, reservation.lease) == ("waiting", lab.h1, None)
    # The page says so, and offers no second place in line.
    assert f"You wait in line for it: reservation {reservation.pk}, place 1" in html
    assert host_reserve_form(html) == ""


def test_a_refused_reservation_says_why_by_the_form_and_keeps_what_was_typed(
    lab, alice, alice_client, settings
):
    settings.RESERVATION_HOSTS_PER_TESTER = 1
    services.reservation_request(
        owner=alice, host=lab.h3, duration=timedelta(hours=1), reason="mine"
    )
    response = reserve_from_host(alice_client, "h1.lab", reason="second one")
    form = host_reserve_form(response.content.decode())
    assert response.status_code == 409
    error = form.split('id="tester-reserve-error"')[1].split("</p>")[0]
    assert "You hold or wait for 1 reservation, the most a tester may" in error
    assert 'value="second one"' in form
    assert Reservation.objects.count() == 1

    no_reason = reserve_from_host(alice_client, "h1.lab", reason="")
    assert no_reason.status_code == 400
    assert "A reason is required" in host_reserve_form(no_reason.content.decode())


def test_a_retired_hosts_page_offers_a_tester_no_reserve_and_no_lock(lab, sam, alice_client):
    services.lease_reserve(host=lab.h1, holder=sam, duration=timedelta(hours=1), reason="x")
    services.lease_release(lease=lab.h1.leases.get(), by=sam)
    services.host_delete(host=lab.h1, by=sam)  # a host with history is retired, not deleted
    assert Host.objects.get(pk=lab.h1.pk).status == "retired"
    html = alice_client.get("/hosts/h1.lab/").content.decode()
    assert "the host is retired" in html
    assert host_reserve_form(html) == "" and "Reserve this host" not in html
    assert "Lock it for debugging" not in html


# --- a label's page ---------------------------------------------------------------------------


def label_card(html: str) -> str:
    return html.split('id="label-reserve"')[1].split("</section>")[0]


def reserve_from_label(client, label: str, **data):  # noqa: ANN001, ANN201
    body = {"fragment": "label", "labels": label, "minutes": 60, "reason": "bisecting"}
    return client.post("/reservations/", {**body, **data}, headers=HTMX)


def test_a_label_page_offers_reserve_the_next_free_one(lab, alice_client):
    card = label_card(alice_client.get("/labels/board:eve/").content.decode())
    assert 'action="/reservations/"' in card and 'name="labels" value="board:eve"' in card
    assert ">Reserve a host</button>" in card
    assert (
        '<button class="btn" type="submit" name="wait" value="1">Reserve the next free one' in card
    )


def test_from_a_label_page_a_tester_takes_a_free_host_then_waits_for_the_next(
    lab, alice, sam, alice_client
):
    services.lease_reserve(host=lab.h2, holder=sam, duration=timedelta(hours=1), reason="lab")
    now = reserve_from_label(alice_client, "board:eve", wait="0")
    assert now.status_code == 200
    held = label_card(now.content.decode())
    assert 'Holds</span> <a href="/hosts/h1.lab/">h1.lab</a>' in held
    assert "Reserved h1.lab until" in now.content.decode()  # the toast

    later = reserve_from_label(alice_client, "board:eve", wait="1")
    card = label_card(later.content.decode())
    waiting = Reservation.objects.get(status="waiting")
    assert f"Reservation {waiting.pk} is place 1 in line: none of the 2 hosts that fit" in card
    assert waiting.labels == ["board:eve"] and waiting.owner == alice


def test_from_a_label_page_no_free_host_without_waiting_is_said_in_the_card(lab, sam, alice_client):
    for host in (lab.h1, lab.h2):
        services.lease_reserve(host=host, holder=sam, duration=timedelta(hours=1), reason="lab")
    response = reserve_from_label(alice_client, "board:eve", wait="0")
    assert response.status_code == 409
    error = label_card(response.content.decode()).split('id="label-reserve-error"')[1]
    assert "No free host you may take" in error and 'value="bisecting"' in label_card(
        response.content.decode()
    )
    assert not Reservation.objects.exists()


def test_without_javascript_a_label_reservation_returns_to_the_label_page(lab, alice_client):
    body = {"fragment": "label", "labels": "board:kevin", "minutes": 60, "reason": "x", "wait": "0"}
    response = alice_client.post("/reservations/", body, follow=True)
    assert response.redirect_chain[-1][0] == "/labels/board:kevin/"
    assert "Reserved h3.lab until" in response.content.decode()
