"""Request throttles and the login lockout's answer (docs/security.md#throttles-and-lockout)."""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING

from axes.helpers import get_cool_off
from django.core.cache.backends.locmem import LocMemCache
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.template.loader import render_to_string
from rest_framework import throttling
from rest_framework.settings import api_settings

from schedsite import roles
from schedsite.api_permissions import action_rule

if TYPE_CHECKING:  # rest_framework.views imports this module through its settings
    from rest_framework.request import Request
    from rest_framework.views import APIView

SAFE_METHODS = {"GET", "HEAD", "OPTIONS"}


def is_runner_protocol(view: APIView) -> bool:
    """Tell whether the view's action is one the runner protocol opens to runners.

    docs/api.md#the-runner-protocol-and-run_worker lists them.
    """
    rule = action_rule(view)
    return rule is not None and rule.who in (roles.Who.RUNNER, roles.Who.WORKER_RUNNER)


class RateFromSettings:
    """Read the rate on every request, not once at import, so a changed setting applies."""

    scope: str

    def get_rate(self) -> str | None:
        return api_settings.DEFAULT_THROTTLE_RATES[self.scope]


class AnonThrottle(RateFromSettings, throttling.AnonRateThrottle):
    """Anonymous requests, per client IP."""

    scope = "anon"


class AuthenticatedThrottle(RateFromSettings, throttling.SimpleRateThrottle):
    """A signed-in user's requests of one kind, per user."""

    def applies(self, request: Request, view: APIView) -> bool:
        raise NotImplementedError

    def get_cache_key(self, request: Request, view: APIView) -> str | None:
        if not request.user.is_authenticated or not self.applies(request, view):
            return None
        return self.cache_format % {"scope": self.scope, "ident": request.user.pk}


class ReadThrottle(AuthenticatedThrottle):
    """Reads (GET, HEAD, OPTIONS), per user."""

    scope = "read"

    def applies(self, request: Request, view: APIView) -> bool:
        return request.method in SAFE_METHODS and not is_runner_protocol(view)


class WriteThrottle(AuthenticatedThrottle):
    """Writes (POST, PUT, PATCH, DELETE), per user, counted apart from reads."""

    scope = "write"

    def applies(self, request: Request, view: APIView) -> bool:
        return request.method not in SAFE_METHODS and not is_runner_protocol(view)


class RunnerThrottle(AuthenticatedThrottle):
    """The runner protocol, per account: generous, since one runner heartbeats many leases.

    Counted in each web process's memory, not in the shared cache: the runner protocol is the
    lab's busiest path, and a shared count cost a cache round trip (with the database cache,
    two statements) on every call (docs/security.md#throttles-and-lockout).
    """

    scope = "runner"
    cache = LocMemCache("runner-throttle", {"OPTIONS": {"MAX_ENTRIES": 10_000}})

    def applies(self, request: Request, view: APIView) -> bool:
        return is_runner_protocol(view)


class LoginThrottle(RateFromSettings, throttling.SimpleRateThrottle):
    """Password checks (POST /api/token/, the login forms), per client IP."""

    scope = "login"

    def get_cache_key(self, request: Request | HttpRequest, view: object) -> str | None:
        if request.method != "POST":
            return None
        return self.cache_format % {"scope": self.scope, "ident": self.get_ident(request)}


class PasswordResetThrottle(RateFromSettings, throttling.SimpleRateThrottle):
    """Password-reset requests (each sends a mail), per client IP."""

    scope = "password_reset"

    def get_cache_key(self, request: HttpRequest, view: object) -> str | None:
        if request.method != "POST":
            return None
        return self.cache_format % {"scope": self.scope, "ident": self.get_ident(request)}


class PasswordResetEmailThrottle(RateFromSettings, throttling.SimpleRateThrottle):
    """Password-reset requests per email address asked for, whoever asks: one inbox is not
    flooded from many addresses. Counted whether or not an account has that email."""

    scope = "password_reset_email"

    def get_cache_key(self, request: HttpRequest, view: object) -> str | None:
        email = request.POST.get("email", "").strip().lower() if request.method == "POST" else ""
        if not email:
            return None
        ident = hashlib.sha256(email.encode()).hexdigest()  # any text, a safe cache key
        return self.cache_format % {"scope": self.scope, "ident": ident}


def client_ip(request: HttpRequest) -> str:
    """The client's address, behind NUM_PROXIES trusted proxies: one rule for throttles and axes."""
    return throttling.BaseThrottle().get_ident(request)


def lockout_response(
    request: HttpRequest, original_response: HttpResponse | None = None, credentials: object = None
) -> HttpResponse:
    """django-axes' answer once a username has failed too often from one address (429)."""
    seconds = max(1, round(get_cool_off(request).total_seconds()))
    message = (
        f"Too many failed sign-ins for this account from your address. Try again in "
        f"{wait_words(seconds)}."
    )
    return too_many_attempts(request, message, seconds)


def too_many_attempts(
    request: HttpRequest, message: str, seconds: int, title: str = ""
) -> HttpResponse:
    """429 with Retry-After: JSON for the API (/api/token/), a page for the login forms."""
    match = request.resolver_match
    if match is not None and match.namespace == "api":
        response: HttpResponse = JsonResponse({"detail": message}, status=429)
    else:
        body = render_to_string(
            "registration/too_many_attempts.html",
            {"message": message, "title": title},
            request=request,
        )
        response = HttpResponse(body, status=429)
    response["Retry-After"] = str(seconds)
    return response


def wait_words(seconds: int) -> str:
    if seconds < 90:
        return f"{seconds} seconds"
    return f"{round(seconds / 60)} minutes"
