"""The queue page and the API queue show the same selection of the scheduler's order."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from rest_framework.test import APIClient

from jobs import services
from jobs.choices import JobStatus
from jobs.models import Job, Suite
from jobs.scheduling import queue
from schedsite import counting
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


@pytest.mark.postgres
def test_a_filtered_page_shows_places_in_the_whole_queue_and_says_about_a_big_count(
    alice_client, monkeypatch
):
    monkeypatch.setattr(counting, "EXACT_COUNT_LIMIT", 3)
    first = [f.job(f"urgent-{i}", ["board:nope"], priority=90) for i in range(4)]
    f.suite("quota-suite", 2, labels=["board:nope"], min_duts=1)  # its first job goes first
    mine = f.job("mine", ["board:mine"], priority=10)
    html = alice_client.get("/queue/?label=board:mine").content.decode()

    row = html[html.index(f'id="queued-{mine.pk}"') :]
    assert '<td class="num" data-label="#">7</td>' in row[: row.index("</tr>")]
    assert " 1 of about " in html  # the filter's one job counted, the whole queue estimated
    whole = alice_client.get("/queue/").content.decode()
    assert "about " in whole[: whole.index(" queued jobs")][-20:]
    assert all(f"urgent-{i}" in whole for i in range(len(first)))


@pytest.mark.django_db
def test_every_text_a_queue_row_shows_is_escaped(sam, sam_client):
    # Names the forms refuse can still come from the database (an import, an admin edit).
    rack = f.worker("rack-1")
    pinned = f.host("dut1", ["board:eve"], worker=rack)
    f.suite("nightly", [["board:nope"]], owner=sam)
    f.job("solo", ["board:nope"], host=pinned, owner=sam)
    services.scheduler_tick()
    Job.objects.update(name="<i>job</i>")
    Suite.objects.update(name="<i>suite</i>")
    get_user_model().objects.filter(pk=sam.pk).update(username="<i>sam</i>")

    page = sam_client.get("/queue/").content.decode()
    for text in ("job", "suite", "sam"):
        assert f"&lt;i&gt;{text}&lt;/i&gt;" in page, text
    assert "<i>" not in page
