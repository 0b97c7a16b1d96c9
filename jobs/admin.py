"""Django admin for suites, jobs, leases, ticks and hosts: to read, and delete by the rules."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from django.contrib import admin
from django.db.models import Model, QuerySet
from django.forms import ModelForm
from django.http import HttpRequest

from hosts import services as inventory
from hosts.admin import DeletedByService, saved_as
from hosts.models import Host
from jobs import services as job_services
from jobs.models import (
    IdempotencyKey,
    Job,
    Lease,
    OutboxEntry,
    SchedulerSettings,
    SchedulerSettingsChange,
    SchedulerTick,
    SubmitLimit,
    Suite,
)
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

    jobs_by: ClassVar[str]  # how a job names what this admin deletes: itself, or its suite

    def delete_blockers(self, objs: Sequence[Model]) -> list[str]:
        jobs = Job.objects.filter(**{f"{self.jobs_by}__in": [obj.pk for obj in objs]})
        # Locked until the delete commits, so the scheduler cannot lease them in between.
        ids = list(jobs.select_for_update().values_list("pk", flat=True))
        return live_leases(Lease.objects.filter(job__in=ids))

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
    jobs_by = "suite"
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
class JobAdmin(SubmittedOnlyAdmin):
    jobs_by = "pk"
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
    readonly_fields = [f for f in list_display]


# Changed only on /scheduler/settings/ or through the API, which audit each change.
@admin.register(SchedulerSettings)
class SchedulerSettingsAdmin(ViewOnlyAdmin):
    list_display = ["ordering", "aging_minutes", "aging_cap", "host_choice", "default_duration"]
    list_display += ["version", "updated_at", "updated_by"]


@admin.register(SchedulerSettingsChange)
class SchedulerSettingsChangeAdmin(ViewOnlyAdmin):
    list_display = ["at", "actor", "version", "changes", "reason"]


@admin.register(OutboxEntry)
class OutboxEntryAdmin(ViewOnlyAdmin):
    """What the moves told the apps above jobs, and when it was taken (docs/notifications.md)."""

    list_display = ["id", "kind", "created_at", "handled_at", "payload"]
    list_filter = ["kind", ("handled_at", admin.EmptyFieldListFilter)]
    ordering = ["-id"]


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


@admin.register(Host)
class HostAdmin(DeletedByService):
    delete_service = job_services.host_delete

    def retires(self, obj: Host) -> bool:
        return inventory.host_has_history(obj)

    list_display = ["hostname", "worker", "status", "locked", "lock_reason", "current_build"]
    list_filter = ["status", "locked", "worker", "labels"]
    search_fields = ["hostname", "lock_reason", "labels__name", "current_build"]
    autocomplete_fields = ["labels"]
    list_select_related = ["worker"]
    fields = ["hostname", "worker", "labels", "current_build", "status", "locked"]
    fields += ["lock_reason", "locked_by", "locked_at"]
    # Status and lock change through the state machine, with their events (UI and API).
    readonly_fields = ["status", "locked", "lock_reason", "locked_by", "locked_at"]

    def get_readonly_fields(self, request: HttpRequest, obj: Host | None = None) -> list[str]:
        # Hostnames name hosts in URLs, events and runners' environments: set once.
        return [*self.readonly_fields, "hostname"] if obj else list(self.readonly_fields)

    def save_model(self, request: HttpRequest, obj: Host, form: ModelForm, change: bool) -> None:
        data = form.cleaned_data
        labels = [label.name for label in data.get("labels", ())]
        build = data.get("current_build", "")
        if change:
            inventory.host_update(
                host=obj, by=request.user, labels=labels, worker=data["worker"], current_build=build
            )
        else:
            host = inventory.host_create(
                hostname=data["hostname"],
                by=request.user,
                worker=data["worker"],
                labels=labels,
                current_build=build,
            )
            saved_as(obj, host)

    def save_related(
        self, request: HttpRequest, form: ModelForm, formsets: list, change: bool
    ) -> None:
        # The service set the labels (and audited them); the form must not set them again.
        for formset in formsets:
            self.save_formset(request, form, formset, change=change)

    def delete_blockers(self, objs: Sequence[Host]) -> list[str]:
        ids = [host.pk for host in objs]
        # Locked until the delete commits, so no lease can start on them in between.
        list(Host.objects.select_for_update().filter(pk__in=ids).values_list("pk", flat=True))
        active = Lease.objects.active().filter(host__in=ids)
        return [
            f"Host {lease.host.hostname} holds active lease {lease.pk}: release it first."
            for lease in active.select_related("host").order_by("pk")
        ]
