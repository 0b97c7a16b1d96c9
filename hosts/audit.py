"""The audit trail of hosts and workers: typed events, written one at a time or in bulk."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.db import connection
from django.utils import timezone

from hosts.models import Host, HostEvent, Worker

Actor = AbstractBaseUser | AnonymousUser | str | None
SCHEDULER = "scheduler"


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
    # One INSERT ... SELECT FROM unnest(arrays): a cold tick writes 10,000 lease events, and
    # bulk_create spends most of a second building and binding one parameter per cell.
    fields = [HostEvent._meta.get_field(name) for name, _ in _BULK_COLUMNS]
    columns = ", ".join(connection.ops.quote_name(field.column) for field in fields)
    arrays = ", ".join(f"%s::{kind}[]" for _, kind in _BULK_COLUMNS)
    table = connection.ops.quote_name(HostEvent._meta.db_table)
    sql = f"INSERT INTO {table} ({columns}) SELECT * FROM unnest({arrays})"
    with connection.cursor() as cursor:
        cursor.execute(sql, [[getattr(e, field.attname) for e in events] for field in fields])
