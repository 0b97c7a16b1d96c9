"""How events ask for a scheduler tick: one coalesced django-q2 task per burst of requests."""

from __future__ import annotations

import logging
import multiprocessing
import random
import threading
from datetime import datetime, timedelta

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Q
from django.utils import timezone
from django_q.conf import Conf
from django_q.tasks import async_task

from jobs.models import SchedulerState

log = logging.getLogger("schedsite.scheduler")

# The django-q2 function a requested tick runs; the safety-net schedule names it too.
TICK_FUNC = "jobs.tasks.tick"
# The PostgreSQL advisory lock a tick holds (jobs.scheduling.tick): one planner at a time. Any
# constant works as long as every process uses the same one; the watcher below reads it too.
TICK_LOCK_KEY = 0x5C4ED517E


def request_tick(reason: str) -> None:
    """Ask for a tick once the current transaction commits; requests coalesce into one."""
    transaction.on_commit(lambda: _enqueue(reason))


def on_tick_wanted(*, reason: str, **_kwargs: object) -> None:
    """hosts.signals.tick_wanted: the inventory, which does not import jobs, asks for a tick."""
    request_tick(reason)


# A worker starting takes over a request older than this: a cluster's workers all start within
# it, and ask for one tick between them.
STARTING_STALE_SECONDS = 1


def on_worker_started(**_kwargs: object) -> None:
    """django-q2's `post_spawn`, in each task worker as it starts: ask for a tick at once.

    The cluster may be starting after one died mid-tick, its request lost with it and the flag
    still saying a tick is on its way: a request older than a second is taken over, so the
    first lease is made in seconds, not at the safety net's next minute. A tick that turns out
    to be a duplicate changes nothing. Never fails the worker's start (the safety net stays).
    With `Q_SYNC` no cluster starts: each task runs in a worker made for it alone, here.
    """
    if Conf.SYNC:
        return
    try:
        _enqueue("cluster started", stale_seconds=STARTING_STALE_SECONDS)
    except Exception:
        log.exception("could not ask for a tick as the cluster started")


def resend_lost_request(now: datetime | None = None) -> bool:
    """Send a tick request again if it was lost: pending longer than TICK_REQUEST_STALE_SECONDS
    while no tick runs. True if this call sent it.

    A request is lost when the cluster that took it was killed before its tick started or
    committed: the flag still says a tick is on its way, so every later request would ride
    along. A request merely waiting behind a running tick is not lost; it is left alone.
    """
    now = now or timezone.now()
    stale_before = now - timedelta(seconds=settings.TICK_REQUEST_STALE_SECONDS)
    pending = SchedulerState.objects.filter(pk=1, tick_pending=True, requested_at__lt=stale_before)
    if not pending.exists() or tick_running():
        return False
    # The compare-and-set on requested_at: of all the clusters' watchers, one sends it.
    return _enqueue("lost tick request")


def tick_running() -> bool:
    """A tick holds the planner's lock now (PostgreSQL; elsewhere ticks are not watched)."""
    if connection.vendor != "postgresql":
        return False
    with connection.cursor() as cursor:
        cursor.execute(
            # pg_locks lists every database's locks: an advisory key is this database's only.
            "SELECT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND granted "
            "AND database = (SELECT oid FROM pg_database WHERE datname = current_database()) "
            "AND classid = %s AND objid = %s AND objsubid = 1)",
            [TICK_LOCK_KEY >> 32, TICK_LOCK_KEY & 0xFFFFFFFF],
        )
        return bool(cursor.fetchone()[0])


_watcher: threading.Thread | None = None


def watch_lost_requests(**_kwargs: object) -> None:
    """django-q2's `post_spawn`: in a cluster's task worker, check for a lost tick request
    every few seconds.

    A surviving cluster is otherwise told of a request lost by another one only by the next
    request, or by the safety net up to a minute later: an idle lab would wait that long
    (docs/scheduling.md#triggers). One thread per task worker, with its own database
    connection, and one small query per check; a no-op with `Q_SYNC` and outside a cluster's
    worker process (a test sending post_spawn itself).
    """
    global _watcher
    if Conf.SYNC or multiprocessing.parent_process() is None:
        return
    if _watcher is not None and _watcher.is_alive():
        return
    _watcher = threading.Thread(target=_watch, name="tick-request-watcher", daemon=True)
    _watcher.start()


def _watch() -> None:
    period = max(0.5, settings.TICK_REQUEST_STALE_SECONDS / 4)
    while True:
        # Spread over the period: a cluster's workers started together need not check together.
        threading.Event().wait(period * random.uniform(0.75, 1.25))
        try:
            resend_lost_request()
        except Exception:  # the database may be away: a fresh connection next time
            log.warning("could not check for a lost tick request", exc_info=True)
            connection.close()


def _enqueue(reason: str, *, stale_seconds: int | None = None) -> bool:
    if not _claim_request(timezone.now(), stale_seconds=stale_seconds):
        return False
    try:
        async_task(TICK_FUNC, reason[:50], task_name="tick", group="tick")
    except Exception:  # the safety-net schedule will tick anyway; never fail the caller
        SchedulerState.objects.filter(pk=1).update(tick_pending=False)
        log.exception("could not enqueue a tick")
        return False
    return True


def _claim_request(now: datetime, *, stale_seconds: int | None = None) -> bool:
    """Flag a tick as requested; True if this request should enqueue it.

    Compare-and-set: only the request that flips the flag enqueues; the rest ride along. A tick
    clears the flag as it starts, so a request still pending after a few seconds was lost: the
    cluster holding it died (a Redis broker drops it; the ORM broker hands it out again only
    after `retry`, minutes later). Then a request sends a tick of its own rather than ride
    along; one request per window wins the compare-and-set on `requested_at`, and a duplicate
    tick, should the old one turn up after all, changes nothing
    (docs/deployment.md#what-happens-when-things-fail).
    """
    if stale_seconds is None:
        stale_seconds = settings.TICK_REQUEST_STALE_SECONDS
    stale_before = now - timedelta(seconds=stale_seconds)
    if connection.vendor == "postgresql":
        # Every finished job asks for a tick: one statement, the row created if missing.
        table = connection.ops.quote_name(SchedulerState._meta.db_table)
        with connection.cursor() as cursor:
            cursor.execute(
                f"INSERT INTO {table} (id, tick_pending, requested_at) VALUES (1, true, %s) "
                "ON CONFLICT (id) DO UPDATE SET tick_pending = true, requested_at = %s "
                f"WHERE NOT {table}.tick_pending OR {table}.requested_at IS NULL "
                f"OR {table}.requested_at < %s RETURNING id",
                [now, now, stale_before],
            )
            return cursor.fetchone() is not None
    SchedulerState.objects.get_or_create(pk=1)
    due = Q(tick_pending=False) | Q(requested_at__isnull=True) | Q(requested_at__lt=stale_before)
    return bool(
        SchedulerState.objects.filter(due, pk=1).update(tick_pending=True, requested_at=now)
    )
