"""/api/suites/: submit with jobs or as a fan-out, counts, derived status, abort."""

from __future__ import annotations

import pytest

from jobs import services
from jobs.models import Job, Suite
from tests import factories as f

pytestmark = pytest.mark.django_db


def suite_payload(**overrides: object) -> dict:
    payload = {
        "name": "bvt-inline R120",
        "build": "R120-1",
        "priority": "cq",
        "min_duts": 1,
        "max_duts": 3,
        "jobs": [
            {"name": "login_Smoke", "labels": ["board:eve"]},
            {"name": "power_Resume", "labels": ["board:eve", "pool:cq"], "max_retries": 2},
            {"name": "audio", "labels": ["board:eve"], "priority": 10, "timeout": 120},
        ],
    }
    return {**payload, **overrides}


def test_a_tester_submits_a_suite_with_its_jobs_in_one_request(alice_client, eve):
    response = alice_client.post("/api/suites/", suite_payload())

    assert response.status_code == 201, response.json()
    body = response.json()
    assert body["priority"] == 70  # "cq"
    assert (body["min_duts"], body["max_duts"], body["owner"]) == (1, 3, "alice")
    assert body["status"] == "queued" and body["jobs_total"] == 3
    assert body["job_counts"]["queued"] == 3 and body["job_counts"]["passed"] == 0
    jobs = {j.name: j for j in Job.objects.filter(suite_id=body["id"])}
    assert jobs["login_Smoke"].priority == 70  # the suite's
    assert jobs["audio"].priority == 10 and jobs["audio"].timeout.total_seconds() == 120
    assert jobs["power_Resume"].labels == ["board:eve", "pool:cq"]
    assert jobs["power_Resume"].max_retries == 2


def test_a_job_can_be_pinned_to_a_host_by_hostname(alice_client):
    host = f.host("h1.lab", ["board:eve"])
    jobs = [{"name": "t", "labels": ["board:eve"], "host": "h1.lab"}]
    response = alice_client.post("/api/suites/", suite_payload(jobs=jobs))
    assert response.status_code == 201
    assert Job.objects.get(suite_id=response.json()["id"]).host == host


def test_an_unknown_pinned_host_is_a_400_at_that_jobs_index(alice_client):
    f.host("h1.lab")
    jobs = [{"name": "a", "host": "h1.lab"}, {"name": "b", "host": "nope.lab"}]
    response = alice_client.post("/api/suites/", suite_payload(jobs=jobs))
    assert response.status_code == 400
    assert response.json() == {"jobs": [{}, {"host": ["No host named nope.lab."]}]}
    assert not Suite.objects.exists()


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"priority": 101}, "priority"),
        ({"priority": "urgent"}, "priority"),
        ({"priority": True}, "priority"),
        ({"priority": "²"}, "priority"),
        ({"priority": "9" * 5000}, "priority"),
        ({"priority": 70.5}, "priority"),
        ({"min_duts": -1}, "min_duts"),
        ({"min_duts": 4, "max_duts": 3}, "min_duts"),
        ({"max_duts": 0}, "max_duts"),
        ({"name": ""}, "name"),
        ({"jobs": []}, "jobs"),
        ({"jobs": [{"labels": ["board:x"]}]}, "jobs"),
        ({"jobs": [{"name": "t", "labels": ["bad label"]}]}, "jobs[0].labels"),
        ({"jobs": [{"name": "t", "timeout": 0}]}, "jobs"),
        ({"jobs": [{"name": "t", "max_retries": 101}]}, "jobs"),
        ({"fanout": {"labels": ["board:x"]}}, "fanout"),
        ({"jobs": "t1,t2"}, "jobs"),
    ],
)
def test_bad_suite_input_is_a_400_naming_the_field_and_creates_nothing(
    alice_client, overrides, field
):
    response = alice_client.post("/api/suites/", suite_payload(**overrides))
    assert response.status_code == 400, response.json()
    assert field in response.json()
    assert not Suite.objects.exists() and not Job.objects.exists()


def test_a_named_priority_level_and_an_integer_string_both_work(alice_client, eve):
    assert (
        alice_client.post("/api/suites/", suite_payload(priority="Weekly")).json()["priority"] == 10
    )
    assert alice_client.post("/api/suites/", suite_payload(priority="55")).json()["priority"] == 55


def test_a_suite_beyond_the_job_limit_is_refused_with_a_clear_400(alice_client, settings):
    settings.MAX_JOBS_PER_SUITE = 3
    jobs = [{"name": f"t{i}"} for i in range(4)]
    response = alice_client.post("/api/suites/", suite_payload(jobs=jobs))
    assert response.status_code == 400
    assert response.json() == {"jobs": ["A suite may have at most 3 jobs; this one has 4."]}


def test_a_fanout_suite_runs_one_pinned_job_on_every_matching_host(alice_client):
    for name in ("a.lab", "b.lab"):
        f.host(name, ["bluetooth", "board:eve"])
    f.host("c.lab", ["board:eve"])
    payload = {"name": "bt everywhere", "fanout": {"labels": ["bluetooth"], "name": "bt_Pair"}}

    response = alice_client.post("/api/suites/", payload)

    assert response.status_code == 201, response.json()
    assert response.json()["fanout_labels"] == ["bluetooth"]
    jobs = Job.objects.filter(suite_id=response.json()["id"]).order_by("name")
    assert [(j.name, j.host.hostname) for j in jobs] == [
        ("bt_Pair@a.lab", "a.lab"),
        ("bt_Pair@b.lab", "b.lab"),
    ]


def test_a_fanout_over_labels_no_host_carries_is_a_400(alice_client):
    f.host("a.lab", ["board:eve"])
    response = alice_client.post("/api/suites/", {"name": "x", "fanout": {"labels": ["nfc"]}})
    assert response.status_code == 400
    assert "no host carries nfc" in response.json()["fanout_labels"][0]


def test_the_suite_detail_counts_jobs_by_status_and_hosts_held(staff_client, lab):
    services.job_complete(job=lab.running, result="passed", by="runner-1")

    body = staff_client.get(f"/api/suites/{lab.suite.pk}/").json()

    assert body["job_counts"]["passed"] == 1 and body["job_counts"]["leased"] == 1
    assert body["hosts_held"] == 1 and body["status"] == "running"


def test_the_owner_aborts_a_suite_and_aborting_again_is_a_conflict(alice_client, lab):
    response = alice_client.post(f"/api/suites/{lab.suite.pk}/abort/")

    assert response.status_code == 200
    body = response.json()
    assert body["status"] == "aborted" and body["jobs_aborted"] == 2
    assert body["hosts_held"] == 0 and body["aborted_by"] == "alice"
    assert alice_client.post(f"/api/suites/{lab.suite.pk}/abort/").status_code == 409


def test_another_tester_cannot_abort_the_suite_and_nothing_changes(bob_client, lab):
    response = bob_client.post(f"/api/suites/{lab.suite.pk}/abort/")
    assert response.status_code == 403
    assert "your own" in response.json()["detail"]
    assert Job.objects.filter(suite=lab.suite, status="aborted").count() == 0


def test_suites_filter_by_owner_active_and_q(staff_client, lab, bob):
    f.suite("nightly graphics", 1, owner=bob)
    services.suite_abort(suite=lab.suite, by="sam")

    def names(query: str) -> list[str]:
        response = staff_client.get(f"/api/suites/?{query}")
        assert response.status_code == 200
        return [s["name"] for s in response.json()["results"]]

    assert names("owner=bob") == ["nightly graphics"]
    assert names("active=true") == ["nightly graphics"]
    assert names("aborted=true") == ["S"]
    assert names("q=GRAPH") == ["nightly graphics"]
    assert staff_client.get("/api/suites/999999/").status_code == 404
