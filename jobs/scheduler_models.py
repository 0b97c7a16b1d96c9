"""The scheduler's own rows: its ticks, its state, its settings and their history."""

from __future__ import annotations

from datetime import timedelta

from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.db.models import Q
from django.utils import timezone

from jobs.choices import (
    HostChoice,
    SchedulerOrdering,
)
from jobs.scheduling import planner
from schedsite.model_fields import JSONText
from schedsite.prepared import PreparedQuery


class SchedulerTick(models.Model):
    """One run of the scheduler: timings and counts, for the dashboard and /api/scheduler/."""

    started_at = models.DateTimeField(db_index=True)
    duration_ms = models.FloatField(default=0)
    plan_ms = models.FloatField(default=0)
    query_count = models.PositiveIntegerField(null=True, blank=True)
    jobs_considered = models.PositiveIntegerField(default=0)
    hosts_free = models.PositiveIntegerField(default=0)
    hosts_total = models.PositiveIntegerField(default=0)
    hosts_leased = models.PositiveIntegerField(default=0)  # active leases after the tick
    leases_made = models.PositiveIntegerField(default=0)
    leases_expired = models.PositiveIntegerField(default=0)
    jobs_timed_out = models.PositiveIntegerField(default=0)
    queued_after = models.PositiveIntegerField(default=0)
    oldest_wait_s = models.FloatField(default=0)
    trigger = models.CharField(max_length=50, blank=True)
    # A digest of what the plan depends on that changes with no write (snapshot.lab_changes);
    # empty where the database cannot compute one. A tick that finds no write in the change
    # log and this digest equal to the previous tick's skips the plan: the same input gives
    # the same plan, so the reasons it left (WaitReasonClass) still hold.
    fingerprint = models.CharField(max_length=40, blank=True)
    unchanged = models.BooleanField(default=False)  # skipped the plan: the lab had not changed
    # Hosts the tick holds idle for a multi-host job that cannot start yet
    # (docs/scheduling.md#holds-and-backfill): {"<host id>": <job id>}. The hold lasts until
    # the next tick plans again; an unchanged tick copies it.
    holds = models.JSONField(default=dict, blank=True)
    # The lab's capacity as the tick leaves it, after its leases (hosts_free is before them):
    # hosts a test job could take now, hosts waiting for or running a verify or repair, and
    # hosts whose repairs gave up. Null on ticks recorded before they were counted, so a chart
    # leaves those out instead of drawing a drop to zero.
    hosts_schedulable = models.PositiveIntegerField(null=True, blank=True)
    hosts_in_maintenance = models.PositiveIntegerField(null=True, blank=True)
    hosts_repair_failed = models.PositiveIntegerField(null=True, blank=True)

    class Meta:
        ordering = ["-started_at", "-id"]

    def __str__(self) -> str:
        return f"tick {self.pk} at {self.started_at:%H:%M:%S}"


class WaitReasonClass(models.Model):
    """Why the queued jobs of one class still wait, as the latest tick that planned said.

    One row per class of identical jobs (`planner.class_key`, or `planner.holder_key` for the
    job holding hosts): at 100,000 queued jobs a tick cannot rewrite every job row, and the
    reasons are resolved per class when a page reads them. A tick writes only the classes
    whose reason changed and deletes those no job waits in any more
    (docs/performance.md#the-wait-reason-table); a tick that keeps the previous plan writes
    nothing.
    """

    key = models.TextField(primary_key=True)
    reason = JSONText()  # {"code", "message", "details"}: written whole, read by key

    def __str__(self) -> str:
        return self.key


class SchedulerState(models.Model):
    """A single row that coalesces tick requests: set while a follow-up tick is enqueued."""

    id = models.PositiveSmallIntegerField(primary_key=True, default=1)
    tick_pending = models.BooleanField(default=False)
    requested_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return "scheduler state"


class SchedulerSettings(models.Model):
    """The cluster's scheduler settings: one row, changed by staff (docs/api.md#scheduler-settings).

    Every change goes through jobs.services.update_scheduler_settings, which bumps `version`
    (the compare-and-set a form or a script sends back) and writes a SchedulerSettingsChange.
    """

    id = models.PositiveSmallIntegerField(primary_key=True, default=1)
    # Each help text is the one line the settings page and the API schema show for the field.
    ordering = models.CharField(
        max_length=10,
        choices=SchedulerOrdering.choices,
        default=SchedulerOrdering.FIFO,
        help_text="Within a priority: fifo = submission order; size = shortest expected first; "
        "dynsize = shortest first, with a job's size shrinking the longer it waits "
        "(nothing starves).",
    )
    aging_minutes = models.PositiveIntegerField(
        default=0,
        help_text="A queued job gains one priority level per this many minutes it waits; "
        "0 = no aging.",
    )
    aging_cap = models.PositiveIntegerField(
        default=20,
        validators=[MaxValueValidator(100)],
        help_text="The most priority levels aging may add to a job (0–100).",
    )
    host_choice = models.CharField(
        max_length=10,
        choices=HostChoice.choices,
        default=HostChoice.AFFINITY,
        help_text="Which free host a job gets when several fit: affinity = one with its build "
        "and the fewest extra labels; spread = the one idle longest; pack = hosts of "
        "workers already busy first.",
    )
    default_duration = models.DurationField(
        default=timedelta(minutes=10),
        help_text="How long a job with no estimate and no run history is expected to take "
        "(what size and dynsize order it by).",
    )
    preemption = models.BooleanField(
        default=False,
        help_text="Let a job that cannot otherwise run stop a preemptible job at least "
        "preempt_margin priority levels below it (never maintenance work or reservations).",
    )
    preempt_margin = models.PositiveSmallIntegerField(
        default=20,
        validators=[MinValueValidator(1), MaxValueValidator(100)],
        help_text="How many priority levels higher a job must be to preempt one (1–100).",
    )
    fair_share = models.BooleanField(
        default=False,
        help_text="Among jobs of equal priority, the owner who used fewer host-seconds "
        "recently goes first.",
    )
    fair_share_half_life_hours = models.PositiveIntegerField(
        default=24,
        validators=[MinValueValidator(1), MaxValueValidator(8760)],
        help_text="How fast past use is forgotten for fair share: it counts half after this "
        "many hours (1–8760).",
    )
    same_build_first_minutes = models.PositiveIntegerField(
        default=0,
        validators=[MaxValueValidator(10080)],
        help_text="Within a priority, jobs a free host already carries the build of go before "
        "jobs that would need a reimage, until those have waited this many minutes; "
        "0 = off (0–10080).",
    )
    version = models.PositiveIntegerField(default=0)  # bumped by every change
    updated_at = models.DateTimeField(default=timezone.now)
    updated_by = models.CharField(max_length=150, blank=True)  # a username; "" for the defaults

    class Meta:
        verbose_name_plural = "scheduler settings"
        constraints = [
            models.CheckConstraint(condition=Q(id=1), name="scheduler_settings_one_row"),
            models.CheckConstraint(
                condition=Q(ordering__in=SchedulerOrdering.values),
                name="scheduler_settings_ordering_valid",
            ),
            models.CheckConstraint(
                condition=Q(host_choice__in=HostChoice.values),
                name="scheduler_settings_host_choice_valid",
            ),
            models.CheckConstraint(
                condition=Q(aging_cap__lte=100), name="scheduler_settings_aging_cap_range"
            ),
            models.CheckConstraint(
                condition=Q(default_duration__gt=timedelta(0)),
                name="scheduler_settings_default_duration_positive",
            ),
            models.CheckConstraint(
                condition=Q(preempt_margin__gte=1, preempt_margin__lte=100),
                name="scheduler_settings_preempt_margin_range",
            ),
            models.CheckConstraint(
                condition=Q(
                    fair_share_half_life_hours__gte=1, fair_share_half_life_hours__lte=8760
                ),
                name="scheduler_settings_half_life_range",
            ),
            models.CheckConstraint(
                condition=Q(same_build_first_minutes__lte=10080),
                name="scheduler_settings_same_build_first_range",
            ),
        ]

    def __str__(self) -> str:
        return "scheduler settings"

    @classmethod
    def load(cls) -> SchedulerSettings:
        """The settings row, created with the defaults if there is none yet."""
        found = _SETTINGS_ROW.first()  # every tick that plans reads it: compiled once
        if found is not None:
            return found
        # get_or_create is race-safe here: two first readers both try the INSERT of pk 1, the
        # loser's IntegrityError (in its own savepoint) makes it read the winner's row.
        settings_row, _ = cls.objects.get_or_create(pk=1)
        return settings_row

    def policy(self) -> planner.Policy:
        """The settings as the planner reads them."""
        return planner.Policy(
            ordering=self.ordering,
            aging_minutes=self.aging_minutes,
            aging_cap=self.aging_cap,
            host_choice=self.host_choice,
            default_duration_s=self.default_duration.total_seconds(),
            preemption=self.preemption,
            preempt_margin=self.preempt_margin,
            fair_share=self.fair_share,
            fair_share_half_life_hours=self.fair_share_half_life_hours,
            same_build_first_minutes=self.same_build_first_minutes,
        )


_SETTINGS_ROW = PreparedQuery(lambda: SchedulerSettings.objects.filter(pk=1))


class SchedulerSettingsChange(models.Model):
    """One change of the scheduler settings: who, when, why, and each field's old and new value."""

    at = models.DateTimeField(default=timezone.now, db_index=True)
    actor = models.CharField(max_length=150)
    # {field: [old, new]}, as the API shows the values (default_duration in seconds).
    changes = models.JSONField(default=dict)
    reason = models.TextField(blank=True)
    version = models.PositiveIntegerField(default=0)  # the settings' version after the change

    class Meta:
        ordering = ["-at", "-id"]

    def __str__(self) -> str:
        return f"scheduler settings v{self.version} by {self.actor}"
