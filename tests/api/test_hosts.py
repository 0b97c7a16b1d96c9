"""/api/hosts/: inventory writes, lock/unlock/release, filters and the host's detail."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from hosts import services as host_services
from hosts.models import Host, HostEvent
from jobs import services
from jobs.models import Job, Lease
from tests import factories as f

pytestmark = pytest.mark.django_db


def test_staff_adds_a_host_with_labels_on_a_worker(staff_client):
    f.worker("w1")
    response = staff_client.post(
        "/api/hosts/",
        {
            "hostname": "chromeos1-row1-host1.lab",
            "worker": "w1",
            "labels": ["pool:cq", "board:eve", "board:eve"],
            "current_build": "R120",
        },
    )

    assert response.status_code == 201, response.json()
    body = response.json()
    assert body["hostname"] == "chromeos1-row1-host1.lab"
    assert body["labels"] == ["board:eve", "pool:cq"]
    assert body["worker"] == "w1" and body["status"] == "ready"
    assert body["schedulable"] is True and body["lease"] is None
    assert body["recent_events"][0]["kind"] == "created"
    assert body["recent_events"][0]["actor"] == "sam"


@pytest.mark.parametrize(
    ("payload", "field"),
    [
        ({"hostname": "has space"}, "hostname"),
        ({"hostname": "-leading-dash"}, "hostname"),
        ({"hostname": "h1", "labels": ["no spaces allowed"]}, "labels"),
        ({"hostname": "h1", "labels": "board:x"}, "labels"),
        ({"hostname": "h1", "status": "broken"}, "status"),
        ({"hostname": "h1", "worker": "nope"}, "worker"),
        ({"hostname": "x" * 256}, "hostname"),
        ({}, "hostname"),
    ],
)
def test_bad_host_input_is_a_400_naming_the_field(staff_client, payload, field):
    response = staff_client.post("/api/hosts/", payload)
    assert response.status_code == 400
    assert field in response.json()
    assert not Host.objects.exists()


def test_a_duplicate_hostname_is_a_conflict(staff_client):
    f.host("h1.lab")
    response = staff_client.post("/api/hosts/", {"hostname": "h1.lab"})
    assert response.status_code == 409
    assert "already exists" in response.json()["detail"]


def test_a_hostname_with_dots_addresses_the_host(staff_client):
    f.host("chromeos2-row3-host4.cros.lab")
    response = staff_client.get("/api/hosts/chromeos2-row3-host4.cros.lab/")
    assert response.status_code == 200
    assert response.json()["hostname"] == "chromeos2-row3-host4.cros.lab"
    assert staff_client.get("/api/hosts/chromeos2-row3-host4/").status_code == 404


def test_staff_changes_labels_status_worker_and_build_and_each_is_audited(staff_client):
    f.worker("w1")
    f.host("h1", ["board:x"])

    response = staff_client.patch(
        "/api/hosts/h1/",
        {
            "labels": ["board:y", "pool:cq"],
            "status": "needs_repair",
            "worker": "w1",
            "current_build": "R121",
        },
    )

    assert response.status_code == 200, response.json()
    body = response.json()
    assert body["labels"] == ["board:y", "pool:cq"]
    assert (body["status"], body["worker"], body["current_build"]) == (
        "needs_repair",
        "w1",
        "R121",
    )
    kinds = [e["kind"] for e in body["recent_events"]]
    assert kinds[:2] == ["status", "updated"]
    assert staff_client.patch("/api/hosts/h1/", {"worker": None}).json()["worker"] is None


def test_put_is_not_offered_patch_is(staff_client):
    f.host("h1")
    assert staff_client.put("/api/hosts/h1/", {"labels": []}).status_code == 405


def test_lock_needs_a_reason_and_locking_a_locked_host_is_a_conflict(staff_client):
    f.host("h1")
    assert staff_client.post("/api/hosts/h1/lock/", {}).status_code == 400

    response = staff_client.post("/api/hosts/h1/lock/", {"reason": "flaky USB hub"})
    assert response.status_code == 200
    body = response.json()
    assert body["locked"] is True and body["lock_reason"] == "flaky USB hub"
    assert body["locked_by"] == "sam" and body["schedulable"] is False

    again = staff_client.post("/api/hosts/h1/lock/", {"reason": "again"})
    assert again.status_code == 409
    assert Host.objects.get(hostname="h1").lock_reason == "flaky USB hub"


def test_unlock_frees_the_host_and_unlocking_an_unlocked_host_is_a_conflict(staff_client, sam):
    host_services.host_lock(host=f.host("h1"), by=sam, reason="debugging")
    response = staff_client.post("/api/hosts/h1/unlock/")
    assert response.status_code == 200 and response.json()["locked"] is False
    assert staff_client.post("/api/hosts/h1/unlock/").status_code == 409


def test_releasing_a_hosts_lease_requeues_its_job_by_default(staff_client, lab):
    response = staff_client.post(f"/api/hosts/{lab.h2.hostname}/release/", {"reason": "stuck"})

    assert response.status_code == 200, response.json()
    assert response.json()["active"] is False
    assert response.json()["release_reason"] == "released"
    lab.leased.refresh_from_db()
    assert lab.leased.status == "queued"


def test_releasing_with_requeue_false_aborts_the_job(staff_client, lab):
    response = staff_client.post(f"/api/hosts/{lab.h1.hostname}/release/", {"requeue": False})
    assert response.status_code == 200
    lab.running.refresh_from_db()
    assert lab.running.status == "aborted"


def test_releasing_a_host_without_a_lease_is_a_conflict(staff_client):
    f.host("h1")
    response = staff_client.post("/api/hosts/h1/release/")
    assert response.status_code == 409
    assert "no active lease" in response.json()["detail"]


def test_a_leased_or_pinned_host_cannot_be_deleted_a_free_one_can(staff_client, lab):
    assert staff_client.delete(f"/api/hosts/{lab.h1.hostname}/").status_code == 409
    f.job("pinned", ["board:z"], host=lab.free)
    assert staff_client.delete("/api/hosts/free.lab/").status_code == 409
    f.host("spare")
    assert staff_client.delete("/api/hosts/spare/").status_code == 204
    assert not Host.objects.filter(hostname="spare").exists()


def test_the_host_detail_shows_its_active_lease_and_twenty_newest_events(staff_client, lab, sam):
    for i in range(25):
        HostEvent.objects.create(host=lab.h1, kind="updated", actor="sam", message=f"e{i}")

    body = staff_client.get(f"/api/hosts/{lab.h1.hostname}/").json()

    assert body["leased"] is True
    assert body["lease"]["job"] == lab.running.pk
    assert body["lease"]["job_name"] == lab.running.name
    assert len(body["recent_events"]) == 20
    assert body["recent_events"][0]["message"] == "e24"
    events = staff_client.get(f"/api/hosts/{lab.h1.hostname}/events/?page_size=10").json()
    assert events["count"] == HostEvent.objects.filter(host=lab.h1).count()
    assert len(events["results"]) == 10


def hostnames(client, query: str) -> list[str]:  # noqa: ANN001
    response = client.get(f"/api/hosts/?{query}")
    assert response.status_code == 200, response.json()
    return [h["hostname"] for h in response.json()["results"]]


def test_hosts_filter_by_every_label_given_and_by_status_locked_leased_worker_q(staff_client, sam):
    w1 = f.worker("w1")
    f.host("eve1", ["board:eve", "pool:cq"], worker=w1)
    f.host("eve2", ["board:eve"], build="R120")
    host_services.host_lock(host=f.host("kevin1", ["board:kevin", "pool:cq"]), by=sam, reason="x")
    broken = f.host("broken", ["board:eve"], status="needs_repair")
    # Waiting out its repair backoff, so the tick below leaves it in needs_repair.
    type(broken).objects.filter(pk=broken.pk).update(
        repair_not_before=timezone.now() + timedelta(hours=1)
    )
    f.job("J", ["board:eve", "pool:cq"])
    services.scheduler_tick()

    assert hostnames(staff_client, "label=board:eve") == ["broken", "eve1", "eve2"]
    assert hostnames(staff_client, "label=board:eve&label=pool:cq") == ["eve1"]
    assert hostnames(staff_client, "status=needs_repair") == ["broken"]
    assert hostnames(staff_client, "status=ready&status=needs_repair&locked=true") == ["kevin1"]
    assert hostnames(staff_client, "leased=true") == ["eve1"]
    assert hostnames(staff_client, "leased=false&label=board:eve") == ["broken", "eve2"]
    assert hostnames(staff_client, "worker=w1") == ["eve1"]
    assert hostnames(staff_client, "q=r120") == ["eve2"]


def test_a_bad_status_or_boolean_filter_is_a_400_naming_the_parameter(staff_client):
    f.host("h1")
    response = staff_client.get("/api/hosts/?status=melted")
    assert response.status_code == 400
    assert "status" in response.json()
    response = staff_client.get("/api/hosts/?locked=perhaps")
    assert response.status_code == 400
    assert response.json()["locked"] == ["'perhaps' is not true or false."]
    assert hostnames(staff_client, "locked=0&leased=no") == ["h1"]


def test_an_unknown_host_is_a_404_for_reads_and_actions(staff_client):
    assert staff_client.get("/api/hosts/nope.lab/").status_code == 404
    assert staff_client.post("/api/hosts/nope.lab/lock/", {"reason": "x"}).status_code == 404
    assert staff_client.patch("/api/hosts/nope.lab/", {"labels": []}).status_code == 404


def test_a_locked_hosts_job_lease_stays_and_release_by_host_hits_the_right_lease(
    staff_client, lab, sam
):
    # Locking a leased host takes it out of scheduling but leaves the running job alone.
    host_services.host_lock(host=lab.h1, by=sam, reason="watch it")
    assert Lease.objects.filter(host=lab.h1, released_at=None).exists()
    staff_client.post(f"/api/hosts/{lab.h1.hostname}/release/")
    assert Job.objects.get(pk=lab.running.pk).status == "queued"
    assert Job.objects.get(pk=lab.leased.pk).status == "leased"


def test_a_patch_with_a_stale_version_is_a_conflict_and_changes_nothing(staff_client):
    f.host("h1", ["board:x"])
    version = staff_client.get("/api/hosts/h1/").json()["inventory_version"]
    fresh = staff_client.patch("/api/hosts/h1/", {"labels": ["board:y"], "version": version})
    assert fresh.status_code == 200
    stale = staff_client.patch("/api/hosts/h1/", {"labels": ["board:z"], "version": version})
    assert stale.status_code == 409
    assert "changed by someone else" in stale.json()["detail"]
    assert staff_client.get("/api/hosts/h1/").json()["labels"] == ["board:y"]
