"""Choices for the lab inventory."""

from __future__ import annotations

from django.db import models


class HostStatus(models.TextChoices):
    READY = "ready", "Ready"
    NEEDS_REPAIR = "needs_repair", "Needs repair"
    REPAIRING = "repairing", "Repairing"
    REPAIR_FAILED = "repair_failed", "Repair failed"


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
