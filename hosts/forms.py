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


class HealthPolicyForm(forms.Form):
    """A health policy as typed on the policies page; hosts.services.health_policy_clean checks it.

    Only the parsing is here (a number is a number, labels are split on spaces and commas);
    every rule is the service's, so the page, the API and the admin refuse the same things.
    """

    name = forms.CharField(required=False, label="Name")
    labels = forms.CharField(required=False, label="Labels")
    every_jobs = forms.IntegerField(required=False, label="Every N test jobs")
    every_hours = forms.IntegerField(required=False, label="Every N hours")
    enabled = forms.BooleanField(required=False, label="Enabled")

    def policy_fields(self) -> dict[str, object]:
        """The service's keyword arguments (call after is_valid)."""
        data = dict(self.cleaned_data)
        data["labels"] = split_labels(data.get("labels", ""))
        return data
