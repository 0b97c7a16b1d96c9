"""Serializers for jobs, leases and suites (docs/api.md#endpoints).

What testers send to submit suites and jobs is in submit_serializers; the queue and the
scheduler's ticks are in queue_serializers.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import timedelta
from operator import attrgetter
from typing import Any

from django.utils.functional import cached_property
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from hosts.choices import EventKind, HostStatus
from hosts.models import Host, HostEvent
from jobs import selectors
from jobs.api.fields import (
    IdentityURL,
    RelatedName,
    Seconds,
)
from jobs.choices import JobKind, JobStatus, ReleaseReason, SuiteStatus
from jobs.filtersets import RESERVATION
from jobs.job_history import Attempt, suite_outcome
from jobs.models import Job, Lease, Suite, decode_labels
from jobs.provisioning import MAX_PROVISION_SECONDS
from jobs.scheduling.planner import WAIT_CODES
from jobs.submission_schema import PriorityField, StrictInputSerializer
from schedsite.api_fields import (
    StrictBooleanField,
    StrictCharField,
    StrictFloatField,
    StrictIntegerField,
)
from schedsite.api_serializers import FieldsBuiltOnce

# --- leases ---------------------------------------------------------------------------------


def lease_kind(lease: Lease) -> str:
    """What a lease is for: its job's kind, or a manual reservation."""
    return lease.job.kind if lease.job_id else RESERVATION


PROVISION_TO_HELP = (
    "The build its runner must put on the host before the test: the job's build, which the "
    "host did not carry when it was leased (docs/api.md#provisioning). Null: none needed."
)


class ProvisionToField(serializers.CharField):
    """A lease's provision_to: the build, or null when none is needed ("" stored)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(read_only=True, allow_null=True, help_text=PROVISION_TO_HELP, **kwargs)

    def to_representation(self, value: str) -> str | None:
        return value or None


class ActiveLeaseSerializer(serializers.ModelSerializer):
    """The lease holding a host or job right now."""

    url = IdentityURL(view_name="api:lease-detail")
    host = serializers.CharField(source="host.hostname")
    job_name = RelatedName("job.name")
    holder = RelatedName("holder.username")
    kind = serializers.SerializerMethodField()
    provision_to = ProvisionToField()

    class Meta:
        model = Lease
        fields = ["url", "id", "host", "job", "job_name", "kind", "holder", "reason"]
        fields += ["acquired_at", "expires_at", "heartbeat_at", "provision_to"]
        read_only_fields = fields

    @extend_schema_field(
        serializers.CharField(
            help_text="Its job's kind (test, verify, repair), or reservation for a manual one."
        )
    )
    def get_kind(self, lease: Lease) -> str:
        return lease_kind(lease)


class ActiveLeaseMixin:
    """Render a listed row's active lease with one ActiveLeaseSerializer for the whole list:
    building a serializer's fields per row cost more than the rest of a page of 50."""

    context: dict

    @cached_property
    def _lease_serializer(self) -> ActiveLeaseSerializer:
        return ActiveLeaseSerializer(context=self.context)

    def lease_data(self, lease: Lease | None) -> dict | None:
        return self._lease_serializer.to_representation(lease) if lease else None


class LeaseSerializer(ActiveLeaseSerializer):
    # Declared: a read-only model field loses allow_blank, and "" (still active) is a value.
    release_reason = serializers.ChoiceField(
        choices=ReleaseReason.choices, allow_blank=True, read_only=True
    )
    worker = RelatedName("host.worker.name")
    suite = serializers.SerializerMethodField()
    active = serializers.SerializerMethodField()
    manual = serializers.SerializerMethodField()

    class Meta(ActiveLeaseSerializer.Meta):
        fields = [*ActiveLeaseSerializer.Meta.fields, "worker", "suite", "active", "manual"]
        fields += ["released_at", "release_reason", "released_by", "host_failed"]
        read_only_fields = fields
        extra_kwargs = {
            "host_failed": {
                "help_text": "The host failed under this lease's test job: the runner reported "
                "it broken (host_ok false), or the lease expired. The job was retried or ended."
            }
        }

    @extend_schema_field(serializers.IntegerField(allow_null=True))
    def get_suite(self, lease: Lease) -> int | None:
        return lease.job.suite_id if lease.job_id else None

    def get_active(self, lease: Lease) -> bool:
        return lease.active

    def get_manual(self, lease: Lease) -> bool:
        return lease.job_id is None


# Generous bounds that keep timedelta() from overflowing; the service enforces the real limit
# (MAX_RESERVATION_SECONDS) with a message that names it.
MAX_DURATION = 10**9
MAX_ID = 2**63 - 1


class LeaseReserveInputSerializer(serializers.Serializer):
    host = serializers.SlugRelatedField(slug_field="hostname", queryset=Host.objects.all())
    duration = StrictIntegerField(min_value=1, max_value=MAX_DURATION, help_text="Seconds.")
    reason = StrictCharField(max_length=500)


class LeaseEndInputSerializer(serializers.Serializer):
    reason = StrictCharField(max_length=500, allow_blank=True, default="")


class LeaseReleaseInputSerializer(LeaseEndInputSerializer):
    requeue = StrictBooleanField(
        default=True, help_text="Requeue the lease's job (default), or abort it."
    )


class LeaseExtendInputSerializer(serializers.Serializer):
    duration = StrictIntegerField(
        min_value=1, max_value=MAX_DURATION, help_text="Seconds added to the reservation's end."
    )

    def validate_duration(self, seconds: int) -> timedelta:
        return timedelta(seconds=seconds)


# --- jobs -----------------------------------------------------------------------------------


class RoleSerializer(serializers.Serializer):
    """One role of a multi-host job: `count` essential hosts, up to `max` with elastic ones."""

    name = serializers.CharField()
    labels = serializers.ListField(
        child=serializers.CharField(), help_text="The role's own labels; the job's apply too."
    )
    count = serializers.IntegerField()
    max = serializers.IntegerField()


class AttemptHostSerializer(serializers.Serializer):
    """One host of a job's attempt: its role, its hostname and the lease that holds it."""

    role = serializers.CharField(help_text="The job's role it plays; empty for a one-host job.")
    hostname = serializers.CharField()
    lease = serializers.IntegerField(help_text="The lease's id.")
    provision_to = serializers.CharField(allow_null=True, help_text=PROVISION_TO_HELP)


_SLOT = attrgetter("slot", "pk")


def attempt_hosts(leases: Iterable[Lease]) -> list[dict]:
    """The hosts of an attempt as the API shows them: [{"role", "hostname", "lease",
    "provision_to"}], by slot; each host of a multi-host job says whether it needs a build."""
    return [
        {
            "role": lease.role,
            "hostname": lease.host.hostname,
            "lease": lease.pk,
            "provision_to": lease.provision_to or None,
        }
        for lease in sorted(leases, key=_SLOT)
    ]


class WaitReasonSerializer(serializers.Serializer):
    code = serializers.ChoiceField(choices=WAIT_CODES)
    message = serializers.CharField()
    details = serializers.DictField()


class JobSerializer(FieldsBuiltOnce, ActiveLeaseMixin, serializers.ModelSerializer):
    """A job, its wait reason and its active lease; its fields built once per process
    (schedsite.api_serializers), which took a millisecond of every page of jobs."""

    url = IdentityURL(view_name="api:job-detail")
    suite_name = RelatedName("suite.name")
    labels = serializers.ListField(child=serializers.CharField(), read_only=True)
    host = RelatedName("host.hostname", help_text="Pinned host.")
    owner = RelatedName("owner.username")
    timeout = Seconds(help_text="Maximum runtime in seconds.")
    estimated_duration = Seconds(allow_null=True, help_text="Seconds.")
    wait_reason = serializers.SerializerMethodField()
    lease = serializers.SerializerMethodField()
    roles = serializers.SerializerMethodField()
    build = serializers.SerializerMethodField()
    hosts = serializers.SerializerMethodField()

    class Meta:
        model = Job
        fields = [
            "url",
            "id",
            "name",
            "kind",
            "suite",
            "suite_name",
            "build",
            "status",
            "priority",
            "labels",
            "roles",
            "together_by",
            "host",
            "max_retries",
            "attempts",
            "timeout",
            "estimated_duration",
            "preemptible",
            "owner",
            "created_at",
            "submitted_at",
            "started_at",
            "finished_at",
            "not_before",
            "expires_after",
            "expires_at",
            "message",
            "wait_reason",
            "lease",
            "hosts",
        ]
        read_only_fields = fields
        extra_kwargs = {
            "together_by": {
                "help_text": "A label prefix: every host of the job carries the same "
                "`<prefix>:<value>` label; empty if none."
            }
        }

    def to_representation(self, job: Job) -> dict[str, Any]:
        """What DRF's walk over the fields above gives, made directly: the walk (each field's
        source looked up, checked for None, converted) took 4 ms of a page of 50 jobs, this
        takes under 2. tests/api/test_job_representation.py holds the two equal."""
        fields = self.fields
        when = fields["created_at"].to_representation
        suite, host, owner = job.suite, job.host, job.owner
        return {
            "url": fields["url"].to_representation(job),
            "id": job.pk,
            "name": job.name,
            "kind": fields["kind"].to_representation(job.kind),
            "suite": job.suite_id,
            "suite_name": suite.name if suite is not None else None,
            "build": self.get_build(job),
            "status": fields["status"].to_representation(job.status),
            "priority": job.priority,
            "labels": job.labels,
            "roles": self.get_roles(job),
            "together_by": job.together_by,
            "host": host.hostname if host is not None else None,
            "max_retries": job.max_retries,
            "attempts": job.attempts,
            "timeout": round(job.timeout.total_seconds()),
            "estimated_duration": _seconds(job.estimated_duration),
            "preemptible": job.preemptible,
            "owner": owner.username if owner is not None else None,
            "created_at": when(job.created_at),
            "submitted_at": when(job.submitted_at),
            "started_at": _or_none(when, job.started_at),
            "finished_at": _or_none(when, job.finished_at),
            "not_before": _or_none(when, job.not_before),
            "expires_after": job.expires_after,
            "expires_at": _or_none(when, job.expires_at),
            "message": job.message,
            "wait_reason": self.get_wait_reason(job),
            "lease": self.get_lease(job),
            "hosts": self.get_hosts(job),
        }

    @extend_schema_field(
        serializers.CharField(
            help_text="The build it tests: its suite's, or a standalone job's own; empty if none."
        )
    )
    def get_build(self, job: Job) -> str:
        return job.build_to_test

    @extend_schema_field(WaitReasonSerializer(allow_null=True))
    def get_wait_reason(self, job: Job) -> dict | None:
        reasons = self.context.get("wait_reasons") or {}
        return reasons.get(job.pk)

    @extend_schema_field(
        RoleSerializer(
            many=True,
            help_text="A multi-host job's roles (docs/scheduling.md#multi-host-jobs); empty for "
            "a one-host job.",
        )
    )
    def get_roles(self, job: Job) -> list[dict]:
        return [_role(role) for role in job.roles]

    def _active_leases(self, job: Job) -> list[Lease]:
        """The job's active leases by slot (a multi-host job's one per host)."""
        leases = getattr(job, "active_leases", None)
        if leases is None:  # not prefetched (a freshly changed job): read it
            leases = list(job.leases.active().select_related("host", "holder"))
            job.active_leases = leases
        if len(leases) > 1:
            leases = sorted(leases, key=_SLOT)
        return leases

    @extend_schema_field(ActiveLeaseSerializer(allow_null=True))
    def get_lease(self, job: Job) -> dict | None:
        """The active lease (a multi-host job's slot 0: its runner's)."""
        leases = self._active_leases(job)
        return self.lease_data(leases[0] if leases else None)

    @extend_schema_field(AttemptHostSerializer(many=True))
    def get_hosts(self, job: Job) -> list[dict]:
        """The hosts of the active attempt, by slot; empty when it holds none."""
        return attempt_hosts(self._active_leases(job))


def _role(role: dict) -> dict:
    return {
        "name": role["name"],
        "labels": list(role.get("labels") or ()),
        "count": role.get("count", 1),
        "max": role.get("max") or role.get("count", 1),
    }


def _seconds(value: timedelta | None) -> int | None:
    return None if value is None else round(value.total_seconds())


def _or_none(convert: Callable[[Any], Any], value: Any) -> Any:
    return None if value is None else convert(value)


class ProtocolActiveLeaseSerializer(FieldsBuiltOnce, ActiveLeaseSerializer):
    """ActiveLeaseSerializer, fields built once: the lease in a runner's `start` answer."""

    def to_representation(self, lease: Lease) -> dict[str, Any]:
        """What DRF's walk over ActiveLeaseSerializer's fields gives, made directly: the walk
        was a tenth of a runner's `start` in a profile (docs/performance.md#the-runner-protocol).
        tests/api/test_protocol_answers.py holds the two equal."""
        fields = self.fields
        when = fields["acquired_at"].to_representation
        job, holder = lease.job, lease.holder
        return {
            "url": fields["url"].to_representation(lease),
            "id": lease.pk,
            "host": lease.host.hostname,
            "job": lease.job_id,
            "job_name": job.name if job is not None else None,
            "kind": lease_kind(lease),
            "holder": holder.username if holder is not None else None,
            "reason": lease.reason,
            "acquired_at": when(lease.acquired_at),
            "expires_at": when(lease.expires_at),
            "heartbeat_at": _or_none(when, lease.heartbeat_at),
            "provision_to": lease.provision_to or None,
        }


class ProtocolJobSerializer(JobSerializer):
    """JobSerializer, field for field, for the answers of `start` and `complete`.

    Its lease's fields are built once per process too (schedsite.api_serializers): the runner
    protocol answers a job a hundred times a second in a big lab.
    """

    @cached_property
    def _lease_serializer(self) -> ActiveLeaseSerializer:
        return ProtocolActiveLeaseSerializer(context=self.context)


class LeaseInputSerializer(FieldsBuiltOnce, serializers.Serializer):
    """The lease a runner acts through; `start` and `complete` add their own fields. Fields
    built once per process and copied per call, as the answers' are: DRF deep-copies each
    declared field for every body it checks."""

    lease = StrictIntegerField(
        required=False,
        min_value=1,
        max_value=MAX_ID,
        error_messages={"required": "Runners must name the lease they hold (its id)."},
        help_text="The lease the runner holds. Required for runners (400 without it); staff may "
        "leave it out to act on the job's active lease. A lease of this job that is no longer "
        "active (a late call from an earlier attempt) gives 409 and changes nothing.",
    )

    def __init__(self, *args: Any, lease_required: bool = False, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["lease"].required = lease_required


def provision_seconds_field(help_text: str) -> StrictFloatField:
    return StrictFloatField(
        required=False,
        allow_null=True,
        default=None,
        min_value=0,
        max_value=MAX_PROVISION_SECONDS,
        help_text=help_text,
    )


class JobStartInputSerializer(LeaseInputSerializer):
    build = StrictCharField(
        required=False,
        allow_null=True,
        default=None,
        max_length=200,
        help_text="The build the runner put on the host (a multi-host job: on every host) "
        "before the test: it becomes the host's current_build, with a `provisioned` event "
        "(docs/api.md#provisioning). Leave it out when nothing was provisioned.",
    )
    provision_seconds = provision_seconds_field(
        "How long provisioning took (0 to 86,400 seconds); only with build."
    )

    def validate_build(self, build: str | None) -> str | None:
        if build is not None and not build.strip():
            raise serializers.ValidationError("Give the build now on the host, or leave it out.")
        return build.strip() if build is not None else None

    def validate(self, data: dict) -> dict:
        if data.get("provision_seconds") is not None and data.get("build") is None:
            raise serializers.ValidationError(
                {"provision_seconds": ["Only with build: the build it took that long to put on."]}
            )
        return data


class JobCompleteInputSerializer(LeaseInputSerializer):
    result = serializers.ChoiceField(choices=[JobStatus.PASSED, JobStatus.FAILED])
    message = StrictCharField(
        allow_blank=True, default="", max_length=100000, help_text="Stored up to 10,000 chars."
    )
    host_ok = StrictBooleanField(
        default=True,
        help_text="false sends the host (a multi-host job: every host of it) to needs_repair.",
    )
    hosts_ok = serializers.DictField(
        child=StrictBooleanField(),
        required=False,
        allow_empty=True,
        help_text='A multi-host job\'s hosts by hostname: {"dut2": false} sends dut2 to '
        "needs_repair, the hosts not named are fine. A hostname that is not one of the job's "
        "hosts gives 400 naming it.",
    )
    provision_failed = StrictBooleanField(
        default=False,
        help_text="Provisioning the host failed before the test could start: a failed Provision "
        "and a `provisioned` event with the message's tail (docs/api.md#provisioning). Only "
        "with result failed, on a job not started; send host_ok false to repair the host and "
        "retry the job elsewhere.",
    )
    provision_seconds = provision_seconds_field(
        "How long the failed provisioning ran; only with provision_failed."
    )

    def validate(self, data: dict) -> dict:
        if data.get("provision_failed") and data["result"] != JobStatus.FAILED:
            raise serializers.ValidationError(
                {"provision_failed": ["A job whose provisioning failed has result failed."]}
            )
        if data.get("provision_seconds") is not None and not data.get("provision_failed"):
            raise serializers.ValidationError(
                {"provision_seconds": ["Only with provision_failed (or on start, with build)."]}
            )
        return data


class JobAbortInputSerializer(serializers.Serializer):
    reason = StrictCharField(max_length=500, allow_blank=True, default="")


class JobUpdateInputSerializer(StrictInputSerializer):
    """PATCH of a queued job: its priority, read as a submission reads one (a PATCH is partial:
    an empty body changes nothing)."""

    priority = PriorityField(required=False, help_text="0–100, or a level name; a queued job only")


class AttemptEventSerializer(serializers.ModelSerializer):
    """One audit event of an attempt: on its host while it held the host, or about its lease."""

    kind = serializers.ChoiceField(EventKind.choices, read_only=True)
    # Blank on events that are not status changes; the schema has to say so.
    old_status = serializers.ChoiceField(HostStatus.choices, allow_blank=True, read_only=True)
    new_status = serializers.ChoiceField(HostStatus.choices, allow_blank=True, read_only=True)

    class Meta:
        model = HostEvent
        fields = ["id", "created_at", "kind", "actor", "subject", "old_status", "new_status"]
        fields += ["message", "lease_id"]
        read_only_fields = fields


ATTEMPT_RESULTS = sorted({*JobStatus.values, *ReleaseReason.values} - {JobStatus.QUEUED})


class JobAttemptSerializer(serializers.Serializer):
    """One try of a job: the lease it ran under, its host, what came of it and its events."""

    id = serializers.IntegerField(source="lease.pk", help_text="The lease's id.")
    number = serializers.IntegerField(help_text="1 = the first attempt.")
    host = serializers.CharField(source="lease.host.hostname")
    worker = serializers.CharField(
        source="lease.host.worker.name",
        allow_null=True,
        default=None,
        help_text="The host's worker (now).",
    )
    acquired_at = serializers.DateTimeField(source="lease.acquired_at")
    started_at = serializers.DateTimeField(
        allow_null=True, help_text="When the runner started the test (null: never started)."
    )
    heartbeat_at = serializers.DateTimeField(source="lease.heartbeat_at", allow_null=True)
    released_at = serializers.DateTimeField(
        source="lease.released_at", allow_null=True, help_text="Null while it holds the host."
    )
    release_reason = serializers.ChoiceField(
        source="lease.release_reason", choices=ReleaseReason.choices, allow_blank=True
    )
    released_by = serializers.CharField(source="lease.released_by", allow_blank=True)
    host_failed = serializers.BooleanField(
        source="lease.host_failed", help_text="It ended because its host failed under the job."
    )
    provision_to = ProvisionToField(source="lease.provision_to")
    result = serializers.ChoiceField(
        choices=ATTEMPT_RESULTS,
        help_text="The job's status while this attempt holds it or when this attempt ended it; "
        "failed for a try whose host broke; otherwise how the lease ended (expired, released, "
        "timeout, aborted).",
    )
    message = serializers.CharField(
        allow_blank=True,
        help_text="The job's output (up to 10,000 characters) if this attempt ended the job; "
        "else the message of the event that ended the lease.",
    )
    retried_because = serializers.SerializerMethodField()
    hosts = serializers.SerializerMethodField()
    events = AttemptEventSerializer(many=True, help_text="Oldest first.")

    @extend_schema_field(AttemptHostSerializer(many=True))
    def get_hosts(self, attempt: Attempt) -> list[dict]:
        """Every host of the attempt, by slot (a one-host job's one)."""
        return attempt_hosts(attempt.leases or (attempt.lease,))

    @extend_schema_field(
        serializers.CharField(
            allow_null=True, help_text="Why the job went back to the queue after this attempt."
        )
    )
    def get_retried_because(self, attempt: Attempt) -> str | None:
        return attempt.retried_because or None


# --- suites ---------------------------------------------------------------------------------


class JobCountsSerializer(serializers.Serializer):
    """How many of a suite's jobs are in each status."""

    def to_representation(self, counts: dict[str, int]) -> dict[str, int]:
        return {status: counts.get(status, 0) for status in JobStatus.values}

    def get_fields(self) -> dict[str, serializers.Field]:
        return {status: serializers.IntegerField() for status in JobStatus.values}


class SuiteOutcomeSerializer(serializers.Serializer):
    """How a suite's jobs came out; a completed suite passed only if all passed."""

    passed = serializers.IntegerField()
    failed = serializers.IntegerField(help_text="failed, error or expired.")
    aborted = serializers.IntegerField()
    skipped = serializers.IntegerField(
        help_text="Fan-out jobs whose host was retired, repair_failed or no longer matching."
    )
    unfinished = serializers.IntegerField(help_text="queued, leased or running.")


class FanoutSerializer(serializers.Serializer):
    """A fan-out suite's labels, its cut-off for joining hosts, and its hosts by how they stand."""

    labels = serializers.ListField(child=serializers.CharField())
    until = serializers.DateTimeField(allow_null=True)
    done = serializers.IntegerField(help_text="Hosts whose job ended, whatever the result.")
    pending = serializers.IntegerField(help_text="Hosts whose job is queued, leased or running.")
    skipped = serializers.IntegerField(
        help_text="Hosts whose job was skipped: retired, repair_failed or no longer matching."
    )


class SuiteSerializer(serializers.ModelSerializer):
    url = serializers.HyperlinkedIdentityField(view_name="api:suite-detail")
    owner = RelatedName("owner.username")
    priority = serializers.IntegerField(read_only=True)
    status = serializers.SerializerMethodField()
    job_counts = serializers.SerializerMethodField()
    outcome = serializers.SerializerMethodField()
    jobs_total = serializers.SerializerMethodField()
    hosts_held = serializers.SerializerMethodField()
    fanout_labels = serializers.SerializerMethodField()
    fanout = serializers.SerializerMethodField()

    class Meta:
        model = Suite
        fields = [
            "url",
            "id",
            "name",
            "build",
            "priority",
            "min_duts",
            "max_duts",
            "expires_after",
            "owner",
            "status",
            "job_counts",
            "outcome",
            "jobs_total",
            "hosts_held",
            "fanout_labels",
            "fanout",
            "rerun_of",
            "cloned_from",
            "created_at",
            "aborted_at",
            "aborted_by",
        ]
        read_only_fields = fields
        extra_kwargs = {
            "rerun_of": {"help_text": "The suite whose failed jobs this one re-runs."},
            "cloned_from": {"help_text": "The suite this one is a copy of."},
        }

    def _counts(self, suite: Suite) -> dict[str, int]:
        return (self.context.get("job_counts") or {}).get(suite.pk, {})

    @extend_schema_field(serializers.ChoiceField(choices=SuiteStatus.choices))
    def get_status(self, suite: Suite) -> str:
        return str(suite.status_from_counts(self._counts(suite)))

    @extend_schema_field(JobCountsSerializer)
    def get_job_counts(self, suite: Suite) -> dict[str, int]:
        return JobCountsSerializer().to_representation(self._counts(suite))

    @extend_schema_field(SuiteOutcomeSerializer)
    def get_outcome(self, suite: Suite) -> dict[str, int]:
        return suite_outcome(self._counts(suite))

    def get_jobs_total(self, suite: Suite) -> int:
        return sum(self._counts(suite).values())

    def get_hosts_held(self, suite: Suite) -> int:
        return (self.context.get("hosts_held") or {}).get(suite.pk, 0)

    @extend_schema_field(
        serializers.ListField(
            child=serializers.CharField(), allow_null=True, help_text="Set for fan-out suites."
        )
    )
    def get_fanout_labels(self, suite: Suite) -> list[str] | None:
        return decode_labels(suite.fanout_labels) if suite.fanout_labels else None

    @extend_schema_field(FanoutSerializer(allow_null=True))
    def get_fanout(self, suite: Suite) -> dict | None:
        """Null unless a fan-out suite; the views put every suite's counts in the context."""
        if not suite.fanout_labels:
            return None
        counts = self.context.get("fanout_hosts")
        if counts is None or suite.pk not in counts:
            counts = selectors.fanout_host_counts([suite])
        body = {"labels": decode_labels(suite.fanout_labels), "until": suite.fanout_until}
        return FanoutSerializer({**body, **counts[suite.pk]}).data


class SuiteAbortResultSerializer(SuiteSerializer):
    jobs_aborted = serializers.SerializerMethodField()

    class Meta(SuiteSerializer.Meta):
        fields = [*SuiteSerializer.Meta.fields, "jobs_aborted"]
        read_only_fields = fields

    def get_jobs_aborted(self, suite: Suite) -> int:
        return int(self.context.get("jobs_aborted", 0))


# --- the runner's view of its leases ---------------------------------------------------------


class RunnerHostSerializer(serializers.ModelSerializer):
    labels = serializers.SerializerMethodField()

    class Meta:
        model = Host
        fields = ["hostname", "labels", "current_build", "status"]
        read_only_fields = fields

    @extend_schema_field(serializers.ListField(child=serializers.CharField()))
    def get_labels(self, host: Host) -> list[str]:
        return host.label_names


class RunnerJobSerializer(serializers.ModelSerializer):
    labels = serializers.ListField(child=serializers.CharField(), read_only=True)
    suite_name = RelatedName("suite.name")
    build = serializers.SerializerMethodField()
    timeout = Seconds(help_text="Maximum runtime in seconds.")

    class Meta:
        model = Job
        fields = ["id", "name", "kind", "status", "labels", "priority", "attempts"]
        fields += ["max_retries", "timeout", "suite", "suite_name", "build"]
        read_only_fields = fields

    @extend_schema_field(
        serializers.CharField(
            help_text="Its suite's build, or a standalone job's own; may be empty."
        )
    )
    def get_build(self, job: Job) -> str:
        return job.build_to_test


class RunnerLeaseSerializer(serializers.ModelSerializer):
    """One of a worker's active job leases, with what its runner needs to run the job.

    A multi-host job is listed once, by its slot 0 lease, to the runner of that host's worker
    (`runs_here` true), with every host of the attempt in `hosts`; a host of it on another
    worker is listed there by its own lease with `runs_here` false: held for a job another
    runner runs, which this one leaves alone (docs/api.md#multi-host-jobs).
    """

    host = RunnerHostSerializer(read_only=True)
    job = RunnerJobSerializer(read_only=True)
    kind = serializers.ChoiceField(source="job.kind", choices=JobKind.choices, read_only=True)
    runs_here = serializers.SerializerMethodField()
    hosts = serializers.SerializerMethodField()
    provision_to = ProvisionToField()

    class Meta:
        model = Lease
        fields = ["id", "kind", "acquired_at", "expires_at", "heartbeat_at", "host", "job"]
        fields += ["role", "slot", "runs_here", "hosts", "provision_to"]
        read_only_fields = fields
        extra_kwargs = {
            "role": {"help_text": "The job's role this lease's host plays; empty: a one-host job."},
            "slot": {"help_text": "0: the job's first essential host, whose runner runs it."},
        }

    @extend_schema_field(
        serializers.BooleanField(
            help_text="This worker's runner runs the job. false: the host is held for a "
            "multi-host job another worker's runner runs; leave it alone."
        )
    )
    def get_runs_here(self, lease: Lease) -> bool:
        return lease.slot == 0

    @extend_schema_field(AttemptHostSerializer(many=True))
    def get_hosts(self, lease: Lease) -> list[dict]:
        """Every host of the job's attempt, by slot (a one-host job: its host)."""
        leases = getattr(lease.job, "attempt_leases", None)
        return attempt_hosts(leases if leases else [lease])

    def to_representation(self, lease: Lease) -> dict[str, Any]:
        """What DRF's walk over the fields above gives, made directly: a runner lists its
        leases every poll, and the walk over 50 leases with their hosts and jobs was about a
        third of the list's CPU (docs/performance.md#the-runner-protocol).
        tests/api/test_runner_lease_representation.py holds the two equal."""
        fields = self.fields
        when = fields["acquired_at"].to_representation
        host, job = lease.host, lease.job
        job_fields = fields["job"].fields
        suite = job.suite
        return {
            "id": lease.pk,
            "kind": fields["kind"].to_representation(job.kind),
            "acquired_at": when(lease.acquired_at),
            "expires_at": when(lease.expires_at),
            "heartbeat_at": _or_none(when, lease.heartbeat_at),
            "host": {
                "hostname": host.hostname,
                "labels": host.label_names,
                "current_build": host.current_build,
                "status": fields["host"].fields["status"].to_representation(host.status),
            },
            "job": {
                "id": job.pk,
                "name": job.name,
                "kind": job_fields["kind"].to_representation(job.kind),
                "status": job_fields["status"].to_representation(job.status),
                "labels": [str(label) for label in job.labels],
                "priority": job.priority,
                "attempts": job.attempts,
                "max_retries": job.max_retries,
                "timeout": round(job.timeout.total_seconds()),
                "suite": job.suite_id,
                "suite_name": suite.name if suite is not None else None,
                "build": job.build_to_test,
            },
            "role": lease.role,
            "slot": lease.slot,
            "runs_here": lease.slot == 0,
            "hosts": self.get_hosts(lease),
            "provision_to": lease.provision_to or None,
        }
