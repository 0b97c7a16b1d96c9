"""The queue page and the API queue show the same selection of the scheduler's order."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from jobs import selectors, services
from jobs.choices import JobStatus
from tests import factories as f


@pytest.fixture
def stale_order(lab, monkeypatch):  # noqa: ANN001, ANN201
    """An order read just before the tick leased its first job (as a cached order can be)."""
    leased = f.job("leased-meanwhile", ["board:kevin"], priority=70)
    waiting = f.job("still-waiting", ["board:nope"])
    order = selectors.QueueOrder(ids=[leased.pk, waiting.pk], quota_ids=frozenset())
    services.scheduler_tick()
    leased.refresh_from_db()
    assert leased.status == JobStatus.LEASED
    monkeypatch.setattr(selectors, "queue_order_ids", lambda: order)
    return order


def test_a_job_leased_since_the_order_was_read_is_not_shown_as_queued(alice_client, stale_order):
    html = alice_client.get("/queue/").content.decode()
    assert "still-waiting" in html
    assert "leased-meanwhile" not in html


def test_the_api_queue_drops_it_too_and_keeps_the_positions(alice, stale_order):
    client = APIClient()
    client.force_authenticate(alice)
    rows = client.get("/api/queue/").json()["results"]
    assert [(row["name"], row["position"]) for row in rows] == [("still-waiting", 2)]
