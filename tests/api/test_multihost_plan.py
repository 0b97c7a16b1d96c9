"""What-if plans of multi-host jobs: POST /api/scheduler/plan/ and the submit form's Preview
take roles, and the planned result lists each multi-host job's hosts."""

from __future__ import annotations

import pytest

from jobs.models import Job, Lease, Suite
from tests import factories as f
from tests.multihost import multihost_job, role
from tests.ui.conftest import HTMX

pytestmark = pytest.mark.django_db

URL = "/api/scheduler/plan/"


@pytest.fixture
def chambers(sam):  # noqa: ANN001, ANN201
    """Chamber a: one bt DUT and an AP; chamber b: two bt DUTs and an AP."""
    w1 = f.worker("w1")
    return {
        name: f.host(name, labels, worker=w1)
        for name, labels in [
            ("a-dut1", ["bt", "chamber:a"]),
            ("a-ap", ["ap", "chamber:a"]),
            ("b-dut1", ["bt", "chamber:b"]),
            ("b-dut2", ["bt", "chamber:b"]),
            ("b-ap", ["ap", "chamber:b"]),
        ]
    }


PAIR = {
    "name": "bt_Pair",
    "roles": [
        {"name": "dut", "labels": ["bt"], "count": 2},
        {"name": "peer", "labels": ["ap"]},
    ],
    "together_by": "chamber",
}


def test_a_previewed_multi_host_job_is_planned_on_all_its_hosts_together(alice_client, chambers):
    body = {"suite": {"name": "bt", "jobs": [PAIR, {"name": "solo", "labels": ["bt"]}]}}

    response = alice_client.post(URL, body, format="json")

    assert response.status_code == 200, response.json()
    answer = response.json()
    assert answer["new_jobs"]["total"] == 2 and answer["new_jobs"]["would_start"] == 2
    (pair,) = [lease for lease in answer["leases"] if lease["new_job"] == 0]
    # Only chamber b holds two bt DUTs and an AP: all three hosts from there, DUTs first.
    assert [(h["role"], h["hostname"][:1]) for h in pair["hosts"]] == [
        ("dut", "b"),
        ("dut", "b"),
        ("peer", "b"),
    ]
    assert {h["hostname"] for h in pair["hosts"]} == {"b-dut1", "b-dut2", "b-ap"}
    assert pair["host"] == pair["hosts"][0]["hostname"]
    (solo,) = [lease for lease in answer["leases"] if lease["new_job"] == 1]
    assert solo["host"] == "a-dut1" and "hosts" not in solo
    assert answer["counts"]["leases"] == 4  # hosts leased
    assert "bt_Pair would run on" in answer["summary"]
    assert not Suite.objects.exists() and not Lease.objects.exists()


def test_a_previewed_multi_host_job_that_cannot_fit_now_waits(alice_client, chambers):
    # No chamber has three bt DUTs: it is submitted only with allow_unmatched, and waits.
    pair = {**PAIR, "roles": [{"name": "dut", "labels": ["bt"], "count": 3}]}
    body = {"suite": {"name": "bt", "jobs": [pair], "allow_unmatched": True}}

    response = alice_client.post(URL, body, format="json")

    assert response.status_code == 200, response.json()
    answer = response.json()
    assert answer["new_jobs"]["would_start"] == 0 and answer["new_jobs"]["waiting"] == 1
    assert all(lease["new_job"] is None for lease in answer["leases"])
    (waiting,) = answer["new_jobs"]["waits"]
    assert waiting["name"] == "bt_Pair" and "no chamber has them all" in waiting["message"]


def test_a_plan_with_a_malformed_role_is_a_400(alice_client, chambers):
    pair = {**PAIR, "roles": [{"name": "dut", "count": 2, "max": 1}]}

    response = alice_client.post(URL, {"suite": {"name": "bt", "jobs": [pair]}}, format="json")

    assert response.status_code == 400
    assert "at least its count" in response.json()["jobs[0].roles[0].max"][0]
    assert not Job.objects.exists()


def test_the_submit_forms_preview_names_the_hosts_of_a_multi_host_job(
    django_user_model, client, chambers
):
    user = django_user_model.objects.create_user("carol", password="carol-pass")
    client.force_login(user)
    data = {
        "name": "bt",
        "priority": "40",
        "min_duts": "0",
        "max_retries": "0",
        "mode": "jobs",
        "job_key": ["aaaa0001"],
        "job_name": ["bt_Pair"],
        "job_labels": [""],
        "job_host": [""],
        "job_together_by": ["chamber"],
        "role_job": ["aaaa0001", "aaaa0001"],
        "role_name": ["dut", "peer"],
        "role_labels": ["bt", "ap"],
        "role_count": ["2", "1"],
        "role_max": ["", ""],
        "preview": "1",
    }

    response = client.post("/suites/new/", data, headers=HTMX)

    html = response.content.decode()
    assert response.status_code == 200
    preview = html[html.index('id="suite-preview"') :]
    assert "1 of your 1 job would start now" in preview
    assert "bt_Pair would run on b-dut" in preview and "b-ap (peer)" in preview
    assert not Suite.objects.exists()


def test_locking_the_last_host_of_a_role_strands_a_multi_host_job_and_names_the_role(
    staff_client, chambers
):
    # Only chamber b has two bt DUTs and an AP: locking b-ap leaves no chamber that could
    # serve the peer role with the rest; locking a-ap leaves chamber b whole.
    job = multihost_job(
        "bt_Pair",
        [role("dut", ["bt"], count=2), role("peer", ["ap"])],
        together_by="chamber",
    )

    body = staff_client.post(URL, {"lock_hosts": ["b-ap"]}, format="json").json()

    assert body["counts"]["stranded"] == 1
    (stranded,) = body["stranded"]
    assert (stranded["job"], stranded["role"]) == (job.pk, "peer")
    assert "bt_Pair: no hosts left for role peer" in body["summary"]
    harmless = staff_client.post(URL, {"lock_hosts": ["a-ap"]}, format="json").json()
    assert harmless["counts"]["stranded"] == 0
    assert not Lease.objects.exists()
