"""The API's throttles, applied to the HTML side too: the login forms and every write."""

from __future__ import annotations

from collections.abc import Callable

from django.db import OperationalError
from django.http import HttpRequest, HttpResponse
from rest_framework import throttling

from schedsite.errors import Unavailable
from schedsite.throttles import (
    SAFE_METHODS,
    LoginThrottle,
    PasswordResetEmailThrottle,
    PasswordResetThrottle,
    WriteThrottle,
    too_many_attempts,
    wait_words,
)
from schedsite.transactions import RETRY_AFTER, is_transient
from schedsite.ui.htmx import error_response

# URL names of the HTML login forms; /api/token/ is a DRF view and lists LoginThrottle itself.
LOGIN_FORMS = {"login", "admin:login"}
# The form that mails a reset link: throttled per address and per email asked for.
PASSWORD_RESET_FORM = "password_reset"


class ThrottleMiddleware:
    """Password checks per address, and a user's writes in the same count as their API writes."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_view(
        self, request: HttpRequest, view_func: object, view_args: object, view_kwargs: object
    ) -> HttpResponse | None:
        match = request.resolver_match
        if match is None or match.namespace == "api":
            return None  # DRF throttles its own views (docs/security.md#throttles-and-lockout)
        if match.view_name == PASSWORD_RESET_FORM:
            for reset in (PasswordResetThrottle(), PasswordResetEmailThrottle()):
                if not reset.allow_request(request, None):
                    return refuse_password_reset(request, retry_after(reset))
            return None
        if match.view_name in LOGIN_FORMS:
            throttle, refusal = LoginThrottle(), refuse_sign_in
        elif request.method not in SAFE_METHODS and request.user.is_authenticated:
            throttle, refusal = WriteThrottle(), refuse_write
        else:
            return None
        if throttle.allow_request(request, None):
            return None
        return refusal(request, retry_after(throttle))


def refuse_sign_in(request: HttpRequest, seconds: int) -> HttpResponse:
    """The page that says the sign-in form is closed to this address for a while."""
    message = f"Too many sign-in attempts from your address. Try again in {wait_words(seconds)}."
    return too_many_attempts(request, message, seconds)


def refuse_password_reset(request: HttpRequest, seconds: int) -> HttpResponse:
    """The page that says no more reset mails are sent for a while (nothing was sent)."""
    message = (
        f"Too many password reset requests: no mail was sent. Try again in {wait_words(seconds)}."
    )
    return too_many_attempts(request, message, seconds, title="Too many password reset requests")


def refuse_write(request: HttpRequest, seconds: int) -> HttpResponse:
    """A 429 that says nothing was changed, as a toast (htmx) or an error page."""
    message = (
        f"Too many changes in a short time: nothing was changed. Try again in "
        f"{wait_words(seconds)}."
    )
    response = error_response(request, message, 429)
    response["Retry-After"] = str(seconds)
    return response


def retry_after(throttle: throttling.SimpleRateThrottle) -> int:
    return max(1, round(throttle.wait() or 1))


class BusyDatabaseMiddleware:
    """A page whose transaction lost to a deadlock (after its service's retries) is a 503 with
    Retry-After, as the API answers (schedsite/api_exceptions.py), never a 500."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_exception(self, request: HttpRequest, exc: Exception) -> HttpResponse | None:
        if isinstance(exc, Unavailable):
            seconds = exc.retry_after
        elif isinstance(exc, OperationalError) and is_transient(exc):
            seconds = RETRY_AFTER
        else:
            return None
        message = "The database was busy with a conflicting change: nothing was changed. Try again."
        response = error_response(request, message, 503)
        response["Retry-After"] = str(seconds)
        return response
