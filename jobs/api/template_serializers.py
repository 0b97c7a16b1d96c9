"""What /api/suite-templates/ returns and takes (docs/api.md#suite-templates)."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from jobs.api.fields import PriorityField, RelatedName
from jobs.choices import SuiteStatus
from jobs.models import Suite, SuiteTemplate, TemplateRun
from jobs.submission_schema import StrictInputSerializer
from jobs.suite_templates import DISPATCH_PARAMETERS, cron_words
from schedsite.api_fields import StrictBooleanField, StrictCharField, StrictIntegerField


class TemplateRunSerializer(serializers.ModelSerializer):
    suite_status = serializers.SerializerMethodField()

    class Meta:
        model = TemplateRun
        fields = ["id", "slot", "outcome", "suite", "suite_status", "reason", "actor", "at"]
        read_only_fields = fields

    @extend_schema_field(serializers.ChoiceField(choices=SuiteStatus.choices, allow_blank=True))
    def get_suite_status(self, run: TemplateRun) -> str:
        return str(getattr(run, "suite_status", ""))


class SuiteTemplateSerializer(serializers.ModelSerializer):
    url = serializers.HyperlinkedIdentityField(view_name="api:suitetemplate-detail")
    owner = RelatedName("owner.username")
    cron_description = serializers.SerializerMethodField()
    next_run = serializers.SerializerMethodField()
    last_run = serializers.SerializerMethodField()
    dispatch_parameters = serializers.SerializerMethodField()

    class Meta:
        model = SuiteTemplate
        fields = ["url", "id", "name", "owner", "body", "cron", "cron_description", "enabled"]
        fields += ["next_run", "last_run", "dispatch_parameters", "created_at", "updated_at"]
        read_only_fields = fields

    def get_cron_description(self, template: SuiteTemplate) -> str:
        return cron_words(template.cron)

    @extend_schema_field(serializers.DateTimeField(allow_null=True))
    def get_next_run(self, template: SuiteTemplate) -> Any:
        schedule = template.schedule
        return (
            serializers.DateTimeField().to_representation(schedule.next_run) if schedule else None
        )

    @extend_schema_field(TemplateRunSerializer(allow_null=True))
    def get_last_run(self, template: SuiteTemplate) -> dict | None:
        run = getattr(template, "last_run", None)
        return TemplateRunSerializer(run).data if run is not None else None

    @extend_schema_field(serializers.ListField(child=serializers.CharField()))
    def get_dispatch_parameters(self, template: SuiteTemplate) -> list[str]:
        return list(DISPATCH_PARAMETERS)


CRON_HELP = (
    "Five-field cron expression in the site's time zone (such as '0 2 * * *'); each run makes "
    "a new suite, skipped while the previous run is unfinished. Empty: dispatched by hand only."
)


class SuiteTemplateUpdateInputSerializer(StrictInputSerializer):
    """The fields of a template a PATCH may change; only those sent change."""

    name = StrictCharField(max_length=200, required=False)
    body = serializers.JSONField(required=False, help_text="A POST /api/suites/ body.")
    cron = StrictCharField(max_length=100, allow_blank=True, required=False, help_text=CRON_HELP)
    enabled = StrictBooleanField(required=False, help_text="Default true: the cron runs it.")


class SuiteTemplateInputSerializer(SuiteTemplateUpdateInputSerializer):
    """A new template: a suite `body`, or `from_suite` to save an existing suite."""

    name = StrictCharField(max_length=200, required=False, help_text="Default: the suite's name.")
    from_suite = StrictIntegerField(
        min_value=1, required=False, help_text="Save this suite (its owner, or staff) instead."
    )

    def validate_from_suite(self, value: int) -> Suite:
        suite = Suite.objects.filter(pk=value).first()
        if suite is None:
            raise serializers.ValidationError(f"No suite {value}.")
        return suite

    def validate(self, data: dict) -> dict:
        if ("body" in data) == ("from_suite" in data):
            raise serializers.ValidationError({"body": ["Give either body or from_suite."]})
        if "body" in data and not data.get("name"):
            raise serializers.ValidationError({"name": ["This field is required."]})
        return data


class DispatchInputSerializer(serializers.Serializer):
    """The parameters a dispatch may set; anything else is refused by name."""

    build = StrictCharField(max_length=200, allow_blank=True, required=False)
    priority = PriorityField(required=False)

    def to_internal_value(self, data: Any) -> dict:
        if hasattr(data, "keys"):
            unknown = sorted(set(data.keys()) - set(DISPATCH_PARAMETERS))
            if unknown:
                allowed = ", ".join(DISPATCH_PARAMETERS)
                raise serializers.ValidationError(
                    {
                        "non_field_errors": [
                            f"Unknown parameters: {', '.join(unknown)} (a dispatch takes "
                            f"{allowed})."
                        ]
                    }
                )
        return super().to_internal_value(data)
