"""Notification pages (docs/ui.md#notifications)."""

from __future__ import annotations

from django.urls import path

from notifications import views

app_name = "notifications"

urlpatterns = [
    path("notifications/deliveries/", views.delivery_list, name="delivery_list"),
    path("notifications/settings/", views.subscription_save, name="subscription_save"),
    path("notifications/secret/", views.secret_regenerate, name="secret_regenerate"),
]
