"""The notifications panel of the profile page, rendered where the page includes it."""

from __future__ import annotations

from typing import Any

from django import template

from notifications.views import panel_context

register = template.Library()


@register.inclusion_tag("notifications/partials/profile_panel.html", takes_context=True)
def notification_panel(context: template.Context) -> dict[str, Any]:
    """The signed-in user's notification settings and their last deliveries."""
    request = context["request"]
    return {**panel_context(request), "request": request, "csrf_token": context.get("csrf_token")}
