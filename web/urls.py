"""Top-level URL configuration: the UI at /, the REST API at /api/, Django admin at /admin/."""

from __future__ import annotations

from django.contrib import admin
from django.urls import include, path

from jobs.metrics import metrics

urlpatterns = [
    path("admin/", admin.site.urls),
    path("accounts/", include("django.contrib.auth.urls")),
    path("api/", include("web.api_urls")),
    path("metrics", metrics, name="metrics"),
    path("", include("web.ui_urls")),
]
