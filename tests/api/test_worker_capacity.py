"""A worker's capacity in the API: max_jobs set by staff, the runner's concurrency by heartbeat."""

from __future__ import annotations

import pytest

from hosts.choices import EventKind
from hosts.models import HostEvent, Worker

pytestmark = pytest.mark.django_db


def capacity_fields(body: dict) -> tuple:
    return tuple(body[k] for k in ("max_jobs", "runner_concurrency", "capacity", "running"))


def test_a_worker_shows_its_limits_capacity_and_the_jobs_it_runs(staff_client, lab):
    Worker.objects.filter(pk=lab.w1.pk).update(max_jobs=8, runner_concurrency=4)

    listed = {w["name"]: w for w in staff_client.get("/api/workers/").json()["results"]}
    one = staff_client.get("/api/workers/w1/").json()

    # w1 runs `running` and `leased`; w2 runs `other`; w3 is paused with no hosts.
    assert capacity_fields(listed["w1"]) == capacity_fields(one) == (8, 4, 4, 2)
    assert capacity_fields(listed["w2"]) == (None, None, None, 1)
    assert capacity_fields(listed["w3"]) == (None, None, None, 0)


def test_staff_set_and_clear_max_jobs(staff_client, lab):
    response = staff_client.patch("/api/workers/w1/", {"max_jobs": 3}, format="json")
    assert response.status_code == 200, response.json()
    assert capacity_fields(response.json()) == (3, None, 3, 2)

    response = staff_client.patch("/api/workers/w1/", {"max_jobs": None}, format="json")
    assert capacity_fields(response.json()) == (None, None, None, 2)

    events = HostEvent.objects.filter(worker=lab.w1, kind=EventKind.CAPACITY).order_by("id")
    assert list(events.values_list("actor", "message")) == [
        ("sam", "max jobs unlimited → 3"),
        ("sam", "max jobs 3 → unlimited"),
    ]


def test_a_patch_without_max_jobs_leaves_it_alone(staff_client, lab):
    Worker.objects.filter(pk=lab.w1.pk).update(max_jobs=5)
    response = staff_client.patch("/api/workers/w1/", {"name": "w1b"}, format="json")
    assert response.status_code == 200 and response.json()["max_jobs"] == 5


def test_staff_add_a_worker_with_max_jobs(staff_client):
    response = staff_client.post("/api/workers/", {"name": "rack-7", "max_jobs": 6}, format="json")
    assert response.status_code == 201, response.json()
    assert capacity_fields(response.json()) == (6, None, 6, 0)


@pytest.mark.parametrize("bad", [0, -2, "many", 1.5, True, 100_001])
def test_a_bad_max_jobs_is_a_400_that_changes_nothing(staff_client, lab, bad):
    Worker.objects.filter(pk=lab.w1.pk).update(max_jobs=5)
    events = HostEvent.objects.count()

    response = staff_client.patch("/api/workers/w1/", {"max_jobs": bad}, format="json")

    assert response.status_code == 400, response.content
    assert "max_jobs" in response.json()
    assert Worker.objects.get(pk=lab.w1.pk).max_jobs == 5
    assert HostEvent.objects.count() == events
    response = staff_client.post("/api/workers/", {"name": "w9", "max_jobs": bad}, format="json")
    assert response.status_code == 400 and not Worker.objects.filter(name="w9").exists()


def test_only_staff_set_max_jobs(runner_client, alice_client, lab):
    for client in (runner_client, alice_client):
        response = client.patch("/api/workers/w1/", {"max_jobs": 1}, format="json")
        assert response.status_code == 403
    assert Worker.objects.get(pk=lab.w1.pk).max_jobs is None


def test_capacity_and_running_are_read_only(staff_client, lab):
    body = {"runner_concurrency": 1, "capacity": 1, "running": 9}
    response = staff_client.patch("/api/workers/w1/", body, format="json")
    assert response.status_code == 200
    assert capacity_fields(response.json()) == (None, None, None, 2)


# --- the heartbeat's concurrency ------------------------------------------------------------


def test_the_heartbeat_stores_the_runners_concurrency(runner_client, lab):
    response = runner_client.post("/api/workers/w1/heartbeat/", {"concurrency": 3}, format="json")
    assert response.status_code == 200, response.content
    assert Worker.objects.get(pk=lab.w1.pk).runner_concurrency == 3

    # A heartbeat without it (an older runner) leaves the last report as it was.
    runner_client.post("/api/workers/w1/heartbeat/", {"leases": []}, format="json")
    assert capacity_fields(runner_client.get("/api/workers/w1/").json()) == (None, 3, 3, 2)


@pytest.mark.parametrize("bad", [0, -1, "4", 2.5, None, 100_001])
def test_a_bad_concurrency_is_a_400_that_changes_nothing(runner_client, lab, bad):
    Worker.objects.filter(pk=lab.w1.pk).update(runner_concurrency=4, last_seen=None)

    response = runner_client.post("/api/workers/w1/heartbeat/", {"concurrency": bad}, format="json")

    assert response.status_code == 400, response.content
    worker = Worker.objects.get(pk=lab.w1.pk)
    assert worker.runner_concurrency == 4 and worker.last_seen is None
