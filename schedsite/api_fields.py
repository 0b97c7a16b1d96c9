"""Serializer fields the API's input serializers share: JSON values of the documented type only."""

from __future__ import annotations

import math
from typing import Any

from django.http import QueryDict
from rest_framework import serializers


def _from_form(field: serializers.Field) -> bool:
    """Whether the body was form data, where every value is text (JSON says what it means)."""
    return isinstance(getattr(field.root, "initial_data", None), QueryDict)


class StrictCharField(serializers.CharField):
    """Text, and only text: DRF's CharField would quietly turn 0 or 1.5 into "0" or "1.5"."""

    def to_internal_value(self, data: Any) -> str:
        if not isinstance(data, str):
            self.fail("invalid")
        # The schema's maxLength is the text as sent: DRF would check it after trimming, and
        # take 201 characters whose first is a space.
        if self.max_length is not None and len(data) > self.max_length:
            self.fail("max_length", max_length=self.max_length, length=len(data))
        return super().to_internal_value(data)


class StrictBooleanField(serializers.BooleanField):
    """true or false in JSON (DRF's also takes 0, 1 and "yes"); form data's words still work."""

    def to_internal_value(self, data: Any) -> bool:
        if isinstance(data, bool):
            return data
        if isinstance(data, str) and _from_form(self):
            return super().to_internal_value(data)
        self.fail("invalid", input=data)


class StrictIntegerField(serializers.IntegerField):
    """A JSON number with no fraction (DRF's also takes "5"); form data's digits still work."""

    def to_internal_value(self, data: Any) -> int:
        integral_float = isinstance(data, float) and data.is_integer()
        number = isinstance(data, int) and not isinstance(data, bool)
        if not (number or integral_float or (isinstance(data, str) and _from_form(self))):
            self.fail("invalid")
        return super().to_internal_value(data)


class IdListField(serializers.ListField):
    """A list of ids: JSON integers from min_value to max_value.

    A bulk heartbeat names every lease its runner holds, hundreds a call on a big worker, and
    DRF's walk over the list (a copy, a validation and a bound check per item) was a sixth of
    the call's CPU (docs/performance.md#the-runner-protocol). A list whose every item is a plain
    integer in range is taken in one pass; any other goes through the walk, for its errors.
    """

    def __init__(self, *, min_value: int, max_value: int, **kwargs: Any) -> None:
        child = StrictIntegerField(min_value=min_value, max_value=max_value)
        super().__init__(child=child, **kwargs)
        self.bounds = (min_value, max_value)

    def to_internal_value(self, data: Any) -> list[int]:
        low, high = self.bounds
        plain = type(data) is list and (data or self.allow_empty)
        if plain and all(type(item) is int and low <= item <= high for item in data):
            return list(data)
        return super().to_internal_value(data)


class StrictFloatField(serializers.FloatField):
    """A finite JSON number (DRF's also takes "5", and Python's JSON takes NaN and Infinity)."""

    def to_internal_value(self, data: Any) -> float:
        number = isinstance(data, int | float) and not isinstance(data, bool)
        if not (number or (isinstance(data, str) and _from_form(self))):
            self.fail("invalid")
        value = super().to_internal_value(data)
        if not math.isfinite(value):
            self.fail("invalid")
        return value
