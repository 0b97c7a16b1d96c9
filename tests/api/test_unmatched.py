"""Submissions that could never run are refused, naming what matches nothing, unless asked."""

from __future__ import annotations

import pytest

from jobs import services as job_services
from jobs.models import Job, Suite
from tests import factories as f

pytestmark = pytest.mark.django_db


@pytest.fixture
def lab() -> None:
    """h1 carries board:eve and pool:cq; h2 carries board:kevin; h3 (retired) board:old."""
    f.host("h1", ["board:eve", "pool:cq"])
    f.host("h2", ["board:kevin"])
    old = f.host("h3", ["board:old"])
    job_services.host_set_status(host=old, status="needs_repair", by="sam")  # some history
    job_services.host_delete(host=old, by="sam")


def suite(*jobs: dict, **fields: object) -> dict:
    return {"name": "S", "jobs": list(jobs), **fields}


@pytest.mark.parametrize(
    ("job", "field", "says"),
    [
        ({"name": "t", "labels": ["board:nope"]}, "labels", "carries label board:nope"),
        (
            {"name": "t", "labels": ["board:eve", "board:nope", "pool:zzz"]},
            "labels",
            "carries labels board:nope, pool:zzz",
        ),
        ({"name": "t", "labels": ["board:kevin", "pool:cq"]}, "labels", "pool:cq together"),
        ({"name": "t", "labels": ["board:old"]}, "labels", "carries label board:old"),
        ({"name": "t", "labels": ["board:kevin"], "host": "h1"}, "host", "h1 lacks board:kevin"),
    ],
    ids=["unknown label", "two unknown", "never together", "only on a retired host", "pinned"],
)
def test_a_job_no_host_could_run_is_a_400_naming_what_matches_nothing(
    alice_client, lab, job, field, says
):
    fine = {"name": "ok", "labels": ["board:eve"]}

    response = alice_client.post("/api/suites/", suite(fine, job), format="json")

    assert response.status_code == 400
    (message,) = response.json()[f"jobs[1].{field}"]
    assert says in message and "allow unmatched" in message
    assert not Suite.objects.exists() and not Job.objects.exists()


def test_allow_unmatched_submits_the_suite_and_its_jobs_wait_saying_why(alice_client, lab):
    body = suite({"name": "t", "labels": ["board:nope"]}, allow_unmatched=True)

    response = alice_client.post("/api/suites/", body, format="json")

    assert response.status_code == 201, response.json()
    assert Job.objects.get().status == "queued"


def test_a_standalone_job_is_checked_the_same_way(alice_client, lab):
    job = {"name": "t", "labels": ["board:nope"]}

    refused = alice_client.post("/api/jobs/", job, format="json")
    allowed = alice_client.post("/api/jobs/", {**job, "allow_unmatched": True}, format="json")

    assert refused.status_code == 400
    assert "no host in the lab carries label board:nope" in refused.json()["labels"][0]
    assert allowed.status_code == 201 and Job.objects.count() == 1


def test_min_duts_above_the_number_of_jobs_is_a_400(alice_client, lab):
    jobs = [{"name": "a", "labels": ["board:eve"]}, {"name": "b", "labels": ["board:eve"]}]

    response = alice_client.post("/api/suites/", suite(*jobs, min_duts=3), format="json")

    assert response.status_code == 400
    assert "min_duts (3) is more than the suite's 2 jobs" in response.json()["min_duts"][0]
    assert not Suite.objects.exists()


def test_allow_unmatched_must_be_a_json_boolean(alice_client, lab):
    body = suite({"name": "t", "labels": ["board:eve"]}, allow_unmatched="yes")
    response = alice_client.post("/api/suites/", body, format="json")
    assert response.status_code == 400 and "allow_unmatched" in response.json()


def test_a_fan_out_never_reaches_a_retired_host(alice_client, lab):
    job_services.host_delete(host=f.host("h4", ["board:eve"]), by="sam")  # no history: gone
    old = f.host("h5", ["board:eve"])
    job_services.host_set_status(host=old, status="needs_repair", by="sam")
    job_services.host_delete(host=old, by="sam")  # retired, kept

    response = alice_client.post(
        "/api/suites/", {"name": "F", "fanout": {"labels": ["board:eve"]}}, format="json"
    )

    assert response.status_code == 201, response.json()
    assert list(Job.objects.values_list("host__hostname", flat=True)) == ["h1"]
