"""Web UI routes of the reliability pages (docs/ui.md#reliability)."""

from __future__ import annotations

from django.urls import path

from stats import views

app_name = "stats"

urlpatterns = [
    path("reliability/hosts/", views.host_reliability, name="host_reliability"),
    path("reliability/tests/", views.test_reliability, name="test_reliability"),
]
