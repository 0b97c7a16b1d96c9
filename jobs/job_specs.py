"""What a tester asks for in one job, the unsaved Job it makes, and whom a fan-out gives one.

Below the services and the tick alike: submitting checks specs with these, and so does the
tick's fan-out phase when a host joins a fan-out suite's lab (a module of jobs.services would
run jobs/services/__init__.py, which imports the tick: a circle).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings

from hosts.audit import Actor, actor_user
from hosts.choices import HostStatus
from hosts.models import Host
from hosts.querysets import HostQuerySet
from hosts.services import labels_validate
from jobs import limits
from jobs.choices import DEFAULT_PRIORITY
from jobs.models import Job, Suite, encode_labels
from schedsite.errors import InvalidInput


@dataclass(frozen=True)
class JobSpec:
    """What a tester asks for in one job."""

    name: str
    labels: Sequence[str] = ()
    host: Host | None = None  # pinned host
    priority: int | None = None  # defaults to the suite's
    max_retries: int = 0
    timeout: timedelta | None = None
    estimated_duration: timedelta | None = None
    expires_after: int | None = None  # seconds it may wait in the queue; defaults to the suite's
    preemptible: bool = False  # may be stopped for a job preempt_margin levels higher
    # A multi-host job's roles as submitted: {"name", "labels", "count", "max"} each
    # (docs/api.md#multi-host-jobs); empty for a one-host job.
    roles: Sequence[Mapping] = ()
    together_by: str = ""  # a label prefix every host of the job shares a value of
    # A standalone job's build to test; a suite's jobs test the suite's build and take none.
    build: str = ""


MAX_EXPIRES_AFTER = limits.bounds("expires_after").high


def check_expires_after(seconds: int | None, field_name: str = "expires_after") -> None:
    if seconds is None:
        return
    if (
        isinstance(seconds, bool)
        or not isinstance(seconds, int)
        or not 1 <= seconds <= MAX_EXPIRES_AFTER
    ):
        raise InvalidInput(
            f"{field_name} must be a whole number of seconds from 1 to {MAX_EXPIRES_AFTER} "
            "(30 days), or empty",
            field=field_name,
        )


def check_priority(priority: int, field_name: str = "priority") -> None:
    if isinstance(priority, bool) or not isinstance(priority, int) or not 0 <= priority <= 100:
        raise InvalidInput(f"{field_name} must be an integer from 0 to 100", field=field_name)


ROLE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*\Z")
LABEL_PREFIX = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._/=+-]*\Z")


def _whole(value: object, low: int, high: int) -> bool:
    return not isinstance(value, bool) and isinstance(value, int) and low <= value <= high


def roles_normalize(
    roles: Sequence[Mapping], together_by: str, *, where: str = ""
) -> tuple[list[dict], str]:
    """A multi-host job's roles and together_by as stored (docs/api.md#multi-host-jobs): each
    role {"name", "labels" (its own, sorted), "count", "max"}; InvalidInput names the role."""
    together_by = (together_by or "").strip()
    if not roles:
        if together_by:
            raise InvalidInput(
                f"{where}together_by: keeps a multi-host job's hosts together; give roles too",
                field=f"{where}together_by",
            )
        return [], ""
    if isinstance(roles, str | Mapping) or not isinstance(roles, Sequence):
        raise InvalidInput(f"{where}roles must be a list of roles", field=f"{where}roles")
    most = limits.bounds("roles").high
    if len(roles) > most:
        raise InvalidInput(
            f"{where}roles: at most {most} roles, got {len(roles)}", field=f"{where}roles"
        )
    normalized: list[dict] = []
    for k, role in enumerate(roles):
        normalized.append(_role(role, at=f"{where}roles[{k}]", seen=normalized))
    total, most = sum(r["max"] for r in normalized), limits.bounds("job_hosts").high
    if total > most:
        raise InvalidInput(
            f"{where}roles: a job may have at most {most} hosts; these roles ask for up to {total}",
            field=f"{where}roles",
        )
    longest = limits.bounds("together_by").high
    if together_by and (len(together_by) > longest or not LABEL_PREFIX.match(together_by)):
        raise InvalidInput(
            f"{where}together_by: {together_by[:40]!r} is not a label prefix such as "
            f"chamber (letters, digits and . _ / = + -, at most {longest} characters)",
            field=f"{where}together_by",
        )
    return normalized, together_by


def _role(role: object, *, at: str, seen: Sequence[Mapping]) -> dict:
    """One role as stored; InvalidInput names it (`at`, jobs[0].roles[1])."""
    if not isinstance(role, Mapping):
        raise InvalidInput(f"{at}: a role is an object with name, labels, count, max", field=at)
    name = str(role.get("name") or "").strip()
    longest = limits.bounds("role_name").high
    if not name:
        raise InvalidInput(f"{at}.name is required", field=f"{at}.name")
    if len(name) > longest or not ROLE_NAME.match(name):
        raise InvalidInput(
            f"{at}.name: {name[:40]!r} is not a role name: 1 to {longest} letters, digits "
            "and . _ -, starting with a letter or digit",
            field=f"{at}.name",
        )
    if any(other["name"] == name for other in seen):
        raise InvalidInput(
            f"{at}.name: role {name} is named twice; each role of a job needs its own name",
            field=f"{at}.name",
        )
    labels = labels_validate(role.get("labels") or [], field=f"{at}.labels")
    bound = limits.bounds("role_count")
    count = role.get("count", 1)
    if not _whole(count, bound.low, bound.high):
        raise InvalidInput(
            f"{at}.count: for role {name}, a whole number of hosts from {bound.low} to "
            f"{bound.high}",
            field=f"{at}.count",
        )
    top = count if role.get("max") is None else role["max"]
    if not _whole(top, count, bound.high):
        raise InvalidInput(
            f"{at}.max: for role {name}, at least its count ({count}) and at most "
            f"{bound.high}, or empty for exactly count hosts",
            field=f"{at}.max",
        )
    return {"name": name, "labels": labels, "count": count, "max": top}


def hosts_needed(roles: Sequence[Mapping]) -> int:
    """The essential hosts of a job with these normalized roles: 1 for a one-host job."""
    return sum(role["count"] for role in roles) if roles else 1


def job_from_spec(
    spec: JobSpec, *, suite: Suite | None, owner: Actor, now: datetime, index: int | None = None
) -> Job:
    """The unsaved job `spec` asks for in `suite` (or standalone), or InvalidInput saying why."""
    where = f"jobs[{index}]." if index is not None else ""
    name = (spec.name or "").strip()
    if not name:
        raise InvalidInput(f"{where}name is required", field=f"{where}name")
    longest = limits.bounds("name").high
    if len(name) > longest:
        raise InvalidInput(f"{where}name: at most {longest} characters", field=f"{where}name")
    if (priority := spec.priority) is None:
        priority = suite.priority if suite else DEFAULT_PRIORITY
    check_priority(priority, f"{where}priority")
    retries = limits.bounds("max_retries")
    if not retries.low <= spec.max_retries <= retries.high:
        raise InvalidInput(
            f"{where}max_retries must be {retries.low}–{retries.high}", field=f"{where}max_retries"
        )
    timeout = spec.timeout or timedelta(seconds=settings.JOB_DEFAULT_TIMEOUT)
    if timeout <= timedelta(0):
        raise InvalidInput(f"{where}timeout must be positive", field=f"{where}timeout")
    labels = labels_validate(spec.labels, field=f"{where}labels")
    expires_after = spec.expires_after
    check_expires_after(expires_after, f"{where}expires_after")
    if expires_after is None and suite is not None:
        expires_after = suite.expires_after
    roles, together_by = roles_normalize(spec.roles, spec.together_by, where=where)
    if roles and spec.host is not None:
        raise InvalidInput(
            f"{where}roles: a job pinned to host {spec.host.hostname} runs on that one host; "
            "give roles or a host, not both",
            field=f"{where}roles",
        )
    build = (spec.build or "").strip()
    if build and suite is not None:
        raise InvalidInput(
            f"{where}build: a suite's jobs test the suite's build; give the suite a build",
            field=f"{where}build",
        )
    longest = limits.bounds("build").high
    if len(build) > longest:
        raise InvalidInput(f"{where}build: at most {longest} characters", field=f"{where}build")
    return Job(
        suite=suite,
        name=name,
        build=build,
        priority=priority,
        label_key=encode_labels(labels),
        host=spec.host,
        max_retries=spec.max_retries,
        timeout=timeout,
        estimated_duration=spec.estimated_duration,
        preemptible=bool(spec.preemptible),
        roles=roles,
        together_by=together_by,
        owner=actor_user(owner),
        created_at=now,
        submitted_at=suite.created_at if suite else now,
        expires_after=expires_after,
        expires_at=now + timedelta(seconds=expires_after) if expires_after else None,
    )


# A fan-out gives no job to a host that will run nothing: retired, or its repairs gave up.
FANOUT_GONE = (HostStatus.RETIRED, HostStatus.REPAIR_FAILED)


def fanout_lab(labels: Sequence[str]) -> HostQuerySet:
    """The hosts a fan-out over `labels` runs on: every host carrying them all, gone ones aside."""
    return Host.objects.exclude(status__in=FANOUT_GONE).carrying(list(labels))


def fanout_spec(labels: Sequence[str], job_name: str, host: Host) -> JobSpec:
    """The job a fan-out named `job_name` gives `host`: NAME@HOSTNAME, pinned to it."""
    return JobSpec(name=f"{job_name}@{host.hostname}", labels=labels, host=host)
