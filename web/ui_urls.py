"""Web UI routes (docs/ui.md): the dashboard and profile here, the rest in each app's urls."""

from __future__ import annotations

from django.urls import include, path

from jobs.views_dashboard import dashboard
from schedsite.accounts import profile, token_revoke

urlpatterns = [
    path("", dashboard, name="dashboard"),
    path("accounts/profile/", profile, name="profile"),
    path("accounts/profile/token/revoke/", token_revoke, name="token_revoke"),
    path("", include("jobs.host_urls")),
    path("", include("jobs.urls")),
    path("", include("notifications.urls")),
    path("", include("stats.urls")),
]
