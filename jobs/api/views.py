"""API viewsets for suites, jobs, leases, the queue and the scheduler: thin callers of services."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import QuerySet
from django.http import Http404
from django.utils import timezone
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import generics, mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import PermissionDenied, ValidationError
from rest_framework.request import Request
from rest_framework.response import Response

from jobs import job_history, recovery, resubmit, selectors, services, signals
from jobs.api import idempotency
from jobs.api import plan_serializers as plan_s
from jobs.api import queue_serializers as queue_s
from jobs.api import serializers as s
from jobs.api import settings_serializers as settings_s
from jobs.api import submit_serializers as submit
from jobs.choices import JobStatus
from jobs.filtersets import JobFilterSet, LeaseFilterSet, SuiteFilterSet
from jobs.models import Job, Lease, SchedulerSettings, SchedulerSettingsChange, SchedulerTick, Suite
from jobs.scheduling import whatif
from jobs.scheduling.queue import queue_jobs, queue_select
from jobs.services.runner_protocol import attempt_leases
from schedsite import roles
from schedsite.api_exceptions import ErrorSerializer
from schedsite.api_permissions import RolePermissionsMixin
from schedsite.api_views import ActionTablesMixin
from schedsite.errors import Conflict
from schedsite.prepared import PreparedQuery

TOO_MANY = OpenApiResponse(
    ErrorSerializer,
    description="Too many submissions in the last minute (SUBMIT_RATE_PER_MINUTE); retry after "
    "the `Retry-After` seconds. Nothing was created.",
)


def idempotent_create(responses: dict) -> Callable[[Callable], Callable]:
    """A create that honours an Idempotency-Key, documented with the header and its conflict."""

    def decorate(create: Callable) -> Callable:
        schema = extend_schema(
            parameters=[idempotency.PARAMETER],
            responses={**responses, 409: idempotency.CONFLICT},
        )
        return schema(idempotency.idempotent(create))

    return decorate


def runner_id_of_lease(lease: Lease) -> int | None:
    """The account that runs the worker of the lease's host (None: no worker, or no runner).

    A manual reservation is no runner's, whatever worker its host is on: None, so a runner is
    refused (403) rather than told the lease is not a job's (409).
    """
    worker = lease.host.worker
    if lease.job_id is None or worker is None:
        return None
    return worker.runner_id


def runner_leases(complete: bool, failed: bool) -> QuerySet[Lease]:
    """Leases with what a runner's `start` (or `complete`, of a `failed` test) reads of them."""
    leases = Lease.objects.select_related("host__worker", "job__suite", "job__owner", "job__host")
    if complete:
        # What the job's end goes on to read, read here in the same query: whether its owner
        # has notification settings (else no suite-finished check after commit), and for a
        # failed test on a healthy host the host's last results (its failure streak).
        leases = leases.select_related("job__owner__notification_settings")
        if failed:
            leases = recovery.with_earlier_results(leases)
    return leases


def _runner_lease_read(complete: bool, failed: bool) -> PreparedQuery[Lease]:
    def build(lease_id: int, job_id: int) -> QuerySet[Lease]:
        return runner_leases(complete, failed).filter(pk=lease_id, job_id=job_id)

    return PreparedQuery(build, int, int, variant=lambda: settings.HOST_FAILURE_STREAK)


# The lease a runner names, by (complete, failed): the protocol's hottest read, compiled once
# per process (schedsite.prepared).
RUNNER_LEASE = {
    kind: _runner_lease_read(*kind) for kind in [(False, False), (True, False), (True, True)]
}


class ReadViewSet(
    RolePermissionsMixin,
    ActionTablesMixin,
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    viewsets.GenericViewSet,
):
    """List and detail for any authenticated user; writes are actions with their own roles."""


# --- suites ---------------------------------------------------------------------------------


class SuiteViewSet(ReadViewSet):
    """Groups of jobs submitted together; list a suite's jobs with /api/jobs/?suite=ID."""

    serializer_class = s.SuiteSerializer
    filterset_class = SuiteFilterSet
    action_summaries = {
        "list": "List suites with job counts, hosts held and status",
        "retrieve": "One suite with its job counts by status and hosts held",
        "create": "Submit a suite with its jobs, or a fan-out suite over every matching host",
        "abort": "Abort every unfinished job of the suite (its owner, or staff)",
        "rerun": "Submit a finished suite's failed, error and expired jobs again as a new suite "
        "(its owner, or staff)",
        "clone": "Submit a copy of the suite, all its jobs, with some settings changed "
        "(its owner, or staff)",
    }
    action_inputs = {
        "create": submit.SuiteCreateInputSerializer,
        "abort": None,
        "rerun": submit.SuiteRerunInputSerializer,
        "clone": submit.SuiteCloneInputSerializer,
    }

    def get_queryset(self) -> QuerySet[Suite]:
        return Suite.objects.select_related("owner")

    def _context(self, suites: Sequence[Suite], **extra: object) -> dict:
        ids = [suite.pk for suite in suites]
        return {
            **self.get_serializer_context(),
            "job_counts": selectors.suite_job_counts(ids),
            "hosts_held": selectors.suite_hosts_held(ids),
            "fanout_hosts": selectors.fanout_host_counts(suites),
            **extra,
        }

    def list(self, request: Request) -> Response:
        page = self.paginate_queryset(self.filter_queryset(self.get_queryset()))
        data = s.SuiteSerializer(page, many=True, context=self._context(page)).data
        return self.get_paginated_response(data)

    def retrieve(self, request: Request, pk: str) -> Response:
        suite = self.get_object()
        return Response(s.SuiteSerializer(suite, context=self._context([suite])).data)

    def _created(self, suite: Suite) -> Response:
        suite = self.get_queryset().get(pk=suite.pk)
        body = s.SuiteSerializer(suite, context=self._context([suite])).data
        return Response(body, status=status.HTTP_201_CREATED)

    def _own_suite(self, doing: str) -> Suite:
        suite = self.get_object()
        if not roles.may(self.request.user, f"suite.{self.action}", owner_id=suite.owner_id):
            raise PermissionDenied(f"You may only {doing} your own suites.")
        return suite

    @idempotent_create({201: s.SuiteSerializer, 429: TOO_MANY})
    def create(self, request: Request) -> Response:
        data = self.action_input()
        # Refused before anything is submitted: a suite must not start without its notify.
        signals.suite_notify_check(request.user, data["notify"])
        with transaction.atomic():
            suite = submit.submit_suite(request.user, data)
            signals.suite_notify_set(suite, data["notify"])
        return self._created(suite)

    @idempotent_create({201: s.SuiteSerializer, 429: TOO_MANY})
    @action(detail=True, methods=["post"])
    def rerun(self, request: Request, pk: str) -> Response:
        suite = self._own_suite("re-run")
        job_ids = self.action_input().get("jobs")
        return self._created(resubmit.suite_rerun(suite=suite, owner=request.user, job_ids=job_ids))

    @idempotent_create({201: s.SuiteSerializer, 429: TOO_MANY})
    @action(detail=True, methods=["post"])
    def clone(self, request: Request, pk: str) -> Response:
        suite = self._own_suite("clone")
        changes = self.action_input()
        return self._created(resubmit.suite_clone(suite=suite, owner=request.user, changes=changes))

    @extend_schema(responses=s.SuiteAbortResultSerializer)
    @action(detail=True, methods=["post"])
    def abort(self, request: Request, pk: str) -> Response:
        suite = self._own_suite("abort")
        count = services.suite_abort(suite=suite, by=request.user)
        suite = self.get_queryset().get(pk=suite.pk)
        context = self._context([suite], jobs_aborted=count)
        return Response(s.SuiteAbortResultSerializer(suite, context=context).data)


# --- jobs -----------------------------------------------------------------------------------


class JobViewSet(ReadViewSet):
    """Tests that each need one host; `start` and `complete` are the runner protocol."""

    serializer_class = s.JobSerializer
    filterset_class = JobFilterSet
    # Which worker a runner acts for depends on the job's lease: checked in _runner_lease.
    permission_resource = "job"
    action_summaries = {
        "list": "List jobs (filter status, suite, label, host, owner, q)",
        "retrieve": "One job, with its wait reason and active lease",
        "attempts": "A job's attempts in order: each lease, its host, result, retry reason, events",
        "create": "Submit a standalone job",
        "start": "Runner protocol: the test has begun (leased → running)",
        "complete": "Runner protocol: report passed/failed; releases the lease",
        "abort": "Abort a queued or running job (its owner, staff, or the runner holding it)",
        "partial_update": "Change a queued job's priority (its owner, or staff)",
    }
    action_inputs = {
        "create": submit.JobCreateInputSerializer,
        "start": s.JobStartInputSerializer,
        "complete": s.JobCompleteInputSerializer,
        "abort": s.JobAbortInputSerializer,
        "partial_update": s.JobUpdateInputSerializer,
    }
    changes = {"start": services.lease_job_start, "complete": services.lease_job_complete}

    def get_queryset(self) -> QuerySet[Job]:
        return Job.objects.select_related("suite", "host__worker", "owner").prefetch_related(
            selectors.active_lease_prefetch(of="job")
        )

    def _render(self, jobs: Sequence[Job]) -> list[dict]:
        # One read of the latest tick resolves every queued job's reason on the page.
        context = {
            **self.get_serializer_context(),
            "wait_reasons": selectors.wait_reasons_for(jobs),
        }
        return s.JobSerializer(jobs, many=True, context=context).data

    def _render_one(self, job: Job, code: int = status.HTTP_200_OK) -> Response:
        fresh = self.get_queryset().get(pk=job.pk)
        return Response(self._render([fresh])[0], status=code)

    def list(self, request: Request) -> Response:
        page = self.paginate_queryset(self.filter_queryset(self.get_queryset()))
        return self.get_paginated_response(self._render(page))

    def retrieve(self, request: Request, pk: str) -> Response:
        return Response(self._render([self.get_object()])[0])

    @extend_schema(request=s.JobUpdateInputSerializer, responses=s.JobSerializer)
    def partial_update(self, request: Request, pk: str) -> Response:
        job = self.get_object()  # 404, then 403 for anyone but its owner and staff
        data = self.action_input()
        if "priority" in data:
            job = services.job_set_priority(job=job, by=request.user, priority=data["priority"])
        return self._render_one(job)

    @extend_schema(responses=s.JobAttemptSerializer(many=True), filters=False)
    @action(detail=True, methods=["get"], pagination_class=None, filter_backends=[])
    def attempts(self, request: Request, pk: str) -> Response:
        job = self.get_object()
        return Response(s.JobAttemptSerializer(job_history.job_attempts(job), many=True).data)

    @idempotent_create({201: s.JobSerializer, 429: TOO_MANY})
    def create(self, request: Request) -> Response:
        data = self.action_input()
        job = services.job_submit(
            owner=request.user, spec=data["spec"], allow_unmatched=data["allow_unmatched"]
        )
        return self._render_one(job, status.HTTP_201_CREATED)

    def _protocol_input(self) -> dict:
        """Validate a start or complete body; `lease` is required unless the caller is staff."""
        lease_required = not roles.is_staff(self.request.user)
        serializer_class = self.action_inputs[self.action]
        serializer = serializer_class(data=self.request.data, lease_required=lease_required)
        serializer.is_valid(raise_exception=True)
        return serializer.validated_data

    def _runner_lease(self, lease_id: int | None, data: dict) -> Lease:
        """The lease the caller acts through, with its job and host: the one named, or (staff
        only) the job's own. One query when the lease is named."""
        kind = (
            self.action == "complete",
            self.action == "complete"
            and data["result"] == JobStatus.FAILED
            and data.get("host_ok", True),
        )
        if lease_id is not None:
            lease = RUNNER_LEASE[kind].first(lease_id, self._job_id())
            if lease is None:
                job = self.get_object()  # 404 when there is no such job
                raise ValidationError(
                    {"lease": [f"Lease {lease_id} is not a lease of job {job.pk}."]}
                )
        else:
            # Only staff get here: the input serializer requires the lease from everyone else.
            job = self.get_object()
            lease = selectors.lease_of_job(job)
            if lease is None:
                raise Conflict(f"job {job.pk} holds no active lease (status {job.status})")
            lease = runner_leases(*kind).get(pk=lease.pk)
        if not roles.runner_may_work(self.request.user, runner_id_of_lease(lease)):
            raise PermissionDenied("This job's lease is on a worker you are not the runner of.")
        return lease

    def _job_id(self) -> int:
        try:
            return int(self.kwargs["pk"])
        except ValueError:
            raise Http404 from None

    def change(self, service: Callable[..., Job]) -> Response:
        """One runner-protocol step: the checked body, the lease it acts through, its job."""
        data = self._protocol_input()
        lease = self._runner_lease(data.pop("lease", None), data)
        job = service(lease=lease, by=self.request.user, **data)
        # The service leaves the job and the lease as it wrote them: no second read (a
        # multi-host job's other leases are read: its answer lists all its hosts).
        job.active_leases = attempt_leases(lease) if lease.active else []
        # The answer of _render, from a serializer whose fields are built once per process.
        context = {
            **self.get_serializer_context(),
            "wait_reasons": selectors.wait_reasons_for([job]),
        }
        return Response(s.ProtocolJobSerializer(job, context=context).data)

    @action(detail=True, methods=["post"])
    def abort(self, request: Request, pk: str) -> Response:
        job = self.get_object()
        data = self.action_input()
        user = request.user
        if roles.can_manage(user, job.owner_id):
            return self._render_one(services.job_abort(job=job, by=user, reason=data["reason"]))
        # A runner may give up a job its worker holds (it is shutting down).
        lease = (
            selectors.lease_of_job_for_runner(job=job, user=user) if roles.is_runner(user) else None
        )
        if lease is None:
            raise PermissionDenied("You may only abort your own jobs.")
        return self._render_one(
            services.lease_job_abort(lease=lease, by=user, reason=data["reason"])
        )


# --- leases ---------------------------------------------------------------------------------


def lease_release_or_hand_back(*, lease: Lease, by: object, requeue: bool, reason: str) -> Lease:
    """Staff release any lease; a runner only hands back a job it has not started."""
    if roles.is_staff(by):
        return services.lease_release(lease=lease, by=by, requeue=requeue, reason=reason)
    if not requeue:
        raise PermissionDenied("A runner hands a job back with requeue true; to end it, abort it.")
    return services.lease_hand_back(lease=lease, by=by, reason=reason)


class LeaseViewSet(ReadViewSet):
    """Every hold on a host: jobs' leases and manual reservations."""

    serializer_class = s.LeaseSerializer
    filterset_class = LeaseFilterSet
    # extend and end: its holder or staff, "reservation.manage", checked by the service.
    permission_resource = "lease"
    action_summaries = {
        "list": "List leases (filter active, worker, host, job, manual)",
        "retrieve": "One lease",
        "create": "Reserve a free host for manual work, for a duration (staff)",
        "heartbeat": "Runner protocol: keep a job's lease alive (its worker's runner, or staff)",
        "release": "Release a lease; its job is requeued (default) or aborted (staff); "
        "its runner may hand back a job it has not started",
        "extend": "Push a manual reservation's end later by duration seconds (its holder or "
        "staff), up to MAX_RESERVATION_SECONDS from now",
        "end": "End a manual reservation now: the host is free again (its holder or staff)",
    }
    action_inputs = {
        "create": s.LeaseReserveInputSerializer,
        "heartbeat": None,
        "release": s.LeaseReleaseInputSerializer,
        "extend": s.LeaseExtendInputSerializer,
        "end": s.LeaseEndInputSerializer,
    }
    changes = {
        "release": lease_release_or_hand_back,
        "extend": services.lease_extend,
        "end": services.reservation_end,
    }

    def get_queryset(self) -> QuerySet[Lease]:
        return Lease.objects.select_related("host__worker", "job", "holder")

    def runner_id_of(self, lease: Lease) -> int | None:
        return runner_id_of_lease(lease)

    def _render_one(self, lease: Lease, code: int = status.HTTP_200_OK) -> Response:
        fresh = self.get_queryset().get(pk=lease.pk)
        return Response(self.get_serializer(fresh).data, status=code)

    def change(self, service: Callable[..., Lease]) -> Response:
        """One change of a lease: found (404 or 403 first), its body checked, then the service."""
        lease = self.get_object()
        return self._render_one(service(lease=lease, by=self.request.user, **self.action_input()))

    @extend_schema(request=None, responses=s.LeaseSerializer)
    @action(detail=True, methods=["post"])
    def heartbeat(self, request: Request, pk: str) -> Response:
        # The hottest call of the protocol: answered from the lease as read and as written.
        lease = services.lease_job_heartbeat(lease=self.get_object(), by=request.user)
        return Response(self.get_serializer(lease).data)

    @idempotent_create({201: s.LeaseSerializer})
    def create(self, request: Request) -> Response:
        data = self.action_input()
        lease = services.lease_reserve(
            host=data["host"],
            holder=request.user,
            duration=timedelta(seconds=data["duration"]),
            reason=data["reason"],
        )
        return self._render_one(lease, status.HTTP_201_CREATED)


# --- the queue and the scheduler ------------------------------------------------------------


class QueueView(RolePermissionsMixin, generics.GenericAPIView):
    """Queued jobs in the exact order the scheduler will consider them, with wait reasons."""

    serializer_class = queue_s.QueueEntrySerializer
    filterset_class = JobFilterSet
    queryset = Job.objects.queued()

    @extend_schema(
        summary="The queue in the scheduler's order; filters keep each job's global position",
        responses=queue_s.QueueEntrySerializer(many=True),
    )
    def get(self, request: Request) -> Response:
        # Filtering also validates the parameters: a bad one is a 400 even when nothing is queued.
        filtered = self.filter_queryset(self.get_queryset())
        names = set(JobFilterSet.base_filters)
        filtering = any(key in names for key in request.query_params)
        selection = queue_select(filtered if filtering else None)
        page = queue_jobs(self.paginate_queryset(selection.ids))
        positions = selection.positions([job.pk for job in page])
        page = [job for job in page if job.pk in positions]  # leased meanwhile: no place
        context = {
            **self.get_serializer_context(),
            "positions": positions,
            "queue_head": selection.head,
            "wait_reasons": selectors.wait_reasons_for(page),
            "now": timezone.now(),
        }
        return self.get_paginated_response(
            queue_s.QueueEntrySerializer(page, many=True, context=context).data
        )


class SchedulerViewSet(ReadViewSet):
    """Scheduler ticks and the scheduler settings; staff run a tick now and change the settings."""

    serializer_class = queue_s.SchedulerTickSerializer
    queryset = SchedulerTick.objects.all()
    permission_resource = "scheduler"
    action_summaries = {
        "list": "Recent scheduler ticks, newest first: timings and counts",
        "retrieve": "One scheduler tick",
        "tick": "Run one scheduler tick now and return what it did (staff)",
        "plan": "What-if: what the next tick would lease with a proposed change; saves nothing "
        "(pausing and locking: staff; a suite's changes: its owner or staff)",
        "scheduler_settings": "The scheduler settings: job ordering, aging, host choice",
        "scheduler_settings_update": "Change some scheduler settings, compare-and-set on "
        "`version` (staff)",
        "settings_history": "Every change of the scheduler settings, newest first: who, when, "
        "why, old and new values",
    }
    action_inputs = {
        "tick": None,
        "plan": plan_s.PlanInputSerializer,
        "scheduler_settings_update": settings_s.SchedulerSettingsInputSerializer,
    }

    @extend_schema(responses=queue_s.TickSummarySerializer)
    @action(detail=False, methods=["post"])
    def tick(self, request: Request) -> Response:
        summary = services.scheduler_tick(trigger=f"api: {request.user.get_username()}")
        return Response(queue_s.TickSummarySerializer(summary.as_dict()).data)

    @extend_schema(responses=plan_s.PlanResultSerializer)
    @action(detail=False, methods=["post"])
    def plan(self, request: Request) -> Response:
        data = self.action_input()
        if (data["workers"] or data["hosts"]) and not roles.is_staff(request.user):
            raise PermissionDenied("Only lab staff may preview pausing workers or locking hosts.")
        for suite in data["suites"].values():
            if not roles.can_manage(request.user, suite.owner_id):
                raise PermissionDenied(f"You may not change suite {suite.pk}.")
        now = timezone.now()
        result = whatif.plan_change(plan_s.plan_change_of(request.user, data, now=now), now=now)
        return Response(plan_s.PlanResultSerializer(plan_s.plan_answer(result)).data)

    # Not named `settings`: APIView.settings holds DRF's own.
    @extend_schema(responses=settings_s.SchedulerSettingsSerializer)
    @action(detail=False, methods=["get"], url_path="settings", url_name="settings")
    def scheduler_settings(self, request: Request) -> Response:
        return Response(settings_s.SchedulerSettingsSerializer(SchedulerSettings.load()).data)

    @extend_schema(responses=settings_s.SchedulerSettingsSerializer)
    @scheduler_settings.mapping.patch
    def scheduler_settings_update(self, request: Request) -> Response:
        data = self.action_input()
        changed = services.update_scheduler_settings(
            request.user,
            expected_version=data.pop("version", None),
            reason=data.pop("reason", ""),
            **data,
        )
        return Response(settings_s.SchedulerSettingsSerializer(changed).data)

    @extend_schema(responses=settings_s.SchedulerSettingsChangeSerializer(many=True), filters=False)
    @action(detail=False, methods=["get"], url_path="settings/history", url_name="settings-history")
    def settings_history(self, request: Request) -> Response:
        page = self.paginate_queryset(SchedulerSettingsChange.objects.all())
        data = settings_s.SchedulerSettingsChangeSerializer(page, many=True).data
        return self.get_paginated_response(data)
