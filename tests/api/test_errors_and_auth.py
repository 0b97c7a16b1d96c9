"""Errors as docs/api.md#conventions says (never a 500), authentication, and pagination."""

from __future__ import annotations

import pytest
from django.core.exceptions import ObjectDoesNotExist
from django.core.exceptions import ValidationError as DjangoValidationError
from django.db import DataError, IntegrityError
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from schedsite.api_exceptions import exception_handler
from schedsite.errors import Conflict, Forbidden, InvalidInput
from tests import factories as f

pytestmark = pytest.mark.django_db


# --- authentication -------------------------------------------------------------------------


def test_without_credentials_the_api_answers_401_with_the_token_scheme(anon_client):
    response = anon_client.get("/api/hosts/")
    assert response.status_code == 401
    assert response["WWW-Authenticate"] == "Token"
    assert response.json() == {"detail": "Authentication credentials were not provided."}


def test_a_wrong_token_is_a_401(anon_client):
    anon_client.credentials(HTTP_AUTHORIZATION="Token not-a-real-token")
    assert anon_client.get("/api/hosts/").status_code == 401


def test_a_script_exchanges_its_password_for_a_token(alice):
    client = APIClient()
    response = client.post("/api/token/", {"username": "alice", "password": "alice-pass"})
    assert response.status_code == 200
    assert response.json()["token"] == Token.objects.get(user=alice).key
    bad = client.post("/api/token/", {"username": "alice", "password": "wrong"})
    assert bad.status_code == 400


def test_me_says_who_the_token_belongs_to_and_what_it_may_do(runner_client, lab):
    assert runner_client.get("/api/me/").json() == {
        "username": "runner-1",
        "staff": False,
        "runner": True,
        "workers": ["w1"],
    }


def test_lab_staff_group_members_are_staff(bob, bob_client):
    from django.contrib.auth.models import Group

    bob.groups.add(Group.objects.get_or_create(name="lab-staff")[0])
    f.worker("w1")
    assert bob_client.get("/api/me/").json()["staff"] is True
    assert bob_client.post("/api/workers/w1/pause/", {"reason": "x"}).status_code == 200


def test_the_browser_session_works_and_writes_need_the_csrf_token(sam):
    client = APIClient(enforce_csrf_checks=True)
    client.force_login(sam)
    f.host("h1")
    assert client.get("/api/hosts/h1/").status_code == 200
    response = client.post("/api/hosts/h1/lock/", {"reason": "x"})
    assert response.status_code == 403
    assert "CSRF" in response.json()["detail"]


def test_the_schema_and_docs_are_public(anon_client):
    schema = anon_client.get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json")
    assert schema.status_code == 200
    assert "/api/hosts/{hostname}/lock/" in schema.json()["paths"]
    assert anon_client.get("/api/docs/").status_code == 200


# --- pagination -----------------------------------------------------------------------------


@pytest.fixture
def seven_hosts() -> None:
    for i in range(7):
        f.host(f"h{i}.lab")


def test_every_list_is_paginated_with_count_and_links(staff_client, seven_hosts):
    body = staff_client.get("/api/hosts/?page_size=3").json()
    assert body["count"] == 7 and len(body["results"]) == 3
    assert "page=2" in body["next"] and body["previous"] is None
    last = staff_client.get("/api/hosts/?page_size=3&page=last").json()
    assert [h["hostname"] for h in last["results"]] == ["h6.lab"]


@pytest.mark.parametrize("page", ["abc", "0", "-1", "1.5", "9" * 5000])
def test_a_malformed_page_number_is_a_400(staff_client, seven_hosts, page):
    response = staff_client.get(f"/api/hosts/?page={page}")
    assert response.status_code == 400
    assert "page" in response.json()


def test_a_page_past_the_end_is_a_404(staff_client, seven_hosts):
    assert staff_client.get("/api/hosts/?page=9").status_code == 404


@pytest.mark.parametrize("size", ["abc", "0", "-1", "1.5", "null"])
def test_a_malformed_page_size_is_a_400(staff_client, seven_hosts, size):
    response = staff_client.get(f"/api/hosts/?page_size={size}")
    assert response.status_code == 400
    assert "page_size" in response.json()


def test_a_page_size_above_the_maximum_is_not_an_error(staff_client, seven_hosts):
    response = staff_client.get("/api/hosts/?page_size=100000")
    assert response.status_code == 200 and len(response.json()["results"]) == 7


# --- bad input never becomes a 500 ----------------------------------------------------------


@pytest.mark.parametrize(
    "url",
    [
        "/api/hosts/%00/",
        "/api/workers/w%00/",
        "/api/jobs/99999999999999999999999/",
        "/api/jobs/abc/",
        "/api/leases/-1/",
        "/api/scheduler/1e9/",
    ],
)
def test_a_malformed_identifier_is_a_404(staff_client, url):
    assert staff_client.get(url).status_code == 404


@pytest.mark.parametrize(
    "query",
    [
        "label=%00",
        "q=%00",
        "worker=%00",
        "label=" + "x" * 5000,
        "suite=-1.7976931348623157e%2B308&job=99999999999999999999999",
    ],
)
def test_odd_filter_values_never_make_a_500(staff_client, query):
    f.host("h1", ["board:x"])
    for url in ("/api/hosts/", "/api/jobs/", "/api/queue/", "/api/leases/"):
        assert staff_client.get(f"{url}?{query}").status_code in (200, 400), url


def test_malformed_json_and_a_non_object_body_are_a_400(staff_client):
    f.host("h1")
    response = staff_client.generic(
        "POST", "/api/hosts/h1/lock/", "{not json", content_type="application/json"
    )
    assert response.status_code == 400
    assert staff_client.post("/api/suites/", ["a", "list"], format="json").status_code == 400
    assert staff_client.post("/api/hosts/", "just a string", format="json").status_code == 400


def test_form_encoded_bodies_work_for_curl_users(staff_client):
    f.host("h1")
    response = staff_client.post(
        "/api/hosts/h1/lock/", {"reason": "from curl -d"}, format="multipart"
    )
    assert response.status_code == 200
    assert response.json()["lock_reason"] == "from curl -d"


def test_a_nul_character_in_a_body_is_a_400(staff_client):
    response = staff_client.post("/api/workers/", {"name": "w\x00"})
    assert response.status_code == 400


def test_an_unsupported_method_is_a_405(staff_client, lab):
    assert staff_client.delete(f"/api/suites/{lab.suite.pk}/").status_code == 405
    assert staff_client.put("/api/workers/w1/", {"name": "x"}).status_code == 405


@pytest.mark.parametrize(
    ("exc", "status", "body"),
    [
        (Conflict("host h1 is already locked"), 409, {"detail": "host h1 is already locked"}),
        (InvalidInput("bad label", field="labels"), 400, {"labels": ["bad label"]}),
        (InvalidInput("bad"), 400, {"detail": "bad"}),
        (Forbidden("not yours"), 403, {"detail": "not yours"}),
        (DjangoValidationError({"name": ["too long"]}), 400, {"name": ["too long"]}),
        (DjangoValidationError("nope"), 400, {"detail": ["nope"]}),
        (DataError("value too long"), 400, None),
        (OverflowError("Python int too large to convert to SQLite INTEGER"), 400, None),
        (ObjectDoesNotExist(), 404, None),
    ],
)
def test_the_exception_handler_maps_service_and_django_errors(exc, status, body):
    response = exception_handler(exc, {})
    assert response.status_code == status
    if body is not None:
        assert response.data == body


def test_a_constraint_caught_race_is_a_409_not_a_500(staff_client, monkeypatch):
    f.host("h1")

    def raced(**_kwargs: object) -> None:
        raise IntegrityError('duplicate key value violates "one_active_lease_per_host"')

    monkeypatch.setattr("jobs.services.lease_reserve", raced)
    response = staff_client.post("/api/leases/", {"host": "h1", "duration": 60, "reason": "x"})
    assert response.status_code == 409
    assert "nothing was changed" in response.json()["detail"]


def test_a_path_no_route_matches_is_a_json_404(staff_client):
    for url in ("/api/jobs/1.5/abort/", "/api/nothing-here/", "/api/hosts/a/b/lock/"):
        response = staff_client.post(url)
        assert response.status_code == 404
        assert response.json() == {"detail": "Not found."}
    assert staff_client.get("/api/hosts").status_code == 301  # APPEND_SLASH still helps
