"""Choices for notification events, channels and deliveries."""

from __future__ import annotations

from django.db import models


class EventKind(models.TextChoices):
    SUITE_FINISHED = "suite_finished", "Suite finished"
    HOST_REPAIR_FAILED = "host_repair_failed", "Host reached repair_failed"
    WORKER_OFFLINE = "worker_offline", "Worker went offline"
    RESERVATION_READY = "reservation_ready", "My waiting reservation got its host"


# Events only lab staff may subscribe to; testers hear about their own suites.
STAFF_EVENTS = (EventKind.HOST_REPAIR_FAILED, EventKind.WORKER_OFFLINE)


class Channel(models.TextChoices):
    EMAIL = "email", "E-mail"
    WEBHOOK = "webhook", "Webhook"


class DeliveryStatus(models.TextChoices):
    PENDING = "pending", "Pending"
    SENT = "sent", "Sent"
    FAILED = "failed", "Failed"
