"""Serializer helpers for the hottest answers: fields built once per class, not per answer."""

from __future__ import annotations

import copy
from typing import Any

from rest_framework import fields, serializers


class FieldsBuiltOnce:
    """Build a serializer's fields once per class; each instance binds copies of them.

    A ModelSerializer builds every field from the model for each instance it makes, and a
    Serializer deep-copies its declared fields: about 0.5 ms for a job, on runner-protocol calls
    that cost a few ms in all (docs/performance.md#the-runner-protocol). Binding (name, parent,
    source) is all a field of a read-only answer keeps per instance, so a shallow copy of the
    class's field will do; a field with a child (a list of something) is deep-copied, since its
    child is bound to it. A nested serializer as a field is refused: it keeps fields of its own.
    """

    def get_fields(self) -> dict[str, fields.Field]:
        cls = type(self)
        built = cls.__dict__.get("_fields_built_once")
        if built is None:
            built = super().get_fields()  # type: ignore[misc]
            for name, field in built.items():
                if isinstance(field, serializers.BaseSerializer):
                    raise TypeError(f"{cls.__name__}.{name}: a nested serializer is not copied")
            cls._fields_built_once = built  # type: ignore[attr-defined]
        return {name: _copy(field) for name, field in built.items()}


def _copy(field: Any) -> Any:
    if hasattr(field, "child") or hasattr(field, "child_relation"):
        return copy.deepcopy(field)
    return copy.copy(field)
