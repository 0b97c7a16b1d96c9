"""Web UI routes of the reliability pages, the lab history and the label pages (docs/ui.md)."""

from __future__ import annotations

from django.urls import path

from stats import views, views_labels

app_name = "stats"

urlpatterns = [
    path("reliability/hosts/", views.host_reliability, name="host_reliability"),
    path("reliability/tests/", views.test_reliability, name="test_reliability"),
    path("history/", views_labels.lab_history, name="lab_history"),
    # A label holds ':' and may hold '/': the path converter takes both (board:eve, rack/3).
    path("labels/<path:label>/", views_labels.label_detail, name="label_detail"),
]
