"""Workers, hosts (DUTs), labels and the host event log."""

from __future__ import annotations

from datetime import datetime

from django.db import models
from django.db.models import Q
from django.utils import timezone

from hosts.choices import EventKind, HostStatus, ProvisionResult
from hosts.querysets import HostQuerySet, WorkerQuerySet, seen_online, worker_capacity
from hosts.validators import NAME_VALIDATORS, label_validator
from schedsite.model_fields import account_link


class Worker(models.Model):
    """A lab server that drives hosts; paused or offline workers get no new leases."""

    name = models.CharField(max_length=100, unique=True, validators=[*NAME_VALIDATORS])
    paused = models.BooleanField(default=False)
    paused_reason = models.CharField(max_length=500, blank=True)
    paused_by = account_link("+")
    paused_at = models.DateTimeField(null=True, blank=True)
    last_seen = models.DateTimeField(null=True, blank=True)
    # The most jobs it runs at once (null: unlimited), and the --concurrency its runner last
    # reported in its heartbeat (null: not reported); the smaller applies (`capacity`).
    max_jobs = models.PositiveIntegerField(null=True, blank=True)
    runner_concurrency = models.PositiveIntegerField(null=True, blank=True)
    # The account whose token the worker's runner uses; it may work only this worker's leases.
    runner = account_link("runner_workers")
    created_at = models.DateTimeField(default=timezone.now)
    # Retired instead of deleted once it has history: kept for the audit trail, out of service.
    retired_at = models.DateTimeField(null=True, blank=True)

    objects = WorkerQuerySet.as_manager()

    class Meta:
        ordering = ["name"]
        constraints = [
            models.CheckConstraint(
                condition=Q(paused=False) | ~Q(paused_reason=""),
                name="worker_pause_needs_reason",
            ),
            models.CheckConstraint(
                condition=Q(max_jobs__isnull=True) | Q(max_jobs__gte=1),
                name="worker_max_jobs_positive",
            ),
        ]

    def __str__(self) -> str:
        return self.name

    def is_online(self, now: datetime | None = None) -> bool:
        return seen_online(self.last_seen, now or timezone.now())

    @property
    def capacity(self) -> int | None:
        """The most jobs the worker runs at once: the smaller limit set, or None (unlimited)."""
        return worker_capacity(self.max_jobs, self.runner_concurrency)


class Label(models.Model):
    """A tag a host carries, such as board:eve or pool:cq; jobs require sets of them."""

    name = models.CharField(max_length=100, unique=True, validators=[label_validator])

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class Host(models.Model):
    """One device under test."""

    hostname = models.CharField(max_length=255, unique=True, validators=[*NAME_VALIDATORS])
    worker = models.ForeignKey(
        Worker, null=True, blank=True, on_delete=models.PROTECT, related_name="hosts"
    )
    labels = models.ManyToManyField(Label, blank=True, related_name="hosts")
    status = models.CharField(
        max_length=20, choices=HostStatus.choices, default=HostStatus.READY, db_index=True
    )
    locked = models.BooleanField(default=False, db_index=True)
    lock_reason = models.CharField(max_length=500, blank=True)
    locked_by = account_link("+")
    locked_at = models.DateTimeField(null=True, blank=True)
    current_build = models.CharField(max_length=200, blank=True)
    # When a runner last reported putting current_build on it (a `start` with a `build`).
    provisioned_at = models.DateTimeField(null=True, blank=True)
    # Failed repairs in a row; at REPAIR_MAX_ATTEMPTS the host goes to repair_failed.
    repair_attempts = models.PositiveSmallIntegerField(default=0, db_default=0)
    repair_not_before = models.DateTimeField(null=True, blank=True)  # the repair backoff
    # A repair_failed host's automatic repair (REPAIR_FAILED_RETRY_SECONDS); null otherwise.
    next_repair_at = models.DateTimeField(null=True, blank=True)
    # Automatic repair rounds given since the host was last repaired or sent to repair by staff;
    # each failed one doubles the wait for the next (jobs.recovery.repair_failed_retry).
    repair_rounds = models.PositiveSmallIntegerField(default=0, db_default=0)
    last_verified_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(auto_now=True)

    objects = HostQuerySet.as_manager()

    class Meta:
        ordering = ["hostname"]
        constraints = [
            models.CheckConstraint(
                condition=Q(locked=False) | ~Q(lock_reason=""), name="host_lock_needs_reason"
            ),
            models.CheckConstraint(
                condition=Q(status__in=HostStatus.values), name="host_status_valid"
            ),
        ]

    def __str__(self) -> str:
        return self.hostname

    @property
    def label_names(self) -> list[str]:
        # A list page reads its hosts' names in one query (hosts.selectors.with_label_names).
        names = self.__dict__.get("listed_label_names")
        if names is not None:
            return list(names)
        return sorted(label.name for label in self.labels.all())


class HostEvent(models.Model):
    """One entry of the audit trail: who did what to a host (or worker), and why."""

    # SET_NULL, not CASCADE: the trail outlives the host or worker it is about, and `subject`
    # still names it once the row is gone.
    host = models.ForeignKey(
        Host, null=True, blank=True, on_delete=models.SET_NULL, related_name="events"
    )
    worker = models.ForeignKey(
        Worker, null=True, blank=True, on_delete=models.SET_NULL, related_name="events"
    )
    subject = models.CharField(max_length=255, blank=True)  # the hostname or worker name then
    kind = models.CharField(max_length=20, choices=EventKind.choices)
    actor = models.CharField(max_length=150)  # a username, or "scheduler"
    # The host's status before and after, on `status` events; blank on the others.
    old_status = models.CharField(max_length=20, choices=HostStatus.choices, blank=True)
    new_status = models.CharField(max_length=20, choices=HostStatus.choices, blank=True)
    message = models.TextField(blank=True)
    lease_id = models.BigIntegerField(null=True, blank=True)
    job_id = models.BigIntegerField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now, db_index=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [
            models.Index(fields=["host", "-created_at"]),
            models.Index(fields=["worker", "-created_at"]),
        ]

    def __str__(self) -> str:
        return f"{self.subject} {self.kind} by {self.actor}"


class Provision(models.Model):
    """One provisioning of a host: a runner putting a build on it before a job, as it reported
    it (docs/scheduling.md#provisioning). The dashboard, `/metrics` and the size estimate's
    provisioning time read these rows; the host's timeline has a `provisioned` event beside
    each."""

    host = models.ForeignKey(
        Host, null=True, blank=True, on_delete=models.SET_NULL, related_name="provisions"
    )
    hostname = models.CharField(max_length=255)  # the host's name then
    # The host's board label then ("board:eve"), "" if it had none: the estimate's median
    # provisioning time is per board.
    board = models.CharField(max_length=100, blank=True)
    build = models.CharField(max_length=200)  # the build put on it
    from_build = models.CharField(max_length=200, blank=True)  # its current_build before
    result = models.CharField(max_length=10, choices=ProvisionResult.choices)
    seconds = models.FloatField(null=True, blank=True)  # how long it took, if the runner said
    lease_id = models.BigIntegerField(null=True, blank=True)
    job_id = models.BigIntegerField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now, db_index=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["board", "result", "-created_at"])]

    def __str__(self) -> str:
        return f"{self.hostname} {self.result} {self.build}"


class HealthPolicy(models.Model):
    """When hosts carrying some labels get a verify job (docs/health.md#health-checks-and-policies).

    A host carrying every label of an enabled policy is due a verify when it was never
    verified, when `every_jobs` test jobs were leased on it since its last verify, or when its
    last verify is `every_hours` old.
    """

    name = models.CharField(max_length=100, unique=True)
    # The label selector, stored as ",a,b," (jobs.models.encode_labels): empty matches all hosts.
    label_key = models.CharField(max_length=1000, blank=True)
    every_jobs = models.PositiveIntegerField(null=True, blank=True)
    every_hours = models.PositiveIntegerField(null=True, blank=True)
    enabled = models.BooleanField(default=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["name"]
        verbose_name_plural = "health policies"
        constraints = [
            models.CheckConstraint(
                condition=Q(every_jobs__isnull=True) | Q(every_jobs__gte=1),
                name="health_policy_every_jobs_positive",
            ),
            models.CheckConstraint(
                condition=Q(every_hours__isnull=True) | Q(every_hours__gte=1),
                name="health_policy_every_hours_positive",
            ),
        ]

    def __str__(self) -> str:
        return self.name

    @property
    def labels(self) -> list[str]:
        return [name for name in self.label_key.split(",") if name]


class PoolTarget(models.Model):
    """A pool the balancer keeps full (docs/health.md#pool-targets).

    When fewer than `min_ready` hosts carrying the `pool` label are in service (ready or
    leased), a ready spare (carrying `spare`, with the same value of each label prefix in
    `same` as a broken member, e.g. the same `board:*`) swaps places with that broken member.
    """

    pool = models.CharField(max_length=100, unique=True, validators=[label_validator])
    spare = models.CharField(max_length=100, validators=[label_validator])
    min_ready = models.PositiveIntegerField()
    # Label prefixes ("board") whose value a spare must share with the member it replaces.
    same = models.JSONField(default=list, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["pool"]
        constraints = [
            models.CheckConstraint(
                condition=~Q(pool=models.F("spare")), name="pool_target_spare_not_pool"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.pool} ≥ {self.min_ready}"
