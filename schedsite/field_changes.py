"""Helpers shared by the services that check, edit or delete a stored row's fields."""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from typing import TypeVar

from django.db.models import Model

from schedsite.errors import Conflict, InvalidInput

M = TypeVar("M", bound=Model)


def fields_known(fields: Mapping[str, object], known: Collection[str], what: str) -> None:
    """InvalidInput naming every field of `fields` that a `what` does not have."""
    unknown = set(fields) - set(known)
    if unknown:
        raise InvalidInput(f"unknown {what} fields: {', '.join(sorted(unknown))}")


def name_clean(value: object, *, most: int) -> str:
    """The name without surrounding spaces; InvalidInput unless it is 1 to `most` characters."""
    name = str(value or "").strip()
    if not name or len(name) > most:
        raise InvalidInput(f"name: 1 to {most} characters", field="name")
    return name


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
