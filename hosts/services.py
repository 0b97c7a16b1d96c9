"""State changes of workers and hosts; each is atomic, compare-and-set, and audited.

A host's status moves, and its retirement, are jobs.services.hosts': the host state machine is
jobs.transitions'. A change that may let queued jobs start asks for a tick (hosts.signals).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import TypeVar

from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser, Group
from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from hosts import audit
from hosts.audit import Actor, actor_user
from hosts.choices import EventKind, HostStatus
from hosts.models import HealthPolicy, Host, Label, Worker
from hosts.signals import tick_wanted
from hosts.validators import label_validator, name_validator, policy_name_validator
from schedsite.errors import Conflict, InvalidInput, ServiceError
from schedsite.field_changes import (
    apply_changes,
    fields_known,
    locked_or_conflict,
    name_clean,
)
from schedsite.prepared import update_one
from schedsite.roles import RUNNER_GROUP

HostOrWorker = TypeVar("HostOrWorker", Host, Worker)


def _validate(validator, value: str, field: str) -> None:  # noqa: ANN001
    try:
        validator(value)
    except ValidationError as exc:
        raise InvalidInput(f"{field} {value!r}: {exc.messages[0]}", field=field) from exc


REASON_MAX = 500


def reason_clean(reason: str | None, *, what: str, required: bool = True) -> str:
    """Return the stripped reason, or raise InvalidInput if it is missing or too long."""
    text = (reason or "").strip()
    if required and not text:
        raise InvalidInput(f"a reason is required to {what}", field="reason")
    if len(text) > REASON_MAX:
        # Refuse rather than cut: a truncated reason in the audit trail misleads whoever reads it.
        raise InvalidInput(
            f"the reason is {len(text)} characters long; at most {REASON_MAX}", field="reason"
        )
    return text


def labels_validate(names: Iterable[str], field: str = "labels") -> list[str]:
    """Return the distinct label names, sorted, or raise InvalidInput naming the bad one."""
    if isinstance(names, str):
        raise InvalidInput("labels must be a list of names", field=field)
    wanted = sorted({str(n).strip() for n in names if n and str(n).strip()})
    for name in wanted:
        if len(name) > 100:
            raise InvalidInput(f"label {name[:40]!r}…: at most 100 characters", field=field)
        _validate(label_validator, name, field)
    return wanted


def labels_get_or_create(names: Iterable[str]) -> list[Label]:
    """Return Label rows for the names, creating the missing ones."""
    wanted = labels_validate(names)
    existing = {lbl.name: lbl for lbl in Label.objects.filter(name__in=wanted)}
    missing = [Label(name=n) for n in wanted if n not in existing]
    if missing:
        Label.objects.bulk_create(missing, ignore_conflicts=True)
        existing = {lbl.name: lbl for lbl in Label.objects.filter(name__in=wanted)}
    return [existing[n] for n in wanted]


# --- holds: a host's lock and a worker's pause ------------------------------------------------


@dataclass(frozen=True)
class Hold:
    """A flag that keeps a host or a worker out of scheduling, with why, by whom and since when."""

    model: type[Host] | type[Worker]
    noun: str  # "host" or "worker": the HostEvent field that names it, and the messages' word
    name: str  # the field people know it by
    flag: str
    reason: str
    by: str
    at: str
    set_kind: EventKind
    clear_kind: EventKind
    set_word: str  # "locked": "host h1 is already locked"
    clear_word: str  # "unlocked": the tick request's reason


LOCK = Hold(
    Host, "host", "hostname", "locked", "lock_reason", "locked_by", "locked_at",
    EventKind.LOCKED, EventKind.UNLOCKED, "locked", "unlocked",
)  # fmt: skip
PAUSE = Hold(
    Worker, "worker", "name", "paused", "paused_reason", "paused_by", "paused_at",
    EventKind.PAUSED, EventKind.RESUMED, "paused", "resumed",
)  # fmt: skip


@transaction.atomic
def _hold_set(hold: Hold, obj: HostOrWorker, *, by: Actor, reason: str) -> HostOrWorker:
    """Set the hold (compare-and-set: a second lock or pause is refused) and audit it."""
    now = timezone.now()
    changed = hold.model.objects.filter(pk=obj.pk, **{hold.flag: False}).update(
        **{hold.flag: True, hold.reason: reason, hold.by: actor_user(by), hold.at: now}
    )
    if not changed:
        raise Conflict(f"{hold.noun} {getattr(obj, hold.name)} is already {hold.set_word}")
    audit.record(hold.set_kind, actor=by, message=reason, at=now, **{hold.noun: obj})
    obj.refresh_from_db()
    return obj


@transaction.atomic
def _hold_clear(hold: Hold, obj: HostOrWorker, *, by: Actor) -> HostOrWorker:
    """Clear the hold (refused if it is not set), audit it, and ask for a tick."""
    changed = hold.model.objects.filter(pk=obj.pk, **{hold.flag: True}).update(
        **{hold.flag: False, hold.reason: "", hold.by: None, hold.at: None}
    )
    if not changed:
        raise Conflict(f"{hold.noun} {getattr(obj, hold.name)} is not {hold.set_word}")
    audit.record(hold.clear_kind, actor=by, **{hold.noun: obj})
    tick_wanted(f"{hold.noun} {hold.clear_word}")
    obj.refresh_from_db()
    return obj


# --- workers --------------------------------------------------------------------------------


def _worker_name_check(name: str, *, renaming: Worker | None = None) -> None:
    _validate(name_validator, name, "name")
    if len(name) > 100:
        raise InvalidInput("name: at most 100 characters", field="name")
    others = Worker.objects.exclude(pk=renaming.pk) if renaming else Worker.objects.all()
    if others.filter(name=name).exists():
        raise Conflict(f"worker {name} already exists", field="name")


# The most jobs a worker may be set to run at once, and the most a runner may report: a
# worker drives hundreds of hosts, not more.
CAPACITY_MOST = 100_000


def max_jobs_clean(value: object) -> int | None:
    """A worker's max_jobs as given, or None (unlimited); InvalidInput unless 1 to CAPACITY_MOST."""
    if value is None:
        return None
    # bool is an int to Python; True is not a number of jobs anyone meant.
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= CAPACITY_MOST:
        raise InvalidInput(
            f"max jobs: a whole number from 1 to {CAPACITY_MOST}, or empty for unlimited",
            field="max_jobs",
        )
    return value


def _limit_text(value: int | None) -> str:
    return "unlimited" if value is None else str(value)


def _capacity_rose(old: int | None, new: int | None) -> bool:
    return old is not None and (new is None or new > old)


@transaction.atomic
def worker_create(
    *, name: str, by: Actor, paused: bool = False, reason: str = "", max_jobs: int | None = None
) -> Worker:
    """Add a lab server."""
    _worker_name_check(name)
    max_jobs = max_jobs_clean(max_jobs)
    reason = reason_clean(reason, what="pause a worker", required=False) if paused else ""
    if paused and not reason:
        reason = "paused when created"
    worker = Worker.objects.create(
        name=name,
        paused=paused,
        paused_reason=reason,
        paused_by=actor_user(by) if paused else None,
        paused_at=timezone.now() if paused else None,
        max_jobs=max_jobs,
    )
    limit = f"; max jobs {max_jobs}" if max_jobs is not None else ""
    audit.record(EventKind.CREATED, actor=by, worker=worker, message=f"worker {name} added{limit}")
    return worker


def worker_pause(*, worker: Worker, by: Actor, reason: str) -> Worker:
    """Stop new leases on the worker's hosts; running leases continue."""
    return _hold_set(PAUSE, worker, by=by, reason=reason_clean(reason, what="pause a worker"))


def worker_resume(*, worker: Worker, by: Actor) -> Worker:
    """Let the worker's hosts take new leases again."""
    return _hold_clear(PAUSE, worker, by=by)


def worker_heartbeat(
    *, worker: Worker, at: datetime | None = None, concurrency: int | None = None
) -> Worker:
    """Mark the worker seen and store the concurrency its runner reports, if it changed.

    A worker coming back online makes its hosts schedulable, and so does a runner restarted
    with a higher --concurrency.
    """
    if worker.retired_at is not None:
        # A runner still running on a retired worker would look alive on the dashboard.
        raise Conflict(f"worker {worker.name} is retired; stop its runner or add a new worker")
    at = at or timezone.now()
    was_online = worker.is_online(at)
    old_capacity, old_concurrency = worker.capacity, worker.runner_concurrency
    changes: dict[str, object] = {"last_seen": at}
    if concurrency is not None and concurrency != old_concurrency:
        # In the UPDATE of last_seen that every heartbeat makes: a report costs no query.
        changes["runner_concurrency"] = concurrency
    update_one("worker", Worker.objects.all, worker.pk, changes)  # compiled once: every heartbeat
    for field, value in changes.items():
        setattr(worker, field, value)
    if "runner_concurrency" in changes:
        # One INSERT, no transaction of its own: a heartbeat stays within its query budget.
        audit.record(
            EventKind.CAPACITY,
            actor=worker.name,
            worker=worker,
            message=f"runner concurrency {old_concurrency or '(none)'} → {concurrency}",
            at=at,
        )
        if was_online and _capacity_rose(old_capacity, worker.capacity):
            tick_wanted("worker capacity raised")  # the UPDATE above is committed already
    if not was_online:
        with transaction.atomic():
            audit.record(
                EventKind.UPDATED,
                actor=worker.name,
                worker=worker,
                message="worker online",
                at=at,
            )
            tick_wanted("worker online")
    return worker


def worker_has_history(worker: Worker) -> bool:
    """Whether retired hosts or events name the worker: then it is retired, not deleted."""
    return worker.hosts.exists() or worker.events.exclude(kind=EventKind.CREATED).exists()


@transaction.atomic
def worker_delete(*, worker: Worker, by: Actor) -> Worker | None:
    """Remove a worker, or retire it once it has history; return it when it was retired."""
    worker = Worker.objects.select_for_update().get(pk=worker.pk)
    if worker.retired_at is not None:
        raise Conflict(f"worker {worker.name} is retired already")
    if Host.objects.filter(worker=worker).exclude(status=HostStatus.RETIRED).exists():
        raise Conflict(f"worker {worker.name} still has hosts; retire or move its hosts first")
    if worker_has_history(worker):
        # Its events and its retired hosts still name it: keep the row, out of service.
        Worker.objects.filter(pk=worker.pk).update(retired_at=timezone.now())
        audit.record(
            EventKind.RETIRED, actor=by, worker=worker, message=f"worker {worker.name} retired"
        )
        worker.refresh_from_db()
        return worker
    audit.record(
        EventKind.DELETED, actor=by, worker=worker, message=f"worker {worker.name} deleted"
    )
    worker.delete()
    return None


# --- hosts ----------------------------------------------------------------------------------


def check_status(status: str) -> None:
    if status not in HostStatus.values:
        raise InvalidInput(
            f"status {status!r} is not one of {', '.join(HostStatus.values)}", field="status"
        )


@transaction.atomic
def host_create(
    *,
    hostname: str,
    by: Actor,
    worker: Worker | None = None,
    labels: Iterable[str] = (),
    status: str = HostStatus.READY,
    current_build: str = "",
) -> Host:
    """Add a host to the inventory."""
    _validate(name_validator, hostname, "hostname")
    if len(hostname) > 255:
        raise InvalidInput("hostname: at most 255 characters", field="hostname")
    check_status(status)
    if Host.objects.filter(hostname=hostname).exists():
        raise Conflict(f"host {hostname} already exists", field="hostname")
    host = Host.objects.create(
        hostname=hostname, worker=worker, status=status, current_build=current_build[:200]
    )
    host.labels.set(labels_get_or_create(labels))
    audit.record(
        EventKind.CREATED,
        actor=by,
        host=host,
        message=f"labels: {', '.join(host.label_names) or '(none)'}",
    )
    if status == HostStatus.READY:
        tick_wanted("host added")
    return host


_UNSET = object()


@transaction.atomic
def host_update(
    *,
    host: Host,
    by: Actor,
    labels: Iterable[str] | None = None,
    worker: Worker | None | object = _UNSET,
    current_build: str | None = None,
) -> Host:
    """Change a host's labels, worker or build; each change is audited.

    Its status moves through the host state machine: jobs.services.host_update does both.
    """
    host = Host.objects.select_for_update().get(pk=host.pk)
    changes: list[str] = []
    if labels is not None:
        new = labels_get_or_create(labels)
        old = host.label_names
        if sorted(lbl.name for lbl in new) != old:
            host.labels.set(new)
            changes.append(
                f"labels {', '.join(old) or '(none)'} → "
                f"{', '.join(lbl.name for lbl in new) or '(none)'}"
            )
    if worker is not _UNSET and worker != host.worker:
        old_name = host.worker.name if host.worker else "(none)"
        host.worker = worker  # type: ignore[assignment]
        changes.append(f"worker {old_name} → {worker.name if worker else '(none)'}")  # type: ignore[union-attr]
    if current_build is not None and current_build != host.current_build:
        changes.append(f"build {host.current_build or '(none)'} → {current_build or '(none)'}")
        host.current_build = current_build[:200]
    if changes:
        # Not the status: that moves only through the host state machine (jobs.transitions).
        host.save(update_fields=["worker", "current_build", "updated_at"])
        audit.record(EventKind.UPDATED, actor=by, host=host, message="; ".join(changes))
        tick_wanted("host updated")
    return host


def host_lock(*, host: Host, by: Actor, reason: str) -> Host:
    """Take a host out of scheduling for debugging; a reason is required."""
    return _hold_set(LOCK, host, by=by, reason=reason_clean(reason, what="lock a host"))


def host_unlock(*, host: Host, by: Actor) -> Host:
    """Return a locked host to scheduling."""
    return _hold_clear(LOCK, host, by=by)


def host_has_history(host: Host) -> bool:
    """Whether anything but its creation happened to the host: then it is retired, not deleted."""
    return (
        host.leases.exists()
        or host.pinned_jobs.exists()
        or host.events.exclude(kind=EventKind.CREATED).exists()
    )


# --- renaming workers and their runner accounts ---------------------------------------------


@transaction.atomic
def worker_update(
    *,
    worker: Worker,
    by: Actor,
    name: str | None = None,
    runner: AbstractBaseUser | None | object = _UNSET,
    max_jobs: int | None | object = _UNSET,
) -> Worker:
    """Rename a worker, change its runner account or its max jobs; each change is audited."""
    worker = Worker.objects.select_for_update().get(pk=worker.pk)
    if max_jobs is not _UNSET:
        max_jobs = max_jobs_clean(max_jobs)
    changes: list[str] = []
    if name is not None and name != worker.name:
        _worker_name_check(name, renaming=worker)
        changes.append(f"renamed {worker.name} → {name}")
        worker.name = name
    if runner is not _UNSET and getattr(runner, "pk", None) != worker.runner_id:
        old = worker.runner.get_username() if worker.runner else "(none)"
        new = runner.get_username() if runner is not None else "(none)"  # type: ignore[union-attr]
        worker.runner = runner  # type: ignore[assignment]
        changes.append(f"runner {old} → {new}")
    old_capacity, old_max_jobs = worker.capacity, worker.max_jobs
    if max_jobs is not _UNSET and max_jobs != old_max_jobs:
        worker.max_jobs = max_jobs  # type: ignore[assignment]
    if changes or worker.max_jobs != old_max_jobs:
        worker.save()
    if changes:
        audit.record(EventKind.UPDATED, actor=by, worker=worker, message="; ".join(changes))
    if worker.max_jobs != old_max_jobs:
        message = f"max jobs {_limit_text(old_max_jobs)} → {_limit_text(worker.max_jobs)}"
        audit.record(EventKind.CAPACITY, actor=by, worker=worker, message=message)
        if _capacity_rose(old_capacity, worker.capacity):
            tick_wanted("worker capacity raised")
    return worker


@transaction.atomic
def worker_runner_ensure(
    *, worker_name: str, by: Actor, username: str | None = None
) -> tuple[Worker, AbstractBaseUser]:
    """Get or create a worker's runner account (group runners) and link it to the worker."""
    User = get_user_model()
    username = f"runner-{worker_name}" if username is None else username.strip()
    if not username:
        raise InvalidInput("a runner account needs a username", field="username")
    # get_or_create runs no validators: check the name as a form would, so a bad one is refused
    # rather than stored (SQLite) or failed on by the database (PostgreSQL).
    for validator in User._meta.get_field(User.USERNAME_FIELD).validators:
        _validate(validator, username, "username")
    worker = Worker.objects.filter(name=worker_name).first()
    if worker is None:
        worker = worker_create(name=worker_name, by=by)
    user, created = User.objects.get_or_create(username=username)
    if created:
        # Runners authenticate with their token only; no password can log in to the UI.
        user.set_unusable_password()
        user.save()
    group, _ = Group.objects.get_or_create(name=RUNNER_GROUP)
    user.groups.add(group)
    worker = worker_update(worker=worker, by=by, runner=user)
    return worker, user


# --- several hosts at once ------------------------------------------------------------------


@transaction.atomic
def hosts_bulk_lock(
    *, hosts: Iterable[Host], by: Actor, reason: str, unlock: bool = False
) -> dict[str, str | None]:
    """Lock (or unlock) several hosts; returns hostname → None when done, or why it was not."""
    # One transaction for the batch, one savepoint per host (host_lock is atomic itself): a host
    # in the wrong state is reported and skipped while the others still change.
    reason = reason_clean(reason, what="lock hosts", required=not unlock)
    results: dict[str, str | None] = {}
    for host in hosts:
        try:
            if unlock:
                host_unlock(host=host, by=by)
            else:
                host_lock(host=host, by=by, reason=reason)
            results[host.hostname] = None
        except ServiceError as exc:
            results[host.hostname] = exc.message
    return results


# What a bulk label edit reports for a host that already is as asked: neutral news, not an error.
LABELS_ALREADY = "already as asked"


@transaction.atomic
def hosts_bulk_labels(
    *, hosts: Iterable[Host], by: Actor, add: Iterable[str] = (), remove: Iterable[str] = ()
) -> dict[str, str | None]:
    """Add and remove labels on several hosts; hostname → None when changed, or why not.

    Each host's labels are read under its row lock and written through host_update (one
    `updated` event each), in a savepoint of its own: a retired host is reported and skipped
    while the others still change.
    """
    add, remove = labels_validate(add), labels_validate(remove)
    if not add and not remove:
        raise InvalidInput("give a label to add or remove", field="labels")
    if both := sorted(set(add) & set(remove)):
        raise InvalidInput(f"label {both[0]} is both added and removed", field="labels")
    results: dict[str, str | None] = {}
    for host in hosts:
        try:
            with transaction.atomic():
                locked = Host.objects.select_for_update().get(pk=host.pk)
                if locked.status == HostStatus.RETIRED:
                    raise Conflict(f"host {locked.hostname} is retired: it is not edited")
                old = set(locked.label_names)
                new = (old | set(add)) - set(remove)
                if new == old:
                    results[host.hostname] = LABELS_ALREADY
                    continue
                host_update(host=locked, by=by, labels=sorted(new))
            results[host.hostname] = None
        except ServiceError as exc:
            results[host.hostname] = exc.message
    return results


# --- health policies ------------------------------------------------------------------------

# The most a policy's period may be: beyond these a policy would in effect never fire.
POLICY_LIMITS = {"every_jobs": 1_000_000, "every_hours": 100_000}
POLICY_PERIODS = {"every_jobs": "every N test jobs", "every_hours": "every N hours"}
POLICY_FIELDS = ("name", "labels", "every_jobs", "every_hours", "enabled")


def label_key(names: Iterable[str]) -> str:
    """A label set stored as ",a,b,", the way jobs store theirs (jobs.models.encode_labels)."""
    names = labels_validate(names)
    return f",{','.join(names)}," if names else ""


def _policy_period(field: str, value: object) -> int | None:
    if value is None:
        return None
    most = POLICY_LIMITS[field]
    # bool is an int to Python; True is not a period anyone meant.
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= most:
        raise InvalidInput(
            f"{POLICY_PERIODS[field]}: a whole number from 1 to {most}, or empty for never",
            field=field,
        )
    return value


def health_policy_clean(
    fields: dict[str, object], *, policy: HealthPolicy | None = None
) -> dict[str, object]:
    """The model's values for the given policy fields; InvalidInput or Conflict names a bad one.

    The one place a policy's rules live: the API, the web UI and the admin all ask it.
    """
    fields_known(fields, POLICY_FIELDS, "policy")
    out: dict[str, object] = {}
    if "name" in fields:
        name = name_clean(fields["name"], most=100)
        _validate(policy_name_validator, name, "name")
        others = HealthPolicy.objects.exclude(pk=policy.pk) if policy else HealthPolicy.objects
        if others.filter(name=name).exists():
            raise Conflict(f"health policy {name} already exists", field="name")
        out["name"] = name
    if "labels" in fields:
        out["label_key"] = label_key(fields["labels"])  # type: ignore[arg-type]
    for every in POLICY_LIMITS:
        if every in fields:
            out[every] = _policy_period(every, fields[every])
    if "enabled" in fields:
        if not isinstance(fields["enabled"], bool):
            raise InvalidInput("enabled: true or false", field="enabled")
        out["enabled"] = fields["enabled"]
    return out


def _policy_text(field: str, value: object) -> str:
    """One policy value as the audit trail says it."""
    if field == "label_key":
        return ", ".join(n for n in str(value).split(",") if n) or "(every host)"
    if field == "enabled":
        return "yes" if value else "no"
    return "never" if value is None else str(value)


def _policy_summary(policy: HealthPolicy) -> str:
    fields = ("label_key", "every_jobs", "every_hours", "enabled")
    return "; ".join(f"{f} {_policy_text(f, getattr(policy, f))}" for f in fields)


def _policy_audit(kind: str, policy: HealthPolicy, by: Actor, message: str) -> None:
    # A policy is about no one host: the event names it in `subject` and nothing else.
    audit.record(kind, actor=by, subject=f"health policy {policy.name}", message=message)


@transaction.atomic
def health_policy_create(*, by: Actor, name: str, **fields: object) -> HealthPolicy:
    """Add a health policy; the next tick verifies the hosts it makes due."""
    values = health_policy_clean({"name": name, **fields})
    policy = HealthPolicy.objects.create(**values)
    _policy_audit(EventKind.CREATED, policy, by, f"policy added: {_policy_summary(policy)}")
    tick_wanted("health policy added")
    return policy


@transaction.atomic
def health_policy_update(*, policy: HealthPolicy, by: Actor, **fields: object) -> HealthPolicy:
    """Change a health policy's name, labels, periods or whether it is enabled."""
    policy = HealthPolicy.objects.select_for_update().get(pk=policy.pk)
    values = health_policy_clean(fields, policy=policy)
    changes = apply_changes(policy, values, _policy_text)
    if not changes:
        return policy
    policy.save(update_fields=list(values))
    _policy_audit(EventKind.UPDATED, policy, by, "; ".join(changes))
    tick_wanted("health policy changed")
    return policy


@transaction.atomic
def health_policy_delete(*, policy: HealthPolicy, by: Actor) -> None:
    """Remove a health policy; verifies already queued still run."""
    policy = locked_or_conflict(HealthPolicy, policy.pk, "the health policy no longer exists")
    _policy_audit(EventKind.DELETED, policy, by, f"policy deleted: {_policy_summary(policy)}")
    policy.delete()
