"""Forms that parse the hosts and workers actions of the web UI (the services validate)."""

from __future__ import annotations

from django import forms

from schedsite.filters import AnyValueMultipleField


class ReasonForm(forms.Form):
    """A lock or pause: the reason is required by the service, which says so if it is missing."""

    reason = forms.CharField(required=False)  # the service checks it


class BulkHostsForm(forms.Form):
    """Lock or unlock the hosts ticked in the hosts table."""

    action = forms.ChoiceField(choices=[("lock", "Lock"), ("unlock", "Unlock")])
    hosts = AnyValueMultipleField(required=False)
    reason = forms.CharField(required=False)  # the service checks it
