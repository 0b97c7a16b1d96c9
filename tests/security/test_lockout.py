"""Login lockout (django-axes): a username that keeps failing from one address is refused."""

from __future__ import annotations

from datetime import timedelta

import pytest
from axes.models import AccessAttempt
from django.test import Client
from rest_framework.test import APIClient

pytestmark = pytest.mark.django_db

ATTACKER = "203.0.113.9"
ELSEWHERE = "198.51.100.7"


def token(address: str, password: str, username: str = "alice"):  # noqa: ANN201
    return APIClient(REMOTE_ADDR=address).post(
        "/api/token/", {"username": username, "password": password}
    )


def test_five_wrong_passwords_lock_the_username_out_of_the_token_endpoint(alice) -> None:  # noqa: ANN001
    for _ in range(4):
        assert token(ATTACKER, "guess").status_code == 400
    fifth = token(ATTACKER, "guess")
    assert fifth.status_code == 429
    assert fifth["Content-Type"] == "application/json"
    assert "Too many failed sign-ins for this account" in fifth.json()["detail"]
    assert fifth["Retry-After"] == "900"  # AXES_COOLOFF_MINUTES, 15
    # Even the right password is refused now, from that address...
    locked = token(ATTACKER, "alice-pass")
    assert locked.status_code == 429
    assert "token" not in locked.json()
    # ...but alice herself, elsewhere, is not locked out by someone guessing her password.
    assert token(ELSEWHERE, "alice-pass").status_code == 200


def test_the_lockout_ends_after_the_cool_off(alice) -> None:  # noqa: ANN001
    for _ in range(5):
        token(ATTACKER, "guess")
    assert token(ATTACKER, "alice-pass").status_code == 429
    AccessAttempt.objects.update(
        attempt_time=AccessAttempt.objects.get().attempt_time - timedelta(minutes=16)
    )
    assert token(ATTACKER, "alice-pass").status_code == 200


def test_signing_in_before_the_limit_starts_the_count_again(alice) -> None:  # noqa: ANN001
    browser = Client(REMOTE_ADDR=ATTACKER)
    for _ in range(4):
        browser.post("/accounts/login/", {"username": "alice", "password": "typo"})
    assert (
        browser.post("/accounts/login/", {"username": "alice", "password": "alice-pass"})
    ).status_code == 302
    for _ in range(4):
        assert token(ATTACKER, "typo").status_code == 400


@pytest.mark.parametrize("path", ["/accounts/login/", "/admin/login/"])
def test_the_login_forms_lock_out_the_same_way(sam, path: str) -> None:  # noqa: ANN001
    browser = Client(REMOTE_ADDR=ATTACKER)
    for _ in range(4):
        response = browser.post(path, {"username": "sam", "password": "guess"})
        assert response.status_code == 200  # the form again, with its error
    response = browser.post(path, {"username": "sam", "password": "guess"})
    assert response.status_code == 429
    assert response["Retry-After"] == "900"
    page = response.content.decode()
    assert "<h1" in page and "Too many sign-in attempts" in page
    assert "Too many failed sign-ins for this account from your address" in page
    response = browser.post(path, {"username": "sam", "password": "sam-pass"})
    assert response.status_code == 429
    assert "_auth_user_id" not in browser.session
    # The lockout is sam's from that address: sam elsewhere signs in.
    elsewhere = Client(REMOTE_ADDR=ELSEWHERE)
    assert elsewhere.post(path, {"username": "sam", "password": "sam-pass"}).status_code == 302


def test_one_lockout_covers_every_login(alice) -> None:  # noqa: ANN001
    for _ in range(5):
        Client(REMOTE_ADDR=ATTACKER).post(
            "/accounts/login/", {"username": "alice", "password": "guess"}
        )
    assert token(ATTACKER, "alice-pass").status_code == 429
