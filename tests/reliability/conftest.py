"""Fixtures of the reliability tests: subprocesses that are always reaped, a private Redis queue."""

from __future__ import annotations

from tests.reliability.support import processes, redis_queue

__all__ = ["processes", "redis_queue"]
