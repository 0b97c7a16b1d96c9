"""The audit trail of hosts and workers: typed events, written one at a time or in bulk."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from functools import cache

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.db import connection
from django.utils import timezone

from hosts.models import Host, HostEvent, Worker
from schedsite.pgarrays import bigint_array, text_array

Actor = AbstractBaseUser | AnonymousUser | str | None
SCHEDULER = "scheduler"
# The pool balancer (jobs.services.balancer): it swaps labels of spares and broken members.
BALANCER = "balancer"


def actor_name(actor: Actor) -> str:
    """Name the actor for the audit trail: a username, or a system actor's name."""
    if actor is None:
        return SCHEDULER
    if isinstance(actor, str):
        return actor
    return actor.get_username() or "anonymous"


def actor_user(actor: Actor) -> AbstractBaseUser | None:
    """Return the actor as a user to store in a foreign key, or None for a system actor."""
    if actor is None or isinstance(actor, str) or not actor.is_authenticated:
        return None
    return actor  # type: ignore[return-value]


def entry(
    kind: str,
    *,
    actor: Actor,
    host: Host | None = None,
    worker: Worker | None = None,
    host_id: int | None = None,
    subject: str = "",
    at: datetime | None = None,
    message: str = "",
    old_status: str = "",
    new_status: str = "",
    job_id: int | None = None,
    lease_id: int | None = None,
) -> HostEvent:
    """Build one unsaved event for `record_many`; `host_id`, `subject` name a host not at hand."""
    if not subject:
        subject = host.hostname if host else worker.name if worker else ""
    return HostEvent(
        **({"host": host} if host else {"host_id": host_id}),
        worker=worker,
        subject=subject,
        kind=kind,
        actor=actor_name(actor),
        old_status=old_status,
        new_status=new_status,
        message=message,
        lease_id=lease_id,
        job_id=job_id,
        created_at=at or timezone.now(),
    )


def record(kind: str, *, actor: Actor, **fields: object) -> HostEvent:
    """Write one event about a host or a worker; `fields` are `entry`'s."""
    event = entry(kind, actor=actor, **fields)  # type: ignore[arg-type]
    event.save()
    return event


# The columns record_many writes, and the PostgreSQL array type each is bound as.
_BULK_COLUMNS = (
    ("host", "bigint"),
    ("worker", "bigint"),
    ("subject", "text"),
    ("kind", "text"),
    ("actor", "text"),
    ("old_status", "text"),
    ("new_status", "text"),
    ("message", "text"),
    ("lease_id", "bigint"),
    ("job_id", "bigint"),
    ("created_at", "timestamptz"),
)


def record_many(events: Sequence[HostEvent]) -> None:
    """Write many events (built with `entry`) in one statement."""
    if not events:
        return
    if connection.vendor != "postgresql":
        HostEvent.objects.bulk_create(events)
        return
    fields = [HostEvent._meta.get_field(name).attname for name, _ in _BULK_COLUMNS]
    _insert_columns([[getattr(e, field) for e in events] for field in fields])


def record_alike(
    kind: str,
    *,
    actor: Actor,
    at: datetime | Sequence[datetime],
    host_ids: Sequence[int],
    subjects: Sequence[str],
    messages: Sequence[str],
    lease_ids: Sequence[int | None],
    job_ids: Sequence[int | None],
) -> None:
    """Write many host events of one kind, by one actor, at one time (a tick's leases), or each
    at its own time (`at` a sequence, one per host).

    The same rows as `record_many` of `entry`s, without building a model instance for each:
    a cold tick writes 10,000 of them, and the instances took 0.2 s.
    """
    n = len(host_ids)
    ats = [at] * n if isinstance(at, datetime) else list(at)
    if connection.vendor != "postgresql":
        record_many(
            [
                entry(
                    kind,
                    actor=actor,
                    host_id=h,
                    subject=s,
                    at=when,
                    message=m,
                    lease_id=lease,
                    job_id=j,
                )
                for h, s, m, lease, j, when in zip(
                    host_ids, subjects, messages, lease_ids, job_ids, ats, strict=True
                )
            ]
        )
        return
    name = actor_name(actor)
    _insert_columns(
        [
            host_ids,
            [None] * n,
            subjects,
            [kind] * n,
            [name] * n,
            [""] * n,
            [""] * n,
            messages,
            lease_ids,
            job_ids,
            ats,
        ]
    )


def _insert_columns(columns: Sequence[Sequence[object]]) -> None:
    """INSERT the events given column by column, in _BULK_COLUMNS' order, in one statement."""
    if not columns[0]:
        return
    params = []
    for (_name, kind), values in zip(_BULK_COLUMNS, columns, strict=True):
        if kind == "bigint":
            params.append(bigint_array(values))  # type: ignore[arg-type]
        elif kind == "timestamptz":
            params.append(text_array(at.isoformat() for at in values))  # type: ignore[union-attr]
        else:
            params.append(text_array(values))  # type: ignore[arg-type]
    with connection.cursor() as cursor:
        cursor.execute(_insert_sql(), params)


@cache
def _insert_sql() -> str:
    """The events' INSERT, written once per process (PostgreSQL's only: the other databases
    take bulk_create): the same text for every runner's start and complete."""
    # One INSERT ... SELECT FROM unnest(arrays): a cold tick writes 10,000 lease events, and
    # bulk_create spends most of a second building and binding one parameter per cell. Each
    # array is bound as one literal (schedsite/pgarrays.py).
    fields = [HostEvent._meta.get_field(name) for name, _ in _BULK_COLUMNS]
    names = ", ".join(connection.ops.quote_name(field.column) for field in fields)
    arrays = ", ".join(f"%s::{kind}[]" for _, kind in _BULK_COLUMNS)
    table = connection.ops.quote_name(HostEvent._meta.db_table)
    return f"INSERT INTO {table} ({names}) SELECT * FROM unnest({arrays})"
