"""Provisioning through the API (docs/api.md#provisioning): a lease says which build its host
must get first, `start` with a `build` records it on the host, and a provisioning that failed
before the start is recorded as such; bad input changes nothing."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from hosts import services as host_services
from hosts.choices import EventKind, HostStatus, ProvisionResult
from hosts.models import Host, HostEvent, Provision
from jobs import services
from jobs.models import Job, Lease
from tests import factories as f
from tests.multihost import attempt, lease_hosts, multihost_job, role

pytestmark = pytest.mark.django_db


@pytest.fixture
def rack(sam, runner_user):  # noqa: ANN001, ANN201
    """Worker w1 (runner-1's) with eve1 on R119 and eve2 on R121, both board:eve."""
    w1 = f.worker("w1")
    host_services.worker_update(worker=w1, by=sam, runner=runner_user)
    f.host("eve1", ["board:eve", "pool:cq"], worker=w1, build="R119")
    f.host("eve2", ["board:eve"], worker=w1, build="R121")
    return w1


def leased(job: Job) -> Lease:
    return Lease.objects.active().get(job=job)


def suite_job(build: str, *, pinned: str) -> Job:
    """alice's one-job suite of `build`, its job pinned to a host, one retry."""
    spec = services.JobSpec(
        name="login", labels=["board:eve"], host=Host.objects.get(hostname=pinned), max_retries=1
    )
    suite = services.suite_submit(owner="alice", name=f"nightly {build}", jobs=[spec], build=build)
    return suite.jobs.get()


def test_a_lease_says_to_provision_only_when_the_hosts_build_differs(rack):
    on_r119 = suite_job("R121", pinned="eve1")
    on_r121 = suite_job("R121", pinned="eve2")
    f.tick(timezone.now(), rack)
    assert leased(on_r119).provision_to == "R121"
    assert leased(on_r121).provision_to == ""


def test_a_job_without_a_build_never_provisions(rack):
    job = suite_job("", pinned="eve1")
    f.tick(timezone.now(), rack)
    assert leased(job).provision_to == ""


def test_a_standalone_jobs_own_build_is_what_its_host_gets(rack, alice_client):
    body = {"name": "solo", "labels": ["board:eve"], "host": "eve1", "build": "R200"}
    response = alice_client.post("/api/jobs/", body, format="json")
    assert response.status_code == 201, response.json()
    assert response.json()["build"] == "R200"
    job = Job.objects.get(pk=response.json()["id"])
    f.tick(timezone.now(), rack)
    assert leased(job).provision_to == "R200"


def test_a_suites_job_takes_no_build_of_its_own(alice_client):
    body = {
        "name": "s",
        "build": "R121",
        "jobs": [{"name": "t", "labels": ["board:eve"], "build": "R1"}],
        "allow_unmatched": True,
    }
    response = alice_client.post("/api/suites/", body, format="json")
    assert response.status_code == 400
    assert "build" in str(response.json()["jobs"])  # the job's field, unknown to a suite's job
    assert not Job.objects.exists()


def test_the_runner_sees_provision_to_in_its_leases_and_the_job_its_build(rack, runner_client):
    job = suite_job("R121", pinned="eve1")
    f.tick(timezone.now(), rack)
    (row,) = runner_client.get("/api/workers/w1/leases/").json()["results"]
    assert row["provision_to"] == "R121" and row["job"]["build"] == "R121"
    assert row["hosts"] == [
        {"role": "", "hostname": "eve1", "lease": leased(job).pk, "provision_to": "R121"}
    ]
    lease = runner_client.get(f"/api/leases/{leased(job).pk}/").json()
    assert lease["provision_to"] == "R121"


def test_a_lease_with_nothing_to_provision_shows_null(rack, runner_client):
    suite_job("R121", pinned="eve2")
    f.tick(timezone.now(), rack)
    (row,) = runner_client.get("/api/workers/w1/leases/").json()["results"]
    assert row["provision_to"] is None and row["hosts"][0]["provision_to"] is None


def start(client, job: Job, **body: object):  # noqa: ANN001, ANN201
    return client.post(
        f"/api/jobs/{job.pk}/start/", {"lease": leased(job).pk, **body}, format="json"
    )


def test_start_with_a_build_puts_it_on_the_host_with_an_event_and_a_provision(rack, runner_client):
    job = suite_job("R121", pinned="eve1")
    f.tick(timezone.now(), rack)
    lease = leased(job)

    response = start(runner_client, job, build="R121", provision_seconds=303)

    assert response.status_code == 200, response.json()
    assert response.json()["status"] == "running"
    host = Host.objects.get(hostname="eve1")
    assert host.current_build == "R121" and host.provisioned_at is not None
    (row,) = Provision.objects.all()
    assert (row.hostname, row.board, row.build, row.from_build, row.result, row.seconds) == (
        "eve1", "board:eve", "R121", "R119", ProvisionResult.OK, 303.0,
    )  # fmt: skip
    assert (row.lease_id, row.job_id, row.host_id) == (lease.pk, job.pk, host.pk)
    event = HostEvent.objects.get(kind=EventKind.PROVISIONED)
    assert event.message == "Provisioned R121 (was R119) in 5m 03s"
    assert (event.host_id, event.lease_id, event.job_id) == (host.pk, lease.pk, job.pk)
    attempt = runner_client.get(f"/api/jobs/{job.pk}/attempts/").json()[0]
    assert attempt["provision_to"] == "R121"
    assert [e["kind"] for e in attempt["events"]].count("provisioned") == 1


def test_a_build_put_on_by_other_means_updates_the_host_too(rack, runner_client):
    job = suite_job("", pinned="eve2")  # nothing asked to provision
    f.tick(timezone.now(), rack)
    assert start(runner_client, job, build="R122").status_code == 200
    assert Host.objects.get(hostname="eve2").current_build == "R122"
    event = HostEvent.objects.get(kind=EventKind.PROVISIONED)
    assert event.message == "Provisioned R122 (was R121)"  # no time given: none said
    assert Provision.objects.get().seconds is None


def test_a_build_the_host_already_carries_changes_nothing(rack, runner_client):
    job = suite_job("R121", pinned="eve2")
    f.tick(timezone.now(), rack)
    assert start(runner_client, job, build="R121").status_code == 200
    assert not Provision.objects.exists()
    assert not HostEvent.objects.filter(kind=EventKind.PROVISIONED).exists()


@pytest.mark.parametrize(
    "body",
    [
        {"build": "R" * 201},
        {"build": ""},
        {"build": "   "},
        {"build": 121},
        {"build": "R121", "provision_seconds": -1},
        {"build": "R121", "provision_seconds": 10**9},
        {"build": "R121", "provision_seconds": "300"},
        {"build": "R121", "provision_seconds": True},
        {"provision_seconds": 300},
    ],
    ids=[
        "too long", "empty", "blank", "a number", "negative seconds", "a billion seconds",
        "seconds as text", "seconds as a boolean", "seconds without a build",
    ],
)  # fmt: skip
def test_a_bad_provisioning_report_is_a_400_and_changes_nothing(rack, runner_client, body):
    job = suite_job("R121", pinned="eve1")
    f.tick(timezone.now(), rack)
    events = HostEvent.objects.count()

    response = start(runner_client, job, **body)

    assert response.status_code == 400, response.json()
    job.refresh_from_db()
    assert job.status == "leased"
    assert Host.objects.get(hostname="eve1").current_build == "R119"
    assert not Provision.objects.exists() and HostEvent.objects.count() == events


def complete(client, job: Job, **body: object):  # noqa: ANN001, ANN201
    body = {"lease": leased(job).pk, "result": "failed", "host_ok": False, **body}
    return client.post(f"/api/jobs/{job.pk}/complete/", body, format="json")


def test_a_provisioning_that_failed_before_the_start_is_recorded_and_the_host_repaired(
    rack, runner_client
):
    job = suite_job("R121", pinned="eve1")
    f.tick(timezone.now(), rack)
    lease = leased(job)

    response = complete(runner_client, job, message="flash: write error at block 7\n")

    assert response.status_code == 200, response.json()
    (row,) = Provision.objects.all()
    assert (row.result, row.build, row.from_build, row.lease_id) == (
        ProvisionResult.FAILED, "R121", "R119", lease.pk,
    )  # fmt: skip
    event = HostEvent.objects.get(kind=EventKind.PROVISIONED)
    assert event.message.startswith("Provisioning R121 failed")
    assert "write error at block 7" in event.message
    host = Host.objects.get(hostname="eve1")
    assert host.status == HostStatus.NEEDS_REPAIR and host.current_build == "R119"
    job.refresh_from_db()
    assert job.status == "queued"  # retried elsewhere, per its retries


def test_provision_failed_says_so_explicitly_with_its_time(rack, runner_client):
    job = suite_job("R121", pinned="eve1")
    f.tick(timezone.now(), rack)
    response = complete(
        runner_client, job, message="timeout", provision_failed=True, provision_seconds=61
    )
    assert response.status_code == 200, response.json()
    row = Provision.objects.get()
    assert (row.result, row.seconds) == (ProvisionResult.FAILED, 61.0)
    assert "after 1m 01s" in HostEvent.objects.get(kind=EventKind.PROVISIONED).message


def test_a_started_job_that_fails_is_no_failed_provisioning(rack, runner_client):
    job = suite_job("R121", pinned="eve1")
    f.tick(timezone.now(), rack)
    assert start(runner_client, job, build="R121").status_code == 200
    assert complete(runner_client, job, message="DUT died").status_code == 200
    assert list(Provision.objects.values_list("result", flat=True)) == [ProvisionResult.OK]


@pytest.mark.parametrize(
    "body",
    [
        {"provision_failed": True, "result": "passed"},
        {"provision_seconds": 5},
        {"provision_failed": True, "provision_seconds": -5},
        {"provision_failed": "yes"},
    ],
    ids=["passed", "seconds alone", "negative seconds", "not a boolean"],
)
def test_a_bad_provisioning_failure_is_a_400_and_changes_nothing(rack, runner_client, body):
    job = suite_job("R121", pinned="eve1")
    f.tick(timezone.now(), rack)
    response = complete(runner_client, job, **body)
    assert response.status_code == 400, response.json()
    assert leased(job).active and not Provision.objects.exists()
    assert Host.objects.get(hostname="eve1").status == HostStatus.READY


def test_provision_failed_on_a_started_job_is_a_400(rack, runner_client):
    job = suite_job("R121", pinned="eve1")
    f.tick(timezone.now(), rack)
    assert start(runner_client, job).status_code == 200
    response = complete(runner_client, job, provision_failed=True)
    assert response.status_code == 400 and "provisioning comes before" in str(response.json())
    assert Job.objects.get(pk=job.pk).status == "running" and not Provision.objects.exists()


def test_the_next_lease_of_a_provisioned_host_needs_no_provisioning(rack, runner_client):
    first = suite_job("R121", pinned="eve1")
    now = timezone.now()
    f.tick(now, rack)
    assert start(runner_client, first, build="R121").status_code == 200
    body = {"lease": leased(first).pk, "result": "passed"}
    response = runner_client.post(f"/api/jobs/{first.pk}/complete/", body, format="json")
    assert response.status_code == 200
    second = suite_job("R121", pinned="eve1")
    f.tick(now + timedelta(seconds=5), rack)
    assert leased(second).provision_to == ""


def test_each_host_of_a_multi_host_job_decides_its_own_and_start_provisions_them_all(
    rack, runner_client
):
    dut, peer = Host.objects.get(hostname="eve1"), Host.objects.get(hostname="eve2")
    job = multihost_job("bt_Pair", [role("dut", ["pool:cq"]), role("peer")], owner="alice")
    Job.objects.filter(pk=job.pk).update(build="R121")  # a standalone job's own build
    lease_hosts(job, [("dut", dut), ("peer", peer)])
    first, second = attempt(job)
    assert (first.provision_to, second.provision_to) == ("R121", "")  # eve2 carries R121

    (row,) = runner_client.get("/api/workers/w1/leases/").json()["results"]
    assert [h["provision_to"] for h in row["hosts"]] == ["R121", None]
    body = {"lease": first.pk, "build": "R121", "provision_seconds": 42}
    response = runner_client.post(f"/api/jobs/{job.pk}/start/", body, format="json")

    assert response.status_code == 200, response.json()
    assert list(Host.objects.values_list("hostname", "current_build")) == [
        ("eve1", "R121"),
        ("eve2", "R121"),
    ]
    # Only the host that was asked to provision (and carried another build) has a record.
    assert list(Provision.objects.values_list("hostname", "from_build", "lease_id")) == [
        ("eve1", "R119", first.pk)
    ]
