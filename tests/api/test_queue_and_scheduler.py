"""/api/queue/ in the scheduler's exact order, and /api/scheduler/ ticks."""

from __future__ import annotations

import pytest

from jobs import selectors, services
from jobs.models import SchedulerTick
from tests import factories as f

pytestmark = pytest.mark.django_db


@pytest.fixture
def queue(alice):  # noqa: ANN001, ANN201
    """Nine queued jobs, none runnable: two suites (one with a min-DUT quota) and solos."""
    f.host("h1", ["board:eve"])
    low = f.suite("low", 3, priority=20, min_duts=2, labels=["board:none"], owner=alice)
    high = f.suite("high", 3, priority=70, labels=["board:none"], owner=alice)
    solos = [f.job(f"solo{i}", ["board:none"], priority=40, owner=alice) for i in range(3)]
    services.scheduler_tick()
    return low, high, solos


def test_the_queue_lists_jobs_in_the_schedulers_exact_order_with_positions(alice_client, queue):
    response = alice_client.get("/api/queue/")

    assert response.status_code == 200
    rows = response.json()["results"]
    assert [r["job"] for r in rows] == selectors.queue_order_ids().ids
    assert [r["position"] for r in rows] == list(range(1, 10))
    # The quota phase puts the low suite's first min_duts jobs ahead of everything.
    assert [r["suite_name"] for r in rows[:2]] == ["low", "low"]
    assert rows[2]["suite_name"] == "high" and rows[2]["priority"] == 70
    first = rows[0]
    assert first["labels"] == ["board:none"] and first["owner"] == "alice"
    assert first["age_seconds"] >= 0
    assert "board:none" in first["wait_reason"]["message"]


def test_the_queue_pages_and_filters_keep_each_jobs_global_position(alice_client, queue):
    low, high, _solos = queue
    page2 = alice_client.get("/api/queue/?page=2&page_size=4").json()
    assert [r["position"] for r in page2["results"]] == [5, 6, 7, 8]
    assert page2["count"] == 9

    mine = alice_client.get(f"/api/queue/?suite={high.pk}").json()["results"]
    assert [r["position"] for r in mine] == [3, 4, 5]
    assert alice_client.get("/api/queue/?suite=high").status_code == 400


def test_the_scheduler_lists_recent_ticks_newest_first_without_the_reasons_blob(
    alice_client, queue
):
    services.scheduler_tick()
    response = alice_client.get("/api/scheduler/")

    assert response.status_code == 200
    rows = response.json()["results"]
    assert [r["id"] for r in rows] == list(
        SchedulerTick.objects.order_by("-started_at", "-id").values_list("id", flat=True)
    )
    assert "wait_reasons" not in rows[0]
    assert rows[0]["jobs_considered"] == 9 and rows[0]["hosts_total"] == 1
    assert alice_client.get(f"/api/scheduler/{rows[0]['id']}/").json()["id"] == rows[0]["id"]


def test_staff_runs_a_tick_and_gets_the_leases_it_made(staff_client):
    f.host("h1.lab", ["board:eve"])
    job = f.job("J", ["board:eve"])

    response = staff_client.post("/api/scheduler/tick/")

    assert response.status_code == 200
    body = response.json()
    assert body["leases"] == [
        {"job": "J", "job_id": job.pk, "suite": None, "host": "h1.lab", "kind": "test"}
    ]
    assert body["tick_id"] == SchedulerTick.objects.latest("id").pk
    assert SchedulerTick.objects.get(pk=body["tick_id"]).trigger == "api: sam"


def test_a_tester_cannot_run_a_tick(alice_client):
    f.host("h1.lab", ["board:eve"])
    f.job("J", ["board:eve"])
    assert alice_client.post("/api/scheduler/tick/").status_code == 403
    assert not SchedulerTick.objects.exists()
