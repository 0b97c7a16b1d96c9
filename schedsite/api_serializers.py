"""Serializer helpers for the hottest answers: fields built once per class, not per answer."""

from __future__ import annotations

import copy
from collections.abc import Iterator, MutableMapping
from typing import Any

from django.utils.functional import cached_property
from rest_framework import fields, serializers


class FieldsBuiltOnce:
    """Build a serializer's fields once per class; each instance binds copies of them.

    A ModelSerializer builds every field from the model for each instance it makes, and a
    Serializer deep-copies its declared fields: about 0.5 ms for a job, on runner-protocol calls
    that cost a few ms in all (docs/performance.md#the-runner-protocol). Binding (name, parent,
    source) is all a field keeps per instance, in an answer and in the check of a body alike
    (the rest — validators, messages, bounds — is set when the class is built and only read), so
    a shallow copy of the class's field will do; a field with a child (a list of something)
    gets a copy of its child too, bound to it. A nested serializer as a field is refused: it
    keeps fields of its own.

    And a field is copied and bound only when it is used (`LazyFields`): an answer made
    directly (`JobSerializer.to_representation`) uses four of its thirty fields, and copying
    the other twenty-six was a tenth of a runner's `start` in a profile.
    """

    def _built_once(self) -> dict[str, fields.Field]:
        cls = type(self)
        built = cls.__dict__.get("_fields_built_once")
        if built is None:
            built = super().get_fields()  # type: ignore[misc]
            for name, field in built.items():
                if isinstance(field, serializers.BaseSerializer):
                    raise TypeError(f"{cls.__name__}.{name}: a nested serializer is not copied")
            cls._fields_built_once = built  # type: ignore[attr-defined]
        return built

    def get_fields(self) -> dict[str, fields.Field]:
        return {name: _copy(field) for name, field in self._built_once().items()}

    @cached_property
    def fields(self) -> LazyFields:  # type: ignore[override]
        return LazyFields(self, self._built_once())


class LazyFields(MutableMapping):
    """DRF's BindingDict over the class's fields, each copied and bound on first use."""

    def __init__(self, serializer: Any, built: dict[str, fields.Field]) -> None:
        self.serializer = serializer
        self.built = built
        self.bound: dict[str, fields.Field] = {}
        self.order = list(built)

    def __getitem__(self, key: str) -> fields.Field:
        field = self.bound.get(key)
        if field is None:
            field = _copy(self.built[key])  # KeyError for a name the class does not have
            field.bind(field_name=key, parent=self.serializer)
            self.bound[key] = field
        return field

    def __setitem__(self, key: str, field: fields.Field) -> None:
        if key not in self.bound and key not in self.built:
            self.order.append(key)
        self.bound[key] = field
        field.bind(field_name=key, parent=self.serializer)

    def __delitem__(self, key: str) -> None:
        if key not in self.order:
            raise KeyError(key)
        self.order.remove(key)
        self.bound.pop(key, None)
        self.built = {name: f for name, f in self.built.items() if name != key}

    def __iter__(self) -> Iterator[str]:
        return iter(list(self.order))

    def __len__(self) -> int:
        return len(self.order)

    def __repr__(self) -> str:
        return f"LazyFields({self.order!r})"


def _copy(field: Any) -> Any:
    if hasattr(field, "child_relation"):
        return copy.deepcopy(field)
    copied = copy.copy(field)
    if hasattr(field, "child"):
        # A list's or a dict's child is bound to its parent: a copy of its own, whose parent
        # is this copy. DRF's deepcopy builds the field again from its arguments, child and
        # all: a tenth of a bulk heartbeat, for its list of ids.
        copied.child = _copy(field.child)
        copied.child.parent = copied  # its name and source ("") are the class's child's
    return copied
