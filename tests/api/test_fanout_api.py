"""/api/suites/ for a fan-out suite: `fanout.until` checked, and its hosts done/pending/skipped."""

from __future__ import annotations

import pytest

from hosts import services as host_services
from jobs import services
from jobs import services as job_services
from jobs.models import Job, Suite
from tests import factories as f

pytestmark = pytest.mark.django_db


def fanout_body(**fanout: object) -> dict:
    return {"name": "bt", "fanout": {"labels": ["bluetooth"], "name": "bt_Pair", **fanout}}


@pytest.mark.parametrize(
    "until",
    [
        "tomorrow",
        "2026-13-40T25:00:00Z",
        "9999-12-31T23:59:59-01:00",  # past the last datetime once in UTC
        "0001-01-01T00:00:00+01:00",
        1700000000,
        ["2026-11-24T12:00:00Z"],
        {"at": 1},
        "",
    ],
)
def test_a_bad_until_is_a_400_on_fanout_that_submits_nothing(alice_client, until):
    f.host("a.lab", ["bluetooth"])

    response = alice_client.post("/api/suites/", fanout_body(until=until), format="json")

    assert response.status_code == 400, response.json()
    assert "until" in response.json()["fanout"]
    assert not Suite.objects.exists() and not Job.objects.exists()


def test_until_is_kept_and_answered_and_the_fanout_counts_its_hosts(alice_client):
    w1 = f.worker("w1")
    f.host("a.lab", ["bluetooth"], worker=w1)
    gone = f.host("b.lab", ["bluetooth"], worker=w1)
    host_services.host_lock(host=gone, by="sam", reason="debugging")
    f.host("c.lab", ["board:eve"], worker=w1)

    response = alice_client.post(
        "/api/suites/", fanout_body(until="2030-01-01T12:00:00+01:00"), format="json"
    )

    assert response.status_code == 201, response.json()
    body = response.json()
    assert body["fanout"] == {
        "labels": ["bluetooth"],
        "until": "2030-01-01T11:00:00Z",
        "done": 0,
        "pending": 2,
        "skipped": 0,
    }
    suite = Suite.objects.get(pk=body["id"])
    services.scheduler_tick()
    services.job_complete(job=suite.jobs.get(host__hostname="a.lab"), result="failed", by="r")
    job_services.host_delete(host=gone, by="sam")  # retired
    services.scheduler_tick()

    detail = alice_client.get(f"/api/suites/{suite.pk}/").json()
    assert (detail["fanout"]["done"], detail["fanout"]["pending"]) == (1, 0)
    assert detail["fanout"]["skipped"] == 1
    assert detail["status"] == "completed"
    assert detail["outcome"] == f.outcome(failed=1, skipped=1)
    assert detail["job_counts"]["skipped"] == 1
    listed = alice_client.get("/api/suites/").json()["results"]
    assert [s["fanout"] for s in listed] == [detail["fanout"]]
    skipped = alice_client.get("/api/jobs/?status=skipped").json()["results"]
    assert [j["name"] for j in skipped] == ["bt_Pair@b.lab"]


def test_a_plain_suite_has_no_fanout_object(alice_client):
    f.host("a.lab", ["board:eve"])
    body = {"name": "plain", "jobs": [{"name": "t", "labels": ["board:eve"]}]}
    response = alice_client.post("/api/suites/", body, format="json")
    assert response.status_code == 201 and response.json()["fanout"] is None


def test_without_until_the_fanout_answers_a_null_until(alice_client):
    f.host("a.lab", ["bluetooth"])
    response = alice_client.post("/api/suites/", fanout_body(), format="json")
    assert response.json()["fanout"]["until"] is None
    assert Suite.objects.get().fanout_until is None


def test_a_clone_of_a_fanout_keeps_its_until(alice_client):
    f.host("a.lab", ["bluetooth"])
    body = fanout_body(until="2030-01-01T11:00:00Z")
    original = alice_client.post("/api/suites/", body, format="json").json()

    response = alice_client.post(f"/api/suites/{original['id']}/clone/", {}, format="json")

    assert response.status_code == 201, response.json()
    assert response.json()["fanout"]["until"] == "2030-01-01T11:00:00Z"
    assert response.json()["cloned_from"] == original["id"]
