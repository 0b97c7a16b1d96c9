"""Hooks the apps above jobs connect in their `ready()`; jobs imports none of them.

A suite's `notify` (the channels its submitter wants to hear by when it finishes) belongs to
notifications, which connects both signals (docs/notifications.md#per-suite-notify).
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from django.dispatch import Signal

from jobs.models import Suite

# Before a suite is submitted: `user`, `channels`. A receiver refuses the channels by raising
# InvalidInput (a 400), before anything is written.
suite_notify_checked = Signal()

# Inside the transaction that submitted the suite: `suite`, `channels`. A receiver records
# them; one that raises rolls the submission back.
suite_notify_chosen = Signal()


def suite_notify_check(user: Any, channels: Collection[str]) -> None:
    """Let the app that owns `notify` refuse it before the suite is submitted."""
    suite_notify_checked.send(sender=Suite, user=user, channels=channels)


def suite_notify_set(suite: Suite, channels: Collection[str]) -> None:
    """Let the app that owns `notify` record it, in the submission's transaction."""
    suite_notify_chosen.send(sender=Suite, suite=suite, channels=channels)
