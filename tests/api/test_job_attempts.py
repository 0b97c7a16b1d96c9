"""GET /api/jobs/{id}/attempts/: a job's attempts in order, each with its host and events."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from jobs import services
from jobs.models import Job
from tests import factories as f
from tests.api.conftest import active_lease

pytestmark = pytest.mark.django_db


def run(job: Job, result: str, *, host_ok: bool = True, message: str = "") -> None:
    services.scheduler_tick()
    job.refresh_from_db()
    assert job.status == "leased", job.message
    services.job_start(job=job, by="runner-1")
    services.job_complete(job=job, result=result, by="runner-1", host_ok=host_ok, message=message)


@pytest.fixture
def retried(lab, alice, settings) -> Job:  # noqa: ANN001
    """A job whose first host broke under it and which passed on its second."""
    settings.RETRY_BACKOFF = 0
    job = f.job("power_Resume", ["board:z"], owner=alice, max_retries=1)
    # Only the lab's unheld board:z host can take it at first; free the reserved one for
    # the retry, which prefers another host.
    run(job, "failed", host_ok=False, message="servo timeout")
    services.lease_release(lease=lab.reservation, by="sam", requeue=True)
    run(job, "passed", message="all good")
    job.refresh_from_db()
    return job


def test_it_lists_each_attempt_in_order_with_its_host_result_and_events(alice_client, retried):
    response = alice_client.get(f"/api/jobs/{retried.pk}/attempts/")

    assert response.status_code == 200
    first, second = response.json()
    assert [first["number"], second["number"]] == [1, 2]
    assert first["host"] == "free.lab" and second["host"] == "reserved.lab"
    assert first["result"] == "failed" and first["host_failed"] is True
    assert first["release_reason"] == "completed"
    assert first["retried_because"].startswith(
        "job power_Resume: retry 1 of 1 after host free.lab broke"
    )
    assert "servo timeout" in first["message"]
    kinds = [event["kind"] for event in first["events"]]
    assert kinds[:3] == ["leased", "started", "completed"]
    assert "retried" in kinds and "status" in kinds  # the host went to repair
    broke = next(e for e in first["events"] if e["kind"] == "status")
    assert broke["new_status"] == "needs_repair" and broke["subject"] == "free.lab"
    assert first["started_at"] is not None and first["released_at"] is not None
    assert first["acquired_at"] <= first["started_at"] <= first["released_at"]

    assert second["result"] == "passed" and second["message"] == "all good"
    assert second["retried_because"] is None
    assert [e["kind"] for e in second["events"]] == ["leased", "started", "completed"]
    assert {e["lease_id"] for e in second["events"]} == {second["id"]}


def test_an_attempt_still_running_has_no_end_yet(alice_client, lab):
    response = alice_client.get(f"/api/jobs/{lab.running.pk}/attempts/")

    (attempt,) = response.json()
    lease = active_lease(lab.running)
    assert attempt["id"] == lease.pk and attempt["host"] == lease.host.hostname
    assert attempt["worker"] == "w1"
    assert attempt["result"] == "running" and attempt["released_at"] is None
    assert attempt["release_reason"] == "" and attempt["retried_because"] is None


def test_a_job_requeued_by_staff_says_why_on_the_attempt_it_left(alice_client, lab, sam):
    services.lease_release(lease=active_lease(lab.leased), by=sam, requeue=True, reason="flaky")

    (attempt,) = alice_client.get(f"/api/jobs/{lab.leased.pk}/attempts/").json()

    assert attempt["result"] == "released"
    assert "flaky" in attempt["retried_because"]


def test_a_job_never_leased_has_no_attempts(alice_client, lab):
    response = alice_client.get(f"/api/jobs/{lab.queued.pk}/attempts/")

    assert response.status_code == 200 and response.json() == []


@pytest.mark.parametrize("client", ["alice_client", "bob_client", "staff_client", "runner_client"])
def test_anyone_signed_in_may_read_it_like_the_job(request, client, lab):
    response = request.getfixturevalue(client).get(f"/api/jobs/{lab.running.pk}/attempts/")

    assert response.status_code == 200 and len(response.json()) == 1


def test_anonymous_callers_get_401(anon_client, lab):
    assert anon_client.get(f"/api/jobs/{lab.running.pk}/attempts/").status_code == 401


@pytest.mark.parametrize(
    "path",
    ["/api/jobs/999999/attempts/", "/api/jobs/abc/attempts/", f"/api/jobs/{10**30}/attempts/"],
)
def test_no_such_job_is_a_404(alice_client, path):
    response = alice_client.get(path)

    assert response.status_code == 404
    assert "detail" in response.json()


def queries(client, path: str) -> tuple[int, list]:  # noqa: ANN001
    with CaptureQueriesContext(connection) as ctx:
        response = client.get(path)
    assert response.status_code == 200
    return len(ctx.captured_queries), response.json()


def test_the_queries_do_not_grow_with_the_attempts(alice_client, lab, sam):
    job = f.job("flaky", ["board:z"], owner="alice")
    services.scheduler_tick()
    path = f"/api/jobs/{job.pk}/attempts/"
    one, _ = queries(alice_client, path)
    for _ in range(4):
        services.lease_release(lease=active_lease(job), by=sam, requeue=True, reason="again")
        services.scheduler_tick()

    five, attempts = queries(alice_client, path)

    assert len(attempts) == 5
    assert five == one
