"""Admin building blocks that keep Django admin inside the lab's rules (docs/security.md#admin)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.contrib import admin
from django.db import router, transaction
from django.db.models import Model
from django.http import HttpRequest, HttpResponse


class ViewOnlyAdmin(admin.ModelAdmin):
    """Rows anyone with admin access may read and nobody, superusers included, may write."""

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return False


class GuardedDeleteAdmin(admin.ModelAdmin):
    """Deletes, single or "delete selected", that the lab's rules refuse are never made."""

    def delete_blockers(self, objs: Sequence[Model]) -> list[str]:
        """Why the objects may not be deleted, one line each; empty when they may."""
        return []

    def get_deleted_objects(self, objs: Sequence[Model], request: HttpRequest) -> tuple:
        # Django refuses a delete whose "protected" list is not empty, on the confirmation page
        # and on the confirming POST alike, and shows the list as the reason. It also refuses
        # one that would cascade to rows the admin may not delete (audit events, leases), but
        # then shows only that: a blocker, which says what to do first, takes its place.
        deleted, counts, perms_needed, protected = super().get_deleted_objects(objs, request)
        if blockers := self.delete_blockers(objs):
            return deleted, counts, set(), [*protected, *blockers]
        return deleted, counts, perms_needed, protected

    def changelist_view(
        self, request: HttpRequest, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        # "Delete selected" then checks its blockers (under row locks) and deletes in one
        # transaction, as the single delete view already does: no lease can start in between.
        with transaction.atomic(using=router.db_for_write(self.model)):
            return super().changelist_view(request, extra_context)
