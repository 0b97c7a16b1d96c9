"""Take the jobs outbox's entries and turn each into its events and deliveries, exactly once.

`jobs/transitions.py` writes an `OutboxEntry` in the transaction of every move notifications
acts on (jobs/outbox.py). Here each entry is claimed (`SELECT … FOR UPDATE SKIP LOCKED`: two
takers never hold the same entry, and neither waits for the other), acted on, and marked
handled, all in one transaction: the events and deliveries it makes commit exactly when the
entry is marked. An entry is taken right after its move commits (a django-q2 task) and, should
that task be lost with its process, by the sweep (docs/notifications.md#the-outbox).
"""

from __future__ import annotations

import logging
from datetime import datetime

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from jobs.choices import OutboxKind
from jobs.models import OutboxEntry
from notifications import events

log = logging.getLogger("schedsite.notifications")


def act(entry: OutboxEntry) -> int:
    """Make the events and deliveries one entry calls for; how many events it announced."""
    payload = entry.payload
    if entry.kind == OutboxKind.JOBS_ENDED:
        return events.suites_ended(payload["suite_ids"])
    if entry.kind == OutboxKind.HOSTS_REPAIR_FAILED:
        at = datetime.fromisoformat(payload["at"])
        return events.hosts_repair_failed(
            payload["host_ids"], status=payload["status"], at=at, why=payload["why"]
        )
    if entry.kind == OutboxKind.RESERVATION_LEASED:
        at = datetime.fromisoformat(payload["at"])
        return events.reservation_ready(payload["reservation_id"], at=at)
    log.warning("outbox entry %s has a kind notifications does not know: %s", entry.pk, entry.kind)
    return 0


class _Failed(Exception):
    """Acting on an entry failed; its transaction was rolled back."""

    def __init__(self, entry_id: int) -> None:
        super().__init__(entry_id)
        self.entry_id = entry_id


def _take_one(skip: list[int]) -> OutboxEntry | None:
    """Claim, act on and mark handled the oldest entry nobody else holds; None if none is left."""
    with transaction.atomic():
        entry = (
            OutboxEntry.objects.select_for_update(skip_locked=True)
            .filter(handled_at=None)
            .exclude(pk__in=skip)
            .order_by("id")
            .first()
        )
        if entry is None:
            return None
        try:
            act(entry)
        except Exception as e:
            log.exception("could not act on outbox entry %s (%s)", entry.pk, entry.kind)
            raise _Failed(entry.pk) from e
        OutboxEntry.objects.filter(pk=entry.pk).update(handled_at=timezone.now())
    return entry


def take(*, limit: int | None = None) -> int:
    """Handle unhandled outbox entries, oldest first, each in its own transaction; how many.

    An entry whose handling fails stays unhandled (its transaction rolls back whole) and is
    tried again by the next sweep; this run goes on with the others.
    """
    limit = settings.NOTIFY_SWEEP_BATCH if limit is None else limit
    failed: list[int] = []
    done = 0
    while done < limit:
        try:
            entry = _take_one(failed)
        except _Failed as e:
            failed.append(e.entry_id)
            continue
        if entry is None:
            break
        done += 1
    return done
