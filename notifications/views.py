"""Notification pages: the profile's settings panel and the staff delivery log."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_GET, require_POST

from notifications import services
from notifications.choices import EventKind
from notifications.filtersets import DeliveryFilterSet
from notifications.forms import SubscriptionForm
from notifications.models import Delivery
from schedsite import roles
from schedsite.errors import InvalidInput
from schedsite.ui.htmx import (
    action_response,
    clean_query,
    filtered_page,
    page_or_fragment,
    staff_only,
    ui_login_required,
)

PANEL = "notifications/partials/profile_panel.html"
DELIVERIES_PER_PAGE = 50
RECENT_DELIVERIES = 10


def panel_context(request: HttpRequest, **extra: Any) -> dict[str, Any]:
    """The profile's notifications panel: the user's settings and their last deliveries."""
    user = request.user
    recent = Delivery.objects.filter(user=user).select_related("event")[:RECENT_DELIVERIES]
    sub = services.subscription_of(user)
    posted = extra.get("posted")
    # A refused form comes back as it was typed, its ticked events included: shown as saved
    # instead, a second Save would quietly store what the person had unticked.
    if posted is not None:
        checked = set(posted.getlist("events"))
    else:
        checked = {kind for kind in EventKind.values if getattr(sub, kind)}
    return {
        "user": user,
        "sub": sub,
        "events_checked": checked,
        "is_staff": roles.is_staff(user),
        "recent_deliveries": list(recent),
        "now": timezone.now(),
        **extra,
    }


def _fallback() -> str:
    return reverse("profile") + "#notifications"


@ui_login_required
@require_POST
def subscription_save(request: HttpRequest) -> HttpResponse:
    """Save the user's notification settings; a refusal names the field and changes nothing."""
    form = SubscriptionForm(request.POST)
    valid = form.is_valid()
    data = form.cleaned_data
    had_webhook = bool(services.subscription_of(request.user).webhook_url)
    try:
        if not valid:
            # A field the form could not read is left out of cleaned_data: saving without it
            # would store an empty value in its place (no events: every subscription dropped).
            field, errors = next(iter(form.errors.items()))
            raise InvalidInput(f"{form.fields[field].label or field}: {errors[0]}", field=field)
        sub = services.subscription_update(
            user=request.user,
            email=data.get("email", False),
            email_address=data.get("email_address", ""),
            webhook_url=data.get("webhook_url", ""),
            events=data.get("events", []),
        )
    except InvalidInput as exc:
        if not getattr(request, "htmx", False):
            messages.error(request, exc.message)
            return redirect(_fallback())
        context = panel_context(request, form=form, error=exc, posted=request.POST)
        return render(request, PANEL, context, status=400)
    # A first webhook shows its secret once, as a regenerated one does.
    show_secret = bool(sub.webhook_url) and not had_webhook
    context = panel_context(request, secret_shown=show_secret)
    message = "Notification settings saved."
    if (sub.email or sub.webhook_url) and not data.get("events"):
        message += " No event is ticked, so nothing will be sent."
    if show_secret:
        message += " Copy your signing secret now: it is shown only this once."
    return action_response(request, PANEL, context, message=message, fallback=_fallback())


@ui_login_required
@require_POST
def secret_regenerate(request: HttpRequest) -> HttpResponse:
    """Make a new webhook signing secret and show it once; the old one stops verifying."""
    services.secret_regenerate(user=request.user)
    context = panel_context(request, secret_shown=True)
    message = "New signing secret made; signatures with the old one no longer verify."
    return action_response(request, PANEL, context, message=message, fallback=_fallback())


@ui_login_required
@require_GET
def delivery_list(request: HttpRequest) -> HttpResponse:
    """Every delivery, newest first, with its status, attempts and last error (staff)."""
    if denied := staff_only(request, "notification.deliveries"):
        return denied
    context = filtered_page(
        DeliveryFilterSet,
        Delivery.objects.select_related("event", "user").prefetch_related("attempt_log"),
        clean_query(request.GET),
        request.GET.get("page"),
        per_page=DELIVERIES_PER_PAGE,
        path=reverse("notifications:delivery_list"),
    )
    context["deliveries"] = list(context["page_obj"].object_list)
    return page_or_fragment(
        request,
        "notifications/delivery_list.html",
        "notifications/partials/delivery_table.html",
        context,
    )
