"""Filter pieces shared by the apps' FilterSets."""

from __future__ import annotations

from django import forms
from django.core.validators import ProhibitNullCharactersValidator
from django_filters import rest_framework as filters
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field

from schedsite.booleans import parse_bool

SHOWN_CHARS = 40  # of a refused value, quoted back in the error message


def shown(value: object) -> str:
    """A refused value as an error message quotes it: repr'd, and cut short if long."""
    text = repr(value)
    return text if len(text) <= SHOWN_CHARS else f"{text[: SHOWN_CHARS - 1]}…"


class AnyValueMultipleField(forms.MultipleChoiceField):
    """A repeated query parameter (?label=a&label=b) whose values are free text."""

    def valid_value(self, value: str) -> bool:
        return True

    def validate(self, value: list[str]) -> None:
        super().validate(value)
        # PostgreSQL refuses NUL in text: without this the query itself would fail.
        for item in value:
            ProhibitNullCharactersValidator()(item)


class RepeatedCharFilter(filters.MultipleChoiceFilter):
    """?name=a&name=b — every value must match (AND) when conjoined."""

    field_class = AnyValueMultipleField


class StrictNullBooleanField(forms.NullBooleanField):
    """true/false (or 1/0, yes/no, on/off); empty means "any"; anything else is an error."""

    def to_python(self, value: object) -> bool | None:
        if value in (None, "") or isinstance(value, bool):
            return value if isinstance(value, bool) else None
        parsed = parse_bool(str(value))
        if parsed is not None:
            return parsed
        # The value goes in params, never into the message itself: the message is a %-template
        # (django-filter formats it), so a ?locked=% in it would break the formatting.
        raise forms.ValidationError(
            "%(value)s is not true or false.", code="invalid", params={"value": shown(value)}
        )

    def validate(self, value: object) -> None:
        return None


@extend_schema_field(OpenApiTypes.BOOL)
class StrictBooleanFilter(filters.BooleanFilter):
    """A boolean filter that answers 400 to ?locked=perhaps instead of ignoring it."""

    field_class = StrictNullBooleanField

    def __init__(self, *args: object, **kwargs: object) -> None:
        # django-filter's BooleanWidget turns unknown words into None ("any") before the field
        # can see them; a plain input passes them through to be refused.
        kwargs.setdefault("widget", forms.TextInput)
        super().__init__(*args, **kwargs)


MAX_ID = 2**63 - 1  # the largest id a bigint primary key holds


@extend_schema_field({"type": "integer", "minimum": 1, "maximum": MAX_ID})
class IdFilter(filters.NumberFilter):
    """An object's id: a whole number from 1 up; anything else (1e308, -1, 1.5) is a 400."""

    field_class = forms.IntegerField

    def __init__(self, *args: object, **kwargs: object) -> None:
        kwargs.setdefault("min_value", 1)
        kwargs.setdefault("max_value", MAX_ID)
        super().__init__(*args, **kwargs)
