"""Idempotency-Key on the creating POSTs: a retried request returns the first result."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import DatabaseError
from django.utils import timezone

from jobs import services
from jobs.models import IdempotencyKey, Job, Lease, Suite
from tests import factories as f
from tests.api.conftest import token_client
from tests.threads import race

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def eve_host(db) -> None:  # noqa: ANN001
    """A host the suites below can run on: a job no host could run is refused."""
    f.host("eve1.lab", ["board:eve"])


SUITE = {"name": "bvt", "jobs": [{"name": "login_Smoke", "labels": ["board:eve"]}]}


def post(client, path: str, body: dict, key: str | None):  # noqa: ANN001, ANN201
    headers = {"Idempotency-Key": key} if key is not None else {}
    return client.post(path, body, format="json", headers=headers)


def test_the_same_key_and_body_twice_creates_one_suite_and_replays_the_first_answer(
    alice_client,
):
    first = post(alice_client, "/api/suites/", SUITE, "retry-1")
    again = post(alice_client, "/api/suites/", SUITE, "retry-1")

    assert first.status_code == again.status_code == 201
    assert again.json() == first.json()
    assert again["Idempotent-Replayed"] == "true"
    assert not first.has_header("Idempotent-Replayed")
    assert Suite.objects.count() == 1 and Job.objects.count() == 1


def test_the_same_key_with_a_different_body_is_a_409_and_changes_nothing(alice_client):
    post(alice_client, "/api/suites/", SUITE, "retry-1")
    response = post(alice_client, "/api/suites/", {**SUITE, "name": "other"}, "retry-1")

    assert response.status_code == 409
    assert "Idempotency-Key retry-1 was already used" in response.json()["detail"]
    assert list(Suite.objects.values_list("name", flat=True)) == ["bvt"]


def test_the_same_key_on_another_endpoint_is_a_409(alice_client):
    post(alice_client, "/api/suites/", SUITE, "retry-1")
    response = post(alice_client, "/api/jobs/", SUITE["jobs"][0], "retry-1")
    assert response.status_code == 409
    assert not Job.objects.filter(suite=None).exists()


def test_a_key_older_than_24_hours_is_forgotten(alice_client):
    post(alice_client, "/api/suites/", SUITE, "nightly")
    IdempotencyKey.objects.update(created_at=timezone.now() - timedelta(hours=24, seconds=1))

    response = post(alice_client, "/api/suites/", SUITE, "nightly")

    assert response.status_code == 201
    assert not response.has_header("Idempotent-Replayed")
    assert Suite.objects.count() == 2
    assert IdempotencyKey.objects.count() == 1


def test_keys_are_per_user(alice_client, bob_client):
    a = post(alice_client, "/api/suites/", SUITE, "k")
    b = post(bob_client, "/api/suites/", SUITE, "k")
    assert a.status_code == b.status_code == 201
    assert a.json()["id"] != b.json()["id"]
    assert sorted(Suite.objects.values_list("owner__username", flat=True)) == ["alice", "bob"]


def test_without_a_key_every_post_creates(alice_client):
    post(alice_client, "/api/suites/", SUITE, None)
    post(alice_client, "/api/suites/", SUITE, None)
    assert Suite.objects.count() == 2
    assert not IdempotencyKey.objects.exists()


@pytest.mark.parametrize("key", ["x" * 256, "", "  ", "caf\u00e9"])
def test_a_key_that_is_empty_too_long_or_not_ascii_is_a_400(alice_client, key):
    response = post(alice_client, "/api/suites/", SUITE, key)
    assert response.status_code == 400
    assert "Idempotency-Key" in response.json()["detail"]
    assert not Suite.objects.exists()


def test_a_refused_request_is_not_remembered_so_the_fixed_retry_goes_through(alice_client):
    bad = post(alice_client, "/api/suites/", {**SUITE, "priority": "urgent"}, "k")
    assert bad.status_code == 400
    good = post(alice_client, "/api/suites/", {**SUITE, "priority": "cq"}, "k")
    assert good.status_code == 201
    assert Suite.objects.count() == 1


def test_a_standalone_job_is_created_once(alice_client):
    body = {"name": "solo", "labels": ["board:eve"]}
    first = post(alice_client, "/api/jobs/", body, "job-1")
    again = post(alice_client, "/api/jobs/", body, "job-1")
    assert first.status_code == again.status_code == 201
    assert again.json()["id"] == first.json()["id"]
    assert Job.objects.count() == 1


def test_a_reservation_is_made_once(staff_client):
    f.host("free.lab", ["board:z"])
    body = {"host": "free.lab", "duration": 3600, "reason": "debug"}
    first = post(staff_client, "/api/leases/", body, "reserve-1")
    again = post(staff_client, "/api/leases/", body, "reserve-1")
    assert first.status_code == again.status_code == 201
    assert again.json() == first.json()
    assert Lease.objects.count() == 1


def test_the_key_and_the_suite_are_saved_together_or_not_at_all(alice_client, monkeypatch):
    def crash(*args: object, **kwargs: object) -> None:
        raise DatabaseError("connection lost")

    monkeypatch.setattr(IdempotencyKey, "save", crash)
    alice_client.raise_request_exception = False
    response = post(alice_client, "/api/suites/", SUITE, "k")
    assert response.status_code == 500
    assert not Suite.objects.exists() and not Job.objects.exists()


def test_expired_keys_are_purged(alice, bob):
    now = timezone.now()
    IdempotencyKey.objects.create(user=alice, key="old", fingerprint="x", status_code=201)
    IdempotencyKey.objects.create(user=bob, key="new", fingerprint="x", status_code=201)
    IdempotencyKey.objects.filter(key="old").update(created_at=now - timedelta(hours=25))

    assert services.idempotency_keys_purge(now=now) == 1
    assert list(IdempotencyKey.objects.values_list("key", flat=True)) == ["new"]


def test_the_schema_documents_the_header_and_the_409_on_each_creating_post(staff_client):
    schema = staff_client.get("/api/schema/", {"format": "json"}).json()
    for path in ("/api/suites/", "/api/jobs/", "/api/leases/"):
        operation = schema["paths"][path]["post"]
        names = [p["name"] for p in operation.get("parameters", []) if p["in"] == "header"]
        assert names == ["Idempotency-Key"], path
        assert "Idempotency-Key" in operation["responses"]["409"]["description"]


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_two_concurrent_posts_with_one_key_create_one_suite(django_user_model):
    alice = django_user_model.objects.create_user("alice")
    clients = [token_client(alice), token_client(alice)]
    responses = race(*[lambda c=c: post(c, "/api/suites/", SUITE, "same") for c in clients])
    answers = [(response.status_code, response.json()) for response in responses]
    assert [code for code, _ in answers] == [201, 201]
    assert answers[0][1]["id"] == answers[1][1]["id"]
    assert Suite.objects.count() == 1
