"""Your account page: who you are, your roles, and your API token."""

from __future__ import annotations

from django.db import transaction
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render, resolve_url
from django.views.decorators.http import require_http_methods, require_POST
from rest_framework.authtoken.models import Token

from schedsite import roles
from schedsite.ui.htmx import action_response, ui_login_required


@ui_login_required
@require_http_methods(["GET", "POST"])
def profile(request: HttpRequest) -> HttpResponse:
    """Who you are, your roles, and your API token (created or regenerated here)."""
    token = Token.objects.filter(user=request.user).first()
    if request.method == "POST":
        with transaction.atomic():
            # Regenerating revokes the old token at once: scripts using it get 401 from now on.
            replaced = Token.objects.filter(user=request.user).delete()[0] > 0
            token = Token.objects.create(user=request.user)
        message = (
            "New API token created; the old one no longer works."
            if replaced
            else "API token created."
        )
        return action_response(
            request,
            "accounts/partials/token_panel.html",
            {"token": token, "just_created": True},
            message=message,
            fallback=request.path,
        )
    context = {
        "token": token,
        "is_staff": roles.is_staff(request.user),
        "is_runner": roles.is_runner(request.user),
        "api_base": request.build_absolute_uri("/api/"),
    }
    return render(request, "accounts/profile.html", context)


@ui_login_required
@require_POST
def token_revoke(request: HttpRequest) -> HttpResponse:
    """Delete your API token: scripts using it get 401 from now on, and none replaces it."""
    revoked = Token.objects.filter(user=request.user).delete()[0] > 0
    message = "API token revoked; it no longer works." if revoked else "You had no API token."
    return action_response(
        request,
        "accounts/partials/token_panel.html",
        {"token": None},
        message=message,
        fallback=resolve_url("profile"),
    )
