"""Suites, jobs, leases and the record of scheduler ticks."""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.core.validators import MaxValueValidator
from django.db import models
from django.db.models import Q
from django.utils import timezone

from jobs.choices import (
    DEFAULT_PRIORITY,
    JobKind,
    JobStatus,
    OutboxKind,
    ReleaseReason,
    ReservationStatus,
    SuiteOrigin,
    SuiteStatus,
    TemplateRunOutcome,
)
from jobs.querysets import ACTIVE_LEASE, JobQuerySet, LeaseQuerySet, SuiteQuerySet, suite_finished

# The scheduler's own rows stand in a module of their own; Django finds them through this
# import, and callers keep importing them from jobs.models.
from jobs.scheduler_models import SchedulerSettings as SchedulerSettings
from jobs.scheduler_models import SchedulerSettingsChange as SchedulerSettingsChange
from jobs.scheduler_models import SchedulerState as SchedulerState
from jobs.scheduler_models import SchedulerTick as SchedulerTick
from jobs.scheduler_models import WaitReasonClass as WaitReasonClass
from schedsite import roles
from schedsite.model_fields import account_link


def encode_labels(labels: object) -> str:
    """Store a label set as ',a,b,' so that one label matches with a plain substring test."""
    names = sorted({str(name) for name in labels})  # type: ignore[union-attr]
    return "," + ",".join(names) + "," if names else ""


def decode_labels(key: str) -> list[str]:
    return [name for name in key.split(",") if name]


class Suite(models.Model):
    """A group of jobs submitted together, with a priority and a minimum-DUT quota."""

    name = models.CharField(max_length=200)
    build = models.CharField(max_length=200, blank=True)
    priority = models.PositiveSmallIntegerField(default=DEFAULT_PRIORITY)
    min_duts = models.PositiveIntegerField(default=0)
    max_duts = models.PositiveIntegerField(null=True, blank=True)
    owner = account_link("suites")
    fanout_labels = models.CharField(max_length=1000, blank=True)  # set for fan-out suites
    # After this, hosts that join (or start carrying the labels) get no job of the fan-out.
    fanout_until = models.DateTimeField(null=True, blank=True)
    # Seconds its jobs may wait in the queue before they end `expired`; each job keeps its own.
    expires_after = models.PositiveIntegerField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now, db_index=True)
    aborted_at = models.DateTimeField(null=True, blank=True)
    aborted_by = models.CharField(max_length=150, blank=True)
    # Where the suite came from: a re-run of another's failed jobs, or a copy of another.
    rerun_of = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="reruns"
    )
    cloned_from = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="clones"
    )
    # The template it was made from, and whether a person dispatched it or its cron did.
    template = models.ForeignKey(
        "SuiteTemplate", null=True, blank=True, on_delete=models.SET_NULL, related_name="runs"
    )
    origin = models.CharField(
        max_length=10,
        choices=SuiteOrigin.choices,
        default=SuiteOrigin.SUBMITTED,
        db_default=SuiteOrigin.SUBMITTED,
    )

    objects = SuiteQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.CheckConstraint(condition=Q(priority__lte=100), name="suite_priority_range"),
            models.CheckConstraint(condition=Q(min_duts__gte=0), name="suite_min_duts_nonneg"),
            models.CheckConstraint(
                condition=Q(max_duts__isnull=True) | Q(max_duts__gte=1),
                name="suite_max_duts_positive",
            ),
        ]

    def __str__(self) -> str:
        return self.name

    def status_from_counts(self, counts: dict[str, int]) -> str:
        """Derive the suite's status from its job counts by status."""
        if self.aborted_at is not None:
            return SuiteStatus.ABORTED
        if suite_finished(counts):
            return SuiteStatus.COMPLETED
        if counts.get(JobStatus.QUEUED, 0) == sum(counts.values()):
            return SuiteStatus.QUEUED
        return SuiteStatus.RUNNING


class Job(models.Model):
    """One test that needs one host or several (`roles`), or a maintenance job (verify,
    repair) pinned to one host."""

    kind = models.CharField(
        max_length=10, choices=JobKind.choices, default=JobKind.TEST, db_default=JobKind.TEST
    )
    suite = models.ForeignKey(
        Suite, null=True, blank=True, on_delete=models.CASCADE, related_name="jobs"
    )
    name = models.CharField(max_length=200)
    priority = models.PositiveSmallIntegerField(default=DEFAULT_PRIORITY)
    label_key = models.CharField(max_length=2000, blank=True)  # encode_labels(); immutable
    # A standalone job's build to test; a suite's jobs test the suite's build (`build_to_test`).
    build = models.CharField(max_length=200, blank=True, default="", db_default="")
    host = models.ForeignKey(  # a pinned host
        "hosts.Host", null=True, blank=True, on_delete=models.PROTECT, related_name="pinned_jobs"
    )
    max_retries = models.PositiveSmallIntegerField(default=0)
    timeout = models.DurationField(default=timedelta(seconds=3600))
    estimated_duration = models.DurationField(null=True, blank=True)
    owner = account_link("jobs")
    status = models.CharField(max_length=10, choices=JobStatus.choices, default=JobStatus.QUEUED)
    attempts = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(default=timezone.now)
    # The submission time the queue orders by: the suite's created_at, or the job's own.
    submitted_at = models.DateTimeField(default=timezone.now)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    message = models.TextField(blank=True)
    # Queue expiry: the seconds it may wait, and the moment that ends (created_at + that).
    expires_after = models.PositiveIntegerField(null=True, blank=True)
    expires_at = models.DateTimeField(null=True, blank=True)
    # A retried job waits out its backoff: the tick leaves it queued until then.
    not_before = models.DateTimeField(null=True, blank=True)
    # One of a fan-out suite's jobs, pinned to the host it was made for (docs/scheduling.md).
    fanout = models.BooleanField(default=False, db_default=False)
    # May be stopped to make room for a job preempt_margin levels higher (docs/scheduling.md#
    # preemption), then requeued without using a retry.
    preemptible = models.BooleanField(default=False, db_default=False)
    # A multi-host job's roles (docs/scheduling.md#multi-host-jobs), as submitted and
    # normalized: [{"name": "dut", "labels": [...], "count": 2, "max": 4}, ...]; the job's own
    # labels apply to every role. Empty: a one-host job. Immutable after submission.
    roles = models.JSONField(
        default=list, blank=True, db_default=models.Value([], output_field=models.JSONField())
    )
    # A label prefix ("chamber"): every host of the job carries the same `chamber:<value>`.
    together_by = models.CharField(max_length=100, blank=True, default="", db_default="")

    objects = JobQuerySet.as_manager()

    class Meta:
        ordering = ["id"]
        constraints = [
            models.CheckConstraint(condition=Q(priority__lte=100), name="job_priority_range"),
            models.CheckConstraint(
                condition=Q(status__in=JobStatus.values), name="job_status_valid"
            ),
            models.CheckConstraint(condition=Q(kind__in=JobKind.values), name="job_kind_valid"),
            # A fan-out gives each host one job to run: two ticks cannot both add one. A host
            # back from repair_failed may get a new job beside the one that was skipped.
            models.UniqueConstraint(
                fields=["suite", "host"],
                condition=Q(fanout=True) & ~Q(status="skipped"),
                name="one_fanout_job_per_host",
            ),
        ]
        indexes = [
            # The tick's and the queue page's scan: queued jobs in consideration order.
            models.Index(
                fields=["-priority", "submitted_at", "id"],
                condition=Q(status="queued"),
                name="job_queue_order",
            ),
            # The queue pages' first rows: the few queued verify and repair jobs, by id.
            models.Index(
                fields=["id"],
                condition=Q(status="queued") & ~Q(kind="test"),
                name="job_queued_maintenance",
            ),
            # The dashboard's oldest waits (views_dashboard.queue_waits): queued jobs by age.
            models.Index(
                fields=["created_at", "id"],
                condition=Q(status="queued"),
                name="job_queued_by_age",
            ),
            models.Index(fields=["suite", "status"], name="job_suite_status"),
            models.Index(fields=["status"], name="job_status"),
            # Retries waiting out a backoff: the tick counts them to notice one ending.
            models.Index(
                fields=["not_before"],
                condition=Q(status="queued", not_before__isnull=False),
                name="job_queued_backoff",
            ),
            # Queued jobs that may expire: every tick asks whether one is overdue.
            models.Index(
                fields=["expires_at"],
                condition=Q(status="queued", expires_at__isnull=False),
                name="job_queued_expiry",
            ),
            # A name's last finished runs: the median run time that `ordering: size` uses.
            models.Index(
                fields=["name", "-finished_at"],
                condition=Q(status__in=["passed", "failed"]),
                name="job_finished_by_name",
            ),
        ]

    def __str__(self) -> str:
        return self.name

    @property
    def labels(self) -> list[str]:
        return decode_labels(self.label_key)

    @property
    def build_to_test(self) -> str:
        """The build its hosts must carry: its suite's, or its own for a standalone job."""
        return self.suite.build if self.suite_id else self.build


class Lease(models.Model):
    """The only way anyone holds a host: a job's lease, or a manual reservation (no job)."""

    host = models.ForeignKey("hosts.Host", on_delete=models.PROTECT, related_name="leases")
    job = models.ForeignKey(
        Job, null=True, blank=True, on_delete=models.CASCADE, related_name="leases"
    )
    holder = account_link("leases")
    reason = models.CharField(max_length=500, blank=True)
    acquired_at = models.DateTimeField(default=timezone.now)
    expires_at = models.DateTimeField()
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    released_at = models.DateTimeField(null=True, blank=True)
    release_reason = models.CharField(max_length=10, choices=ReleaseReason.choices, blank=True)
    released_by = models.CharField(max_length=150, blank=True)
    # The lease ended because its host failed under the job (reported broken, or the runner
    # vanished): a retry of the job prefers another host.
    host_failed = models.BooleanField(default=False, db_default=False)
    # Which of its job's hosts this lease holds: a multi-host job has one lease per host, all
    # of one attempt (`attempt`, the job's attempts count when they were made). `slot` 0 is the
    # first essential host, whose worker runs the job; `role` names the job's role ("" for a
    # one-host job, whose one lease has slot 0).
    role = models.CharField(max_length=100, blank=True, default="", db_default="")
    slot = models.PositiveSmallIntegerField(default=0, db_default=0)
    attempt = models.PositiveIntegerField(null=True, blank=True)
    # The build its runner must put on the host before the test: the job's build when the
    # host's current_build differed as the lease was made; "" when none is needed.
    provision_to = models.CharField(max_length=200, blank=True, default="", db_default="")

    objects = LeaseQuerySet.as_manager()

    class Meta:
        ordering = ["-acquired_at", "-id"]
        constraints = [
            # The invariants of the whole product, guarded by the database itself.
            models.UniqueConstraint(
                fields=["host"],
                condition=ACTIVE_LEASE,
                name="one_active_lease_per_host",
            ),
            # One active lease per job and slot: a one-host job holds one host, a multi-host
            # job one per slot of its attempt.
            models.UniqueConstraint(
                fields=["job", "slot"],
                condition=Q(job__isnull=False) & ACTIVE_LEASE,
                name="one_active_lease_per_job_slot",
            ),
            models.CheckConstraint(
                condition=ACTIVE_LEASE | ~Q(release_reason=""),
                name="released_lease_has_reason",
            ),
        ]
        indexes = [
            models.Index(
                fields=["expires_at"],
                condition=ACTIVE_LEASE,
                name="lease_active_expiry",
            ),
            # The snapshot's read of the hosts each retried job failed on.
            models.Index(fields=["job"], condition=Q(host_failed=True), name="lease_host_failed"),
            # When each host's last lease ended (`host_choice: spread`): one probe per host,
            # however long the lease history. Released leases, `~ACTIVE_LEASE` in words its
            # migration keeps (PostgreSQL reads `released()`'s NOT (… IS NULL) as this).
            models.Index(
                fields=["host", "-released_at"],
                condition=Q(released_at__isnull=False),
                name="lease_host_last_released",
            ),
        ]

    def __str__(self) -> str:
        return f"lease {self.pk} on {self.host_id}"

    @property
    def active(self) -> bool:
        """Not yet released: it holds its host (the Python twin of querysets.ACTIVE_LEASE)."""
        return self.released_at is None

    def managed_by(self, user: roles.User) -> bool:
        """Whether the user may extend or end it: a manual reservation they hold, or staff."""
        return self.job_id is None and roles.may(
            user, "reservation.manage", owner_id=self.holder_id
        )


# What a reservation stores: `ended` is read from its lease (Reservation.current_status).
STORED_RESERVATION_STATUSES = [
    ReservationStatus.WAITING,
    ReservationStatus.ACTIVE,
    ReservationStatus.CANCELLED,
]


class Reservation(models.Model):
    """A tester's request for a host to debug on: served at once, or waiting in line for the
    next free host that fits (docs/api.md#reservations). Once served it holds a manual
    reservation lease, which is extended, ended and expires as any reservation."""

    owner = account_link("reservations")
    label_key = models.CharField(max_length=2000, blank=True)  # encode_labels()
    host = models.ForeignKey(  # the host asked for by name, if any
        "hosts.Host",
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="reservation_requests",
    )
    duration = models.DurationField()
    reason = models.CharField(max_length=500)
    priority = models.PositiveSmallIntegerField(default=DEFAULT_PRIORITY)
    status = models.CharField(
        max_length=10, choices=ReservationStatus.choices, default=ReservationStatus.WAITING
    )
    created_at = models.DateTimeField(default=timezone.now)
    # When it stopped waiting: served (its lease's acquired_at) or cancelled.
    decided_at = models.DateTimeField(null=True, blank=True)
    lease = models.OneToOneField(
        Lease, null=True, blank=True, on_delete=models.PROTECT, related_name="reservation"
    )

    class Meta:
        ordering = ["-id"]
        constraints = [
            models.CheckConstraint(
                condition=Q(status__in=STORED_RESERVATION_STATUSES), name="reservation_status_valid"
            ),
            # Served exactly when it holds a lease.
            models.CheckConstraint(
                condition=Q(status="active", lease__isnull=False)
                | (~Q(status="active") & Q(lease__isnull=True)),
                name="reservation_active_has_lease",
            ),
            models.CheckConstraint(
                condition=Q(priority__lte=100), name="reservation_priority_range"
            ),
        ]
        indexes = [
            # The waiting line, in the order it is served.
            models.Index(
                fields=["-priority", "created_at", "id"],
                condition=Q(status="waiting"),
                name="reservation_line",
            ),
        ]

    def __str__(self) -> str:
        return f"reservation {self.pk}"

    @property
    def labels(self) -> list[str]:
        return decode_labels(self.label_key)

    @property
    def current_status(self) -> str:
        """Its status as people read it: an active one whose lease ended is `ended`."""
        lease = self.lease if self.status == ReservationStatus.ACTIVE else None
        if lease is not None and not lease.active:
            return ReservationStatus.ENDED
        return self.status


class SubmitLimit(models.Model):
    """More than the site's submission limits for the members of one group (docs/security.md)."""

    group = models.OneToOneField(
        "auth.Group", on_delete=models.CASCADE, related_name="submit_limit"
    )
    # Empty: the site default. A member gets the most generous of the default and their grants.
    max_priority = models.PositiveSmallIntegerField(
        null=True,
        blank=True,
        validators=[MaxValueValidator(100)],
        help_text="Highest priority members may submit at (0–100). Empty: SUBMIT_MAX_PRIORITY.",
    )
    max_min_duts = models.PositiveIntegerField(
        null=True, blank=True, help_text="Largest min_duts of a suite. Empty: SUBMIT_MAX_MIN_DUTS."
    )
    max_queued_jobs = models.PositiveIntegerField(
        null=True,
        blank=True,
        help_text="Queued jobs one member may have. Empty: SUBMIT_MAX_QUEUED_JOBS.",
    )
    rate_per_minute = models.PositiveIntegerField(
        null=True,
        blank=True,
        help_text="Suites and standalone jobs one member may submit per minute. "
        "Empty: SUBMIT_RATE_PER_MINUTE.",
    )

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=Q(max_priority__isnull=True) | Q(max_priority__lte=100),
                name="submit_limit_priority_range",
            ),
        ]

    def __str__(self) -> str:
        return f"submit limits of {self.group}"


class IdempotencyKey(models.Model):
    """The first answer to a creating POST that carried an Idempotency-Key (docs/api.md)."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="idempotency_keys"
    )
    key = models.CharField(max_length=255)
    # sha256 of method, path and body: the same key with another request is a 409.
    fingerprint = models.CharField(max_length=64)
    # Written in the transaction that creates the object, so the two commit together; 0 only
    # inside that transaction, before the answer is known.
    status_code = models.PositiveSmallIntegerField(default=0)
    response_body = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(default=timezone.now, db_index=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["user", "key"], name="one_idempotency_key_per_user"),
        ]

    def __str__(self) -> str:
        return f"{self.key} of user {self.user_id}"


class SuiteTemplate(models.Model):
    """A saved suite body to dispatch with a build, by hand or on a cron schedule."""

    name = models.CharField(max_length=200)
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="suite_templates"
    )
    # A POST /api/suites/ body, checked by SuiteCreateInputSerializer whenever it is saved.
    body = models.JSONField(default=dict)
    cron = models.CharField(max_length=100, blank=True)  # blank: dispatched by hand only
    enabled = models.BooleanField(default=True)
    # The django-q2 schedule that runs it: set while it has a cron and is enabled.
    schedule = models.OneToOneField(
        "django_q.Schedule", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["name", "id"]
        constraints = [
            models.UniqueConstraint(fields=["owner", "name"], name="one_template_name_per_owner"),
        ]

    def __str__(self) -> str:
        return self.name


class TemplateRun(models.Model):
    """One run of a template: a dispatch, or a cron slot that created, skipped or failed."""

    template = models.ForeignKey(SuiteTemplate, on_delete=models.CASCADE, related_name="attempts")
    # The cron time this run stands for; null for a dispatch by hand.
    slot = models.DateTimeField(null=True, blank=True)
    outcome = models.CharField(max_length=10, choices=TemplateRunOutcome.choices)
    suite = models.ForeignKey(
        Suite, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    reason = models.TextField(blank=True)
    actor = models.CharField(max_length=150)  # who dispatched it, or "scheduler"
    at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-at", "-id"]
        constraints = [
            # Two qclusters, or a retried task, cannot both run one cron slot.
            models.UniqueConstraint(
                fields=["template", "slot"],
                condition=Q(slot__isnull=False),
                name="one_run_per_template_slot",
            ),
        ]
        indexes = [models.Index(fields=["template", "-at"], name="template_run_recent")]

    def __str__(self) -> str:
        return f"{self.template_id} {self.outcome} at {self.at:%Y-%m-%d %H:%M}"


class OwnerUsage(models.Model):
    """Host-seconds an owner's jobs held, decayed with the fair-share half-life (fair share).

    Written only by a trigger when a job lease is released (migration 0006 on PostgreSQL,
    0010 on SQLite): every code path that ends a lease counts, none has to remember to.
    `host_seconds` is the decayed
    total as of `at`; read it decayed to now (jobs.scheduling.snapshot.owner_usage).
    """

    owner = models.OneToOneField(
        settings.AUTH_USER_MODEL, primary_key=True, on_delete=models.CASCADE, related_name="+"
    )
    host_seconds = models.FloatField(default=0.0)
    at = models.DateTimeField()

    class Meta:
        verbose_name_plural = "owner usage"

    def __str__(self) -> str:
        return f"usage of {self.owner_id}"


class OutboxEntry(models.Model):
    """Something a state move did that an app above jobs acts on (jobs/outbox.py).

    Written in the move's own transaction, so it exists exactly when the move does, whatever
    happens to the process after the commit; the reader marks it handled once it has acted
    (docs/notifications.md#the-outbox).
    """

    kind = models.CharField(max_length=30, choices=OutboxKind.choices)
    payload = models.JSONField()
    created_at = models.DateTimeField(default=timezone.now)
    handled_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        verbose_name_plural = "outbox entries"
        indexes = [
            models.Index(fields=["id"], condition=Q(handled_at=None), name="outbox_unhandled"),
        ]

    def __str__(self) -> str:
        return f"{self.kind} #{self.pk}"
