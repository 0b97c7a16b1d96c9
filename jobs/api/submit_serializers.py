"""What testers send to submit suites and jobs (docs/api.md#endpoints): the API's face of the
submission schema (jobs/submission_schema.py), plus the inputs only the API takes."""

from __future__ import annotations

from django.conf import settings
from rest_framework import serializers

from jobs.limits import bounds
from jobs.submission_schema import (  # noqa: F401 - the schema's serializers, as the API names them
    ALLOW_UNMATCHED_HELP,
    FanoutInputSerializer,
    JobCreateInputSerializer,
    JobSpecInputSerializer,
    PriorityField,
    StrictInputSerializer,
    SuiteCreateInputSerializer,
    _hosts_by_name,
    limited_integer,
    submit_suite,
    suite_arguments,
)
from schedsite.api_fields import StrictCharField, StrictIntegerField


class SuiteRerunInputSerializer(StrictInputSerializer):
    """Which failed jobs of the suite to run again: all of them when `jobs` is left out."""

    jobs = serializers.ListField(
        child=StrictIntegerField(min_value=1),
        required=False,
        allow_empty=False,
        max_length=settings.MAX_JOBS_PER_SUITE,
        help_text="Ids of some of the suite's failed, error or expired jobs (default: all).",
    )


CLONE_FIELDS = ("name", "build", "priority", "min_duts", "max_duts", "expires_after")


class SuiteCloneInputSerializer(serializers.Serializer):
    """What a clone changes of the original; everything left out, its jobs included, is copied."""

    name = StrictCharField(max_length=bounds("name").high, required=False)
    build = StrictCharField(max_length=bounds("build").high, allow_blank=True, required=False)
    priority = PriorityField(required=False)
    min_duts = limited_integer("min_duts", required=False)
    max_duts = limited_integer("max_duts", required=False, allow_null=True)
    expires_after = limited_integer("expires_after", required=False, allow_null=True)

    def validate(self, data: dict) -> dict:
        # A clone copies the original's jobs: a `jobs` or `fanout` here would be silently lost.
        extra = sorted(set(getattr(self, "initial_data", {})) - set(CLONE_FIELDS))
        if extra:
            raise serializers.ValidationError(
                {name: [f"A clone may change only {', '.join(CLONE_FIELDS)}."] for name in extra}
            )
        return data
