"""A suite's `outcome`: its jobs by how they came out, next to the status it always had."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from jobs import services
from tests import factories as f
from tests.api.conftest import active_lease

pytestmark = pytest.mark.django_db


def test_a_completed_suite_with_a_failed_job_keeps_its_status_and_says_so(alice_client, lab):
    suite = lab.suite
    services.job_complete(job=lab.running, result="passed", by="runner-1")
    services.job_complete(job=lab.leased, result="failed", by="runner-1")

    body = alice_client.get(f"/api/suites/{suite.pk}/").json()

    assert body["status"] == "completed"
    assert body["outcome"] == f.outcome(passed=1, failed=1)


def test_an_unfinished_suite_counts_what_still_runs(alice_client, lab):
    body = alice_client.get(f"/api/suites/{lab.suite.pk}/").json()

    assert body["status"] == "running"
    assert body["outcome"] == f.outcome(unfinished=2)


def test_the_suite_list_reads_outcomes_without_a_query_per_suite(alice_client, lab, alice, sam):
    def count() -> int:
        with CaptureQueriesContext(connection) as ctx:
            assert alice_client.get("/api/suites/").status_code == 200
        return len(ctx.captured_queries)

    few = count()
    for i in range(6):
        suite = f.suite(f"extra-{i}", [["board:none"]], owner=alice)
        services.job_abort(job=suite.jobs.get(), by=alice)
    services.lease_release(lease=active_lease(lab.leased), by=sam, requeue=False)

    many = count()
    outcomes = [s["outcome"] for s in alice_client.get("/api/suites/").json()["results"]]

    assert many == few
    assert (
        outcomes.count({"passed": 0, "failed": 0, "aborted": 1, "skipped": 0, "unfinished": 0}) == 6
    )
