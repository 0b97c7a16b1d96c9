"""What the benchmark tests share: counting the queries of one call."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from django.db import connection
from django.test.utils import CaptureQueriesContext

T = TypeVar("T")


def queries(fn: Callable[[], T]) -> tuple[int, T]:
    """How many queries `fn()` ran, and what it returned."""
    with CaptureQueriesContext(connection) as ctx:
        result = fn()
    return len(ctx.captured_queries), result
