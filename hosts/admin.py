"""Django admin for the lab inventory: every change goes through the hosts services.

Hosts themselves are in jobs/admin.py: a host with an active lease is not deleted, and one with
history is retired through the host state machine.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, ClassVar

from django import forms
from django.contrib import admin
from django.db.models import Model, QuerySet
from django.forms import ModelForm
from django.http import HttpRequest

from hosts import services
from hosts.choices import HostStatus
from hosts.models import HealthPolicy, Host, HostEvent, Label, Provision, Worker
from schedsite.admin_base import GuardedDeleteAdmin, ViewOnlyAdmin
from schedsite.errors import ServiceError


class DeletedByService(GuardedDeleteAdmin):
    """Deletes, one or "delete selected", go through the service, which checks and audits them."""

    delete_service: ClassVar[Callable[..., Any]]  # takes the object by its model's name, and by=
    delete_as: ClassVar[str] = ""  # the service's name for the object, when not its model's

    def delete_model(self, request: HttpRequest, obj: Model) -> None:
        keyword = self.delete_as or obj._meta.model_name
        type(self).delete_service(**{keyword: obj}, by=request.user)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet) -> None:
        for obj in queryset:
            self.delete_model(request, obj)

    def retires(self, obj: Model) -> bool:
        """Whether the service keeps the object, retired, instead of deleting it."""
        return False

    def get_deleted_objects(self, objs: Sequence[Model], request: HttpRequest) -> tuple:
        deleted, counts, perms_needed, protected = super().get_deleted_objects(objs, request)
        kept = [obj for obj in objs if self.retires(obj)]
        if not kept:
            return deleted, counts, perms_needed, protected
        # Rows with history are retired with their leases and events, which the page would
        # otherwise list as "protected" and refuse the delete for.
        notes = [f"{obj} has history: it will be retired and kept with it" for obj in kept]
        return [*notes, *deleted], counts, set(), self.delete_blockers(objs)


def saved_as(obj: Model, saved: Model) -> None:
    """Point the admin's unsaved instance at the row a service created."""
    obj.pk = saved.pk
    obj._state.adding = False
    obj._state.db = saved._state.db


@admin.register(Worker)
class WorkerAdmin(DeletedByService):
    delete_service = services.worker_delete

    def retires(self, obj: Worker) -> bool:
        return services.worker_has_history(obj)

    def delete_blockers(self, objs: Sequence[Worker]) -> list[str]:
        hosts = Host.objects.filter(worker__in=[w.pk for w in objs]).exclude(
            status=HostStatus.RETIRED
        )
        names = hosts.order_by("worker__name").values_list("worker__name", flat=True).distinct()
        return [f"Worker {name} still has hosts: retire or move them first." for name in names]

    list_display = ["name", "paused", "paused_reason", "last_seen", "created_at"]
    list_filter = ["paused"]
    search_fields = ["name", "paused_reason"]
    fields = ["name", "runner", "max_jobs", "runner_concurrency"]
    fields += ["paused", "paused_reason", "paused_by", "paused_at", "last_seen"]
    # Pausing needs a reason and an event: the UI and API do it (worker_pause, worker_resume).
    # The runner reports its concurrency itself, in its heartbeat.
    readonly_fields = ["runner_concurrency", "paused", "paused_reason", "paused_by", "paused_at"]
    readonly_fields += ["last_seen"]

    def save_model(self, request: HttpRequest, obj: Worker, form: ModelForm, change: bool) -> None:
        data = form.cleaned_data
        if not change:
            saved_as(obj, services.worker_create(name=data["name"], by=request.user))
        services.worker_update(
            worker=obj,
            by=request.user,
            name=data["name"],
            runner=data.get("runner"),
            max_jobs=data.get("max_jobs"),
        )


@admin.register(Label)
class LabelAdmin(GuardedDeleteAdmin):
    list_display = ["name"]
    search_fields = ["name"]

    def has_change_permission(self, request: HttpRequest, obj: Label | None = None) -> bool:
        # Renaming a label would change every host carrying it, with no event on any of them.
        return False

    def delete_blockers(self, objs: Sequence[Label]) -> list[str]:
        carried = Label.objects.filter(pk__in=[label.pk for label in objs], hosts__isnull=False)
        return [
            f"Label {name} is carried by hosts: remove it from them first."
            for name in carried.values_list("name", flat=True).distinct().order_by("name")
        ]


@admin.register(HostEvent)
class HostEventAdmin(ViewOnlyAdmin):
    """The audit trail: read here, written only by the services."""

    # `subject` still names a host or worker after it is deleted.
    list_display = ["created_at", "subject", "kind", "old_status", "new_status", "actor", "message"]
    list_filter = ["kind", "actor"]
    search_fields = ["subject", "worker__name", "message", "actor"]  # a worker may be renamed
    date_hierarchy = "created_at"


@admin.register(Provision)
class ProvisionAdmin(ViewOnlyAdmin):
    """Each provisioning as its runner reported it: read here, written only by the services."""

    # `hostname` still names the host after it is deleted.
    list_display = ["created_at", "hostname", "board", "from_build", "build", "result", "seconds"]
    list_filter = ["result", "board"]
    search_fields = ["hostname", "build", "from_build"]
    date_hierarchy = "created_at"


class HealthPolicyForm(forms.ModelForm):
    labels = forms.CharField(
        required=False, help_text="Comma-separated, such as board:eve, pool:cq; empty: every host."
    )

    class Meta:
        model = HealthPolicy
        fields = ["name", "labels", "every_jobs", "every_hours", "enabled"]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if self.instance.pk:
            self.initial["labels"] = ", ".join(self.instance.labels)

    def _post_clean(self) -> None:
        # The service's rules, not the model's: the admin refuses what the API and UI refuse.
        if self._errors:
            return  # a field that did not even parse: Django says so next to it
        fields = {name: self.cleaned_data[name] for name in self._meta.fields}
        fields["labels"] = self.cleaned_data["labels"].split(",")
        try:
            services.health_policy_clean(fields, policy=self.instance if self.instance.pk else None)
        except ServiceError as exc:
            self.add_error(exc.field, exc.message)
        self.policy_fields = fields


@admin.register(HealthPolicy)
class HealthPolicyAdmin(DeletedByService):
    """Health policies, added, changed and deleted through the services, which audit them."""

    delete_service = services.health_policy_delete
    delete_as = "policy"
    form = HealthPolicyForm
    list_display = ["name", "label_key", "every_jobs", "every_hours", "enabled"]
    list_filter = ["enabled"]
    search_fields = ["name", "label_key"]

    def save_model(
        self, request: HttpRequest, obj: HealthPolicy, form: HealthPolicyForm, change: bool
    ) -> None:
        if change:
            services.health_policy_update(policy=obj, by=request.user, **form.policy_fields)
        else:
            saved_as(obj, services.health_policy_create(by=request.user, **form.policy_fields))
        obj.refresh_from_db()  # the admin's log and message name what was saved
