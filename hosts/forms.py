"""Forms that parse the hosts and workers actions of the web UI (the services validate)."""

from __future__ import annotations

import re

from django import forms

from schedsite.filters import AnyValueMultipleField

LABEL_SPLIT = re.compile(r"[\s,]+")


def split_labels(text: str) -> list[str]:
    """Labels typed into one box, separated by spaces or commas."""
    return [part for part in LABEL_SPLIT.split(text or "") if part]


class ReasonForm(forms.Form):
    """A lock or pause: the reason is required by the service, which says so if it is missing."""

    reason = forms.CharField(required=False)  # the service checks it


class BulkHostsForm(forms.Form):
    """Lock or unlock the hosts ticked in the hosts table."""

    action = forms.ChoiceField(choices=[("lock", "Lock"), ("unlock", "Unlock")])
    hosts = AnyValueMultipleField(required=False)
    reason = forms.CharField(required=False)  # the service checks it
