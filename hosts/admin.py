"""Django admin for the lab inventory."""

from __future__ import annotations

from django.contrib import admin

from hosts.models import Host, HostEvent, Label, Worker


@admin.register(Worker)
class WorkerAdmin(admin.ModelAdmin):
    list_display = ["name", "paused", "paused_reason", "last_seen", "created_at"]
    list_filter = ["paused"]
    search_fields = ["name", "paused_reason"]


@admin.register(Label)
class LabelAdmin(admin.ModelAdmin):
    list_display = ["name"]
    search_fields = ["name"]


@admin.register(Host)
class HostAdmin(admin.ModelAdmin):
    list_display = ["hostname", "worker", "status", "locked", "lock_reason", "current_build"]
    list_filter = ["status", "locked", "worker", "labels"]
    search_fields = ["hostname", "lock_reason", "labels__name", "current_build"]
    autocomplete_fields = ["labels"]
    list_select_related = ["worker"]


@admin.register(HostEvent)
class HostEventAdmin(admin.ModelAdmin):
    list_display = ["created_at", "host", "worker", "kind", "actor", "message"]
    list_filter = ["kind", "actor"]
    search_fields = ["host__hostname", "worker__name", "message", "actor"]
    list_select_related = ["host", "worker"]
    date_hierarchy = "created_at"
