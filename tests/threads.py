"""Races for the PostgreSQL tests: code run in threads released at the same moment."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TypeVar

from django.db import connections

T = TypeVar("T")


def race(*targets: Callable[[], T]) -> list[T | BaseException]:
    """Run each target in its own thread, all released together; each one's result or error."""
    barrier = threading.Barrier(len(targets))
    results: list[T | BaseException] = [RuntimeError("did not finish")] * len(targets)

    def run(i: int, target: Callable[[], T]) -> None:
        try:
            barrier.wait()
            results[i] = target()
        except BaseException as exc:  # noqa: BLE001 — the test looks at it
            results[i] = exc
        finally:
            connections.close_all()  # a thread's connection would outlive the test database

    threads = [threading.Thread(target=run, args=(i, t)) for i, t in enumerate(targets)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    return results
