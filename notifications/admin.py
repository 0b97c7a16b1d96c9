"""Admin pages of notifications: subscriptions, events and their deliveries with attempts."""

from __future__ import annotations

from django.contrib import admin

from notifications.models import Attempt, Delivery, Event, Subscription, SuiteNotify
from schedsite.admin_base import ViewOnlyAdmin


@admin.register(Subscription)
class SubscriptionAdmin(admin.ModelAdmin):
    list_display = (
        "user",
        "email",
        "webhook_url",
        "suite_finished",
        "host_repair_failed",
        "worker_offline",
    )
    search_fields = ("user__username", "webhook_url")
    exclude = ("secret",)


@admin.register(SuiteNotify)
class SuiteNotifyAdmin(admin.ModelAdmin):
    list_display = ("suite", "email", "webhook")
    raw_id_fields = ("suite",)


class DeliveryInline(admin.TabularInline):
    model = Delivery
    extra = 0
    fields = ("channel", "destination", "status", "attempts", "last_error")
    readonly_fields = fields
    can_delete = False


@admin.register(Event)
class EventAdmin(ViewOnlyAdmin):
    list_display = ("key", "kind", "created_at")
    list_filter = ("kind",)
    search_fields = ("key",)
    inlines = [DeliveryInline]


class AttemptInline(admin.TabularInline):
    model = Attempt
    extra = 0
    readonly_fields = ("at", "ok", "status_code", "error", "duration_ms")
    can_delete = False


@admin.register(Delivery)
class DeliveryAdmin(ViewOnlyAdmin):
    list_display = ("event", "channel", "destination", "status", "attempts", "next_attempt_at")
    list_filter = ("status", "channel")
    search_fields = ("destination", "event__key")
    raw_id_fields = ("event", "user")
    inlines = [AttemptInline]
