"""Filter pieces shared by the apps' FilterSets."""

from __future__ import annotations

from django import forms
from django_filters import rest_framework as filters


class AnyValueMultipleField(forms.MultipleChoiceField):
    """A repeated query parameter (?label=a&label=b) whose values are free text."""

    def valid_value(self, value: str) -> bool:
        return True


class RepeatedCharFilter(filters.MultipleChoiceFilter):
    """?name=a&name=b — every value must match (AND) when conjoined."""

    field_class = AnyValueMultipleField


class StrictNullBooleanField(forms.NullBooleanField):
    """true/false (or 1/0, yes/no, on/off); empty means "any"; anything else is an error."""

    TRUE = {"true", "1", "yes", "on"}
    FALSE = {"false", "0", "no", "off"}

    def to_python(self, value: object) -> bool | None:
        if value in (None, "") or isinstance(value, bool):
            return value if isinstance(value, bool) else None
        text = str(value).strip().lower()
        if text in self.TRUE:
            return True
        if text in self.FALSE:
            return False
        raise forms.ValidationError(f"{value!r} is not true or false.", code="invalid")

    def validate(self, value: object) -> None:
        return None


class StrictBooleanFilter(filters.BooleanFilter):
    """A boolean filter that answers 400 to ?locked=perhaps instead of ignoring it."""

    field_class = StrictNullBooleanField

    def __init__(self, *args: object, **kwargs: object) -> None:
        # django-filter's BooleanWidget turns unknown words into None ("any") before the field
        # can see them; a plain input passes them through to be refused.
        kwargs.setdefault("widget", forms.TextInput)
        super().__init__(*args, **kwargs)
