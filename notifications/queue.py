"""Hand deliveries to the django-q2 cluster."""

from __future__ import annotations

import logging
from collections.abc import Iterable

from django_q.tasks import async_task

log = logging.getLogger("schedsite.notifications")

DELIVER_FUNC = "notifications.tasks.deliver"
OUTBOX_FUNC = "notifications.tasks.take_outbox"


def enqueue(delivery_ids: Iterable[int]) -> None:
    """Send each delivery from a django-q2 task; one lost is picked up by the sweep."""
    for pk in delivery_ids:
        try:
            async_task(DELIVER_FUNC, pk, task_name=f"notify {pk}", group="notify")
        except Exception:  # the sweep sends it at its next run; never fail the caller
            log.exception("could not enqueue delivery %s", pk)


def wake_outbox() -> None:
    """Take the outbox's new entries in a django-q2 task; one lost is left for the sweep."""
    try:
        async_task(OUTBOX_FUNC, task_name="notify outbox", group="notify")
    except Exception:  # the sweep takes the entries at its next run; never fail the caller
        log.exception("could not enqueue the outbox's taking")
