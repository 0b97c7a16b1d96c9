"""The outbox: what a state move did, written in the move's own transaction, for the apps above.

`jobs/transitions.py` writes an `OutboxEntry` in the transaction of each move an app above jobs
acts on (jobs of suites ending, hosts reaching repair_failed). The entry commits or rolls back
with the move: a process that dies right after the commit loses nothing, and a move undone
leaves no entry. The reader (notifications) is woken after the commit, and its periodic sweep
takes whatever a lost wake-up left (docs/notifications.md#the-outbox).

jobs imports nothing of the apps above it: the reader connects itself here from its `ready()`.
Nobody connected means nothing is written.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db import transaction

from hosts.choices import HostStatus
from jobs.choices import OutboxKind
from jobs.models import Job, OutboxEntry


@dataclass(frozen=True)
class Reader:
    """The app that acts on the outbox's entries."""

    # Called after a transaction that wrote entries commits (robustly: it must not fail).
    wake: Callable[[], None]
    # False when the ended jobs, as the mover read them, concern the reader not at all: no
    # entry then. It may only look at what the mover read (it must not query): the runner's
    # `complete` is counted in statements.
    wants_ended: Callable[[Sequence[Job]], bool] = lambda _jobs: True


_readers: list[Reader] = []

# How long a handled entry is kept (for a look at what was told, then purged by the sweep).
KEEP_HANDLED = timedelta(days=7)


def connect(reader: Reader) -> None:
    """Make `reader` the outbox's reader (idempotent: a second connect replaces the first)."""
    _readers[:] = [reader]


def connected() -> bool:
    return bool(_readers)


def _wake() -> None:
    for reader in _readers:
        reader.wake()


def write(kind: OutboxKind, payload: dict[str, object]) -> OutboxEntry | None:
    """Write an entry in the current transaction; None when no reader is connected."""
    if not _readers:
        return None
    entry = OutboxEntry.objects.create(kind=kind, payload=payload)
    # One wake-up per entry: a move writes one entry however many rows it moves, and a reader
    # woken with nothing left to take finds nothing.
    transaction.on_commit(_wake, robust=True)
    return entry


def jobs_ended(
    suite_ids: Sequence[int], *, status: str, at: datetime, known: Sequence[Job] = ()
) -> None:
    """Jobs of these suites reached the final `status`; `known`, the jobs as the mover read them."""
    if not suite_ids or not _readers:
        return
    if known and not any(reader.wants_ended(known) for reader in _readers):
        return
    write(
        OutboxKind.JOBS_ENDED,
        {"suite_ids": sorted(set(suite_ids)), "status": status, "at": at.isoformat()},
    )


def hosts_repair_failed(host_ids: Sequence[int], *, at: datetime, why: str) -> None:
    """These hosts moved to repair_failed."""
    payload = {"host_ids": list(host_ids), "status": HostStatus.REPAIR_FAILED, "at": at.isoformat()}
    write(OutboxKind.HOSTS_REPAIR_FAILED, {**payload, "why": why})


def purge(*, now: datetime) -> int:
    """Delete the entries handled more than KEEP_HANDLED ago; how many."""
    deleted, _ = OutboxEntry.objects.filter(handled_at__lt=now - KEEP_HANDLED).delete()
    return deleted
