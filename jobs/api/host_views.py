"""API viewsets for workers and hosts (docs/api.md): thin callers of hosts.services."""

from __future__ import annotations

import hashlib
import inspect
import json
from collections.abc import Callable
from typing import Any

from django.db.models import Model, QuerySet
from django.http import Http404
from django.utils import timezone
from django.utils.http import parse_etags
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_view
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.serializers import Serializer

from hosts import services
from hosts.filtersets import HostFilterSet, WorkerFilterSet
from hosts.models import HealthPolicy, Host, HostEvent, Worker
from hosts.selectors import with_label_names
from jobs import host_inventory as inventory
from jobs import selectors
from jobs import services as job_services
from jobs.api import host_serializers as s
from jobs.api.serializers import LeaseSerializer, RunnerLeaseSerializer, attempt_hosts
from jobs.models import Lease
from schedsite.api_permissions import RolePermissionsMixin
from schedsite.api_views import ActionTablesMixin, NameLookupMixin
from schedsite.errors import Conflict
from schedsite.prepared import PreparedQuery


def path_parameter(name: str, description: str) -> OpenApiParameter:
    """The URL part an inventory object is addressed by: its name, not its id."""
    return OpenApiParameter(name, str, OpenApiParameter.PATH, description=description)


class InventoryViewSet(
    RolePermissionsMixin,
    NameLookupMixin,
    ActionTablesMixin,
    mixins.ListModelMixin,
    viewsets.GenericViewSet,
):
    """Workers and hosts: read by anyone, changed through hosts.services.

    `changes` name the services behind `partial_update` and `destroy` too; each service takes
    the object by its model's name (`worker=`, `host=`) and who asks (`by=`).
    """

    def _render(self, obj: Model, code: int = status.HTTP_200_OK) -> Response:
        fresh = self.get_queryset().get(pk=obj.pk)  # with what a listed one shows
        return Response(self.get_serializer(fresh).data, status=code)

    def _target(self) -> dict[str, Any]:
        """The object and who asks, as hosts.services take them (404 or 403 first)."""
        obj = self.get_object()
        return {obj._meta.model_name: obj, "by": self.request.user}

    def change(self, service: Callable[..., Model]) -> Response:
        return self._render(service(**self._target(), **self.action_input()))

    def retrieve(self, request: Request, **lookup: str) -> Response:
        return Response(self.get_serializer(self.get_object()).data)

    def partial_update(self, request: Request, **lookup: str) -> Response:
        return self.change(self.changes["partial_update"])

    def filter_queryset(self, queryset: QuerySet) -> QuerySet:
        # The list's filters (retired ones hidden by default) pick rows to list; one object is
        # found by its name whatever its state.
        return queryset if self.detail else super().filter_queryset(queryset)

    def destroy(self, request: Request, **lookup: str) -> Response:
        retired = self.changes["destroy"](**self._target())
        if retired is not None:  # it had history: kept, retired, and shown as it is now
            return self._render(retired)
        return Response(status=status.HTTP_204_NO_CONTENT)

    @extend_schema(responses=s.HostEventSerializer(many=True), filters=False)
    @action(detail=True, methods=["get"])
    def events(self, request: Request, **lookup: str) -> Response:
        obj = self.get_object()
        events = HostEvent.objects.filter(**{obj._meta.model_name: obj})
        page = self.paginate_queryset(events.select_related("host", "worker"))
        data = s.HostEventSerializer(page, many=True, context=self.get_serializer_context()).data
        return self.get_paginated_response(data)


def _form_of_runner_leases() -> str:
    """The form of a runner's lease answer, part of the lease list's ETag: the code that writes
    it (read once per process), so a release that changes the answer changes every tag and no
    runner keeps a list of the old form by a 304 (docs/api.md#conditional-lease-lists). Bump
    the number for a change made elsewhere (the pagination's envelope, say)."""
    try:
        code = "".join(map(inspect.getsource, (RunnerLeaseSerializer, attempt_hosts)))
    except OSError:  # no source shipped: the fields at least
        code = ",".join(RunnerLeaseSerializer.Meta.fields)
    return "1:" + hashlib.blake2b(code.encode(), digest_size=8).hexdigest()


RUNNER_LEASES_FORM = _form_of_runner_leases()
IF_NONE_MATCH = OpenApiParameter(
    "If-None-Match",
    str,
    OpenApiParameter.HEADER,
    description="The ETag of the list the runner has: 304 with no body while it is current.",
)


def etag_matches(request: Request, etag: str) -> bool:
    """Whether the request's If-None-Match names this ETag (weakly compared, `*` matching)."""
    header = request.headers.get("If-None-Match")
    if not header:
        return False
    tags = parse_etags(header)
    return "*" in tags or any(tag.removeprefix("W/") == etag for tag in tags)


# The worker actions its runner calls all the time (docs/api.md#the-runner-protocol-and-run_worker).
RUNNER_ACTIONS = ("heartbeat", "leases")
WORKER_BY_NAME = PreparedQuery(lambda name: Worker.objects.filter(name=name), str)


@extend_schema_view(destroy=extend_schema(responses={200: s.WorkerSerializer, 204: None}))
class WorkerViewSet(InventoryViewSet):
    """Lab servers that drive hosts (addressed by name)."""

    serializer_class = s.WorkerSerializer
    filterset_class = WorkerFilterSet
    lookup_field = "name"
    lookup_parameter = path_parameter("name", "Worker name.")
    permission_resource = "worker"
    action_summaries = {
        "list": "List workers with their online state and host counts",
        "retrieve": "One worker",
        "create": "Add a worker (staff)",
        "partial_update": "Rename a worker, set its runner account or its max jobs (staff)",
        "destroy": "Delete a worker with no hosts left; one with history is retired (staff)",
        "pause": "Pause: no new leases on its hosts; running leases continue (staff)",
        "resume": "Resume a paused worker (staff)",
        "heartbeat": "Runner protocol: mark the worker seen and extend the leases named "
        "(its runner, or staff)",
        "leases": "Runner protocol: the worker's active job leases (its runner, or staff)",
        "events": "The worker's event log (added, paused, resumed, back online), newest first",
    }
    action_inputs = {
        "create": s.WorkerCreateInputSerializer,
        "partial_update": s.WorkerUpdateInputSerializer,
        "pause": s.WorkerPauseInputSerializer,
        "resume": None,
        "heartbeat": s.WorkerHeartbeatInputSerializer,
    }
    changes = {
        "partial_update": services.worker_update,
        "destroy": services.worker_delete,
        "pause": services.worker_pause,
        "resume": services.worker_resume,
    }

    def runner_id_of(self, worker: Worker) -> int | None:
        return worker.runner_id

    def get_queryset(self) -> QuerySet[Worker]:
        if self.action in RUNNER_ACTIONS:  # a runner's, every few seconds: no counts
            return Worker.objects.all()
        return selectors.workers_with_host_counts()

    def get_object(self) -> Worker:
        if self.action not in RUNNER_ACTIONS:
            return super().get_object()
        # The bare row by its name, compiled once per process: what DRF's lookup does, without
        # building the same query on every call of the lab's runners.
        name = self.kwargs["name"]
        worker = WORKER_BY_NAME.first(name) if "\x00" not in name else None
        if worker is None:
            raise Http404
        self.check_object_permissions(self.request, worker)
        return worker

    def create(self, request: Request) -> Response:
        data = self.action_input()
        worker = services.worker_create(
            name=data["name"],
            by=request.user,
            paused=data["paused"],
            reason=data["paused_reason"],
            max_jobs=data["max_jobs"],
        )
        return self._render(worker, status.HTTP_201_CREATED)

    @extend_schema(responses=s.WorkerHeartbeatSerializer)
    @action(detail=True, methods=["post"])
    def heartbeat(self, request: Request, name: str) -> Response:
        worker = self.get_object()
        data = self.action_input()
        gone = job_services.worker_leases_heartbeat(
            worker=worker, leases=data.get("leases", []), concurrency=data.get("concurrency")
        )
        payload = s.WorkerHeartbeatSerializer.payload(worker, gone)
        return Response(s.WorkerHeartbeatSerializer(payload).data)

    @extend_schema(
        responses={200: RunnerLeaseSerializer(many=True), 304: None},
        parameters=[IF_NONE_MATCH],
        filters=False,
    )
    @action(detail=True, methods=["get"])
    def leases(self, request: Request, name: str) -> Response:
        worker = self.get_object()
        # The fingerprint is read before the list: a change between the two makes the next
        # poll's fingerprint differ from this answer's, never the other way round.
        version = selectors.runner_leases_version(worker=worker)
        etag = version and self._etag(version)
        if etag and etag_matches(request, etag):
            return Response(status=status.HTTP_304_NOT_MODIFIED, headers={"ETag": etag})
        leases = self.paginate_queryset(selectors.runner_leases(worker=worker))
        page = selectors.with_attempts(leases)
        data = RunnerLeaseSerializer(page, many=True, context=self.get_serializer_context()).data
        response = self.get_paginated_response(data)
        if not etag:  # no row versions (SQLite): the answer's own fingerprint
            etag = self._etag(json.dumps(response.data, sort_keys=True, default=str))
            if etag_matches(request, etag):
                return Response(status=status.HTTP_304_NOT_MODIFIED, headers={"ETag": etag})
        response["ETag"] = etag
        return response

    def _etag(self, version: str) -> str:
        """The lease list's entity tag: its rows' fingerprint, for this URL (page, size, host)
        in this format and this form of the answer."""
        seen = f"{version}|{self.request.build_absolute_uri()}|{self.request.accepted_media_type}"
        digest = hashlib.blake2b(f"{RUNNER_LEASES_FORM}|{seen}".encode(), digest_size=16)
        return f'"{digest.hexdigest()}"'


@extend_schema_view(destroy=extend_schema(responses={200: s.HostDetailSerializer, 204: None}))
class HostViewSet(InventoryViewSet):
    """Devices under test (addressed by hostname)."""

    filterset_class = HostFilterSet
    lookup_field = "hostname"
    lookup_parameter = path_parameter("hostname", "Hostname (dots allowed).")
    permission_resource = "host"
    action_summaries = {
        "list": "List hosts (filter by label, status, locked, leased, worker, q)",
        "retrieve": "One host, with its active lease and recent events",
        "create": "Add a host (staff)",
        "partial_update": "Change a host's labels, status, worker or build (staff)",
        "destroy": "Delete a host with no active lease; one with history is retired (staff)",
        "lock": "Lock a host out of scheduling, with a reason (staff)",
        "unlock": "Unlock a host (staff)",
        "release": "Release the host's active lease; its job is requeued or aborted (staff)",
        "repair": "Repair now: reset the repair count and queue a repair job (staff)",
        "verify": "Verify now: queue a verify job for a ready host (staff)",
        "events": "The host's event log, newest first",
    }
    action_inputs = {
        "create": s.HostCreateInputSerializer,
        "partial_update": s.HostUpdateInputSerializer,
        "lock": s.HostLockInputSerializer,
        "unlock": None,
        "release": s.HostReleaseInputSerializer,
        "repair": None,
        "verify": None,
    }
    changes = {
        "partial_update": inventory.host_update_checked,
        "destroy": job_services.host_delete,
        "lock": services.host_lock,
        "unlock": services.host_unlock,
        "repair": job_services.host_repair_now,
        "verify": job_services.host_verify_now,
    }

    def get_queryset(self) -> QuerySet[Host]:
        hosts = Host.objects.select_related("worker", "locked_by")
        if self._lists_labels_itself():
            return hosts.prefetch_related(selectors.active_lease_prefetch(of="host"))
        return hosts.prefetch_related("labels", selectors.active_lease_prefetch(of="host"))

    def _lists_labels_itself(self) -> bool:
        # A page of the list reads its label names in one query (paginate_queryset).
        return self.action == "list" and self.paginator is not None

    def paginate_queryset(self, queryset: QuerySet[Host]) -> list[Host] | None:
        page = super().paginate_queryset(queryset)
        if page is not None and self._lists_labels_itself():
            with_label_names(page)
        return page

    def get_serializer_class(self) -> type[Serializer]:
        # The list shows hosts; everything else answers with one host in detail.
        return s.HostSerializer if self.action == "list" else s.HostDetailSerializer

    def get_serializer_context(self) -> dict:
        return {**super().get_serializer_context(), "now": timezone.now()}

    def create(self, request: Request) -> Response:
        host = services.host_create(by=request.user, **self.action_input())
        return self._render(host, status.HTTP_201_CREATED)

    @extend_schema(responses=LeaseSerializer)
    @action(detail=True, methods=["post"])
    def release(self, request: Request, hostname: str) -> Response:
        host = self.get_object()
        data = self.action_input()
        lease = Lease.objects.active().filter(host=host).first()
        if lease is None:
            raise Conflict(f"host {host.hostname} holds no active lease")
        lease = job_services.lease_release(lease=lease, by=request.user, **data)
        lease = Lease.objects.select_related("host__worker", "job", "holder").get(pk=lease.pk)
        return Response(LeaseSerializer(lease, context=self.get_serializer_context()).data)


class HealthPolicyViewSet(
    RolePermissionsMixin,
    ActionTablesMixin,
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    viewsets.GenericViewSet,
):
    """When hosts get a verify job (docs/health.md#health-checks-and-policies)."""

    queryset = HealthPolicy.objects.all()
    serializer_class = s.HealthPolicySerializer
    permission_resource = "healthpolicy"
    action_summaries = {
        "list": "List health policies",
        "retrieve": "One health policy",
        "create": "Add a health policy (staff)",
        "partial_update": "Change a health policy (staff)",
        "destroy": "Delete a health policy (staff)",
    }
    action_inputs = {"create": s.HealthPolicyInputSerializer}

    def _render(self, policy: HealthPolicy, code: int = status.HTTP_200_OK) -> Response:
        return Response(self.get_serializer(policy).data, status=code)

    def create(self, request: Request) -> Response:
        policy = services.health_policy_create(by=request.user, **self.action_input())
        return self._render(policy, status.HTTP_201_CREATED)

    @extend_schema(request=s.HealthPolicyInputSerializer(partial=True))
    def partial_update(self, request: Request, pk: str) -> Response:
        # Only the fields sent change: no defaults fill in the others.
        serializer = s.HealthPolicyInputSerializer(data=request.data, partial=True)
        serializer.is_valid(raise_exception=True)
        policy = services.health_policy_update(
            policy=self.get_object(), by=request.user, **serializer.validated_data
        )
        return self._render(policy)

    def destroy(self, request: Request, pk: str) -> Response:
        services.health_policy_delete(policy=self.get_object(), by=request.user)
        return Response(status=status.HTTP_204_NO_CONTENT)
