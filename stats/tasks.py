"""The django-q2 task that keeps the lab's history (docs/performance.md#lab-history)."""

from __future__ import annotations

from django.utils import timezone

from schedsite.schedules import install_every
from stats.rollup import lab_rollup

SCHEDULE_NAME = "schedsite-lab-rollup"
ROLLUP_FUNC = "stats.tasks.rollup"


def rollup() -> dict:
    """Roll up the minute that just ended (and an hour when one completed); prune old rows."""
    return lab_rollup(now=timezone.now()).as_dict()


def install_schedule(**_kwargs: object) -> None:
    """Install the rollup's schedule, every minute (idempotent across migrations and restarts)."""
    install_every(SCHEDULE_NAME, ROLLUP_FUNC, 1)
