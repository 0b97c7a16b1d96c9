"""What a tester asks for in one job, the unsaved Job it makes, and whom a fan-out gives one.

Below the services and the tick alike: submitting checks specs with these, and so does the
tick's fan-out phase when a host joins a fan-out suite's lab (a module of jobs.services would
run jobs/services/__init__.py, which imports the tick: a circle).
"""

from __future__ import annotations

from collections.abc import Sequence
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
    return Job(
        suite=suite,
        name=name,
        priority=priority,
        label_key=encode_labels(labels),
        host=spec.host,
        max_retries=spec.max_retries,
        timeout=timeout,
        estimated_duration=spec.estimated_duration,
        preemptible=bool(spec.preemptible),
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
