"""django-q2 tasks: the scheduler tick, and how events ask for one."""

from __future__ import annotations

import logging
import time
from datetime import timedelta

from django.db import transaction
from django.db.models import Q
from django.utils import timezone

log = logging.getLogger("schedsite.scheduler")

SCHEDULE_NAME = "schedsite: scheduler tick"


def tick(trigger: str = "schedule") -> dict:
    """Run one scheduler tick (the django-q2 entry point), riding out a database outage."""
    from django.conf import settings
    from django.db import InterfaceError, OperationalError, connection

    from jobs import services
    from jobs.models import SchedulerState

    # Leave a margin under the task timeout, so that the cluster never kills us mid-tick.
    deadline = time.monotonic() + max(settings.Q_CLUSTER["timeout"] - 15, 5)
    delay = 0.25
    while True:
        try:
            # Clear the flag before planning: a request arriving from now on needs a follow-up
            # tick, because this tick's snapshot may already be too old to see its change.
            SchedulerState.objects.filter(pk=1).update(tick_pending=False)
            # No `now` from here: the tick reads the clock once it holds the planner lock, so a
            # tick that waited behind another one does not act on a stale time.
            return services.scheduler_tick(trigger=trigger).as_dict()
        except (OperationalError, InterfaceError) as exc:
            # The database went away (a restart, a failover, a killed session). The tick
            # rolled back whole, and whoever asked for it still needs it: failing here would
            # leave the request unserved until the next event or the safety-net schedule.
            # Inside a caller's transaction (Q_SYNC) there is nothing to retry: it is broken.
            if connection.in_atomic_block or time.monotonic() + delay > deadline:
                raise
            log.warning("tick hit a database error, retrying in %.2f s: %s", delay, exc)
            connection.close()  # the next attempt opens a fresh connection
            time.sleep(delay)
            delay = min(delay * 2, 4.0)


def request_tick(reason: str) -> None:
    """Ask for a tick once the current transaction commits; requests coalesce into one."""
    transaction.on_commit(lambda: _enqueue(reason))


def _enqueue(reason: str) -> None:
    from django.conf import settings
    from django_q.tasks import async_task

    from jobs.models import SchedulerState

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
        async_task("jobs.tasks.tick", reason[:50], task_name="tick", group="tick")
    except Exception:  # the safety-net schedule will tick anyway; never fail the caller
        SchedulerState.objects.filter(pk=1).update(tick_pending=False)
        log.exception("could not enqueue a tick")


def install_schedule(**_kwargs: object) -> None:
    """Install the periodic safety-net tick once (idempotent across migrations and restarts)."""
    from django.conf import settings
    from django_q.models import Schedule

    Schedule.objects.update_or_create(
        name=SCHEDULE_NAME,
        defaults={
            "func": "jobs.tasks.tick",
            "args": "'schedule'",
            "schedule_type": Schedule.MINUTES,
            "minutes": settings.TICK_INTERVAL_MINUTES,
            "repeats": -1,
        },
    )
