"""What testers send to submit suites and jobs: the input serializers (docs/api.md#endpoints)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.conf import settings
from rest_framework import serializers

from hosts.models import Host
from jobs import services
from jobs.api.fields import LabelListField, PriorityField, seconds_field
from jobs.choices import DEFAULT_PRIORITY
from jobs.models import Suite
from jobs.services import JobSpec
from jobs.services.submission import MAX_EXPIRES_AFTER
from schedsite.api_fields import StrictBooleanField, StrictCharField, StrictIntegerField


def expires_after_field(help_text: str) -> StrictIntegerField:
    """Seconds a job may wait in the queue before it ends `expired` (1 s to 30 days)."""
    return StrictIntegerField(
        min_value=1,
        max_value=MAX_EXPIRES_AFTER,
        required=False,
        allow_null=True,
        default=None,
        help_text=help_text,
    )


class JobSpecInputSerializer(serializers.Serializer):
    """One job of a suite, or a standalone job."""

    name = StrictCharField(max_length=200)
    labels = LabelListField(required=False, default=list, help_text="The host must carry all.")
    host = StrictCharField(
        max_length=255,
        required=False,
        allow_null=True,
        default=None,
        help_text="Pin the job to this host (by hostname).",
    )
    priority = PriorityField(
        required=False, allow_null=True, default=None, help_text="Defaults to the suite's."
    )
    max_retries = StrictIntegerField(min_value=0, max_value=100, default=0)
    timeout = seconds_field(
        required=False, allow_null=True, default=None, help_text="Maximum runtime in seconds."
    )
    estimated_duration = seconds_field(required=False, allow_null=True, default=None)
    expires_after = expires_after_field(
        "Seconds it may wait in the queue before it ends expired; defaults to the suite's."
    )
    preemptible = StrictBooleanField(
        default=False,
        help_text="May be stopped, and requeued without using a retry, to make room for a job "
        "the scheduler settings' preempt_margin levels higher (when preemption is on).",
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
        )


def _hosts_by_name(names: set[str]) -> dict[str, Host]:
    return {h.hostname: h for h in Host.objects.filter(hostname__in=names)} if names else {}


ALLOW_UNMATCHED_HELP = (
    "Submit even a job no host in the lab can run yet (its labels match no host that is not "
    "retired, or its pinned host lacks them): it waits for such a host. Default false: such a "
    "job is refused with a 400 naming the labels that match nothing."
)


class JobCreateInputSerializer(JobSpecInputSerializer):
    allow_unmatched = StrictBooleanField(default=False, help_text=ALLOW_UNMATCHED_HELP)

    def validate(self, data: dict) -> dict:
        hostname = data.get("host")
        if hostname:
            hosts = _hosts_by_name({hostname})
            if hostname not in hosts:
                raise serializers.ValidationError({"host": [f"No host named {hostname}."]})
            data["spec"] = self.spec(data, hosts)
        else:
            data["spec"] = self.spec(data, {})
        return data


class FanoutInputSerializer(serializers.Serializer):
    """Run one job on every host carrying all the labels, each pinned to its host."""

    labels = LabelListField(min_length=1)
    name = StrictCharField(
        max_length=150,
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


class SuiteCreateInputSerializer(serializers.Serializer):
    """A suite with its jobs (`jobs`), or a fan-out suite (`fanout`): exactly one of the two."""

    name = StrictCharField(max_length=200)
    build = StrictCharField(max_length=200, allow_blank=True, default="")
    priority = PriorityField(default=DEFAULT_PRIORITY)
    min_duts = StrictIntegerField(min_value=0, max_value=100000, default=0)
    max_duts = StrictIntegerField(
        min_value=1, max_value=100000, required=False, allow_null=True, default=None
    )
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


class SuiteRerunInputSerializer(serializers.Serializer):
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

    name = StrictCharField(max_length=200, required=False)
    build = StrictCharField(max_length=200, allow_blank=True, required=False)
    priority = PriorityField(required=False)
    min_duts = StrictIntegerField(min_value=0, max_value=100000, required=False)
    max_duts = StrictIntegerField(min_value=1, max_value=100000, required=False, allow_null=True)
    expires_after = StrictIntegerField(
        min_value=1, max_value=MAX_EXPIRES_AFTER, required=False, allow_null=True
    )

    def validate(self, data: dict) -> dict:
        # A clone copies the original's jobs: a `jobs` or `fanout` here would be silently lost.
        extra = sorted(set(getattr(self, "initial_data", {})) - set(CLONE_FIELDS))
        if extra:
            raise serializers.ValidationError(
                {name: [f"A clone may change only {', '.join(CLONE_FIELDS)}."] for name in extra}
            )
        return data
