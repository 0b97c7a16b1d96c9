"""A service's transaction, retried when the database picks it as a deadlock's victim."""

from __future__ import annotations

import functools
import logging
import random
import time
from collections.abc import Callable
from typing import ParamSpec, TypeVar

from django.db import OperationalError, connection, transaction

from schedsite.errors import Unavailable

log = logging.getLogger("schedsite.db")

# PostgreSQL's SQLSTATEs of a transaction that did nothing wrong and may simply run again:
# deadlock_detected and serialization_failure (psycopg's DeadlockDetected, SerializationFailure).
TRANSIENT_SQLSTATES = frozenset({"40P01", "40001"})
ATTEMPTS = 3
RETRY_AFTER = 1  # seconds: what a client is told when every attempt lost

P = ParamSpec("P")
R = TypeVar("R")


def is_transient(exc: BaseException) -> bool:
    """A deadlock or a serialization failure: the same transaction may succeed if run again."""
    cause = exc.__cause__ if isinstance(exc, OperationalError) else None
    return getattr(cause, "sqlstate", None) in TRANSIENT_SQLSTATES


def atomic_retry(func: Callable[P, R]) -> Callable[P, R]:
    """`transaction.atomic`, run again (up to ATTEMPTS times) after a deadlock or a
    serialization failure; when every attempt lost, `Unavailable` (HTTP 503, Retry-After).

    The whole transaction runs again, so the function must do nothing outside the database
    that it would not repeat (on-commit hooks of a rolled-back attempt are dropped). Inside a
    caller's transaction there is nothing to retry: it is broken whole, and the error goes up
    to whoever opened it.
    """

    @functools.wraps(func)
    def run(*args: P.args, **kwargs: P.kwargs) -> R:
        if connection.in_atomic_block:
            with transaction.atomic():
                return func(*args, **kwargs)
        for attempt in range(1, ATTEMPTS + 1):
            try:
                with transaction.atomic():
                    return func(*args, **kwargs)
            except OperationalError as exc:
                if not is_transient(exc):
                    raise
                if attempt == ATTEMPTS:
                    log.warning("%s lost %d times to a deadlock: %s", func.__name__, attempt, exc)
                    raise Unavailable(
                        "The database was busy with a conflicting change; try again.",
                        retry_after=RETRY_AFTER,
                    ) from exc
                log.info(
                    "%s retried after a deadlock (attempt %d): %s", func.__name__, attempt, exc
                )
                time.sleep(random.uniform(0, 0.05 * 2**attempt))  # noqa: S311 (jitter, not a secret)
        raise AssertionError("unreachable")  # pragma: no cover

    return run
