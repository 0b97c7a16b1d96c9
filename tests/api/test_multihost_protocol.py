"""The runner protocol and the job API for a multi-host job: listed once, by the runner of its
slot 0 host; heartbeat, start and complete through any of its leases; hosts_ok per host."""

from __future__ import annotations

import pytest
from django.utils import timezone

from hosts.choices import HostStatus
from hosts.models import Host
from jobs import services
from jobs.choices import JobStatus
from jobs.models import Job, Lease, SchedulerTick
from tests import factories as f
from tests.api.conftest import runner_2 as runner_2  # noqa: F401 — the fixture, for w2
from tests.api.conftest import token_client
from tests.multihost import attempt, lease_hosts, multihost_job, role

pytestmark = pytest.mark.django_db


@pytest.fixture
def pair(lab, alice):  # noqa: ANN001, ANN201
    """alice's bt_Pair: its dut on w1 (dut.lab, slot 0: runner-1 runs it), its peer on w2
    (peer.lab, slot 1); one retry."""
    dut = f.host("dut.lab", ["board:m"], worker=lab.w1)
    peer = f.host("peer.lab", ["bt-peer"], worker=lab.w2)
    job = multihost_job(
        "bt_Pair",
        [role("dut", ["board:m"]), role("peer", ["bt-peer"])],
        together_by="",
        max_retries=1,
        owner=alice,
    )
    lease_hosts(job, [("dut", dut), ("peer", peer)])
    return job


def listed(client, worker: str) -> list[dict]:  # noqa: ANN001
    response = client.get(f"/api/workers/{worker}/leases/")
    assert response.status_code == 200, response.content
    return [item for item in response.json()["results"] if item["job"]["name"] == "bt_Pair"]


def hosts_of(job: Job) -> list[dict]:
    return [
        {
            "role": lease.role,
            "hostname": lease.host.hostname,
            "lease": lease.pk,
            "provision_to": lease.provision_to or None,
        }
        for lease in attempt(job)
    ]


def test_the_slot_0_workers_list_shows_the_job_once_with_all_its_hosts(
    pair, runner_client, runner_2
):
    dut, peer = attempt(pair)

    (mine,) = listed(runner_client, "w1")
    (theirs,) = listed(token_client(runner_2), "w2")

    assert (mine["id"], mine["role"], mine["slot"], mine["runs_here"]) == (dut.pk, "dut", 0, True)
    assert mine["host"]["hostname"] == "dut.lab"
    assert mine["hosts"] == [
        {"role": "dut", "hostname": "dut.lab", "lease": dut.pk, "provision_to": None},
        {"role": "peer", "hostname": "peer.lab", "lease": peer.pk, "provision_to": None},
    ]
    # w2's runner sees its host held for a job it does not run.
    assert (theirs["id"], theirs["runs_here"], theirs["slot"]) == (peer.pk, False, 1)
    assert theirs["hosts"] == mine["hosts"]


def test_a_job_with_every_host_on_one_worker_is_listed_once(lab, runner_client):
    duts = [f.host(f"d{i}.lab", ["board:m"], worker=lab.w1) for i in range(3)]
    job = multihost_job("bt_Pair", [role("dut", ["board:m"], count=3)])
    lease_hosts(job, [("dut", host) for host in duts])

    (item,) = listed(runner_client, "w1")

    assert item["runs_here"] is True and item["slot"] == 0
    assert [h["hostname"] for h in item["hosts"]] == ["d0.lab", "d1.lab", "d2.lab"]


def test_a_bulk_heartbeat_naming_the_slot_0_lease_extends_every_host(pair, runner_client):
    dut, peer = attempt(pair)

    response = runner_client.post("/api/workers/w1/heartbeat/", {"leases": [dut.pk]}, format="json")

    assert response.status_code == 200 and response.json()["gone"] == []
    beats = {lease.pk: lease.heartbeat_at for lease in attempt(pair)}
    assert beats[dut.pk] is not None and beats[dut.pk] == beats[peer.pk]


def test_a_heartbeat_through_the_peers_lease_extends_the_duts_too(pair, runner_2):
    dut, peer = attempt(pair)

    response = token_client(runner_2).post(f"/api/leases/{peer.pk}/heartbeat/")

    assert response.status_code == 200, response.content
    assert Lease.objects.get(pk=dut.pk).heartbeat_at == Lease.objects.get(pk=peer.pk).heartbeat_at


def test_start_then_complete_with_hosts_ok_sends_only_the_broken_host_to_repair(
    pair, runner_client
):
    dut, _peer = attempt(pair)
    hosts = hosts_of(pair)

    started = runner_client.post(f"/api/jobs/{pair.pk}/start/", {"lease": dut.pk}, format="json")
    again = runner_client.post(f"/api/jobs/{pair.pk}/start/", {"lease": dut.pk}, format="json")
    done = runner_client.post(
        f"/api/jobs/{pair.pk}/complete/",
        {"lease": dut.pk, "result": "failed", "hosts_ok": {"peer.lab": False}},
        format="json",
    )

    assert started.status_code == 200, started.content
    assert started.json()["status"] == "running" and started.json()["hosts"] == hosts
    assert again.status_code == 409  # once per job
    assert done.status_code == 200, done.content
    body = done.json()
    assert body["status"] == "queued" and body["hosts"] == [] and body["lease"] is None
    statuses = dict(
        Host.objects.filter(hostname__in=["dut.lab", "peer.lab"]).values_list("hostname", "status")
    )
    assert statuses == {"dut.lab": HostStatus.READY, "peer.lab": HostStatus.NEEDS_REPAIR}


@pytest.mark.parametrize(
    ("hosts_ok", "says"),
    [
        ({"dut.lab": True, "nosuch.lab": False}, "nosuch.lab"),
        ({"h1.lab": False}, "h1.lab"),  # a host of another job
        ({"peer.lab": "no"}, "hosts_ok"),
        (["peer.lab"], "hosts_ok"),
        ("peer.lab", "hosts_ok"),
    ],
)
def test_a_bad_hosts_ok_is_a_400_that_names_it_and_changes_nothing(
    pair, runner_client, hosts_ok, says
):
    dut, _peer = attempt(pair)

    response = runner_client.post(
        f"/api/jobs/{pair.pk}/complete/",
        {"lease": dut.pk, "result": "passed", "hosts_ok": hosts_ok},
        format="json",
    )

    assert response.status_code == 400, response.content
    assert says in response.content.decode()
    assert len(attempt(pair)) == 2
    assert Job.objects.get(pk=pair.pk).status == JobStatus.LEASED


def test_the_job_shows_its_roles_and_the_hosts_of_its_active_attempt(pair, alice_client):
    body = alice_client.get(f"/api/jobs/{pair.pk}/").json()

    assert body["roles"] == [
        {"name": "dut", "labels": ["board:m"], "count": 1, "max": 1},
        {"name": "peer", "labels": ["bt-peer"], "count": 1, "max": 1},
    ]
    assert body["together_by"] == ""
    assert body["hosts"] == hosts_of(pair)
    assert body["lease"]["host"] == "dut.lab"  # slot 0's


def test_a_one_host_job_shows_its_one_host(lab, alice_client):
    body = alice_client.get(f"/api/jobs/{lab.leased.pk}/").json()

    assert body["roles"] == [] and body["together_by"] == ""
    lease = Lease.objects.get(job=lab.leased, released_at=None)
    assert body["hosts"] == [
        {"role": "", "hostname": lease.host.hostname, "lease": lease.pk, "provision_to": None}
    ]
    assert alice_client.get(f"/api/jobs/{lab.queued.pk}/").json()["hosts"] == []


def test_each_attempt_lists_all_its_hosts(pair, alice_client, runner_client):
    first = hosts_of(pair)
    dut, _peer = attempt(pair)
    services.lease_job_complete(
        lease=dut, by="runner-1", result="failed", hosts_ok={"peer.lab": False}
    )
    Job.objects.filter(pk=pair.pk).update(not_before=None)
    other_peer = f.host(
        "peer2.lab", ["bt-peer"], worker=Host.objects.get(hostname="dut.lab").worker
    )
    lease_hosts(pair, [("dut", Host.objects.get(hostname="dut.lab")), ("peer", other_peer)])

    attempts = alice_client.get(f"/api/jobs/{pair.pk}/attempts/").json()

    assert [a["number"] for a in attempts] == [1, 2]
    assert attempts[0]["hosts"] == first
    assert attempts[0]["host"] == "peer.lab"  # the host that broke ended it
    assert "retry 1 of 1 after host peer.lab broke" in attempts[0]["retried_because"]
    assert attempts[1]["hosts"] == hosts_of(pair)
    assert attempts[1]["result"] == JobStatus.LEASED


def test_a_host_shows_the_job_it_is_held_for(lab, alice_client):
    SchedulerTick.objects.create(started_at=timezone.now(), holds={str(lab.free.pk): lab.queued.pk})

    held = alice_client.get(f"/api/hosts/{lab.free.hostname}/").json()
    listed_hosts = alice_client.get("/api/hosts/").json()["results"]

    assert held["held_for"] == lab.queued.pk
    by_name = {h["hostname"]: h["held_for"] for h in listed_hosts}
    assert by_name[lab.free.hostname] == lab.queued.pk
    assert by_name["reserved.lab"] is None


def test_a_worker_running_a_two_host_job_counts_it_once(pair, staff_client, lab):
    extra = f.host("dut2.lab", ["board:m"], worker=lab.w1)
    job = multihost_job("bt_Two", [role("dut", ["board:m"], count=2)])
    lease_hosts(job, [("dut", Host.objects.get(hostname="dut.lab")), ("dut", extra)])
    # dut.lab is bt_Pair's: bt_Two got nothing (all or nothing); take another pair.
    assert attempt(job) == []
    more = f.host("dut3.lab", ["board:m"], worker=lab.w1)
    lease_hosts(job, [("dut", extra), ("dut", more)])

    body = staff_client.get("/api/workers/w1/").json()

    # w1 runs running, leased (the lab's), bt_Pair's dut and bt_Two's two duts: 4 jobs.
    assert body["running"] == 4
