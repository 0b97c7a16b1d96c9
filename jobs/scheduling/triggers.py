"""How events ask for a scheduler tick: one coalesced django-q2 task per burst of requests."""

from __future__ import annotations

import logging
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone
from django_q.tasks import async_task

from jobs.models import SchedulerState

log = logging.getLogger("schedsite.scheduler")

# The django-q2 function a requested tick runs; the safety-net schedule names it too.
TICK_FUNC = "jobs.tasks.tick"


def request_tick(reason: str) -> None:
    """Ask for a tick once the current transaction commits; requests coalesce into one."""
    transaction.on_commit(lambda: _enqueue(reason))


def _enqueue(reason: str) -> None:
    now = timezone.now()
    SchedulerState.objects.get_or_create(pk=1)
    # Compare-and-set: only the request that flips the flag enqueues; the rest ride along.
    claimed = (
        SchedulerState.objects.filter(pk=1)
        .filter(tick_pending=False)
        .update(tick_pending=True, requested_at=now)
    )
    if not claimed:
        # A tick clears the flag as it starts, so a request still pending after a few seconds
        # was lost: the cluster holding it died (a Redis broker drops it; the ORM broker hands
        # it out again only after `retry`, minutes later). Send a tick of our own rather than
        # ride along. One request per window wins the compare-and-set on `requested_at`; a
        # duplicate tick, should the old one turn up after all, changes nothing
        # (docs/deployment.md#what-happens-when-things-fail).
        stale_before = now - timedelta(seconds=settings.TICK_REQUEST_STALE_SECONDS)
        resent = (
            SchedulerState.objects.filter(pk=1, tick_pending=True)
            .filter(Q(requested_at__lt=stale_before) | Q(requested_at__isnull=True))
            .update(requested_at=now)
        )
        if not resent:
            return
    try:
        async_task(TICK_FUNC, reason[:50], task_name="tick", group="tick")
    except Exception:  # the safety-net schedule will tick anyway; never fail the caller
        SchedulerState.objects.filter(pk=1).update(tick_pending=False)
        log.exception("could not enqueue a tick")
