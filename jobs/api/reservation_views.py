"""/api/reservations/: testers reserve a host to debug on, at once or waiting in line
(docs/api.md#reservations)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.db.models import QuerySet
from django.utils import timezone
from drf_spectacular.utils import extend_schema, extend_schema_field
from rest_framework import serializers, status
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from hosts.models import Host
from jobs import services
from jobs.api.fields import RelatedName, Seconds
from jobs.api.serializers import LeaseEndInputSerializer, LeaseExtendInputSerializer
from jobs.api.views import ReadViewSet, idempotent_create
from jobs.choices import ReservationStatus
from jobs.models import Reservation
from jobs.submission_schema import PriorityField
from schedsite.api_fields import StrictBooleanField, StrictCharField
from schedsite.durations import parse_duration
from schedsite.errors import Conflict


@extend_schema_field(
    {
        "oneOf": [
            {"type": "string", "minLength": 1, "example": "2h"},
            {"type": "integer", "minimum": 1},
        ]
    }
)
class DurationField(serializers.Field):
    """`2h`, `90m`, `1h30m`, `1d`, or whole seconds."""

    default_error_messages = {"invalid": "{why}"}

    def to_internal_value(self, data: object) -> timedelta:
        try:
            return timedelta(seconds=parse_duration(data))
        except ValueError as exc:
            self.fail("invalid", why=str(exc))

    def to_representation(self, value: timedelta) -> int:
        return int(value.total_seconds())


class ReservationInputSerializer(serializers.Serializer):
    labels = serializers.ListField(
        child=StrictCharField(max_length=100),
        required=False,
        default=list,
        max_length=50,
        help_text="Labels the host must carry (or `host`).",
    )
    host = serializers.SlugRelatedField(
        slug_field="hostname",
        queryset=Host.objects.all(),
        required=False,
        allow_null=True,
        default=None,
        help_text="The host asked for by name (or `labels`).",
    )
    duration = DurationField(help_text="How long: 2h, 90m, 1h30m, 1d or seconds.")
    reason = StrictCharField(max_length=500)
    wait = StrictBooleanField(
        default=False, help_text="With no free host: wait in line (status waiting), not 409."
    )
    priority = PriorityField(required=False, help_text="Its place in line; a tester's cap applies.")
    allow_unmatched = StrictBooleanField(
        default=False, help_text="Wait even though no host in the lab fits yet."
    )


class ReservationSerializer(serializers.ModelSerializer):
    owner = RelatedName("owner.username")
    labels = serializers.ListField(child=serializers.CharField(), read_only=True)
    host = serializers.SerializerMethodField()
    duration = Seconds(help_text="Seconds.")
    status = serializers.SerializerMethodField()
    position = serializers.SerializerMethodField()
    why = serializers.SerializerMethodField()
    lease = serializers.IntegerField(source="lease_id", allow_null=True, read_only=True)
    expires_at = serializers.SerializerMethodField()

    class Meta:
        model = Reservation
        fields = [
            "id",
            "owner",
            "labels",
            "host",
            "duration",
            "reason",
            "priority",
            "status",
            "position",
            "why",
            "created_at",
            "decided_at",
            "lease",
            "expires_at",
        ]
        read_only_fields = fields

    @extend_schema_field(serializers.CharField(allow_null=True))
    def get_host(self, r: Reservation) -> str | None:
        """The host it holds (or held), else the host it asked for."""
        if r.lease is not None:
            return r.lease.host.hostname
        return r.host.hostname if r.host is not None else None

    @extend_schema_field(serializers.ChoiceField(choices=ReservationStatus.choices))
    def get_status(self, r: Reservation) -> str:
        return r.current_status

    @extend_schema_field(serializers.IntegerField(allow_null=True))
    def get_position(self, r: Reservation) -> int | None:
        return services.reservation_position(r)

    @extend_schema_field(serializers.CharField())
    def get_why(self, r: Reservation) -> str:
        if r.status != ReservationStatus.WAITING:
            return ""
        return services.reservation_why(r)

    @extend_schema_field(serializers.DateTimeField(allow_null=True))
    def get_expires_at(self, r: Reservation) -> Any:
        if r.lease is None:
            return None
        return serializers.DateTimeField().to_representation(r.lease.expires_at)


class ReservationViewSet(ReadViewSet):
    """Testers' reservations of a host: held now, or waiting in line for the next free one."""

    serializer_class = ReservationSerializer
    # extend and end: its holder or staff ("reservation.extend", "reservation.end").
    permission_resource = "reservation"
    action_summaries = {
        "list": "Reservations, newest first (?mine=true: your own; ?status=waiting)",
        "retrieve": "One reservation: its status, place in line and why it waits",
        "create": "Reserve a free host that fits (labels or host) for a duration; with wait, "
        "join the line for the next one",
        "extend": "Push an active reservation's end later by duration (its holder or staff)",
        "end": "End a reservation: an active one frees its host, a waiting one leaves the line",
    }
    action_inputs = {
        "create": ReservationInputSerializer,
        "extend": LeaseExtendInputSerializer,
        "end": LeaseEndInputSerializer,
    }

    def get_queryset(self) -> QuerySet[Reservation]:
        rows = Reservation.objects.select_related("owner", "host", "lease__host")
        if self.action != "list":
            return rows
        wanted = self.request.query_params.get("status")
        if wanted is not None:
            if wanted not in ReservationStatus.values:
                raise serializers.ValidationError(
                    {"status": f"one of {', '.join(ReservationStatus.values)}"}
                )
            if wanted == ReservationStatus.ENDED:
                rows = rows.filter(
                    status=ReservationStatus.ACTIVE, lease__released_at__isnull=False
                )
            elif wanted == ReservationStatus.ACTIVE:
                rows = rows.filter(status=wanted, lease__released_at__isnull=True)
            else:
                rows = rows.filter(status=wanted)
        mine = self.request.query_params.get("mine")
        if mine not in (None, "true", "false"):
            raise serializers.ValidationError({"mine": "true or false"})
        if mine == "true":
            rows = rows.filter(owner=self.request.user)
        return rows

    def _one(self, reservation: Reservation, code: int = status.HTTP_200_OK) -> Response:
        fresh = self.get_queryset().get(pk=reservation.pk)
        return Response(self.get_serializer(fresh).data, status=code)

    @idempotent_create({201: ReservationSerializer})
    def create(self, request: Request) -> Response:
        data = self.action_input()
        reservation = services.reservation_request(
            owner=request.user,
            labels=data["labels"],
            host=data["host"],
            duration=data["duration"],
            reason=data["reason"],
            wait=data["wait"],
            priority=data.get("priority"),
            allow_unmatched=data["allow_unmatched"],
            at=timezone.now(),
        )
        return self._one(reservation, status.HTTP_201_CREATED)

    @extend_schema(request=LeaseExtendInputSerializer, responses=ReservationSerializer)
    @action(detail=True, methods=["post"])
    def extend(self, request: Request, pk: str) -> Response:
        reservation = self.get_object()
        if reservation.lease is None:
            raise Conflict(f"reservation {reservation.pk} holds no host yet: nothing to extend")
        services.lease_extend(lease=reservation.lease, by=request.user, **self.action_input())
        return self._one(reservation)

    @extend_schema(request=LeaseEndInputSerializer, responses=ReservationSerializer)
    @action(detail=True, methods=["post"])
    def end(self, request: Request, pk: str) -> Response:
        reservation = self.get_object()
        done = services.reservation_cancel(
            reservation=reservation, by=request.user, **self.action_input()
        )
        return self._one(done)
