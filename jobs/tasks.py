"""django-q2 tasks: the scheduler tick and its safety-net schedule, and periodic suites."""

from __future__ import annotations

import logging
import time

from django.conf import settings
from django.db import InterfaceError, OperationalError, connection
from django.utils import timezone
from django_q.conf import Conf

from jobs import suite_templates
from jobs.models import SchedulerState, SchedulerTick
from jobs.scheduling.tick import scheduler_tick
from jobs.scheduling.triggers import TICK_FUNC, tick_running
from jobs.services.balancer import pools_balance
from schedsite.schedules import install_every

log = logging.getLogger("schedsite.scheduler")

SCHEDULE_NAME = "schedsite: scheduler tick"
BALANCE_SCHEDULE = "schedsite: pool balancer"
BALANCE_FUNC = "jobs.tasks.balance_pools"


def tick(trigger: str = "schedule") -> dict:
    """Run one scheduler tick (the django-q2 entry point), riding out a database outage."""
    # Leave a margin under the task timeout, so that the cluster never kills us mid-tick.
    deadline = time.monotonic() + max(settings.Q_CLUSTER["timeout"] - 15, 5)
    delay = 0.25
    _pace()
    while True:
        try:
            # Clear the flag before planning: a request arriving from now on needs a follow-up
            # tick, because this tick's snapshot may already be too old to see its change.
            SchedulerState.objects.filter(pk=1).update(tick_pending=False)
            # No `now` from here: the tick reads the clock once it holds the planner lock, so a
            # tick that waited behind another one does not act on a stale time.
            summary = scheduler_tick(trigger=trigger).as_dict()
            break
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
    # After the tick, in its own transactions: a host that broke in it (or since) is swapped
    # out of its pool at once, not at the balancer's next periodic run.
    _balance_after_tick()
    return summary


def _pace() -> None:
    """Start no sooner than TICK_MIN_GAP_MS after the last tick ended, the flag still set.

    A busy lab asks for a tick with every job that completes: tens a second. Requests coalesce
    on the flag, which a tick clears as it starts; waiting here first, for a running tick to
    end and then for the gap, lets every request of the meantime ride along on this one. So
    ticks run at most one per tick-and-gap, and the scheduler's share of the CPU stays at most
    tick / (tick + gap) however many requests come (docs/scheduling.md#triggers). Not inside a
    caller's transaction nor with Q_SYNC (the tick runs inline); never past the task's time.
    """
    gap = settings.TICK_MIN_GAP_MS / 1000
    if gap <= 0 or Conf.SYNC or connection.in_atomic_block:
        return
    deadline = time.monotonic() + max(settings.Q_CLUSTER["timeout"] / 4, gap)
    try:
        while tick_running() and time.monotonic() < deadline:
            time.sleep(0.02)
        last = SchedulerTick.objects.order_by("-id").values_list("started_at", "duration_ms")
        ended = last.first()
    except (OperationalError, InterfaceError):
        return  # the tick's own retries deal with the database
    if ended is not None:
        since = (timezone.now() - ended[0]).total_seconds() - ended[1] / 1000
        wait = min(gap - since, gap, deadline - time.monotonic())
        if wait > 0:
            time.sleep(wait)


def _balance_after_tick() -> None:
    try:
        pools_balance()
    except (OperationalError, InterfaceError) as exc:
        # The tick is done; the periodic run (and the next tick) balances again.
        log.warning("pool balancer after the tick hit a database error: %s", exc)


def balance_pools() -> dict:
    """Fill the pools short of their targets (the balancer's periodic django-q2 entry point)."""
    result = pools_balance()
    for warning in result.warnings:
        log.warning("pool balancer: %s", warning)
    return result.as_dict()


def analyze_jobs() -> None:
    """Refresh PostgreSQL's statistics of the job table (after a tick that filled the lab)."""
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE jobs_job")


def install_schedule(**_kwargs: object) -> None:
    """Install the periodic safety-net tick once (idempotent across migrations and restarts)."""
    install_every(SCHEDULE_NAME, TICK_FUNC, settings.TICK_INTERVAL_MINUTES, args="'schedule'")
    install_every(BALANCE_SCHEDULE, BALANCE_FUNC, settings.POOL_BALANCE_MINUTES)


def run_template(template_id: int, slot: str | None = None) -> dict:
    """Run a suite template for the cron slot its django-q2 schedule fired for."""
    run = suite_templates.template_run(template_id=template_id, slot=slot)
    if run is None:
        return {"template": template_id, "outcome": "gone"}
    return {
        "template": template_id,
        "slot": run.slot.isoformat() if run.slot else None,
        "outcome": run.outcome,
        "suite": run.suite_id,
        "reason": run.reason,
    }
