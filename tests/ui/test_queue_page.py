"""The queue page and the API queue show the same selection of the scheduler's order."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from jobs import services
from jobs.choices import JobStatus
from jobs.scheduling import queue
from tests import factories as f


@pytest.fixture
def stale_order(lab, monkeypatch):  # noqa: ANN001, ANN201
    """A page of the queue read just before the tick leased its first job (a read racing it)."""
    leased = f.job("leased-meanwhile", ["board:kevin"], priority=70)
    waiting = f.job("still-waiting", ["board:nope"])
    stale = queue.queue_select().ids[0:50]
    assert stale == [leased.pk, waiting.pk]
    services.scheduler_tick()
    leased.refresh_from_db()
    assert leased.status == JobStatus.LEASED

    def read_before_the_tick(self: queue.QueueIds, index: slice) -> list[int]:
        self.offsets.update((job_id, i) for i, job_id in enumerate(stale))
        return stale

    monkeypatch.setattr(queue.QueueIds, "__getitem__", read_before_the_tick)
    return stale


def test_a_job_leased_since_the_order_was_read_is_not_shown_as_queued(alice_client, stale_order):
    html = alice_client.get("/queue/").content.decode()
    assert "still-waiting" in html
    assert "leased-meanwhile" not in html


def test_the_api_queue_drops_it_too_and_keeps_the_positions(alice, stale_order):
    client = APIClient()
    client.force_authenticate(alice)
    rows = client.get("/api/queue/").json()["results"]
    assert [(row["name"], row["position"]) for row in rows] == [("still-waiting", 2)]
