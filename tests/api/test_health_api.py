"""Staff health actions on /api/hosts/ (repair, verify) and the health policies endpoint."""

from __future__ import annotations

import pytest
from django.utils import timezone

from hosts import services as host_services
from hosts.choices import HostStatus
from hosts.models import HealthPolicy, Host, HostEvent, Worker
from jobs import services
from jobs import services as job_services
from jobs.choices import JobKind, JobStatus
from jobs.models import Job, Lease
from tests import factories as f

pytestmark = pytest.mark.django_db


def broken(hostname: str = "dut1", status: str = HostStatus.REPAIR_FAILED) -> Host:
    """A host on an online worker in `status`, after three failed repairs."""
    host = f.host(hostname, ["board:eve"], worker=f.worker(f"w-{hostname}"))
    Host.objects.filter(pk=host.pk).update(
        status=status, repair_attempts=3, repair_not_before=timezone.now()
    )
    host.refresh_from_db()
    return host


def with_history(host: Host) -> Host:
    """The host after staff sent it to repair: it has a past, so a delete retires it."""
    return job_services.host_set_status(host=host, status=HostStatus.NEEDS_REPAIR, by="sam")


def leased_kinds(host: Host) -> list[str]:
    return list(Lease.objects.active().filter(host=host).values_list("job__kind", flat=True))


# --- repair now -----------------------------------------------------------------------------


def test_repair_now_resets_the_count_and_the_next_tick_leases_a_repair(staff_client):
    host = broken()

    response = staff_client.post("/api/hosts/dut1/repair/")

    assert response.status_code == 200, response.json()
    body = response.json()
    assert body["status"] == "needs_repair"
    assert body["repair_attempts"] == 0 and body["repair_not_before"] is None
    assert body["recent_events"][0]["actor"] == "sam"
    moved = HostEvent.objects.get(host=host, kind="status")
    assert (moved.old_status, moved.new_status) == ("repair_failed", "needs_repair")
    services.scheduler_tick(now=timezone.now())
    host.refresh_from_db()
    assert host.status == HostStatus.REPAIRING
    assert leased_kinds(host) == [JobKind.REPAIR]


def test_repair_now_on_a_host_already_waiting_for_repair_queues_no_second_job(staff_client):
    host = broken(status=HostStatus.NEEDS_REPAIR)

    assert staff_client.post("/api/hosts/dut1/repair/").status_code == 200
    assert staff_client.post("/api/hosts/dut1/repair/").status_code == 200

    assert Job.objects.filter(host=host, kind=JobKind.REPAIR).count() == 1
    assert not HostEvent.objects.filter(host=host, kind="status").exists()


def test_repair_now_drops_a_queued_verify_for_the_repair(staff_client):
    host = broken(status=HostStatus.READY)
    assert staff_client.post("/api/hosts/dut1/verify/").status_code == 200

    assert staff_client.post("/api/hosts/dut1/repair/").status_code == 200
    services.scheduler_tick(now=timezone.now())

    assert leased_kinds(host) == [JobKind.REPAIR]
    verify = Job.objects.get(host=host, kind=JobKind.VERIFY)
    assert verify.status == JobStatus.ABORTED


# --- verify now -----------------------------------------------------------------------------


def test_verify_now_queues_a_verify_that_the_next_tick_leases(staff_client):
    host = broken(status=HostStatus.READY)

    response = staff_client.post("/api/hosts/dut1/verify/")

    assert response.status_code == 200, response.json()
    assert response.json()["status"] == "ready"
    assert "last_verified_at" in response.json()
    services.scheduler_tick(now=timezone.now())
    host.refresh_from_db()
    assert host.status == HostStatus.VERIFYING
    assert leased_kinds(host) == [JobKind.VERIFY]


@pytest.mark.parametrize(
    ("action", "status", "words"),
    [
        ("repair", HostStatus.REPAIRING, "being repaired already"),
        ("repair", HostStatus.RETIRED, "retired"),
        ("verify", HostStatus.NEEDS_REPAIR, "needs repair: use repair"),
        ("verify", HostStatus.REPAIR_FAILED, "needs repair: use repair"),
        ("verify", HostStatus.REPAIRING, "being repaired"),
        ("verify", HostStatus.VERIFYING, "verified already"),
        ("verify", HostStatus.RETIRED, "retired"),
    ],
)
def test_a_staff_action_is_refused_for_a_host_in_the_wrong_status(
    staff_client, action, status, words
):
    broken(status=status)

    response = staff_client.post(f"/api/hosts/dut1/{action}/")

    assert response.status_code == 409
    assert words in str(response.json())
    assert not Job.objects.exists()


def test_verify_now_twice_is_refused_the_second_time(staff_client):
    host = broken(status=HostStatus.NEEDS_VERIFY)

    assert staff_client.post("/api/hosts/dut1/verify/").status_code == 200
    response = staff_client.post("/api/hosts/dut1/verify/")

    assert response.status_code == 409
    assert "maintenance job already" in str(response.json())
    assert Job.objects.filter(host=host).count() == 1


@pytest.mark.parametrize("action", ["repair", "verify"])
def test_only_staff_may_repair_or_verify(alice_client, anon_client, staff_client, action):
    broken(status=HostStatus.READY)

    assert alice_client.post(f"/api/hosts/dut1/{action}/").status_code == 403
    assert anon_client.post(f"/api/hosts/dut1/{action}/").status_code in (401, 403)
    assert staff_client.post(f"/api/hosts/nope/{action}/").status_code == 404
    assert not Job.objects.exists()


# --- retire, don't delete -------------------------------------------------------------------


def test_deleting_a_host_with_history_retires_it_and_hides_it_from_the_list(staff_client):
    host = with_history(broken(status=HostStatus.READY))
    f.host("spare")

    response = staff_client.delete("/api/hosts/dut1/")

    assert response.status_code == 200, response.json()
    assert response.json()["status"] == "retired"
    assert response.json()["schedulable"] is False
    assert response.json()["recent_events"][0]["kind"] == "retired"
    listed = [h["hostname"] for h in staff_client.get("/api/hosts/").json()["results"]]
    assert listed == ["spare"]
    shown = staff_client.get("/api/hosts/?status=retired").json()["results"]
    assert [h["hostname"] for h in shown] == ["dut1"]
    assert staff_client.get("/api/hosts/dut1/").status_code == 200
    services.scheduler_tick(now=timezone.now())
    assert not Job.objects.filter(host=host).exists()
    assert staff_client.delete("/api/hosts/dut1/").status_code == 409


def test_deleting_a_host_with_nothing_but_its_creation_removes_it(staff_client):
    f.host("fresh")
    assert staff_client.delete("/api/hosts/fresh/").status_code == 204
    assert staff_client.get("/api/hosts/?status=retired").json()["results"] == []
    assert HostEvent.objects.get(kind="deleted").subject == "fresh"


def test_a_retired_host_drops_its_queued_verify_at_the_next_tick(staff_client):
    host = broken(status=HostStatus.READY)
    staff_client.post("/api/hosts/dut1/verify/")

    assert staff_client.delete("/api/hosts/dut1/").status_code == 200
    services.scheduler_tick(now=timezone.now())

    assert Job.objects.get(host=host).status == JobStatus.ABORTED
    assert Host.objects.get(pk=host.pk).status == HostStatus.RETIRED


def test_deleting_a_worker_retires_it_once_its_hosts_are_retired(staff_client):
    with_history(broken(status=HostStatus.READY))  # on worker w-dut1
    f.worker("idle")

    refused = staff_client.delete("/api/workers/w-dut1/")
    assert refused.status_code == 409
    assert "retire or move its hosts first" in str(refused.json())
    assert staff_client.delete("/api/hosts/dut1/").status_code == 200
    response = staff_client.delete("/api/workers/w-dut1/")

    assert response.status_code == 200
    assert response.json()["retired_at"] is not None
    names = [w["name"] for w in staff_client.get("/api/workers/").json()["results"]]
    assert names == ["idle"]
    shown = staff_client.get("/api/workers/?retired=true").json()["results"]
    assert [w["name"] for w in shown] == ["w-dut1"]


def test_a_retired_workers_heartbeat_is_refused_and_leaves_it_as_it_was(staff_client):
    worker = host_services.worker_pause(worker=f.worker("old-rack"), by="sam", reason="moved")
    host_services.worker_delete(worker=worker, by="sam")  # it has a past: retired, kept
    before = Worker.objects.get(pk=worker.pk).last_seen

    response = staff_client.post("/api/workers/old-rack/heartbeat/")

    assert response.status_code == 409
    assert "worker old-rack is retired" in str(response.json())
    assert Worker.objects.get(pk=worker.pk).last_seen == before


# --- health policies ------------------------------------------------------------------------

POLICY = {"name": "eve daily", "labels": ["board:eve"], "every_hours": 24, "every_jobs": 50}


def test_staff_add_a_policy_and_everyone_reads_it(staff_client, alice_client):
    response = staff_client.post("/api/health-policies/", POLICY, format="json")

    assert response.status_code == 201, response.json()
    body = response.json()
    assert {k: body[k] for k in POLICY} == POLICY and body["enabled"] is True
    assert HealthPolicy.objects.get().label_key == ",board:eve,"
    listed = alice_client.get("/api/health-policies/").json()["results"]
    assert [p["name"] for p in listed] == ["eve daily"]
    assert alice_client.get(f"/api/health-policies/{body['id']}/").status_code == 200


def test_a_tester_may_not_change_policies(alice_client, staff_client):
    assert alice_client.post("/api/health-policies/", POLICY, format="json").status_code == 403
    policy_id = staff_client.post("/api/health-policies/", POLICY, format="json").json()["id"]
    url = f"/api/health-policies/{policy_id}/"
    assert alice_client.patch(url, {"enabled": False}, format="json").status_code == 403
    assert alice_client.delete(url).status_code == 403
    assert staff_client.get("/api/health-policies/999/").status_code == 404
    assert HealthPolicy.objects.get().enabled is True


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"labels": ["no spaces allowed"]}, "labels"),
        ({"every_jobs": 0}, "every_jobs"),
        ({"every_hours": -1}, "every_hours"),
        ({"name": ""}, "name"),
    ],
)
def test_a_bad_policy_is_a_400_naming_the_field(staff_client, change, field):
    response = staff_client.post("/api/health-policies/", {**POLICY, **change}, format="json")
    assert response.status_code == 400
    assert field in response.json()
    assert not HealthPolicy.objects.exists()


def test_staff_change_only_what_they_send_and_delete_a_policy(staff_client):
    policy_id = staff_client.post("/api/health-policies/", POLICY, format="json").json()["id"]
    url = f"/api/health-policies/{policy_id}/"

    response = staff_client.patch(url, {"enabled": False, "labels": []}, format="json")

    assert response.status_code == 200, response.json()
    assert response.json()["enabled"] is False and response.json()["labels"] == []
    assert response.json()["every_hours"] == 24
    assert staff_client.patch(url, {"every_jobs": 0}, format="json").status_code == 400
    taken = staff_client.post("/api/health-policies/", POLICY, format="json")
    assert taken.status_code == 409
    assert staff_client.delete(url).status_code == 204
    assert not HealthPolicy.objects.exists()


def test_a_policy_gives_a_new_matching_host_a_verify_at_the_next_tick(staff_client):
    staff_client.post("/api/health-policies/", POLICY, format="json")
    eve = f.host("eve1", ["board:eve"], worker=f.worker("w1"))
    other = f.host("kukui1", ["board:kukui"], worker=f.worker("w2"))

    services.scheduler_tick(now=timezone.now())

    assert leased_kinds(eve) == [JobKind.VERIFY]
    assert Host.objects.get(pk=eve.pk).status == HostStatus.VERIFYING
    assert leased_kinds(other) == []


def test_a_retired_host_gets_no_verify_from_a_policy(staff_client):
    staff_client.post("/api/health-policies/", {**POLICY, "labels": []}, format="json")
    host = with_history(broken(status=HostStatus.READY))
    assert staff_client.delete("/api/hosts/dut1/").status_code == 200

    services.scheduler_tick(now=timezone.now())

    assert not Job.objects.filter(host=host).exists()
