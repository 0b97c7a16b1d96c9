"""/api/workers/: online state, host counts, pause/resume, heartbeat and the runner's leases."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from hosts import services as host_services
from hosts.models import HostEvent, Worker
from jobs import services
from tests import factories as f

pytestmark = pytest.mark.django_db


def test_staff_adds_a_worker_that_lists_offline_with_no_hosts(staff_client):
    response = staff_client.post("/api/workers/", {"name": "rack-7.lab"})

    assert response.status_code == 201, response.json()
    body = response.json()
    assert body["name"] == "rack-7.lab"
    assert body["online"] is False and body["hosts_total"] == 0
    assert body["url"].endswith("/api/workers/rack-7.lab/")
    assert staff_client.get("/api/workers/rack-7.lab/").json()["name"] == "rack-7.lab"


def test_a_worker_name_must_be_unique_and_well_formed(staff_client):
    f.worker("w1")
    assert staff_client.post("/api/workers/", {"name": "w1"}).status_code == 409
    response = staff_client.post("/api/workers/", {"name": "bad name"})
    assert response.status_code == 400
    assert "name" in response.json()
    assert staff_client.post("/api/workers/", {}).json() == {"name": ["This field is required."]}


def test_host_counts_say_how_many_hosts_are_leased_and_schedulable(staff_client, sam):
    w1 = f.worker("w1")
    f.host("a", ["board:x"], worker=w1)
    f.host("b", ["board:y"], worker=w1)
    locked = f.host("c", ["board:y"], worker=w1)
    host_services.host_lock(host=locked, by=sam, reason="debugging")
    f.job("J", ["board:x"])
    services.scheduler_tick()

    body = staff_client.get("/api/workers/w1/").json()

    assert (body["hosts_total"], body["hosts_leased"], body["hosts_schedulable"]) == (3, 1, 1)
    assert body["online"] is True


def test_a_paused_or_offline_worker_has_no_schedulable_hosts(staff_client):
    f.host("a", worker=f.worker("paused", paused=True))
    f.host("b", worker=f.worker("offline", online=False))

    rows = {w["name"]: w for w in staff_client.get("/api/workers/").json()["results"]}

    assert rows["paused"]["hosts_schedulable"] == 0 and rows["paused"]["online"] is True
    assert rows["offline"]["hosts_schedulable"] == 0 and rows["offline"]["online"] is False
    assert rows["paused"]["hosts_total"] == rows["offline"]["hosts_total"] == 1


def test_pause_needs_a_reason_and_pausing_twice_is_a_conflict(staff_client, sam):
    f.worker("w1")
    assert staff_client.post("/api/workers/w1/pause/", {}).json() == {
        "reason": ["This field is required."]
    }
    assert staff_client.post("/api/workers/w1/pause/", {"reason": "  "}).status_code == 400

    response = staff_client.post("/api/workers/w1/pause/", {"reason": "rack move"})
    assert response.status_code == 200
    assert response.json()["paused"] is True
    assert response.json()["paused_reason"] == "rack move"
    assert response.json()["paused_by"] == "sam"

    again = staff_client.post("/api/workers/w1/pause/", {"reason": "again"})
    assert again.status_code == 409
    assert "already paused" in again.json()["detail"]


def test_resume_brings_a_paused_worker_back_and_resuming_twice_is_a_conflict(staff_client):
    f.worker("w1", paused=True)
    response = staff_client.post("/api/workers/w1/resume/")
    assert response.status_code == 200 and response.json()["paused"] is False
    assert staff_client.post("/api/workers/w1/resume/").status_code == 409


def test_workers_filter_by_paused_and_online(staff_client):
    f.worker("up")
    f.worker("down", online=False)
    f.worker("held", paused=True)

    def names(query: str) -> list[str]:
        return [w["name"] for w in staff_client.get(f"/api/workers/?{query}").json()["results"]]

    assert names("paused=true") == ["held"]
    assert names("online=false") == ["down"]
    assert names("online=true&paused=false") == ["up"]
    assert names("q=DO") == ["down"]
    # A boolean it cannot read is refused, not guessed at.
    assert staff_client.get("/api/workers/?online=maybe").status_code == 400


def test_staff_renames_a_worker_and_sets_its_runner_account(staff_client, runner_user):
    f.worker("w1")
    response = staff_client.patch("/api/workers/w1/", {"name": "w1.lab", "runner": "runner-1"})

    assert response.status_code == 200, response.json()
    assert response.json()["name"] == "w1.lab" and response.json()["runner"] == "runner-1"
    assert Worker.objects.get(name="w1.lab").runner == runner_user
    assert HostEvent.objects.filter(worker__name="w1.lab", kind="updated").exists()
    assert staff_client.get("/api/workers/w1/").status_code == 404


def test_the_runner_account_must_be_in_group_runners(staff_client, alice):
    f.worker("w1")
    response = staff_client.patch("/api/workers/w1/", {"runner": "alice"})
    assert response.status_code == 400
    assert "create_runner" in response.json()["runner"][0]


def test_renaming_onto_another_workers_name_is_a_conflict(staff_client):
    f.worker("w1")
    f.worker("w2")
    assert staff_client.patch("/api/workers/w1/", {"name": "w2"}).status_code == 409


def test_a_worker_with_hosts_cannot_be_deleted(staff_client):
    f.host("h1", worker=f.worker("w1"))
    f.worker("empty")
    assert staff_client.delete("/api/workers/w1/").status_code == 409
    assert staff_client.delete("/api/workers/empty/").status_code == 204
    assert staff_client.get("/api/workers/empty/").status_code == 404
    assert staff_client.delete("/api/workers/empty/").status_code == 404


def test_a_heartbeat_brings_an_offline_worker_online_and_tells_the_timings(
    runner_client, runner_user, settings
):
    settings.LEASE_TTL = 90
    w1 = f.worker("w1", online=False)
    host_services.worker_update(worker=w1, by="sam", runner=runner_user)

    response = runner_client.post("/api/workers/w1/heartbeat/")

    assert response.status_code == 200
    body = response.json()
    assert body["online"] is True and body["lease_ttl"] == 90
    assert body["offline_timeout"] == settings.WORKER_OFFLINE_TIMEOUT
    w1.refresh_from_db()
    assert timezone.now() - w1.last_seen < timedelta(seconds=5)


def test_the_runner_lists_its_workers_job_leases_with_what_it_needs(runner_client, lab):
    response = runner_client.get("/api/workers/w1/leases/")

    assert response.status_code == 200
    rows = response.json()["results"]
    assert {row["job"]["id"] for row in rows} == {lab.running.pk, lab.leased.pk}
    row = next(r for r in rows if r["job"]["id"] == lab.leased.pk)
    assert row["job"]["status"] == "leased"
    assert row["job"]["labels"] == ["board:x"]
    assert row["job"]["suite_name"] == "S" and row["job"]["timeout"] == 3600
    assert row["host"]["hostname"] == lab.h2.hostname
    assert row["host"]["labels"] == ["board:x"]


def test_a_runner_cannot_list_or_heartbeat_another_workers_leases(runner_client, lab):
    assert runner_client.get("/api/workers/w2/leases/").status_code == 403
    assert runner_client.post("/api/workers/w2/heartbeat/").status_code == 403
    assert runner_client.get("/api/workers/nope/leases/").status_code == 404


def test_a_workers_event_log_shows_who_paused_it_and_why(staff_client):
    f.worker("w1")
    assert staff_client.post("/api/workers/w1/pause/", {"reason": "rack move"}).status_code == 200
    assert staff_client.post("/api/workers/w1/resume/").status_code == 200

    events = staff_client.get("/api/workers/w1/events/").json()["results"]

    assert [(e["kind"], e["actor"]) for e in events[:2]] == [("resumed", "sam"), ("paused", "sam")]
    assert events[1]["message"] == "rack move"
    assert staff_client.get("/api/workers/nope/events/").status_code == 404
