"""Fields the job and host API serializers share: names, labels, priorities, durations."""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers
from rest_framework.request import Request

from jobs.choices import PRIORITY_LEVELS, parse_priority
from schedsite import links
from schedsite.api_fields import StrictCharField, StrictIntegerField

MAX_LABELS = 64


class RelatedName(serializers.CharField):
    """A related object's name (a hostname, a username), or null where there is none."""

    def __init__(self, source: str, **kwargs: Any) -> None:
        super().__init__(source=source, read_only=True, allow_null=True, **kwargs)


class IdentityURL(serializers.HyperlinkedIdentityField):
    """An object's own API URL, reversed once per list instead of once per row.

    The URL DRF builds for one placeholder (absolute, with `?format=` kept as DRF keeps it) is
    split around it, and each row's id or name is formatted in; a value the route might treat
    differently still goes through DRF's reverse (schedsite/links.py).
    """

    def __init__(self, *, accepts: re.Pattern[str] = links.IDS, **kwargs: Any) -> None:
        self.accepts = accepts
        self._split: tuple[Request | None, str | None, str, str] | None = None
        super().__init__(**kwargs)

    def get_url(
        self, obj: Any, view_name: str, request: Request | None, format: str | None
    ) -> str | None:
        if hasattr(obj, "pk") and obj.pk in (None, ""):
            return None
        value = links.format_value(getattr(obj, self.lookup_field), self.accepts)
        if value is None:
            return super().get_url(obj, view_name, request, format)
        split = self._split
        if split is None or split[0] is not request or split[1] != format:
            placeholder = {self.lookup_url_kwarg: links.PLACEHOLDER}
            url = self.reverse(view_name, kwargs=placeholder, request=request, format=format)
            split = self._split = (request, format, *links.split_url(url))
        return split[2] + value + split[3]


class Seconds(serializers.IntegerField):
    """A duration, read only, in whole seconds."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(read_only=True, **kwargs)

    def to_representation(self, value: timedelta) -> int:
        return round(value.total_seconds())


class LabelListField(serializers.ListField):
    """A list of label names such as board:eve or pool:cq."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("child", StrictCharField(max_length=100))
        kwargs.setdefault("max_length", MAX_LABELS)
        super().__init__(**kwargs)


@extend_schema_field(
    {
        "oneOf": [
            {"type": "integer", "minimum": 0, "maximum": 100},
            {"type": "string", "enum": list(PRIORITY_LEVELS)},
        ],
        "description": "0–100, higher first; or a named level: "
        + ", ".join(f"{name} {value}" for name, value in PRIORITY_LEVELS.items()),
    }
)
class PriorityField(serializers.Field):
    """A priority: an integer 0–100, or a named level such as "cq" (70)."""

    default_error_messages = {
        "invalid": "Give an integer from 0 to 100, or one of: " + ", ".join(PRIORITY_LEVELS),
    }

    def to_internal_value(self, data: object) -> int:
        try:
            return parse_priority(data)
        except ValueError:
            self.fail("invalid")

    def to_representation(self, value: int) -> int:
        return value


def seconds_field(**kwargs: Any) -> serializers.IntegerField:
    return StrictIntegerField(min_value=1, max_value=30 * 24 * 3600, **kwargs)
