"""Big lists say an estimated count instead of counting every row, and still page right."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from schedsite import counting
from tests import factories as f

pytestmark = pytest.mark.django_db


@pytest.fixture
def twelve_jobs(alice):  # noqa: ANN001, ANN201
    return [f.job(f"solo-{i}", ["board:none"]) for i in range(12)]


def walk(client, url: str) -> tuple[list[int], list[dict]]:  # noqa: ANN001
    """Follow `next` from the first page; every id seen, and every page's envelope."""
    ids, pages = [], []
    while url:
        body = client.get(url).json()
        ids += [row["id"] for row in body["results"]]
        pages.append(body)
        url = body["next"]
    return ids, pages


def test_a_list_below_the_limit_counts_exactly(alice_client, twelve_jobs):
    body = alice_client.get("/api/jobs/?page_size=5").json()
    assert (body["count"], body["count_estimated"]) == (12, False)


@pytest.mark.postgres
def test_above_the_limit_the_count_is_estimated_and_next_still_walks_every_row(
    alice_client, twelve_jobs, monkeypatch
):
    monkeypatch.setattr(counting, "EXACT_COUNT_LIMIT", 5)
    ids, pages = walk(alice_client, "/api/jobs/?page_size=5")

    assert sorted(ids) == sorted(job.pk for job in twelve_jobs)
    assert len(set(ids)) == 12
    assert [len(page["results"]) for page in pages] == [5, 5, 2]
    assert all(page["count_estimated"] for page in pages)
    assert all(page["count"] > 5 for page in pages)  # never fewer than were seen
    assert alice_client.get("/api/jobs/?page_size=5&page=9").status_code == 404


@pytest.mark.postgres
def test_the_queue_says_so_too_and_keeps_its_positions(alice_client, twelve_jobs, monkeypatch):
    monkeypatch.setattr(counting, "EXACT_COUNT_LIMIT", 5)
    first = alice_client.get("/api/queue/?page_size=5").json()
    rows = first["results"] + alice_client.get(first["next"]).json()["results"]

    assert first["count_estimated"] is True
    assert [row["position"] for row in rows] == list(range(1, 11))


@pytest.mark.postgres
def test_the_estimate_plans_the_rows_alone_not_the_joins_a_page_reads(
    alice_client, twelve_jobs, monkeypatch
):
    monkeypatch.setattr(counting, "EXACT_COUNT_LIMIT", 5)
    with CaptureQueriesContext(connection) as ctx:
        body = alice_client.get("/api/jobs/?page_size=5").json()
    explains = [q["sql"] for q in ctx.captured_queries if q["sql"].startswith("EXPLAIN")]
    assert len(explains) == 1 and " JOIN " not in explains[0]
    assert body["count_estimated"] and body["count"] > 5


@pytest.mark.parametrize(("size", "counted"), [(13, False), (12, False), (11, True), (5, True)])
def test_a_first_page_that_is_the_whole_list_counts_itself(
    alice_client, twelve_jobs, size, counted
):  # noqa: ANN001
    """The first page is read with one row more: when it holds the whole list, its count is
    its length and no COUNT statement runs; when a row is left over, the list is counted and
    `next` points on. Either way the envelope is the same as counting first would give."""
    with CaptureQueriesContext(connection) as queries:
        body = alice_client.get(f"/api/jobs/?page_size={size}").json()
    assert (body["count"], body["count_estimated"]) == (12, False)
    assert len(body["results"]) == min(size, 12)
    assert (body["next"] is not None) is (size < 12)
    assert body["previous"] is None
    counts = [q["sql"] for q in queries.captured_queries if "COUNT(" in q["sql"]]
    assert any('"jobs_job"' in sql for sql in counts) is counted, counts
    ids, _pages = walk(alice_client, f"/api/jobs/?page_size={size}")
    assert sorted(ids) == sorted(job.id for job in twelve_jobs)
