"""A deadlock or serialization failure is retried, and never reaches a client as a 500."""

from __future__ import annotations

import psycopg.errors
import pytest
from django.db import OperationalError

from hosts.choices import EventKind
from hosts.models import HostEvent
from jobs import transitions
from jobs.models import Job, Lease
from tests import factories as f

pytestmark = pytest.mark.django_db

HTMX = {"HX-Request": "true"}


def deadlock() -> OperationalError:
    """What Django raises when PostgreSQL picks the transaction as a deadlock's victim."""
    try:
        raise OperationalError("deadlock detected") from psycopg.errors.DeadlockDetected(
            "deadlock detected"
        )
    except OperationalError as exc:
        return exc


@pytest.fixture
def losing(monkeypatch):  # noqa: ANN001, ANN201
    """Make releasing a lease lose to a deadlock `lose` times (-1: always), counting the tries."""
    tries = {"n": 0, "lose": 0}
    real = transitions.release_leases

    def release_leases(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        tries["n"] += 1
        if tries["lose"] < 0 or tries["n"] <= tries["lose"]:
            raise deadlock()
        return real(*args, **kwargs)

    monkeypatch.setattr(transitions, "release_leases", release_leases)
    return tries


def active_lease(job: Job) -> Lease:
    return Lease.objects.get(job=job, released_at=None)


# The retry runs only outside any transaction: not inside a test's, so these commit for real.
@pytest.mark.django_db(transaction=True)
def test_a_complete_that_loses_to_a_deadlock_is_retried_and_succeeds(runner_client, lab, losing):
    losing["lose"] = 2
    lease = active_lease(lab.running)

    response = runner_client.post(
        f"/api/jobs/{lab.running.pk}/complete/", {"lease": lease.pk, "result": "passed"}
    )

    assert response.status_code == 200, response.json()
    assert losing["n"] == 3
    assert Job.objects.get(pk=lab.running.pk).status == "passed"
    lease.refresh_from_db()
    assert lease.release_reason == "completed"
    # The lost attempts rolled back whole: one release, one event, not three.
    assert HostEvent.objects.filter(lease_id=lease.pk, kind=EventKind.COMPLETED).count() == 1


@pytest.mark.django_db(transaction=True)
def test_a_complete_that_always_deadlocks_is_a_503_with_retry_after(runner_client, lab, losing):
    losing["lose"] = -1
    lease = active_lease(lab.running)

    response = runner_client.post(
        f"/api/jobs/{lab.running.pk}/complete/", {"lease": lease.pk, "result": "passed"}
    )

    assert response.status_code == 503
    assert int(response["Retry-After"]) >= 1
    assert "try again" in response.json()["detail"]
    assert losing["n"] == 3  # every attempt, no more
    assert Job.objects.get(pk=lab.running.pk).status == "running"  # nothing was changed
    assert active_lease(lab.running) == lease


def test_a_deadlock_outside_a_retried_service_is_a_503_in_the_api(staff_client, monkeypatch):
    def broken(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        raise deadlock()

    monkeypatch.setattr("jobs.api.views.JobViewSet.get_queryset", broken)

    response = staff_client.get("/api/jobs/")

    assert response.status_code == 503
    assert int(response["Retry-After"]) >= 1


@pytest.mark.parametrize("headers", [{}, HTMX], ids=["page", "htmx"])
def test_a_page_whose_change_always_deadlocks_is_a_503_not_a_500(lab, sam, losing, headers):
    losing["lose"] = -1
    client = f.signed_in(sam, raise_request_exception=False)

    lease = active_lease(lab.running)

    response = client.post(f"/leases/{lease.pk}/release/", {"requeue": "0"}, headers=headers)

    assert response.status_code == 503
    assert int(response["Retry-After"]) >= 1
    assert b"try again" in response.content.lower()
    assert Job.objects.get(pk=lab.running.pk).status == "running"
