"""The profile's notification settings form: it parses input, the services decide."""

from __future__ import annotations

from django import forms

from notifications.choices import EventKind


class SubscriptionForm(forms.Form):
    """Where to send notifications and which events to send."""

    email = forms.BooleanField(required=False, label="E-mail me")
    email_address = forms.CharField(max_length=254, required=False, label="E-mail address")
    webhook_url = forms.CharField(max_length=500, required=False, label="Webhook URL")
    events = forms.MultipleChoiceField(choices=EventKind.choices, required=False)
