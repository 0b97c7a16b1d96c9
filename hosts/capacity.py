"""A worker's load as plain values: no Django, so the planner shares it with the inventory."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class WorkerLoad:
    """A worker's capacity: the most jobs it may run at once, and how many it runs now."""

    limit: int | None  # None: unlimited
    running: int = 0  # jobs whose active leases hold its hosts (a multi-host job once)
