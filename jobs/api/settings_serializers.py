"""The scheduler settings in the API: what GET shows, what PATCH takes, and their history."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from hosts.services import REASON_MAX
from jobs.api.fields import Seconds
from jobs.choices import HostChoice, SchedulerOrdering
from jobs.models import SchedulerSettings, SchedulerSettingsChange
from jobs.services.scheduler_settings import (
    AGING_CAP_MAX,
    AGING_MINUTES_MAX,
    DEFAULT_DURATION_MAX,
    HALF_LIFE_HOURS_MAX,
    PREEMPT_MARGIN_MAX,
    SAME_BUILD_FIRST_MAX,
    SETTINGS_FIELDS,
)
from schedsite.api_fields import StrictBooleanField, StrictCharField, StrictIntegerField

VERSION_MAX = 2**31 - 1


def _help(field: str) -> str:
    return str(SchedulerSettings._meta.get_field(field).help_text)


class SchedulerSettingsSerializer(serializers.ModelSerializer):
    default_duration = Seconds(help_text=_help("default_duration") + " In seconds.")
    version = serializers.IntegerField(
        read_only=True, help_text="Bumped by every change: send it back as PATCH `version`."
    )
    updated_by = serializers.CharField(
        read_only=True, help_text="Who made the last change; empty for the defaults."
    )

    class Meta:
        model = SchedulerSettings
        fields = [*SETTINGS_FIELDS, "version", "updated_at", "updated_by"]
        read_only_fields = fields


class SchedulerSettingsInputSerializer(serializers.Serializer):
    """Any of the settings, plus the version as read and why; anything else is refused by name.

    The ranges are the service's (jobs.services.scheduler_settings), stated here too so that
    the schema says them.
    """

    ordering = serializers.ChoiceField(
        choices=SchedulerOrdering.choices, required=False, help_text=_help("ordering")
    )
    aging_minutes = StrictIntegerField(
        min_value=0, max_value=AGING_MINUTES_MAX, required=False, help_text=_help("aging_minutes")
    )
    aging_cap = StrictIntegerField(
        min_value=0, max_value=AGING_CAP_MAX, required=False, help_text=_help("aging_cap")
    )
    host_choice = serializers.ChoiceField(
        choices=HostChoice.choices, required=False, help_text=_help("host_choice")
    )
    default_duration = StrictIntegerField(
        min_value=1,
        max_value=int(DEFAULT_DURATION_MAX.total_seconds()),
        required=False,
        help_text=_help("default_duration") + " In seconds.",
    )
    preemption = StrictBooleanField(required=False, help_text=_help("preemption"))
    preempt_margin = StrictIntegerField(
        min_value=1, max_value=PREEMPT_MARGIN_MAX, required=False, help_text=_help("preempt_margin")
    )
    fair_share = StrictBooleanField(required=False, help_text=_help("fair_share"))
    fair_share_half_life_hours = StrictIntegerField(
        min_value=1,
        max_value=HALF_LIFE_HOURS_MAX,
        required=False,
        help_text=_help("fair_share_half_life_hours"),
    )
    same_build_first_minutes = StrictIntegerField(
        min_value=0,
        max_value=SAME_BUILD_FIRST_MAX,
        required=False,
        help_text=_help("same_build_first_minutes"),
    )
    version = StrictIntegerField(
        min_value=0,
        max_value=VERSION_MAX,
        required=False,
        help_text="The settings' version as read: 409 if someone changed them since, and "
        "nothing is changed. Leave it out to change them whatever the version.",
    )
    reason = StrictCharField(
        max_length=REASON_MAX,
        allow_blank=True,
        required=False,
        help_text="Why: kept with the change in the history.",
    )

    class Meta:
        # A misspelt setting must not pass for a change that did nothing.
        openapi_request_rules = {"additionalProperties": False}

    def to_internal_value(self, data: Any) -> dict:
        if hasattr(data, "keys"):
            unknown = sorted(set(data.keys()) - set(self.fields))
            if unknown:
                known = ", ".join(self.fields)
                raise serializers.ValidationError(
                    {name: [f"Unknown field: the body may hold {known}."] for name in unknown}
                )
        return super().to_internal_value(data)


class ProposedSettingsSerializer(SchedulerSettingsInputSerializer):
    """Scheduler settings a what-if plan tries (POST /api/scheduler/plan/ `settings`): any of
    the settings; the others keep their current value. Nothing is saved, so no version or
    reason."""

    version = None
    reason = None


class SchedulerSettingsChangeSerializer(serializers.ModelSerializer):
    changes = serializers.DictField(
        child=serializers.ListField(min_length=2, max_length=2),
        read_only=True,
        help_text="Each changed setting: [old, new] (default_duration in seconds).",
    )

    class Meta:
        model = SchedulerSettingsChange
        fields = ["id", "at", "actor", "version", "changes", "reason"]
        read_only_fields = fields
