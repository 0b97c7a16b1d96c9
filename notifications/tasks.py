"""django-q2 tasks: take the outbox, send a delivery, and the sweep that retries them all."""

from __future__ import annotations

from django.conf import settings
from django.utils import timezone

from jobs import outbox as jobs_outbox
from notifications import delivery, events, outbox
from notifications.choices import DeliveryStatus
from notifications.models import Delivery
from notifications.queue import enqueue
from schedsite.schedules import install_every

SWEEP_FUNC = "notifications.tasks.sweep"
SCHEDULE_NAME = "schedsite: notifications sweep"


def deliver(delivery_id: int) -> str:
    """Make one attempt at a delivery (the django-q2 entry point)."""
    return delivery.deliver(delivery_id=delivery_id, now=timezone.now())


def take_outbox() -> int:
    """Turn the jobs outbox's unhandled entries into events and deliveries (after a commit)."""
    return outbox.take()


def sweep() -> dict:
    """Take the outbox's leftovers, notice workers gone offline, send the deliveries due."""
    taken = outbox.take()
    now = timezone.now()
    jobs_outbox.purge(now=now)
    offline = events.workers_offline(now=now)
    due = list(
        Delivery.objects.filter(status=DeliveryStatus.PENDING, next_attempt_at__lte=now)
        .order_by("next_attempt_at")
        .values_list("pk", flat=True)[: settings.NOTIFY_SWEEP_BATCH]
    )
    enqueue(due)
    return {"outbox": taken, "workers_offline": offline, "deliveries_due": len(due)}


def install_schedule(**_kwargs: object) -> None:
    """Install the sweep's schedule once (idempotent across migrations and restarts)."""
    install_every(SCHEDULE_NAME, SWEEP_FUNC, settings.NOTIFY_SWEEP_MINUTES)
