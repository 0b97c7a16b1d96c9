"""Serializers for workers, hosts, host events and health policies (docs/api.md#endpoints)."""

from __future__ import annotations

from django.conf import settings
from django.contrib.auth import get_user_model
from django.utils import timezone
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from hosts.choices import HostStatus
from hosts.models import HealthPolicy, Host, HostEvent, Worker
from hosts.rules import host_is_schedulable
from hosts.services import CAPACITY_MOST, POLICY_LIMITS
from hosts.validators import NAME_VALIDATORS, label_validator, policy_name_validator
from jobs import host_inventory as inventory
from jobs import selectors
from jobs.api.fields import IdentityURL, LabelListField, RelatedName
from jobs.api.serializers import (
    MAX_ID,
    ActiveLeaseMixin,
    ActiveLeaseSerializer,
    LeaseReleaseInputSerializer,
)
from schedsite import links
from schedsite.api_fields import (
    IdListField,
    StrictBooleanField,
    StrictCharField,
    StrictIntegerField,
)
from schedsite.api_serializers import FieldsBuiltOnce
from schedsite.roles import RUNNER_GROUP

# --- workers --------------------------------------------------------------------------------


class WorkerSerializer(serializers.ModelSerializer):
    url = serializers.HyperlinkedIdentityField(view_name="api:worker-detail", lookup_field="name")
    paused_by = RelatedName("paused_by.username")
    runner = RelatedName("runner.username")
    online = serializers.SerializerMethodField()
    hosts_total = serializers.IntegerField(read_only=True)
    hosts_leased = serializers.IntegerField(read_only=True)
    hosts_schedulable = serializers.IntegerField(
        read_only=True, help_text="Hosts that could take a new lease right now."
    )
    max_jobs = serializers.IntegerField(
        read_only=True,
        allow_null=True,
        help_text="The most jobs the worker runs at once, as staff set it; null: unlimited.",
    )
    runner_concurrency = serializers.IntegerField(
        read_only=True,
        allow_null=True,
        help_text="The --concurrency its runner last reported in a heartbeat; null: never.",
    )
    capacity = serializers.IntegerField(
        read_only=True,
        allow_null=True,
        help_text="The smaller of max_jobs and runner_concurrency; null: unlimited.",
    )
    running = serializers.IntegerField(
        read_only=True, help_text="Jobs running on its hosts now (manual reservations not)."
    )

    class Meta:
        model = Worker
        fields = [
            "url",
            "name",
            "online",
            "last_seen",
            "paused",
            "paused_reason",
            "paused_by",
            "paused_at",
            "runner",
            "hosts_total",
            "hosts_leased",
            "hosts_schedulable",
            "max_jobs",
            "runner_concurrency",
            "capacity",
            "running",
            "created_at",
            "retired_at",
        ]
        read_only_fields = fields

    def get_online(self, worker: Worker) -> bool:
        return worker.is_online(self.context.get("now") or timezone.now())


def _runner_accounts():  # noqa: ANN202
    return get_user_model().objects.filter(groups__name=RUNNER_GROUP)


class RunnerAccountField(serializers.SlugRelatedField):
    """A runner account by username; it must be in group runners (create_runner makes one)."""

    default_error_messages = {
        "does_not_exist": "No runner account named {value}: create one with "
        "`manage.py create_runner WORKER`, or add the user to group runners.",
        "invalid": "Give the runner account's username.",
    }

    def __init__(self, **kwargs: object) -> None:
        super().__init__(slug_field="username", queryset=_runner_accounts(), **kwargs)


def _max_jobs(**kwargs: object) -> StrictIntegerField:
    # The range is the service's (CAPACITY_MOST), stated here too so that the schema says it.
    return StrictIntegerField(
        min_value=1,
        max_value=CAPACITY_MOST,
        allow_null=True,
        help_text="The most jobs the worker runs at once; null: unlimited. Its runner's "
        "--concurrency also applies, the smaller wins.",
        **kwargs,
    )


class WorkerCreateInputSerializer(serializers.Serializer):
    name = StrictCharField(max_length=100, validators=[*NAME_VALIDATORS])
    paused = StrictBooleanField(default=False)
    paused_reason = StrictCharField(max_length=500, allow_blank=True, default="")
    max_jobs = _max_jobs(default=None)


class WorkerUpdateInputSerializer(serializers.Serializer):
    name = StrictCharField(max_length=100, required=False, validators=[*NAME_VALIDATORS])
    runner = RunnerAccountField(required=False, allow_null=True)
    max_jobs = _max_jobs(required=False)


class WorkerPauseInputSerializer(serializers.Serializer):
    reason = StrictCharField(max_length=500)


# The most leases one worker heartbeat may name: a worker drives hundreds of hosts, not more.
MAX_HEARTBEAT_LEASES = 5000


class WorkerHeartbeatInputSerializer(FieldsBuiltOnce, serializers.Serializer):
    """A worker heartbeat's body; its fields built once per process (a runner's every call)."""

    leases = IdListField(
        min_value=1,
        max_value=MAX_ID,
        required=False,
        max_length=MAX_HEARTBEAT_LEASES,
        help_text="Ids of the job leases the runner holds: each one still active on this "
        "worker is extended to now + lease_ttl, in one statement; the others come back in "
        f"`gone`. At most {MAX_HEARTBEAT_LEASES}. Without it only the worker is marked seen.",
    )
    concurrency = StrictIntegerField(
        min_value=1,
        max_value=CAPACITY_MOST,
        required=False,
        help_text="The runner's --concurrency: stored as the worker's runner_concurrency, "
        "which caps its capacity with max_jobs.",
    )


class WorkerHeartbeatSerializer(FieldsBuiltOnce, serializers.Serializer):
    """What a runner learns from its worker heartbeat: the timings it must keep to."""

    name = serializers.CharField()
    last_seen = serializers.DateTimeField()
    online = serializers.BooleanField()
    paused = serializers.BooleanField()
    lease_ttl = serializers.IntegerField(
        help_text="Seconds a lease lives without a heartbeat; heartbeat at least every third."
    )
    offline_timeout = serializers.IntegerField(
        help_text="Seconds without a heartbeat after which the worker counts as offline."
    )
    gone = serializers.ListField(
        child=serializers.IntegerField(),
        help_text="The named leases this heartbeat did not extend: released, expired, a manual "
        "reservation, not this worker's, or no such lease. Stop their jobs.",
    )

    @staticmethod
    def payload(worker: Worker, gone: list[int] | None = None) -> dict:
        return {
            "gone": gone or [],
            "name": worker.name,
            "last_seen": worker.last_seen,
            "online": worker.is_online(),
            "paused": worker.paused,
            "lease_ttl": settings.LEASE_TTL,
            "offline_timeout": settings.WORKER_OFFLINE_TIMEOUT,
        }

    def to_representation(self, payload: dict) -> dict:
        """What DRF's walk over the fields above gives, made directly: the walk, with the
        fields it copied for each answer, was a tenth of a bulk heartbeat in a profile
        (docs/performance.md#the-runner-protocol). tests/api/test_bulk_heartbeat.py holds the
        two equal."""
        last_seen = payload["last_seen"]
        return {
            "name": str(payload["name"]),
            "last_seen": None
            if last_seen is None
            else self.fields["last_seen"].to_representation(last_seen),
            "online": bool(payload["online"]),
            "paused": bool(payload["paused"]),
            "lease_ttl": int(payload["lease_ttl"]),
            "offline_timeout": int(payload["offline_timeout"]),
            "gone": [int(pk) for pk in payload["gone"]],
        }


# --- hosts ----------------------------------------------------------------------------------


class HostEventSerializer(serializers.ModelSerializer):
    host = serializers.SerializerMethodField()
    worker = serializers.SerializerMethodField()
    # Blank on events that are not status changes; the schema has to say so.
    old_status = serializers.ChoiceField(HostStatus.choices, allow_blank=True, read_only=True)
    new_status = serializers.ChoiceField(HostStatus.choices, allow_blank=True, read_only=True)

    class Meta:
        model = HostEvent
        fields = ["id", "created_at", "kind", "actor", "message", "host", "worker"]
        fields += ["lease_id", "job_id", "subject", "old_status", "new_status"]
        read_only_fields = fields

    @extend_schema_field(serializers.CharField(allow_null=True))
    def get_host(self, event: HostEvent) -> str | None:
        return event.host.hostname if event.host_id else None

    @extend_schema_field(serializers.CharField(allow_null=True))
    def get_worker(self, event: HostEvent) -> str | None:
        return event.worker.name if event.worker_id else None


class HostSerializer(ActiveLeaseMixin, serializers.ModelSerializer):
    url = IdentityURL(view_name="api:host-detail", lookup_field="hostname", accepts=links.NAMES)
    worker = RelatedName("worker.name")
    labels = serializers.SerializerMethodField()
    locked_by = RelatedName("locked_by.username")
    leased = serializers.SerializerMethodField()
    schedulable = serializers.SerializerMethodField()
    lease = serializers.SerializerMethodField()
    held_for = serializers.SerializerMethodField()

    class Meta:
        model = Host
        fields = [
            "url",
            "hostname",
            "worker",
            "labels",
            "status",
            "locked",
            "lock_reason",
            "locked_by",
            "locked_at",
            "current_build",
            "repair_attempts",
            "repair_not_before",
            "next_repair_at",
            "repair_rounds",
            "last_verified_at",
            "leased",
            "schedulable",
            "lease",
            "held_for",
            "created_at",
            "updated_at",
        ]
        read_only_fields = fields

    @extend_schema_field(serializers.ListField(child=serializers.CharField()))
    def get_labels(self, host: Host) -> list[str]:
        return host.label_names

    @extend_schema_field(
        serializers.IntegerField(
            allow_null=True,
            help_text="The multi-host job the latest scheduler tick holds this free host idle "
            "for (docs/scheduling.md#holds-and-backfill); null if none.",
        )
    )
    def get_held_for(self, host: Host) -> int | None:
        # One read of the latest tick's holds for the whole page.
        holds = self.context.get("holds")
        if holds is None:
            holds = self.context["holds"] = selectors.current_holds()
        return holds.get(host.pk)

    def _active_lease(self, host: Host):  # noqa: ANN202
        leases = getattr(host, "active_leases", None)
        if leases is None:  # not prefetched (a freshly changed host): read it
            leases = list(host.leases.active().select_related("job"))
            host.active_leases = leases
        return leases[0] if leases else None

    def get_leased(self, host: Host) -> bool:
        return self._active_lease(host) is not None

    def get_schedulable(self, host: Host) -> bool:
        now = self.context.get("now") or timezone.now()
        worker = host.worker
        return host_is_schedulable(
            ready=host.status == HostStatus.READY,
            locked=host.locked,
            leased=self._active_lease(host) is not None,
            worker_paused=worker is not None and worker.paused,
            worker_offline=worker is not None and not worker.is_online(now),
        )

    @extend_schema_field(ActiveLeaseSerializer(allow_null=True))
    def get_lease(self, host: Host) -> dict | None:
        return self.lease_data(self._active_lease(host))


class HostDetailSerializer(HostSerializer):
    recent_events = serializers.SerializerMethodField()
    inventory_version = serializers.SerializerMethodField(
        help_text="A fingerprint of labels, worker and build: send it back as PATCH `version`."
    )

    class Meta(HostSerializer.Meta):
        fields = [*HostSerializer.Meta.fields, "inventory_version", "recent_events"]
        read_only_fields = fields

    def get_inventory_version(self, host: Host) -> str:
        return inventory.inventory_version(host)

    @extend_schema_field(HostEventSerializer(many=True))
    def get_recent_events(self, host: Host) -> list[dict]:
        events = HostEvent.objects.filter(host=host).select_related("host", "worker")[:20]
        return HostEventSerializer(events, many=True, context=self.context).data


class HostCreateInputSerializer(serializers.Serializer):
    hostname = StrictCharField(max_length=255, validators=[*NAME_VALIDATORS])
    worker = serializers.SlugRelatedField(
        slug_field="name", queryset=Worker.objects.all(), required=False, allow_null=True
    )
    labels = LabelListField(required=False, default=list)
    status = serializers.ChoiceField(choices=HostStatus.choices, default=HostStatus.READY)
    current_build = StrictCharField(max_length=200, allow_blank=True, default="")


class HostUpdateInputSerializer(serializers.Serializer):
    worker = serializers.SlugRelatedField(
        slug_field="name", queryset=Worker.objects.all(), required=False, allow_null=True
    )
    labels = LabelListField(required=False, help_text="Replaces the host's labels.")
    status = serializers.ChoiceField(choices=HostStatus.choices, required=False)
    current_build = StrictCharField(max_length=200, allow_blank=True, required=False)
    version = StrictCharField(
        max_length=40,
        required=False,
        help_text="The host's inventory_version as read: 409 if its labels, worker or build "
        "changed since.",
    )


class HostLockInputSerializer(serializers.Serializer):
    reason = StrictCharField(max_length=500)


class HostReleaseInputSerializer(LeaseReleaseInputSerializer):
    """Releasing a host releases its lease: the same choice, under the host's own name."""


# --- health policies ------------------------------------------------------------------------


class HealthPolicySerializer(serializers.ModelSerializer):
    url = serializers.HyperlinkedIdentityField(view_name="api:healthpolicy-detail")
    labels = serializers.ListField(
        child=serializers.CharField(), read_only=True, help_text="Hosts carrying all of these."
    )

    class Meta:
        model = HealthPolicy
        fields = ["url", "id", "name", "labels", "every_jobs", "every_hours", "enabled"]
        fields += ["created_at"]
        read_only_fields = fields


def _every(what: str, field: str) -> StrictIntegerField:
    # The range is the service's (POLICY_LIMITS), stated here too so that the schema says it.
    return StrictIntegerField(
        min_value=1,
        max_value=POLICY_LIMITS[field],
        allow_null=True,
        default=None,
        help_text=f"Verify every N {what}; null: never.",
    )


class HealthPolicyInputSerializer(serializers.Serializer):
    """A policy's fields; the rules are hosts.services.health_policy_clean's, shown in the schema.

    The pattern and ranges come from the same validators and limits the service applies, so
    the schema never allows what the service refuses.
    """

    name = StrictCharField(max_length=100, validators=[policy_name_validator])
    labels = LabelListField(
        child=StrictCharField(max_length=100, validators=[label_validator]),
        default=list,
        help_text="The label selector, such as [board:eve].",
    )
    every_jobs = _every("test jobs", "every_jobs")
    every_hours = _every("hours", "every_hours")
    enabled = StrictBooleanField(default=True)
