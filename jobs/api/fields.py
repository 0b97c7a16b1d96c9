"""Fields the job and host API serializers share: names, labels, priorities, durations."""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

from django.urls import get_script_prefix
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.settings import api_settings

from jobs.submission_schema import (  # noqa: F401 - the API's fields, declared with the schema
    MAX_LABELS,
    PRIORITY_LEVELS,
    LabelListField,
    PriorityField,
    seconds_field,
)
from schedsite import links


class RelatedName(serializers.CharField):
    """A related object's name (a hostname, a username), or null where there is none."""

    def __init__(self, source: str, **kwargs: Any) -> None:
        super().__init__(source=source, read_only=True, allow_null=True, **kwargs)


# IdentityURL's URL texts around the value, by route, format, prefix, scheme and host; cleared
# when full (a host header is the client's to choose).
_AROUND: dict[tuple, tuple[str, str]] = {}
AROUND_MOST = 256


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
            split = self._split = (request, format, *self._around(view_name, request, format))
        return split[2] + value + split[3]

    def _around(self, view_name: str, request: Request | None, format: str | None) -> tuple:
        """The URL's text before and after the value, reversed once per process for each
        host, scheme, script prefix and format (asked, or kept from the request's query): a
        runner's start or complete answers with one job, and reversing its URL was the
        largest part of that answer in a profile."""
        key = (view_name, self.lookup_url_kwarg, format, get_script_prefix())
        if request is not None:
            # DRF's reverse keeps the request's `?format=` in the URL.
            kept = (
                request.GET.get(api_settings.URL_FORMAT_OVERRIDE)
                if hasattr(request, "GET")
                else None
            )
            key += (request.scheme, request.get_host(), kept)
        around = _AROUND.get(key)
        if around is None:
            placeholder = {self.lookup_url_kwarg: links.PLACEHOLDER}
            url = self.reverse(view_name, kwargs=placeholder, request=request, format=format)
            if len(_AROUND) >= AROUND_MOST:
                _AROUND.clear()
            around = _AROUND[key] = links.split_url(url)
        return around


class Seconds(serializers.IntegerField):
    """A duration, read only, in whole seconds."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(read_only=True, **kwargs)

    def to_representation(self, value: timedelta) -> int:
        return round(value.total_seconds())
