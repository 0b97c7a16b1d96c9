"""Inventory changes staff make from the web UI: edit a host as they saw it, import many at once.

Both end in the services (host_create, host_update), so the audit trail reads the same as
for the API, the admin and `import_lab` (docs/ui.md#inventory).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from django.db import transaction

from hosts import services
from hosts.audit import Actor
from hosts.choices import HostStatus
from hosts.models import Host, Worker
from jobs import labfile
from jobs import services as job_services
from schedsite.errors import Conflict, InvalidInput

NONE = "(none)"


def _digest(value: object) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()[:20]


def inventory_values(host: Host) -> dict[str, object]:
    """The fields staff edit, as the edit form and the import compare them."""
    return {
        "labels": host.label_names,
        "worker": host.worker.name if host.worker else None,
        "current_build": host.current_build,
    }


def inventory_version(host: Host) -> str:
    """A short fingerprint of the host's labels, worker and build: the edit form's version."""
    return _digest(inventory_values(host))


def _locked_host(host: Host) -> Host:
    return (
        Host.objects.select_for_update(of=("self",))
        .select_related("worker")
        .prefetch_related("labels")
        .get(pk=host.pk)
    )


def _unchanged_since(current: Host, version: str) -> None:
    if inventory_version(current) != version:
        raise Conflict(
            f"host {current.hostname} was changed by someone else since it was read; "
            "reload it to see their change, then edit again",
            field="version",
        )


@transaction.atomic
def host_update_checked(
    *, host: Host, by: Actor, version: str | None = None, **fields: Any
) -> Host:
    """host_update, refused if the labels, worker or build changed since `version` (if given)."""
    current = _locked_host(host)
    if version is not None:
        _unchanged_since(current, version)
    return job_services.host_update(host=current, by=by, **fields)


@transaction.atomic
def host_edit(
    *,
    host: Host,
    by: Actor,
    version: str,
    labels: Iterable[str],
    worker: Worker | None,
    current_build: str,
) -> Host:
    """Change a host's labels, worker and build, unless someone changed them since `version`.

    A running lease keeps going: the new labels count from the host's next lease
    (docs/ui.md#inventory).
    """
    current = _locked_host(host)
    if current.status == HostStatus.RETIRED:
        raise Conflict(f"host {current.hostname} is retired; its inventory is kept as it was")
    _unchanged_since(current, version)
    if worker is not None and worker.retired_at is not None:
        raise InvalidInput(f"worker {worker.name} is retired", field="worker")
    if len(current_build) > 200:
        raise InvalidInput("build: at most 200 characters", field="current_build")
    return job_services.host_update(
        host=current, by=by, labels=labels, worker=worker, current_build=current_build.strip()
    )


# --- bulk import ----------------------------------------------------------------------------

NEW, CHANGED, UNCHANGED, ERROR = "new", "changed", "unchanged", "error"


@dataclass(frozen=True)
class PlanRow:
    """One host of an import as the preview shows it: what it says, and what would happen."""

    where: str  # "line 3" (CSV) or "hosts[2]" (YAML): how the person finds it in the file
    hostname: str
    worker: str | None
    labels: list[str]
    current_build: str
    action: str  # NEW, CHANGED, UNCHANGED or ERROR
    changes: list[str] = field(default_factory=list)  # "labels a → a, b", as the audit says
    errors: list[str] = field(default_factory=list)

    def entry(self) -> dict[str, object]:
        """The row as a lab-file host entry: what the apply step re-checks."""
        return {
            "hostname": self.hostname,
            "worker": self.worker,
            "labels": self.labels,
            "current_build": self.current_build,
        }


@dataclass
class ImportPlan:
    """What importing a file would do, row by row; nothing of it is saved."""

    rows: list[PlanRow]
    notes: list[str] = field(default_factory=list)  # what the file holds that is not imported

    def count(self, action: str) -> int:
        return sum(row.action == action for row in self.rows)

    @property
    def errors(self) -> int:
        return self.count(ERROR)

    @property
    def to_apply(self) -> list[PlanRow]:
        return [row for row in self.rows if row.action in (NEW, CHANGED)]

    def digest(self) -> str:
        """A fingerprint of every row's action and changes: the preview the person saw."""
        return _digest([[r.hostname, r.action, r.changes, r.errors] for r in self.rows])


def _text(value: object) -> str:
    return str(value) if value not in (None, "", []) else NONE


def _changes(host: Host, wanted: dict) -> list[str]:
    """What would change on an existing host, worded like host_update's audit message."""
    now = inventory_values(host)
    out = []
    if wanted["labels"] != now["labels"]:
        out.append(
            f"labels {', '.join(now['labels']) or NONE} → {', '.join(wanted['labels']) or NONE}"
        )  # type: ignore[arg-type]
    if wanted["worker"] != now["worker"]:
        out.append(f"worker {_text(now['worker'])} → {_text(wanted['worker'])}")
    if wanted["current_build"] != now["current_build"]:
        out.append(f"build {_text(now['current_build'])} → {_text(wanted['current_build'])}")
    return out


def _named(entry: dict) -> str:
    name = entry.get("hostname")
    return name if isinstance(name, str) else ""


def import_plan(entries: list[object], wheres: list[str], *, lock: bool = False) -> ImportPlan:
    """Check lab-file host entries against the inventory: each new, changed, unchanged or wrong.

    The entries are checked by the lab-file reader (jobs.labfile.host_entries) so a file this
    page accepts is one `import_lab` accepts too; a worker must exist already.
    """
    known = set(Worker.objects.filter(retired_at__isnull=True).values_list("name", flat=True))
    names = {_named(e) for e in entries if isinstance(e, dict)} - {""}
    hosts = Host.objects.filter(hostname__in=names)
    if lock:
        hosts = hosts.select_for_update(of=("self",))
    existing = {h.hostname: h for h in hosts.select_related("worker").prefetch_related("labels")}
    # A field the file leaves out (a missing CSV column or YAML key) keeps the host's value.
    mappings = [
        {**inventory_values(existing[e["hostname"]]), **e} if _named(e) in existing else e
        for e in entries
        if isinstance(e, dict)
    ]
    checked = iter(labfile.host_entries(mappings, known))
    rows = []
    for entry, where in zip(entries, wheres, strict=True):
        if not isinstance(entry, dict):
            rows.append(PlanRow(where, "", None, [], "", ERROR, errors=["must be a mapping"]))
            continue
        host, problems = next(checked)
        wanted = {k: host[k] for k in ("hostname", "worker", "labels", "current_build")}
        current = existing.get(host["hostname"])
        changes = _changes(current, wanted) if current and not problems else []
        if current and current.status == HostStatus.RETIRED and changes:
            problems = [f"host {current.hostname} is retired; add it under a new name"]
        action = (
            ERROR if problems else NEW if current is None else CHANGED if changes else UNCHANGED
        )
        rows.append(PlanRow(where, **wanted, action=action, changes=changes, errors=problems))
    return ImportPlan(rows)


@transaction.atomic
def hosts_import(*, entries: list[object], by: Actor, digest: str) -> ImportPlan:
    """Add and change the hosts of a previewed import, all or nothing, one audited change each.

    `digest` is the preview's: if the inventory moved since, nothing is saved and Conflict
    says to look again, so no one applies a change they did not see.
    """
    plan = import_plan(entries, [f"hosts[{i}]" for i in range(len(entries))], lock=True)
    if plan.digest() != digest:
        raise Conflict("the inventory changed since the preview; check the new preview")
    if plan.errors:
        raise InvalidInput(f"{plan.errors} rows have errors; nothing was imported")
    workers = {w.name: w for w in Worker.objects.filter(retired_at__isnull=True)}
    for row in plan.to_apply:
        worker = workers[row.worker] if row.worker else None
        if row.action == NEW:
            services.host_create(
                hostname=row.hostname,
                by=by,
                worker=worker,
                labels=row.labels,
                current_build=row.current_build,
            )
        else:
            job_services.host_update(
                host=Host.objects.get(hostname=row.hostname),
                by=by,
                labels=row.labels,
                worker=worker,
                current_build=row.current_build,
            )
    return plan
