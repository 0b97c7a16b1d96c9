"""API tokens are revocable: revoke or regenerate, and the old key gets 401 at once.

The rules are in docs/security.md#api-tokens.
"""

from __future__ import annotations

import pytest
from django.test import Client
from rest_framework.authtoken.models import Token

from tests.factories import signed_in
from tests.security.conftest import HTMX

pytestmark = pytest.mark.django_db


def with_key(key: str) -> Client:
    """A script calling the API with a token."""
    return Client(headers={"Authorization": f"Token {key}"})


def works(key: str) -> bool:
    status = with_key(key).get("/api/me/").status_code
    assert status in (200, 401)
    return status == 200


def test_revoking_in_the_profile_deletes_the_token_and_the_old_key_gets_401(alice):
    key = Token.objects.create(user=alice).key
    client = signed_in(alice)
    assert "Revoke token" in client.get("/accounts/profile/").content.decode()

    response = client.post("/accounts/profile/token/revoke/", headers=HTMX)

    html = response.content.decode()
    assert response.status_code == 200
    assert "API token revoked" in html and "Create my token" in html and key not in html
    assert not Token.objects.filter(user=alice).exists()
    assert not works(key)


def test_revoking_without_a_token_says_so_and_a_plain_post_comes_back_to_the_profile(alice):
    client = signed_in(alice)
    response = client.post("/accounts/profile/token/revoke/")
    assert response.status_code == 302 and response["Location"] == "/accounts/profile/"
    assert "You had no API token." in client.get(response["Location"]).content.decode()


def test_revoking_is_post_only(alice):
    Token.objects.create(user=alice)
    assert signed_in(alice).get("/accounts/profile/token/revoke/").status_code == 405
    assert Token.objects.filter(user=alice).exists()


def test_regenerating_in_the_profile_retires_the_old_key(alice):
    old = Token.objects.create(user=alice).key
    signed_in(alice).post("/accounts/profile/", headers=HTMX)
    new = Token.objects.get(user=alice).key
    assert new != old
    assert works(new) and not works(old)


def test_revoking_ones_own_token_leaves_everyone_elses_alone(alice, bob):
    mine, theirs = (Token.objects.create(user=u).key for u in (alice, bob))
    signed_in(alice).post("/accounts/profile/token/revoke/", headers=HTMX)
    assert with_key(mine).delete("/api/token/").status_code == 401
    assert works(theirs)


def test_delete_api_token_revokes_the_callers_token(alice, bob):
    key = Token.objects.create(user=alice).key
    other = Token.objects.create(user=bob).key

    response = with_key(key).delete("/api/token/")

    assert response.status_code == 204
    assert not works(key)
    assert works(other)
    # Revoking again with the dead key is a 401 like any other call.
    assert with_key(key).delete("/api/token/").status_code == 401


def test_delete_api_token_without_credentials_is_a_401():
    response = Client().delete("/api/token/")
    assert response.status_code == 401
    assert response["WWW-Authenticate"] == "Token"


def test_after_revoking_the_password_gets_a_fresh_token(alice):
    key = Token.objects.create(user=alice).key
    with_key(key).delete("/api/token/")
    response = Client().post("/api/token/", {"username": "alice", "password": "alice-pass"})
    assert response.status_code == 200
    fresh = response.json()["token"]
    assert fresh != key and works(fresh) and not works(key)


def test_the_revoke_operation_is_in_the_api_schema():
    paths = Client().get("/api/schema/?format=json").json()["paths"]
    assert set(paths["/api/token/"]) >= {"post", "delete"}
    assert "204" in paths["/api/token/"]["delete"]["responses"]
