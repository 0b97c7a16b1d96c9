"""Serializers for the queue and the scheduler's ticks (docs/api.md#endpoints)."""

from __future__ import annotations

from datetime import datetime

from django.utils import timezone
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from jobs.api.fields import IdentityURL, RelatedName
from jobs.api.serializers import WaitReasonSerializer
from jobs.choices import JobKind
from jobs.models import Job, SchedulerTick
from jobs.scheduling.queue import aging_of


class QueueEntrySerializer(serializers.ModelSerializer):
    """A queued job, where it stands in the scheduler's order and why it waits."""

    position = serializers.SerializerMethodField(help_text="1 = considered first.")
    job = serializers.IntegerField(source="id", read_only=True)
    url = IdentityURL(view_name="api:job-detail")
    labels = serializers.ListField(child=serializers.CharField(), read_only=True)
    host = RelatedName("host.hostname", help_text="Pinned host.")
    suite_name = RelatedName("suite.name")
    owner = RelatedName("owner.username")
    age_seconds = serializers.SerializerMethodField(help_text="Seconds since submission.")
    effective_priority = serializers.SerializerMethodField(
        help_text="The priority the scheduler orders it by: its own, raised by aging when the "
        "scheduler settings turn aging on."
    )
    wait_reason = serializers.SerializerMethodField()

    class Meta:
        model = Job
        fields = ["position", "job", "url", "name", "kind", "priority", "effective_priority"]
        fields += ["labels", "host"]
        fields += ["suite"]
        fields += ["suite_name", "owner", "attempts", "submitted_at", "age_seconds"]
        fields += ["wait_reason"]
        read_only_fields = fields

    def get_position(self, job: Job) -> int:
        return self.context["positions"][job.pk]

    def get_age_seconds(self, job: Job) -> float:
        now: datetime = self.context.get("now") or timezone.now()
        return round(max((now - job.submitted_at).total_seconds(), 0.0), 1)

    def get_effective_priority(self, job: Job) -> int:
        head = self.context.get("queue_head")
        aging = aging_of(job, head) if head is not None else None
        return aging.priority if aging is not None else job.priority

    @extend_schema_field(WaitReasonSerializer)
    def get_wait_reason(self, job: Job) -> dict | None:
        return (self.context.get("wait_reasons") or {}).get(job.pk)


class SchedulerTickSerializer(serializers.ModelSerializer):
    url = serializers.HyperlinkedIdentityField(view_name="api:schedulertick-detail")

    class Meta:
        model = SchedulerTick
        fields = "__all__"
        read_only_fields = [f.name for f in SchedulerTick._meta.fields]


class TickLeaseSerializer(serializers.Serializer):
    job = serializers.CharField()
    job_id = serializers.IntegerField()
    suite = serializers.CharField(allow_null=True)
    host = serializers.CharField()
    kind = serializers.ChoiceField(choices=JobKind.choices)


class TickSummarySerializer(serializers.Serializer):
    """What one tick did: the leases it made, expiries, timeouts and timings."""

    tick_id = serializers.IntegerField(allow_null=True)
    started_at = serializers.DateTimeField(allow_null=True)
    duration_ms = serializers.FloatField()
    plan_ms = serializers.FloatField()
    jobs_considered = serializers.IntegerField()
    hosts_free = serializers.IntegerField()
    leases = TickLeaseSerializer(many=True)
    expired = serializers.IntegerField()
    timed_out = serializers.IntegerField()
    skipped_assignments = serializers.IntegerField()
