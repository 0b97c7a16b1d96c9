"""Staff health actions on /api/hosts/ (repair, verify) and the health policies endpoint."""

from __future__ import annotations

import pytest
from django.utils import timezone

from hosts.choices import HostStatus
from hosts.models import Host, HostEvent
from jobs import services
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
