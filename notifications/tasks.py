"""django-q2 tasks: send a delivery, and the sweep that retries and notices offline workers."""

from __future__ import annotations

from django.conf import settings
from django.utils import timezone

from notifications import delivery, events
from notifications.choices import DeliveryStatus
from notifications.models import Delivery
from notifications.queue import enqueue
from schedsite.schedules import install_every

SWEEP_FUNC = "notifications.tasks.sweep"
SCHEDULE_NAME = "schedsite: notifications sweep"


def deliver(delivery_id: int) -> str:
    """Make one attempt at a delivery (the django-q2 entry point)."""
    return delivery.deliver(delivery_id=delivery_id, now=timezone.now())


def sweep() -> dict:
    """Notice workers gone offline and send the deliveries whose next attempt is due."""
    now = timezone.now()
    offline = events.workers_offline(now=now)
    due = list(
        Delivery.objects.filter(status=DeliveryStatus.PENDING, next_attempt_at__lte=now)
        .order_by("next_attempt_at")
        .values_list("pk", flat=True)[: settings.NOTIFY_SWEEP_BATCH]
    )
    enqueue(due)
    return {"workers_offline": offline, "deliveries_due": len(due)}


def install_schedule(**_kwargs: object) -> None:
    """Install the sweep's schedule once (idempotent across migrations and restarts)."""
    install_every(SCHEDULE_NAME, SWEEP_FUNC, settings.NOTIFY_SWEEP_MINUTES)
