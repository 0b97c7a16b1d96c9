"""Query-count guards: list pages cost the same number of queries for 5 rows as for 60."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from hosts import services as host_services
from jobs import services
from tests import factories as f

pytestmark = pytest.mark.django_db

# Ceilings a page must stay under whatever the size of the lab: session, user and roles,
# then a fixed handful of reads for the page itself.
BOUNDS = {
    "/": 17,  # with the provisioning card's one aggregate, and counts bounded at 100,000 queued
    # (queued exact up to 10,000 then "about", starting and running apart: three cheap reads
    # instead of one that grew with the queue, docs/performance.md)
    "/hosts/": 9,
    "/hosts/?label=pool:cq&status=ready": 9,
    # Two more: the maintenance jobs that lead the queue, and the latest tick's reasons for the
    # classes of the jobs on the page (read out of its table, not the whole table).
    "/queue/": 11,
    "/suites/": 8,
    "/leases/": 6,
    "/workers/": 6,
}


def grow(lab_size: int, *, sam) -> None:  # noqa: ANN001
    """Grow the lab to lab_size hosts, with every kind of row a page can show."""
    start = len(_made)
    workers = [f.worker(f"w{i}") for i in range(len(_workers), 3)] if not _workers else []
    _workers.extend(workers)
    for i in range(start, lab_size):
        host = f.host(
            f"dut{i:03d}.lab",
            ["board:eve", "pool:cq" if i % 2 else "pool:bvt", f"model:m{i % 3}"],
            worker=_workers[i % 3],
        )
        _made.append(host)
        if i % 5 == 1:
            host_services.host_lock(host=host, by=sam, reason="debugging")
    # A suite per ten hosts, each with more jobs than hosts so some lease and some wait.
    suites = max(1, lab_size // 10) - _suites[0]
    for s in range(suites):
        f.suite(f"suite-{_suites[0] + s}", lab_size // 4 + 2, min_duts=1, owner=sam)
    _suites[0] += suites
    f.job(f"solo-{lab_size}", ["board:nope"], owner=sam)
    services.scheduler_tick()
    free = next(h for h in _made if not h.locked and not h.leases.filter(released_at=None))
    services.lease_reserve(host=free, holder=sam, duration=timedelta(hours=1), reason="manual")
    services.scheduler_tick()


_made: list = []
_workers: list = []
_suites = [0]


@pytest.fixture(autouse=True)
def _fresh_lab_state():  # noqa: ANN202
    _made.clear()
    _workers.clear()
    _suites[0] = 0


def queries(client, path: str) -> int:  # noqa: ANN001
    with CaptureQueriesContext(connection) as ctx:
        response = client.get(path)
    assert response.status_code == 200
    return len(ctx.captured_queries)


@pytest.mark.parametrize("path", list(BOUNDS))
def test_a_list_page_costs_the_same_queries_for_sixty_rows_as_for_five(
    sam_client, sam, path, django_assert_max_num_queries
):
    grow(5, sam=sam)
    small = queries(sam_client, path)
    grow(60, sam=sam)
    with django_assert_max_num_queries(BOUNDS[path]):
        big = queries(sam_client, path)
    assert big == small, f"{path}: {small} queries for 5 hosts, {big} for 60"


def test_the_htmx_poll_of_the_hosts_table_is_as_cheap(sam_client, sam):
    grow(60, sam=sam)
    with CaptureQueriesContext(connection) as ctx:
        sam_client.get("/hosts/", headers={"HX-Request": "true"})
    assert len(ctx.captured_queries) <= BOUNDS["/hosts/"] - 1  # no worker list for the form


def test_a_tester_costs_no_more_queries_than_staff(alice_client, sam, sam_client):
    grow(20, sam=sam)
    # A tester's roles need one read of their groups; nothing per row.
    assert queries(alice_client, "/hosts/") <= queries(sam_client, "/hosts/") + 1
