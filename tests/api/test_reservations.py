"""/api/reservations/: a tester reserves a host to debug on, at once or waiting in line."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from hosts.choices import EventKind as HostEventKind
from hosts.models import Host, HostEvent
from jobs import services
from jobs.models import Job, Lease, Reservation
from notifications import outbox as notifications_outbox
from notifications.models import Delivery, Event
from schedsite.errors import Conflict
from tests import factories as f
from tests.api.conftest import token_client
from tests.notifications.conftest import subscribe
from tests.threads import race

pytestmark = pytest.mark.django_db


@pytest.fixture
def eve_hosts(db):  # noqa: ANN001, ANN201
    """Two board:eve hosts, e1 and e2, free; one board:kip host, k1."""
    return (
        f.host("e1", ["board:eve", "pool:cq"]),
        f.host("e2", ["board:eve", "pool:cq"]),
        f.host("k1", ["board:kip"]),
    )


def reserve(client, **body):  # noqa: ANN001, ANN201
    body = {"duration": "2h", "reason": "debugging a flaky wifi test", **body}
    return client.post("/api/reservations/", body, format="json")


def take_eve(sam) -> list[Lease]:  # noqa: ANN001
    """Staff reserve every board:eve host: none is free for a tester."""
    return [
        services.lease_reserve(host=h, holder=sam, duration=timedelta(hours=1), reason="lab work")
        for h in Host.objects.filter(labels__name="board:eve").order_by("hostname")
    ]


# --- served at once ---------------------------------------------------------------------------


def test_a_tester_reserves_a_free_host_carrying_the_labels(alice, eve_hosts):
    response = reserve(token_client(alice), labels=["board:eve"])

    assert response.status_code == 201, response.json()
    body = response.json()
    assert body["status"] == "active" and body["owner"] == "alice"
    assert body["host"] in {"e1", "e2"} and body["labels"] == ["board:eve"]
    assert body["duration"] == 7200 and body["position"] is None and body["why"] == ""
    lease = Lease.objects.get(pk=body["lease"])
    assert lease.job_id is None and lease.holder == alice and lease.active
    assert abs(lease.expires_at - timezone.now() - timedelta(hours=2)) < timedelta(seconds=10)
    event = HostEvent.objects.get(host=lease.host, kind=HostEventKind.RESERVED)
    assert "debugging a flaky wifi test" in event.message


def test_a_tester_reserves_a_host_by_name(alice, eve_hosts):
    response = reserve(token_client(alice), host="k1", duration=5400)
    assert response.status_code == 201, response.json()
    assert response.json()["host"] == "k1" and response.json()["duration"] == 5400


def test_with_no_free_host_and_no_wait_it_is_a_409_that_writes_nothing(alice, sam, eve_hosts):
    take_eve(sam)
    response = reserve(token_client(alice), labels=["board:eve"])

    assert response.status_code == 409
    assert "none of the 2 hosts that fit" in response.json()["detail"]
    assert not Reservation.objects.exists()


# --- the waiting line -------------------------------------------------------------------------


def test_with_wait_it_queues_with_its_position_and_why(alice, bob, sam, eve_hosts):
    take_eve(sam)
    first = reserve(token_client(alice), labels=["board:eve"], wait=True)
    second = reserve(token_client(bob), labels=["pool:cq"], wait=True)

    assert first.status_code == 201, first.json()
    assert first.json()["status"] == "waiting" and first.json()["position"] == 1
    assert "none of the 2 hosts that fit" in first.json()["why"]
    assert "2 leased or reserved" in first.json()["why"]
    assert second.json()["position"] == 2
    listed = token_client(bob).get("/api/reservations/?status=waiting").json()["results"]
    assert [r["owner"] for r in listed] == ["bob", "alice"]


def test_the_tick_leases_the_next_free_host_to_the_line_in_order_and_notifies(
    alice, bob, sam, eve_hosts
):
    subscribe(alice, events=("reservation_ready",))
    held = take_eve(sam)
    alice_r = reserve(token_client(alice), labels=["board:eve"], wait=True).json()
    bob_r = reserve(token_client(bob), labels=["board:eve"], wait=True).json()
    services.reservation_end(lease=held[0], by=sam)

    summary = services.scheduler_tick(now=timezone.now())

    assert [lease.get("reservation") for lease in summary.leases] == [alice_r["id"]]
    got = token_client(alice).get(f"/api/reservations/{alice_r['id']}/").json()
    assert got["status"] == "active" and got["host"] == "e1"
    waiting = token_client(bob).get(f"/api/reservations/{bob_r['id']}/").json()
    assert waiting["status"] == "waiting" and waiting["position"] == 1
    # The outbox entry the tick wrote becomes one e-mail to alice.
    notifications_outbox.take()
    event = Event.objects.get(kind="reservation_ready")
    assert event.payload["reservation"]["host"] == "e1"
    assert list(Delivery.objects.values_list("user__username", "channel")) == [("alice", "email")]


def test_a_queued_job_of_a_higher_priority_takes_the_host_first(alice, sam, eve_hosts):
    held = take_eve(sam)
    mine = reserve(token_client(alice), labels=["board:eve"], wait=True).json()
    job = f.job("urgent", ["board:eve"], priority=70, owner=sam)
    services.reservation_end(lease=held[0], by=sam)

    services.scheduler_tick(now=timezone.now())

    job.refresh_from_db()
    assert job.status == "leased"
    assert Reservation.objects.get(pk=mine["id"]).status == "waiting"
    services.reservation_end(lease=held[1], by=sam)
    why = token_client(alice).get(f"/api/reservations/{mine['id']}/").json()["why"]
    assert "1 free host fit" in why
    services.scheduler_tick(now=timezone.now())
    assert Reservation.objects.get(pk=mine["id"]).status == "active"


def test_a_reservation_ahead_of_a_lower_priority_job_gets_the_host(alice, sam, eve_hosts):
    held = take_eve(sam)
    job = f.job("weekly", ["board:eve"], priority=10, owner=sam)
    mine = reserve(token_client(alice), labels=["board:eve"], wait=True, priority="cq").json()
    services.reservation_end(lease=held[0], by=sam)

    services.scheduler_tick(now=timezone.now())

    assert Reservation.objects.get(pk=mine["id"]).status == "active"
    assert Job.objects.get(pk=job.pk).status == "queued"


# --- extend, end early, expiry, staff ---------------------------------------------------------


def test_its_holder_extends_and_ends_it_early(alice, eve_hosts):
    client = token_client(alice)
    r = reserve(client, labels=["board:kip"], duration="1h").json()
    before = Lease.objects.get(pk=r["lease"]).expires_at

    extended = client.post(f"/api/reservations/{r['id']}/extend/", {"duration": 1800})
    assert extended.status_code == 200, extended.json()
    assert Lease.objects.get(pk=r["lease"]).expires_at == before + timedelta(minutes=30)

    ended = client.post(f"/api/reservations/{r['id']}/end/", {"reason": "found it"})
    assert ended.status_code == 200 and ended.json()["status"] == "ended"
    assert not Lease.objects.get(pk=r["lease"]).active
    assert token_client(alice).get("/api/hosts/k1/").json()["schedulable"] is True


def test_a_tester_extends_no_further_than_their_longest(alice, eve_hosts, settings):
    settings.RESERVATION_TESTER_MAX_SECONDS = 3 * 3600
    client = token_client(alice)
    r = reserve(client, labels=["board:kip"], duration="2h").json()
    response = client.post(f"/api/reservations/{r['id']}/extend/", {"duration": 7200})
    assert response.status_code == 400
    assert "at most 3h 00m from now" in response.json()["duration"][0]


def test_ending_a_waiting_reservation_takes_it_out_of_line(alice, bob, sam, eve_hosts):
    take_eve(sam)
    first = reserve(token_client(alice), labels=["board:eve"], wait=True).json()
    second = reserve(token_client(bob), labels=["board:eve"], wait=True).json()

    response = token_client(alice).post(f"/api/reservations/{first['id']}/end/", {})

    assert response.status_code == 200 and response.json()["status"] == "cancelled"
    assert token_client(bob).get(f"/api/reservations/{second['id']}/").json()["position"] == 1
    again = token_client(alice).post(f"/api/reservations/{first['id']}/end/", {})
    assert again.status_code == 409


def test_a_reservation_expires_and_its_host_is_free_again(alice, eve_hosts):
    r = reserve(token_client(alice), labels=["board:kip"], duration="1h").json()
    services.scheduler_tick(now=timezone.now() + timedelta(hours=1, minutes=1))

    lease = Lease.objects.get(pk=r["lease"])
    assert lease.release_reason == "expired"
    assert token_client(alice).get(f"/api/reservations/{r['id']}/").json()["status"] == "ended"


def test_staff_end_anyones_reservation_and_other_testers_may_not(alice, bob, sam, eve_hosts):
    r = reserve(token_client(alice), labels=["board:kip"]).json()

    refused = token_client(bob).post(f"/api/reservations/{r['id']}/end/", {})
    assert refused.status_code == 403
    refused = token_client(bob).post(f"/api/reservations/{r['id']}/extend/", {"duration": 60})
    assert refused.status_code == 403
    assert Lease.objects.get(pk=r["lease"]).active

    ended = token_client(sam).post(f"/api/reservations/{r['id']}/end/", {"reason": "lab needs it"})
    assert ended.status_code == 200 and ended.json()["status"] == "ended"
    assert Lease.objects.get(pk=r["lease"]).released_by == "sam"


def test_nobody_signed_in_may_reserve(eve_hosts):
    assert reserve(token_client(None), labels=["board:eve"]).status_code in (401, 403)
    assert not Reservation.objects.exists()


# --- limits and bad input ---------------------------------------------------------------------


def test_a_tester_holds_or_waits_for_at_most_the_limit(alice, sam, eve_hosts, settings):
    settings.RESERVATION_HOSTS_PER_TESTER = 2
    client = token_client(alice)
    assert reserve(client, labels=["board:eve"]).status_code == 201
    assert reserve(client, labels=["board:eve"]).status_code == 201

    third = reserve(client, labels=["board:kip"], wait=True)

    assert third.status_code == 409
    assert "RESERVATION_HOSTS_PER_TESTER = 2" in third.json()["detail"]
    assert Reservation.objects.count() == 2
    # Staff are not held to it.
    assert reserve(token_client(sam), labels=["board:kip"]).status_code == 201


def test_a_tester_reserves_no_longer_than_their_longest_but_staff_may(alice, sam, eve_hosts):
    response = reserve(token_client(alice), labels=["board:eve"], duration="1d")
    assert response.status_code == 400
    assert "at most 8h 00m" in response.json()["duration"][0]
    assert reserve(token_client(sam), labels=["board:eve"], duration="1d").status_code == 201


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"labels": []}, "labels"),
        ({"labels": ["board:eve"], "host": "e1"}, "host"),
        ({"labels": "board:eve"}, "labels"),
        ({"labels": ["board:eve"], "duration": "soon"}, "duration"),
        ({"labels": ["board:eve"], "duration": 0}, "duration"),
        ({"labels": ["board:eve"], "duration": "-1h"}, "duration"),
        ({"labels": ["board:eve"], "duration": True}, "duration"),
        ({"labels": ["board:eve"], "reason": ""}, "reason"),
        ({"labels": ["board:eve"], "wait": "yes"}, "wait"),
        ({"labels": ["board:eve"], "priority": 101}, "priority"),
        ({"labels": ["board:eve"], "priority": 80}, "priority"),  # above a tester's cap
        ({"host": "nope"}, "host"),
        ({"labels": ["board:nope"], "wait": True}, "labels"),
        ({"labels": ["bad label!"]}, "labels"),
    ],
)
def test_bad_requests_are_a_400_naming_the_field_and_write_nothing(alice, eve_hosts, body, field):
    response = reserve(token_client(alice), **body)
    assert response.status_code == 400, response.json()
    assert field in response.json(), response.json()
    assert not Reservation.objects.exists() and not Lease.objects.exists()


def test_a_request_no_host_fits_may_wait_when_allowed(alice, eve_hosts):
    response = reserve(token_client(alice), labels=["board:nope"], wait=True, allow_unmatched=True)
    assert response.status_code == 201
    assert response.json()["status"] == "waiting"
    assert response.json()["why"] == "no host in the lab fits (a host with board:nope)"


def test_a_filter_of_the_list_that_makes_no_sense_is_a_400(alice):
    assert token_client(alice).get("/api/reservations/?status=soon").status_code == 400
    assert token_client(alice).get("/api/reservations/?mine=perhaps").status_code == 400


# --- races --------------------------------------------------------------------------------------


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_two_testers_reserving_the_last_free_host_one_gets_it_the_other_409_or_waits(
    django_user_model,
):
    f.host("last", ["board:eve"])
    testers = [django_user_model.objects.create_user(name) for name in ("ann", "ben", "cat")]

    def ask(user, wait):  # noqa: ANN001, ANN202
        return lambda: services.reservation_request(
            owner=user, labels=["board:eve"], duration=timedelta(hours=1), reason="r", wait=wait
        )

    results = race(ask(testers[0], False), ask(testers[1], False), ask(testers[2], True))

    served = [r for r in results if isinstance(r, Reservation) and r.status == "active"]
    refused = [r for r in results if isinstance(r, Conflict)]
    waiting = [r for r in results if isinstance(r, Reservation) and r.status == "waiting"]
    assert len(served) == 1, results
    assert len(served) + len(refused) + len(waiting) == 3, results
    assert Lease.objects.filter(released_at__isnull=True).count() == 1
    assert Reservation.objects.filter(status="waiting").count() == len(waiting)
