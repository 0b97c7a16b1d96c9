"""Django admin for suites, jobs, leases and scheduler ticks: to read, and delete by the rules."""

from __future__ import annotations

from collections.abc import Sequence

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest

from jobs.models import IdempotencyKey, Job, Lease, SchedulerTick, SubmitLimit, Suite
from schedsite.admin_base import GuardedDeleteAdmin, ViewOnlyAdmin


def live_leases(leases: QuerySet[Lease]) -> list[str]:
    """Why these leases' jobs may not be deleted: deleting a job silently ends its lease."""
    return [
        f"Job {lease.job.name} ({lease.job_id}) holds active lease {lease.pk} on "
        f"{lease.host.hostname}: abort the job or release the lease first."
        for lease in leases.active().select_related("job", "host").order_by("pk")
    ]


class SubmittedOnlyAdmin(GuardedDeleteAdmin):
    """Suites and jobs are submitted and changed through the UI and API, which check them."""

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False


class JobInline(admin.TabularInline):
    model = Job
    fields = ["name", "status", "priority", "label_key", "host", "attempts"]
    readonly_fields = fields
    extra = 0
    show_change_link = True
    can_delete = False


@admin.register(Suite)
class SuiteAdmin(SubmittedOnlyAdmin):
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

    def delete_blockers(self, objs: Sequence[Suite]) -> list[str]:
        ids = [suite.pk for suite in objs]
        # Locked until the delete commits, so the scheduler cannot lease them in between.
        list(Job.objects.select_for_update().filter(suite__in=ids).values_list("pk", flat=True))
        return live_leases(Lease.objects.filter(job__suite__in=ids))


@admin.register(Job)
class JobAdmin(SubmittedOnlyAdmin):
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

    def delete_blockers(self, objs: Sequence[Job]) -> list[str]:
        ids = [job.pk for job in objs]
        # Locked until the delete commits, so the scheduler cannot lease them in between.
        list(Job.objects.select_for_update().filter(pk__in=ids).values_list("pk", flat=True))
        return live_leases(Lease.objects.filter(job__in=ids))


@admin.register(Lease)
class LeaseAdmin(ViewOnlyAdmin):
    """Leases start and end through the scheduler, the runner protocol and staff actions."""

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
class SchedulerTickAdmin(ViewOnlyAdmin):
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
