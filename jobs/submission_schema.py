"""The submission schema: what a suite or job submission may hold, below the API that takes it.

The API (jobs/api/submit_serializers.py), suite templates, re-run and clone, the what-if plan
and lab files read it; the limits are jobs.limits.SUBMISSION_LIMITS. Every level refuses a field
it does not know with a 400 naming it (docs/api.md#conventions): a misspelt `max_retry` must not
be dropped silently, leaving the job without its retries.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from datetime import timedelta
from typing import Any

from django.conf import settings
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from hosts.models import Host
from jobs import services
from jobs.choices import DEFAULT_PRIORITY, PRIORITY_LEVELS, parse_priority
from jobs.limits import bounds
from jobs.models import Suite
from jobs.services import JobSpec
from schedsite.api_fields import StrictBooleanField, StrictCharField, StrictIntegerField

MAX_LABELS = bounds("labels").high

# What a lab file's suites and jobs may hold (README.md, "Lab-file format"): the API's fields
# they share, and where a job runs now.
LAB_SUITE_FIELDS = ("name", "build", "priority", "min_duts", "max_duts", "jobs")
LAB_JOB_FIELDS = (
    "name",
    "labels",
    "host",
    "priority",
    "max_retries",
    "timeout",
    "running_on",
    "roles",
    "together_by",
)


def unknown_fields(data: object, known: Any) -> list[str]:
    """The keys of a submitted object that the schema does not know, sorted."""
    return sorted(str(key) for key in data if key not in known) if isinstance(data, Mapping) else []


def unknown_field_message(known: Any) -> str:
    return f"Unknown field: expected {', '.join(known)}."


class StrictInputSerializer(serializers.Serializer):
    """An input serializer that refuses fields it does not declare, naming each one.

    Its other errors (nested ones included) are reported along with them, so one answer names
    every unknown field at every level. The API's schema says so (additionalProperties).
    """

    refuses_unknown_fields = True

    def to_internal_value(self, data: Any) -> Any:
        unknown = unknown_fields(data, self.fields)
        if not unknown:
            return super().to_internal_value(data)
        message = unknown_field_message(self.fields)
        errors: dict[str, Any] = {name: [message] for name in unknown}
        try:
            super().to_internal_value(data)
        except serializers.ValidationError as exc:
            if isinstance(exc.detail, Mapping):
                errors = {**exc.detail, **errors}
        raise serializers.ValidationError(errors)


def limited_integer(name: str, **kwargs: Any) -> StrictIntegerField:
    """An integer field within the table's bounds for `name`."""
    limit = bounds(name)
    return StrictIntegerField(min_value=limit.low, max_value=limit.high, **kwargs)


class LabelListField(serializers.ListField):
    """A list of label names such as board:eve or pool:cq."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("child", StrictCharField(max_length=bounds("label").high))
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
    return limited_integer("timeout", **kwargs)


def expires_after_field(help_text: str) -> StrictIntegerField:
    """Seconds a job may wait in the queue before it ends `expired` (1 s to 30 days)."""
    return limited_integer(
        "expires_after", required=False, allow_null=True, default=None, help_text=help_text
    )


class RoleInputSerializer(StrictInputSerializer):
    """One role of a multi-host job: `count` hosts it needs, up to `max` if there is room."""

    name = StrictCharField(
        max_length=bounds("role_name").high,
        help_text="Unique within the job: letters, digits and . _ - (the runner's "
        "SCHEDSITE_HOSTS names its hosts by it).",
    )
    labels = LabelListField(
        required=False, default=list, help_text="Its hosts carry all, and the job's labels."
    )
    count = limited_integer("role_count", default=1, help_text="Essential hosts, at least 1.")
    max = limited_integer(
        "role_count",
        required=False,
        allow_null=True,
        default=None,
        help_text="Hosts it may take when there is room (elastic): at least count; default count.",
    )


class JobSpecInputSerializer(StrictInputSerializer):
    """One job of a suite, or a standalone job."""

    name = StrictCharField(max_length=bounds("name").high)
    labels = LabelListField(required=False, default=list, help_text="The host must carry all.")
    host = StrictCharField(
        max_length=bounds("host").high,
        required=False,
        allow_null=True,
        default=None,
        help_text="Pin the job to this host (by hostname).",
    )
    priority = PriorityField(
        required=False, allow_null=True, default=None, help_text="Defaults to the suite's."
    )
    max_retries = limited_integer("max_retries", default=0)
    timeout = seconds_field(
        required=False, allow_null=True, default=None, help_text="Maximum runtime in seconds."
    )
    estimated_duration = limited_integer(
        "estimated_duration", required=False, allow_null=True, default=None
    )
    expires_after = expires_after_field(
        "Seconds it may wait in the queue before it ends expired; defaults to the suite's."
    )
    preemptible = StrictBooleanField(
        default=False,
        help_text="May be stopped, and requeued without using a retry, to make room for a job "
        "the scheduler settings' preempt_margin levels higher (when preemption is on).",
    )
    roles = RoleInputSerializer(
        many=True,
        required=False,
        default=list,
        max_length=bounds("roles").high,
        help_text="A job needing several hosts at once: its roles (docs/api.md#multi-host-jobs). "
        f"At most {bounds('job_hosts').high} hosts in all (the sum of max); not with host.",
    )
    together_by = StrictCharField(
        max_length=bounds("together_by").high,
        required=False,
        allow_blank=True,
        default="",
        help_text="A label prefix such as chamber: every host of the job carries the same "
        "chamber:<value>. Only with roles.",
    )

    @staticmethod
    def spec(data: dict, hosts: dict[str, Host]) -> JobSpec:
        return JobSpec(
            name=data["name"],
            labels=data["labels"],
            host=hosts.get(data["host"]) if data.get("host") else None,
            priority=data.get("priority"),
            max_retries=data["max_retries"],
            timeout=timedelta(seconds=data["timeout"]) if data.get("timeout") else None,
            estimated_duration=(
                timedelta(seconds=data["estimated_duration"])
                if data.get("estimated_duration")
                else None
            ),
            expires_after=data.get("expires_after"),
            preemptible=data.get("preemptible", False),
            roles=[dict(role) for role in data.get("roles") or ()],
            together_by=data.get("together_by") or "",
        )


def _hosts_by_name(names: set[str]) -> dict[str, Host]:
    return {h.hostname: h for h in Host.objects.filter(hostname__in=names)} if names else {}


ALLOW_UNMATCHED_HELP = (
    "Submit even a job no host in the lab can run yet (its labels match no host that is not "
    "retired, or its pinned host lacks them, or no set of hosts can give each of its roles its "
    "count at once, kept together if asked): it waits for such hosts. Default false: such a "
    "job is refused with a 400 naming the labels or the role that matches nothing."
)


class JobCreateInputSerializer(JobSpecInputSerializer):
    build = StrictCharField(
        max_length=bounds("build").high,
        allow_blank=True,
        default="",
        help_text="The build the job tests: a host carrying another is provisioned to it first "
        "(docs/api.md#provisioning). Standalone jobs only: a suite's jobs test the suite's build.",
    )
    allow_unmatched = StrictBooleanField(default=False, help_text=ALLOW_UNMATCHED_HELP)

    def validate(self, data: dict) -> dict:
        hostname = data.get("host")
        hosts: dict[str, Host] = {}
        if hostname:
            hosts = _hosts_by_name({hostname})
            if hostname not in hosts:
                raise serializers.ValidationError({"host": [f"No host named {hostname}."]})
        data["spec"] = replace(self.spec(data, hosts), build=data["build"])
        return data


class FanoutInputSerializer(StrictInputSerializer):
    """Run one job on every host carrying all the labels, each pinned to its host."""

    labels = LabelListField(min_length=1)
    name = StrictCharField(
        max_length=bounds("fanout_name").high,
        required=False,
        allow_blank=True,
        default="",
        help_text="The test's name; jobs are named NAME@HOSTNAME (default: the suite's name).",
    )
    until = serializers.DateTimeField(
        required=False,
        allow_null=True,
        default=None,
        help_text="ISO 8601 time after which hosts that join (or start carrying the labels) "
        "get no job of the fan-out; default: any host that joins while the suite is open.",
    )


class SuiteCreateInputSerializer(StrictInputSerializer):
    """A suite with its jobs (`jobs`), or a fan-out suite (`fanout`): exactly one of the two."""

    name = StrictCharField(max_length=bounds("name").high)
    build = StrictCharField(max_length=bounds("build").high, allow_blank=True, default="")
    priority = PriorityField(default=DEFAULT_PRIORITY)
    min_duts = limited_integer("min_duts", default=0)
    max_duts = limited_integer("max_duts", required=False, allow_null=True, default=None)
    expires_after = expires_after_field(
        "Seconds each job may wait in the queue before it ends expired, unless it sets its own."
    )
    jobs = JobSpecInputSerializer(many=True, required=False)
    fanout = FanoutInputSerializer(required=False, allow_null=True, default=None)
    allow_unmatched = StrictBooleanField(default=False, help_text=ALLOW_UNMATCHED_HELP)
    notify = serializers.ListField(
        child=serializers.ChoiceField(choices=["email", "webhook"]),
        max_length=2,
        default=list,
        help_text="Tell the submitter when the suite finishes, by e-mail and/or webhook, at "
        "the destinations of their profile (docs/notifications.md).",
    )

    class Meta:
        # validate()'s rule, for the OpenAPI schema: at least one job, or a fan-out, not both.
        openapi_request_rules = {
            "oneOf": [
                {
                    "required": ["jobs"],
                    "properties": {"jobs": {"minItems": 1}, "fanout": {"not": {"type": "object"}}},
                },
                {
                    "required": ["fanout"],
                    "properties": {"fanout": {"type": "object"}, "jobs": {"maxItems": 0}},
                },
            ]
        }

    def to_internal_value(self, data: Any) -> dict:
        # Refuse an oversized suite before validating thousands of job entries one by one.
        jobs = data.get("jobs") if hasattr(data, "get") else None
        limit = settings.MAX_JOBS_PER_SUITE
        if isinstance(jobs, list) and len(jobs) > limit:
            raise serializers.ValidationError(
                {"jobs": [f"A suite may have at most {limit} jobs; this one has {len(jobs)}."]}
            )
        return super().to_internal_value(data)

    def validate(self, data: dict) -> dict:
        jobs, fanout = data.get("jobs"), data.get("fanout")
        if jobs and fanout:
            raise serializers.ValidationError({"fanout": ["Give either jobs or fanout, not both."]})
        if not jobs and not fanout:
            raise serializers.ValidationError(
                {"jobs": ["A suite needs at least one job (or a fanout)."]}
            )
        max_duts = data.get("max_duts")
        if max_duts is not None and data["min_duts"] > max_duts:
            raise serializers.ValidationError({"min_duts": ["min_duts cannot exceed max_duts."]})
        if jobs:
            # One query for every pinned host, however many jobs name one.
            hosts = _hosts_by_name({j["host"] for j in jobs if j.get("host")})
            errors = [
                {"host": [f"No host named {j['host']}."]}
                if j.get("host") and j["host"] not in hosts
                else {}
                for j in jobs
            ]
            if any(errors):
                raise serializers.ValidationError({"jobs": errors})
            data["specs"] = [JobSpecInputSerializer.spec(j, hosts) for j in jobs]
        return data


def submit_suite(owner: Any, data: dict, **links: Suite) -> Suite:
    """Submit the suite a validated `SuiteCreateInputSerializer` describes, owned by `owner`.

    `links` (`rerun_of`, `cloned_from`) name the suite it was made from.
    """
    return services.suite_submit(owner=owner, **suite_arguments(data), **links)


def suite_arguments(data: dict) -> dict[str, Any]:
    """The keyword arguments of `suite_submit` (and `suite_prepare`) a validated body gives."""
    fanout = data.get("fanout")
    return {
        "name": data["name"],
        "jobs": data.get("specs", ()),
        "build": data["build"],
        "priority": data["priority"],
        "min_duts": data["min_duts"],
        "max_duts": data["max_duts"],
        "expires_after": data["expires_after"],
        "fanout_labels": fanout["labels"] if fanout else None,
        "fanout_name": fanout["name"] if fanout else "",
        "fanout_until": fanout["until"] if fanout else None,
        "allow_unmatched": data["allow_unmatched"],
    }
