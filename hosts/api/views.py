"""API viewsets for workers and hosts (docs/api.md): thin callers of hosts.services."""

from __future__ import annotations

from django.db.models import QuerySet
from django.utils import timezone
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_view
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from hosts import services
from hosts.api import serializers as s
from hosts.filtersets import HostFilterSet, WorkerFilterSet
from hosts.models import Host, HostEvent, Worker
from jobs import selectors
from jobs import services as job_services
from jobs.api.serializers import LeaseSerializer, RunnerLeaseSerializer
from jobs.models import Lease
from schedsite.api_permissions import (
    IsLabStaff,
    IsStaffOrRunner,
    RolePermissionsMixin,
    RunsObjectWorker,
)
from schedsite.api_views import NameLookupMixin, valid
from schedsite.errors import Conflict

STAFF = (IsLabStaff,)
RUNNER = (IsStaffOrRunner, RunsObjectWorker)


name_parameter = OpenApiParameter("name", str, OpenApiParameter.PATH, description="Worker name.")
hostname_parameter = OpenApiParameter(
    "hostname", str, OpenApiParameter.PATH, description="Hostname (dots allowed)."
)


@extend_schema_view(
    list=extend_schema(summary="List workers with their online state and host counts"),
    retrieve=extend_schema(summary="One worker", parameters=[name_parameter]),
)
class WorkerViewSet(
    RolePermissionsMixin, NameLookupMixin, mixins.ListModelMixin, viewsets.GenericViewSet
):
    """Lab servers that drive hosts (addressed by name)."""

    serializer_class = s.WorkerSerializer
    filterset_class = WorkerFilterSet
    lookup_field = "name"
    action_permissions = {
        "create": STAFF,
        "partial_update": STAFF,
        "destroy": STAFF,
        "pause": STAFF,
        "resume": STAFF,
        "heartbeat": RUNNER,
        "leases": RUNNER,
    }

    def get_queryset(self) -> QuerySet[Worker]:
        return selectors.workers_with_host_counts()

    def runner_id_of(self, worker: Worker) -> int | None:
        return worker.runner_id

    def _render(self, worker: Worker, code: int = status.HTTP_200_OK) -> Response:
        fresh = self.get_queryset().get(pk=worker.pk)  # with its host counts
        return Response(self.get_serializer(fresh).data, status=code)

    def retrieve(self, request: Request, name: str) -> Response:
        return Response(self.get_serializer(self.get_object()).data)

    @extend_schema(
        summary="Add a worker (staff)",
        request=s.WorkerCreateInputSerializer,
        responses={201: s.WorkerSerializer},
    )
    def create(self, request: Request) -> Response:
        data = valid(s.WorkerCreateInputSerializer, request)
        worker = services.worker_create(
            name=data["name"], by=request.user, paused=data["paused"], reason=data["paused_reason"]
        )
        return self._render(worker, status.HTTP_201_CREATED)

    @extend_schema(
        summary="Rename a worker or set its runner account (staff)",
        request=s.WorkerUpdateInputSerializer,
        responses=s.WorkerSerializer,
        parameters=[name_parameter],
    )
    def partial_update(self, request: Request, name: str) -> Response:
        worker = self.get_object()
        data = valid(s.WorkerUpdateInputSerializer, request)
        worker = services.worker_update(worker=worker, by=request.user, **data)
        return self._render(worker)

    @extend_schema(summary="Delete a worker that has no hosts (staff)", parameters=[name_parameter])
    def destroy(self, request: Request, name: str) -> Response:
        services.worker_delete(worker=self.get_object(), by=request.user)
        return Response(status=status.HTTP_204_NO_CONTENT)

    @extend_schema(
        summary="Pause: no new leases on its hosts; running leases continue (staff)",
        request=s.WorkerPauseInputSerializer,
        responses=s.WorkerSerializer,
        parameters=[name_parameter],
    )
    @action(detail=True, methods=["post"])
    def pause(self, request: Request, name: str) -> Response:
        worker = self.get_object()
        data = valid(s.WorkerPauseInputSerializer, request)
        return self._render(services.worker_pause(worker=worker, by=request.user, **data))

    @extend_schema(
        summary="Resume a paused worker (staff)",
        request=None,
        responses=s.WorkerSerializer,
        parameters=[name_parameter],
    )
    @action(detail=True, methods=["post"])
    def resume(self, request: Request, name: str) -> Response:
        return self._render(services.worker_resume(worker=self.get_object(), by=request.user))

    @extend_schema(
        summary="Runner protocol: mark the worker seen (its runner, or staff)",
        request=None,
        responses=s.WorkerHeartbeatSerializer,
        parameters=[name_parameter],
    )
    @action(detail=True, methods=["post"])
    def heartbeat(self, request: Request, name: str) -> Response:
        worker = services.worker_heartbeat(worker=self.get_object(), at=timezone.now())
        return Response(
            s.WorkerHeartbeatSerializer(s.WorkerHeartbeatSerializer.payload(worker)).data
        )

    @extend_schema(
        summary="Runner protocol: the worker's active job leases (its runner, or staff)",
        responses=RunnerLeaseSerializer(many=True),
        parameters=[name_parameter],
        filters=False,
    )
    @action(detail=True, methods=["get"])
    def leases(self, request: Request, name: str) -> Response:
        worker = self.get_object()
        page = self.paginate_queryset(selectors.runner_leases(worker=worker))
        data = RunnerLeaseSerializer(page, many=True, context=self.get_serializer_context()).data
        return self.get_paginated_response(data)

    @extend_schema(
        summary="The worker's event log (added, paused, resumed, back online), newest first",
        responses=s.HostEventSerializer(many=True),
        parameters=[name_parameter],
        filters=False,
    )
    @action(detail=True, methods=["get"])
    def events(self, request: Request, name: str) -> Response:
        worker = self.get_object()
        events = HostEvent.objects.filter(worker=worker).select_related("host", "worker")
        page = self.paginate_queryset(events)
        data = s.HostEventSerializer(page, many=True, context=self.get_serializer_context()).data
        return self.get_paginated_response(data)


@extend_schema_view(
    list=extend_schema(summary="List hosts (filter by label, status, locked, leased, worker, q)"),
    retrieve=extend_schema(
        summary="One host, with its active lease and recent events",
        parameters=[hostname_parameter],
    ),
)
class HostViewSet(
    RolePermissionsMixin, NameLookupMixin, mixins.ListModelMixin, viewsets.GenericViewSet
):
    """Devices under test (addressed by hostname)."""

    serializer_class = s.HostSerializer
    filterset_class = HostFilterSet
    lookup_field = "hostname"
    action_permissions = {
        "create": STAFF,
        "partial_update": STAFF,
        "destroy": STAFF,
        "lock": STAFF,
        "unlock": STAFF,
        "release": STAFF,
    }

    def get_queryset(self) -> QuerySet[Host]:
        return Host.objects.select_related("worker", "locked_by").prefetch_related(
            "labels", selectors.active_lease_prefetch()
        )

    def get_serializer_context(self) -> dict:
        return {**super().get_serializer_context(), "now": timezone.now()}

    def _render(self, host: Host, code: int = status.HTTP_200_OK) -> Response:
        fresh = self.get_queryset().get(pk=host.pk)
        return Response(
            s.HostDetailSerializer(fresh, context=self.get_serializer_context()).data, status=code
        )

    @extend_schema(responses=s.HostDetailSerializer)
    def retrieve(self, request: Request, hostname: str) -> Response:
        host = self.get_object()
        return Response(s.HostDetailSerializer(host, context=self.get_serializer_context()).data)

    @extend_schema(
        summary="Add a host (staff)",
        request=s.HostCreateInputSerializer,
        responses={201: s.HostDetailSerializer},
    )
    def create(self, request: Request) -> Response:
        data = valid(s.HostCreateInputSerializer, request)
        host = services.host_create(by=request.user, **data)
        return self._render(host, status.HTTP_201_CREATED)

    @extend_schema(
        summary="Change a host's labels, status, worker or build (staff)",
        request=s.HostUpdateInputSerializer,
        responses=s.HostDetailSerializer,
        parameters=[hostname_parameter],
    )
    def partial_update(self, request: Request, hostname: str) -> Response:
        host = self.get_object()
        data = valid(s.HostUpdateInputSerializer, request)
        return self._render(services.host_update(host=host, by=request.user, **data))

    @extend_schema(
        summary="Delete a host with no active lease and no pinned job (staff)",
        parameters=[hostname_parameter],
    )
    def destroy(self, request: Request, hostname: str) -> Response:
        services.host_delete(host=self.get_object(), by=request.user)
        return Response(status=status.HTTP_204_NO_CONTENT)

    @extend_schema(
        summary="Lock a host out of scheduling, with a reason (staff)",
        request=s.HostLockInputSerializer,
        responses=s.HostDetailSerializer,
        parameters=[hostname_parameter],
    )
    @action(detail=True, methods=["post"])
    def lock(self, request: Request, hostname: str) -> Response:
        host = self.get_object()
        data = valid(s.HostLockInputSerializer, request)
        return self._render(services.host_lock(host=host, by=request.user, **data))

    @extend_schema(
        summary="Unlock a host (staff)",
        request=None,
        responses=s.HostDetailSerializer,
        parameters=[hostname_parameter],
    )
    @action(detail=True, methods=["post"])
    def unlock(self, request: Request, hostname: str) -> Response:
        return self._render(services.host_unlock(host=self.get_object(), by=request.user))

    @extend_schema(
        summary="Release the host's active lease; its job is requeued or aborted (staff)",
        request=s.HostReleaseInputSerializer,
        responses=LeaseSerializer,
        parameters=[hostname_parameter],
    )
    @action(detail=True, methods=["post"])
    def release(self, request: Request, hostname: str) -> Response:
        host = self.get_object()
        data = valid(s.HostReleaseInputSerializer, request)
        lease = Lease.objects.active().filter(host=host).first()
        if lease is None:
            raise Conflict(f"host {host.hostname} holds no active lease")
        lease = job_services.lease_release(lease=lease, by=request.user, **data)
        lease = Lease.objects.select_related("host__worker", "job", "holder").get(pk=lease.pk)
        return Response(LeaseSerializer(lease, context=self.get_serializer_context()).data)

    @extend_schema(
        summary="The host's event log, newest first",
        responses=s.HostEventSerializer(many=True),
        parameters=[hostname_parameter],
        filters=False,
    )
    @action(detail=True, methods=["get"])
    def events(self, request: Request, hostname: str) -> Response:
        host = self.get_object()
        events = HostEvent.objects.filter(host=host).select_related("host", "worker")
        page = self.paginate_queryset(events)
        data = s.HostEventSerializer(page, many=True, context=self.get_serializer_context()).data
        return self.get_paginated_response(data)
