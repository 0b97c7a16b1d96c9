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
