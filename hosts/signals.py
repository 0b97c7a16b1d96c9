"""What the inventory tells the apps above it, which it does not import.

hosts stands below jobs (docs/architecture.md#layers): when a change may let a queued job
start (a host added, unlocked or relabelled, a worker back online), it asks for a scheduler
tick through this signal, and jobs answers it with `request_tick` (jobs/apps.py), once the
change commits.
"""

from __future__ import annotations

from django.dispatch import Signal

# Sent with `reason` (a few words for the tick's log) inside the change's transaction.
tick_wanted_signal = Signal()


def tick_wanted(reason: str) -> None:
    """Ask for a scheduler tick once the current transaction commits."""
    tick_wanted_signal.send(sender=None, reason=reason)
