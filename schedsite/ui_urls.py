"""Web UI routes (SPEC §7): the dashboard and profile here, the rest in each app's urls."""

from __future__ import annotations

from django.urls import include, path

from schedsite import views

urlpatterns = [
    path("", views.dashboard, name="dashboard"),
    path("accounts/profile/", views.profile, name="profile"),
    path("accounts/profile/token/revoke/", views.token_revoke, name="token_revoke"),
    path("", include("hosts.urls")),
    path("", include("jobs.urls")),
]
