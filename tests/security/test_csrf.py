"""CSRF (docs/security.md#csrf): every UI form and action needs the token.

So do the API's writes with session authentication.
"""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser

import pytest
from django.test import Client
from rest_framework.authtoken.models import Token

from tests.factories import signed_in
from tests.security.conftest import HTMX, snapshot
from tests.security.test_ui_permissions import ACTIONS, PAGES, form_of

pytestmark = pytest.mark.django_db


def strict(user: object | None) -> Client:
    """A browser that, unlike Django's test client by default, must pass the CSRF check."""
    return signed_in(user, enforce_csrf_checks=True)


def csrf_cookie(client: Client) -> str:
    """Load a page, as a browser would first, and return the CSRF cookie it was given."""
    client.get("/accounts/profile/")
    return client.cookies["csrftoken"].value


# --- UI actions -----------------------------------------------------------------------------


@pytest.mark.parametrize("htmx", [True, False], ids=["htmx", "form"])
@pytest.mark.parametrize("action", ACTIONS, ids=[a.route for a in ACTIONS])
def test_every_ui_action_without_the_csrf_token_is_refused_and_changes_nothing(
    lab, sam, action, htmx
):
    client = strict(sam)
    csrf_cookie(client)  # the cookie alone is not enough: the token must come with the request
    before = snapshot()
    response = client.post(action.url(lab), form_of(action, lab), headers=HTMX if htmx else {})
    assert response.status_code == 403
    assert b"CSRF" in response.content
    assert snapshot() == before


@pytest.mark.parametrize("action", ACTIONS, ids=[a.route for a in ACTIONS])
def test_every_ui_action_with_the_token_from_the_page_passes_the_check(lab, sam, action):
    # The control for the test above: the same request, with the token the page hands out.
    client = strict(sam)
    html = client.get("/hosts/").content.decode()
    header = json.loads(re.search(r"hx-headers='([^']*)'", html).group(1))
    response = client.post(action.url(lab), form_of(action, lab), headers={**HTMX, **header})
    assert response.status_code == (action.success or 200)


@pytest.mark.parametrize(
    ("path", "data"),
    [
        ("/accounts/login/", {"username": "sam", "password": "sam-pass"}),
        ("/accounts/logout/", {}),
        (
            "/accounts/password_change/",
            {"old_password": "sam-pass", "new_password1": "x-Pass-91!", "new_password2": "x"},
        ),
    ],
)
def test_the_account_forms_need_the_token_too(sam, path, data):
    response = strict(sam if "login" not in path else None).post(path, data)
    assert response.status_code == 403


# --- rendered forms -------------------------------------------------------------------------


class Forms(HTMLParser):
    """Every <form method="post"> of a page, and whether it carries a csrfmiddlewaretoken."""

    def __init__(self) -> None:
        super().__init__()
        self.forms: list[dict] = []
        self.hx_headers: list[str] = []
        self._open: dict | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if a.get("hx-headers"):
            self.hx_headers.append(a["hx-headers"])
        if tag == "form" and (a.get("method") or "").lower() == "post":
            self._open = {"action": a.get("action") or a.get("hx-post"), "token": None}
            self.forms.append(self._open)
        elif tag == "input" and self._open is not None and a.get("name") == "csrfmiddlewaretoken":
            self._open["token"] = a.get("value")

    def handle_endtag(self, tag: str) -> None:
        if tag == "form":
            self._open = None


def parse(html: str) -> Forms:
    parser = Forms()
    parser.feed(html)
    return parser


@pytest.mark.parametrize("htmx", [False, True], ids=["page", "fragment"])
@pytest.mark.parametrize("route", list(PAGES))
def test_every_post_form_of_every_page_carries_the_csrf_token(lab, sam, route, htmx):
    client = strict(sam)  # staff see the most forms
    response = client.get(PAGES[route](lab), headers=HTMX if htmx else {})
    assert response.status_code == 200
    for form in parse(response.content.decode()).forms:
        assert form["token"], f"{route}: the form posting to {form['action']} has no CSRF token"


def test_the_profile_token_forms_carry_the_csrf_token_with_and_without_a_token(sam):
    client = strict(sam)
    without = parse(client.get("/accounts/profile/").content.decode()).forms
    Token.objects.create(user=sam)
    with_token = parse(client.get("/accounts/profile/").content.decode()).forms
    actions = {f["action"] for f in without + with_token}
    assert {"/accounts/profile/", "/accounts/profile/token/revoke/"} <= actions
    assert all(f["token"] for f in without + with_token)


def test_every_page_hands_htmx_the_csrf_token_in_its_hx_headers(lab, sam):
    # htmx requests from buttons outside any form (hx-post on a button) get the token from the
    # <body hx-headers=...> that base.html sets; it must be a token the check accepts.
    for route, url in PAGES.items():
        if route in (
            "hosts:label_suggest",
            "hosts:host_suggest",
            "jobs:suite_job_row",
            "jobs:suite_role_row",
        ):
            continue  # fragments only, always swapped into a full page that has the header
        if route in ("jobs:job_output", "hosts:host_export"):
            continue  # plain-text and CSV downloads, not pages
        client = strict(sam)
        page = parse(client.get(url(lab)).content.decode())
        assert len(page.hx_headers) == 1, route
        token = json.loads(page.hx_headers[0])["X-CSRFToken"]
        response = client.post("/accounts/profile/", headers={**HTMX, "X-CSRFToken": token})
        assert response.status_code == 200, route


# --- the API --------------------------------------------------------------------------------


def test_an_api_write_with_a_session_and_no_csrf_token_is_refused(lab, sam):
    client = strict(sam)
    before = snapshot()
    response = client.post(
        "/api/hosts/free.lab/lock/", {"reason": "x"}, content_type="application/json"
    )
    assert response.status_code == 403
    assert "CSRF" in response.json()["detail"]
    assert snapshot() == before


def test_an_api_write_with_a_session_and_the_csrf_token_goes_through(lab, sam):
    client = strict(sam)
    token = csrf_cookie(client)
    response = client.post(
        "/api/hosts/free.lab/lock/",
        {"reason": "x"},
        content_type="application/json",
        headers={"X-CSRFToken": token},
    )
    assert response.status_code == 200


def test_revoking_a_token_with_a_session_needs_the_csrf_token(sam):
    Token.objects.create(user=sam)
    client = strict(sam)
    assert client.delete("/api/token/").status_code == 403
    assert Token.objects.filter(user=sam).exists()
    assert (
        client.delete("/api/token/", headers={"X-CSRFToken": csrf_cookie(client)}).status_code
        == 204
    )
    assert not Token.objects.filter(user=sam).exists()


def test_an_api_write_with_a_token_needs_no_csrf_token(lab, sam):
    # A script has no cookie a forged page could ride on, so CSRF does not apply to it.
    key = Token.objects.create(user=sam).key
    client = Client(enforce_csrf_checks=True, headers={"Authorization": f"Token {key}"})
    response = client.post(
        "/api/hosts/free.lab/lock/", {"reason": "x"}, content_type="application/json"
    )
    assert response.status_code == 200
