"""Helpers shared by the services that edit or delete a stored row under a lock."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TypeVar

from django.db.models import Model

from schedsite.errors import Conflict

M = TypeVar("M", bound=Model)


def apply_changes(
    instance: Model, values: Mapping[str, object], describe: Callable[[str, object], str]
) -> list[str]:
    """Set `values` on `instance` and return one "field old → new" phrase per change.

    `describe(field, value)` renders a value for the phrase. When no value differs from the
    instance's, nothing is set and the list is empty.
    """
    changes = [
        f"{field} {describe(field, getattr(instance, field))} → {describe(field, value)}"
        for field, value in values.items()
        if getattr(instance, field) != value
    ]
    if changes:
        for field, value in values.items():
            setattr(instance, field, value)
    return changes


def locked_or_conflict(model: type[M], pk: object, gone: str) -> M:
    """The row `pk` of `model` locked for update; `Conflict(gone)` when it no longer exists."""
    instance = model.objects.select_for_update().filter(pk=pk).first()
    if instance is None:
        raise Conflict(gone)
    return instance
