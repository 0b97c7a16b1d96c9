"""What a runner reports of provisioning a host: the build it now carries, or that it failed.

Shared by the runner protocol's `start` (a build put on the hosts) and `complete` (a lease that
had to provision ended before its test started, its host broken). Each provisioning is a
`hosts.Provision` row and a `provisioned` event on the host's trail (docs/api.md#provisioning);
the dashboard, `/metrics` and the size estimate read the rows.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import datetime

from hosts import audit
from hosts.audit import Actor
from hosts.choices import EventKind, ProvisionResult
from hosts.models import Host, Label, Provision
from jobs.models import Lease
from schedsite.durations import human_duration
from schedsite.errors import InvalidInput

# The longest provisioning a runner may report: a day. Flashing takes minutes; more is a clock
# or a unit mistake, refused rather than folded into the median an estimate adds to jobs.
MAX_PROVISION_SECONDS = 24 * 3600
MAX_BUILD = 200
BOARD_PREFIX = "board:"


def check_build(build: object, *, field: str = "build") -> str:
    """A reported build as stored: a non-blank string of at most 200 characters."""
    if not isinstance(build, str) or not build.strip():
        raise InvalidInput(f"{field} must be a non-empty string: the build now on the host")
    build = build.strip()
    if len(build) > MAX_BUILD:
        raise InvalidInput(f"{field}: at most {MAX_BUILD} characters", field=field)
    return build


def check_seconds(seconds: object, *, field: str = "provision_seconds") -> float | None:
    """A reported provisioning time: None, or a number of seconds from 0 to a day."""
    if seconds is None:
        return None
    if (
        isinstance(seconds, bool)
        or not isinstance(seconds, int | float)
        or not math.isfinite(seconds)
        or not 0 <= seconds <= MAX_PROVISION_SECONDS
    ):
        raise InvalidInput(
            f"{field} must be a number of seconds from 0 to {MAX_PROVISION_SECONDS}", field=field
        )
    return float(seconds)


def _hosts(leases: Sequence[Lease]) -> dict[int, tuple[str, str, str]]:
    """The leases' hosts, locked in id order (as every host lock is taken): id -> (hostname,
    current_build, board label or "")."""
    ids = sorted({lease.host_id for lease in leases})
    rows = (
        Host.objects.select_for_update()
        .filter(pk__in=ids)
        .order_by("pk")
        .values_list("pk", "hostname", "current_build")
    )
    found = {pk: (hostname, build) for pk, hostname, build in rows}
    boards: dict[int, str] = {}
    labels = Label.objects.filter(hosts__in=ids, name__startswith=BOARD_PREFIX)
    for host_id, name in labels.order_by("name").values_list("hosts", "name"):
        boards.setdefault(host_id, name)
    return {pk: (hostname, build, boards.get(pk, "")) for pk, (hostname, build) in found.items()}


def _said(build: str, from_build: str, seconds: float | None) -> str:
    took = f" in {human_duration(seconds)}" if seconds is not None else ""
    return f"Provisioned {build} (was {from_build or 'no build'}){took}"


def hosts_provisioned(
    leases: Sequence[Lease], *, build: str, seconds: float | None, by: Actor, at: datetime
) -> list[Provision]:
    """Record that the runner put `build` on the hosts of these leases (an attempt's).

    A host whose lease asked for a build, or whose current_build differs, gets current_build
    and provisioned_at set, a Provision row and a `provisioned` event; a host that already
    carried the build and was not asked to provision is left as it was (the runner only
    confirms it). The hosts' rows are locked first, so the build each replaced is the one read.
    """
    hosts = _hosts(leases)
    rows: list[Provision] = []
    events = []
    for lease in sorted(leases, key=lambda each: each.host_id):
        hostname, old, board = hosts[lease.host_id]
        if old == build and not lease.provision_to:
            continue
        rows.append(
            Provision(
                host_id=lease.host_id, hostname=hostname, board=board, build=build,
                from_build=old, result=ProvisionResult.OK, seconds=seconds,
                lease_id=lease.pk, job_id=lease.job_id, created_at=at,
            )
        )  # fmt: skip
        events.append(
            audit.entry(
                EventKind.PROVISIONED, actor=by, host_id=lease.host_id, subject=hostname, at=at,
                message=_said(build, old, seconds), lease_id=lease.pk, job_id=lease.job_id,
            )
        )  # fmt: skip
    if rows:
        Host.objects.filter(pk__in=[row.host_id for row in rows]).update(
            current_build=build, provisioned_at=at
        )
        Provision.objects.bulk_create(rows)
        audit.record_many(events)
    return rows


def hosts_provision_failed(
    leases: Sequence[Lease],
    *,
    message: str,
    seconds: float | None,
    by: Actor,
    at: datetime,
) -> list[Provision]:
    """Record that provisioning the hosts of these leases failed: a `failed` Provision row and a
    `provisioned` event with the output's tail, for each lease that had a build to put on its
    host (its provision_to; the job's build when the runner said so of a lease without one).

    The host keeps its current_build: what it carries now is unknown, and its repair (the
    runner's host_ok false) is what finds out.
    """
    hosts = _hosts(leases)
    tail = (message or "").strip()[-2000:]
    rows: list[Provision] = []
    events = []
    for lease in sorted(leases, key=lambda each: each.host_id):
        build = lease.provision_to or (lease.job.build_to_test if lease.job_id else "")
        if not build:
            continue
        hostname, old, board = hosts[lease.host_id]
        rows.append(
            Provision(
                host_id=lease.host_id, hostname=hostname, board=board, build=build,
                from_build=old, result=ProvisionResult.FAILED, seconds=seconds,
                lease_id=lease.pk, job_id=lease.job_id, created_at=at,
            )
        )  # fmt: skip
        took = f" after {human_duration(seconds)}" if seconds is not None else ""
        said = f"Provisioning {build} failed{took} (host had {old or 'no build'})"
        events.append(
            audit.entry(
                EventKind.PROVISIONED, actor=by, host_id=lease.host_id, subject=hostname, at=at,
                message=f"{said}: {tail}" if tail else said, lease_id=lease.pk,
                job_id=lease.job_id,
            )
        )  # fmt: skip
    if rows:
        Provision.objects.bulk_create(rows)
        audit.record_many(events)
    return rows
