"""Django admin for suites, jobs, leases and scheduler ticks."""

from __future__ import annotations

from django.contrib import admin
from django.http import HttpRequest

from jobs.models import IdempotencyKey, Job, Lease, SchedulerTick, SubmitLimit, Suite


class JobInline(admin.TabularInline):
    model = Job
    fields = ["name", "status", "priority", "label_key", "host", "attempts"]
    readonly_fields = fields
    extra = 0
    show_change_link = True
    can_delete = False


@admin.register(Suite)
class SuiteAdmin(admin.ModelAdmin):
    list_display = [
        "name",
        "priority",
        "min_duts",
        "max_duts",
        "build",
        "owner",
        "created_at",
        "aborted_at",
    ]
    list_filter = ["priority"]
    search_fields = ["name", "build", "owner__username"]
    inlines = [JobInline]


@admin.register(Job)
class JobAdmin(admin.ModelAdmin):
    list_display = [
        "name",
        "suite",
        "status",
        "priority",
        "label_key",
        "host",
        "attempts",
        "created_at",
    ]
    list_filter = ["status", "priority"]
    search_fields = ["name", "label_key", "suite__name"]
    list_select_related = ["suite", "host"]
    raw_id_fields = ["suite", "host"]


@admin.register(Lease)
class LeaseAdmin(admin.ModelAdmin):
    list_display = [
        "id",
        "host",
        "job",
        "holder",
        "acquired_at",
        "expires_at",
        "released_at",
        "release_reason",
    ]
    list_filter = ["release_reason"]
    search_fields = ["host__hostname", "job__name", "reason"]
    list_select_related = ["host", "job", "holder"]
    raw_id_fields = ["host", "job"]


@admin.register(SchedulerTick)
class SchedulerTickAdmin(admin.ModelAdmin):
    list_display = [
        "started_at",
        "duration_ms",
        "plan_ms",
        "jobs_considered",
        "hosts_free",
        "leases_made",
        "leases_expired",
        "queued_after",
        "trigger",
    ]
    exclude = ["wait_reasons"]
    readonly_fields = [f for f in list_display]


@admin.register(SubmitLimit)
class SubmitLimitAdmin(admin.ModelAdmin):
    list_display = ["group", "max_priority", "max_min_duts", "max_queued_jobs", "rate_per_minute"]
    search_fields = ["group__name"]


@admin.register(IdempotencyKey)
class IdempotencyKeyAdmin(admin.ModelAdmin):
    list_display = ["key", "user", "status_code", "created_at"]
    search_fields = ["key", "user__username"]
    list_select_related = ["user"]
    readonly_fields = ["user", "key", "fingerprint", "status_code", "response_body", "created_at"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False
