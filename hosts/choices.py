"""Choices for the lab inventory."""

from __future__ import annotations

from django.db import models


class HostStatus(models.TextChoices):
    READY = "ready", "Ready"
    NEEDS_VERIFY = "needs_verify", "Needs verify"
    VERIFYING = "verifying", "Verifying"
    NEEDS_REPAIR = "needs_repair", "Needs repair"
    REPAIRING = "repairing", "Repairing"
    REPAIR_FAILED = "repair_failed", "Repair failed"
    RETIRED = "retired", "Retired"


# Statuses in which a host waits for a maintenance job, and those in which one runs on it.
AWAITING_MAINTENANCE = (HostStatus.NEEDS_VERIFY, HostStatus.NEEDS_REPAIR)
IN_MAINTENANCE = (HostStatus.VERIFYING, HostStatus.REPAIRING)


class EventKind(models.TextChoices):
    CREATED = "created", "Created"
    UPDATED = "updated", "Updated"
    DELETED = "deleted", "Deleted"
    STATUS = "status", "Status changed"
    LOCKED = "locked", "Locked"
    UNLOCKED = "unlocked", "Unlocked"
    LEASED = "leased", "Leased"
    STARTED = "started", "Job started"
    COMPLETED = "completed", "Job completed"
    RELEASED = "released", "Released"
    EXPIRED = "expired", "Lease expired"
    TIMED_OUT = "timed_out", "Job timed out"
    RESERVED = "reserved", "Reserved"
    EXTENDED = "extended", "Reservation extended"
    PAUSED = "paused", "Worker paused"
    RESUMED = "resumed", "Worker resumed"
    CAPACITY = "capacity", "Capacity changed"
    RETIRED = "retired", "Retired"
    RETRIED = "retried", "Job retried"
    PREEMPTED = "preempted", "Job preempted"
    PROVISIONED = "provisioned", "Provisioned"


class ProvisionResult(models.TextChoices):
    OK = "ok", "Provisioned"
    FAILED = "failed", "Provisioning failed"
