"""Choices for suites, jobs and leases."""

from __future__ import annotations

from django.db import models


class JobStatus(models.TextChoices):
    QUEUED = "queued", "Queued"
    LEASED = "leased", "Leased"
    RUNNING = "running", "Running"
    PASSED = "passed", "Passed"
    FAILED = "failed", "Failed"
    ABORTED = "aborted", "Aborted"
    ERROR = "error", "Error"
    EXPIRED = "expired", "Expired"  # waited in the queue longer than its expires_after
    SKIPPED = "skipped", "Skipped"  # a fan-out job whose host was retired or gave up repairs


ACTIVE_JOB_STATUSES = (JobStatus.LEASED, JobStatus.RUNNING)
TERMINAL_JOB_STATUSES = (
    JobStatus.PASSED,
    JobStatus.FAILED,
    JobStatus.ABORTED,
    JobStatus.ERROR,
    JobStatus.EXPIRED,
    JobStatus.SKIPPED,
)


class JobKind(models.TextChoices):
    """A tester's test, or a maintenance job the scheduler runs on one host (docs/health.md)."""

    TEST = "test", "Test"
    VERIFY = "verify", "Verify"
    REPAIR = "repair", "Repair"


MAINTENANCE_KINDS = (JobKind.VERIFY, JobKind.REPAIR)


class ReservationStatus(models.TextChoices):
    """A tester's reservation request (docs/api.md#reservations): it waits in line for a host,
    holds one (its lease is active), or is over (its lease ended, or it was cancelled waiting)."""

    WAITING = "waiting", "Waiting"
    ACTIVE = "active", "Active"
    ENDED = "ended", "Ended"
    CANCELLED = "cancelled", "Cancelled"


class SuiteStatus(models.TextChoices):
    QUEUED = "queued", "Queued"
    RUNNING = "running", "Running"
    COMPLETED = "completed", "Completed"
    ABORTED = "aborted", "Aborted"


class ReleaseReason(models.TextChoices):
    COMPLETED = "completed", "Completed"
    ABORTED = "aborted", "Aborted"
    EXPIRED = "expired", "Expired"
    RELEASED = "released", "Released"
    TIMEOUT = "timeout", "Timed out"
    PREEMPTED = "preempted", "Preempted"


class Priority(models.IntegerChoices):
    """Named priority levels (Autotest's), higher runs first."""

    WEEKLY = 10, "weekly"
    DAILY = 20, "daily"
    POSTBUILD = 30, "postbuild"
    DEFAULT = 40, "default"
    BUILD = 50, "build"
    PFQ = 60, "pfq"
    CQ = 70, "cq"
    SUPER = 80, "super"


# What a suite or a standalone job runs at when it names no priority.
DEFAULT_PRIORITY: int = Priority.DEFAULT.value
# Level name -> value: the one table the API, the forms, the lab files and the pages read.
PRIORITY_LEVELS: dict[str, int] = {level.label: level.value for level in Priority}


def priority_name(value: int) -> str:
    """The name of the level at `value` ("cq" for 70); "" for a value between levels."""
    try:
        return Priority(value).label
    except ValueError:
        return ""


def parse_priority(value: object) -> int:
    """Read a priority as a person or a file gives it: an integer 0–100 (70, 70.0, "70") or a
    level's name ("cq", " CQ "). The one parser; ValueError says what is wrong."""
    if isinstance(value, bool):
        raise ValueError(f"must be a whole number, got {value!r}")
    if isinstance(value, str):
        text = value.strip().lower()
        if text in PRIORITY_LEVELS:
            return PRIORITY_LEVELS[text]
        # int() alone would accept "²" (then fail) or thousands of digits (then fail).
        if not (text.isascii() and text.isdigit() and len(text) <= 3):
            raise ValueError(f"unknown level {value!r} (use 0–100 or {', '.join(PRIORITY_LEVELS)})")
        value = int(text)
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if not isinstance(value, int):
        raise ValueError(f"must be a whole number, got {value!r}")
    if not 0 <= value <= 100:
        raise ValueError(f"must be from 0 to 100, got {value}")
    return value


class SuiteOrigin(models.TextChoices):
    """How a suite came to be: sent by a tester, dispatched from a template, or by its cron."""

    SUBMITTED = "submitted", "Submitted"
    DISPATCHED = "dispatched", "Dispatched from a template"
    CRON = "cron", "Run by a template's schedule"


class TemplateRunOutcome(models.TextChoices):
    """What one run of a suite template did (docs/scheduling.md#periodic-suites)."""

    CREATED = "created", "Created a suite"
    SKIPPED = "skipped", "Skipped"
    ERROR = "error", "Error"


class SchedulerOrdering(models.TextChoices):
    """How the scheduler orders queued jobs within one priority (planner.ORDERINGS)."""

    FIFO = "fifo", "fifo: submission order"
    SIZE = "size", "size: shortest expected first"
    DYNSIZE = "dynsize", "dynsize: shortest first, shrinking as it waits"


class HostChoice(models.TextChoices):
    """Which free host a leased job gets when several could run it (planner.HOST_CHOICES)."""

    AFFINITY = "affinity", "affinity: same build, fewest labels"
    SPREAD = "spread", "spread: the host idle longest"
    PACK = "pack", "pack: hosts of busy workers first"


class OutboxKind(models.TextChoices):
    """What a state move wrote to the outbox for the apps above jobs (jobs/outbox.py)."""

    # Jobs of suites reached a final status: payload {"suite_ids", "status", "at"}.
    JOBS_ENDED = "jobs_ended", "Jobs of suites ended"
    # Hosts moved to repair_failed: payload {"host_ids", "status", "at", "why"}.
    HOSTS_REPAIR_FAILED = "hosts_repair_failed", "Hosts reached repair_failed"
    # A waiting reservation got its host: payload {"reservation_id", "at"}.
    RESERVATION_LEASED = "reservation_leased", "A waiting reservation got its host"
