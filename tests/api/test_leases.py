"""/api/leases/: manual reservations, extend, release, heartbeat, and the lease filters."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from hosts.models import HostEvent
from jobs import services
from jobs.models import Lease
from tests import factories as f
from tests.api.conftest import active_lease

pytestmark = pytest.mark.django_db


def test_staff_reserves_a_free_host_for_a_duration(staff_client):
    f.host("h1.lab")
    response = staff_client.post(
        "/api/leases/", {"host": "h1.lab", "duration": 7200, "reason": "bisecting a kernel"}
    )

    assert response.status_code == 201, response.json()
    body = response.json()
    assert body["manual"] is True and body["active"] is True and body["job"] is None
    assert body["holder"] == "sam" and body["reason"] == "bisecting a kernel"
    lease = Lease.objects.get(pk=body["id"])
    assert abs((lease.expires_at - timezone.now()) - timedelta(hours=2)) < timedelta(seconds=5)
    host = staff_client.get("/api/hosts/h1.lab/").json()
    assert host["leased"] is True and host["schedulable"] is False


def test_reserving_a_leased_host_is_a_conflict(staff_client, lab):
    response = staff_client.post(
        "/api/leases/", {"host": lab.h1.hostname, "duration": 60, "reason": "mine now"}
    )
    assert response.status_code == 409
    assert "already leased" in response.json()["detail"]
    assert active_lease(lab.running).host == lab.h1


@pytest.mark.parametrize(
    ("payload", "field"),
    [
        ({"host": "free.lab", "duration": 60}, "reason"),
        ({"host": "free.lab", "duration": 0, "reason": "x"}, "duration"),
        ({"host": "free.lab", "duration": "soon", "reason": "x"}, "duration"),
        ({"host": "free.lab", "duration": 10**9, "reason": "x"}, "duration"),
        ({"host": "free.lab", "duration": 10**30, "reason": "x"}, "duration"),
        ({"host": "nope.lab", "duration": 60, "reason": "x"}, "host"),
    ],
)
def test_bad_reservations_are_a_400_naming_the_field(staff_client, lab, payload, field):
    response = staff_client.post("/api/leases/", payload)
    assert response.status_code == 400
    assert field in response.json()
    assert not Lease.objects.filter(host=lab.free).exists()


def test_staff_extends_a_reservation_but_not_a_jobs_lease(staff_client, lab):
    response = staff_client.post(f"/api/leases/{lab.reservation.pk}/extend/", {"duration": 86400})
    assert response.status_code == 200
    lab.reservation.refresh_from_db()
    assert lab.reservation.expires_at > timezone.now() + timedelta(hours=23)

    job_lease = active_lease(lab.running)
    response = staff_client.post(f"/api/leases/{job_lease.pk}/extend/", {"duration": 60})
    assert response.status_code == 409


def test_releasing_a_lease_twice_is_a_conflict(staff_client, lab):
    url = f"/api/leases/{lab.reservation.pk}/release/"
    first = staff_client.post(url, {"reason": "done debugging"})
    assert first.status_code == 200
    assert first.json()["active"] is False and first.json()["released_by"] == "sam"
    assert staff_client.post(url).status_code == 409
    assert (
        staff_client.post(f"/api/leases/{lab.reservation.pk}/extend/", {"duration": 60}).status_code
        == 409
    )


def test_a_heartbeat_extends_a_job_lease_and_marks_the_worker_seen(runner_client, lab, settings):
    settings.LEASE_TTL = 3000
    lease = active_lease(lab.running)
    response = runner_client.post(f"/api/leases/{lease.pk}/heartbeat/")
    assert response.status_code == 200
    lease.refresh_from_db()
    assert lease.expires_at > timezone.now() + timedelta(seconds=2900)


def test_a_heartbeat_on_a_released_lease_or_a_reservation_is_a_conflict(staff_client, lab):
    lease = active_lease(lab.leased)
    staff_client.post(f"/api/leases/{lease.pk}/release/")
    response = staff_client.post(f"/api/leases/{lease.pk}/heartbeat/")
    assert response.status_code == 409
    assert "no longer active" in response.json()["detail"]
    # A heartbeat would cut a reservation down to the lease TTL.
    response = staff_client.post(f"/api/leases/{lab.reservation.pk}/heartbeat/")
    assert response.status_code == 409
    assert "manual reservation" in response.json()["detail"]


def test_a_runner_cannot_heartbeat_another_workers_lease(runner_client, lab):
    lease = active_lease(lab.other)
    before = lease.expires_at
    assert runner_client.post(f"/api/leases/{lease.pk}/heartbeat/").status_code == 403
    lease.refresh_from_db()
    assert lease.expires_at == before


def test_leases_filter_by_active_worker_host_job_and_manual(staff_client, lab):
    staff_client.post(f"/api/leases/{active_lease(lab.leased).pk}/release/")

    def ids(query: str) -> set[int]:
        response = staff_client.get(f"/api/leases/?{query}")
        assert response.status_code == 200, response.json()
        return {row["id"] for row in response.json()["results"]}

    everything = set(Lease.objects.values_list("id", flat=True))
    active = set(Lease.objects.filter(released_at=None).values_list("id", flat=True))
    assert ids("") == everything
    assert ids("active=true") == active and ids("active=false") == everything - active
    assert ids("worker=w1&active=true") == {active_lease(lab.running).pk}
    assert ids("host=reserved.lab") == {lab.reservation.pk}
    assert ids("manual=true") == {lab.reservation.pk}
    assert ids(f"job={lab.leased.pk}") == set(
        Lease.objects.filter(job=lab.leased).values_list("id", flat=True)
    )
    assert staff_client.get("/api/leases/?job=abc").status_code == 400


def test_a_lease_says_whether_its_host_failed_under_its_job(staff_client, lab):
    lease = active_lease(lab.running)
    staff_client.post(
        f"/api/jobs/{lab.running.pk}/complete/",
        {"result": "failed", "host_ok": False, "lease": lease.pk},
        format="json",
    )
    other = active_lease(lab.leased)

    broken = staff_client.get(f"/api/leases/{lease.pk}/").json()
    fine = staff_client.get(f"/api/leases/{other.pk}/").json()

    assert (broken["release_reason"], broken["host_failed"]) == ("completed", True)
    assert (fine["release_reason"], fine["host_failed"]) == ("", False)


def test_the_holder_of_a_reservation_extends_it_and_another_tester_may_not(
    alice_client, bob_client, lab, alice, settings
):
    settings.MAX_RESERVATION_SECONDS = 6 * 3600
    lease = services.lease_reserve(
        host=lab.free, holder=alice, duration=timedelta(hours=1), reason="bisecting"
    )
    url = f"/api/leases/{lease.pk}/extend/"
    assert bob_client.post(url, {"duration": 3600}).status_code == 403
    response = alice_client.post(url, {"duration": 3600})
    assert response.status_code == 200
    lease.refresh_from_db()
    assert timedelta(minutes=119) < lease.expires_at - timezone.now() <= timedelta(hours=2)
    too_far = alice_client.post(url, {"duration": 5 * 3600})
    assert too_far.status_code == 400 and "at most 6h 00m from now" in str(too_far.json())


def test_the_holder_of_a_reservation_ends_it_and_another_tester_may_not(
    alice_client, bob_client, lab, alice
):
    lease = services.lease_reserve(
        host=lab.free, holder=alice, duration=timedelta(hours=1), reason="bisecting"
    )
    url = f"/api/leases/{lease.pk}/end/"
    assert bob_client.post(url, {"reason": "mine now"}).status_code == 403
    assert Lease.objects.get(pk=lease.pk).released_at is None

    response = alice_client.post(url, {"reason": "bisect done"})

    assert response.status_code == 200
    body = response.json()
    assert body["active"] is False and body["release_reason"] == "released"
    assert alice_client.post(url).status_code == 409  # already ended
    event = HostEvent.objects.filter(lease_id=lease.pk).latest("id")
    assert (event.actor, event.message) == ("alice", "bisect done")


def test_a_jobs_lease_is_not_ended_as_a_reservation(staff_client, lab):
    lease = Lease.objects.get(job=lab.running, released_at__isnull=True)
    response = staff_client.post(f"/api/leases/{lease.pk}/end/")
    assert response.status_code == 409
    assert "release a job's lease" in response.json()["detail"]


@pytest.mark.parametrize("action", ["extend", "end"])
def test_a_tester_on_someone_elses_jobs_lease_is_refused_with_403(bob_client, lab, action):
    lease = active_lease(lab.running)  # alice's job
    response = bob_client.post(f"/api/leases/{lease.pk}/{action}/", {"duration": 3600})
    assert response.status_code == 403, response.json()
    assert Lease.objects.get(pk=lease.pk).released_at is None


@pytest.mark.parametrize("action", ["extend", "end", "release", "heartbeat"])
def test_a_runner_on_a_staff_reservation_on_its_workers_host_is_refused_with_403(
    runner_client, lab, sam, action
):
    host = f.host("h9.lab", ["board:x"], worker=lab.w1)  # runner-1's worker
    lease = services.lease_reserve(
        host=host, holder=sam, duration=timedelta(hours=1), reason="debug"
    )
    response = runner_client.post(
        f"/api/leases/{lease.pk}/{action}/", {"duration": 3600, "requeue": True}, format="json"
    )
    assert response.status_code == 403, response.json()
    lease.refresh_from_db()
    assert lease.released_at is None and lease.heartbeat_at is None


@pytest.mark.parametrize("action", ["extend", "end"])
def test_the_owner_of_a_job_is_told_its_lease_is_no_reservation(alice_client, lab, action):
    lease = active_lease(lab.running)
    response = alice_client.post(f"/api/leases/{lease.pk}/{action}/", {"duration": 3600})
    assert response.status_code == 409, response.json()
