"""Submitting suites and jobs: validation, label fan-out, limits."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from hosts.audit import Actor, actor_user
from hosts.choices import HostStatus
from hosts.models import Host, Label
from hosts.querysets import HostQuerySet
from hosts.rules import job_fits_host, missing_labels
from hosts.services import labels_validate
from jobs import limits
from jobs.choices import DEFAULT_PRIORITY
from jobs.models import Job, Suite, decode_labels, encode_labels
from jobs.scheduling.triggers import request_tick
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


MAX_EXPIRES_AFTER = 30 * 24 * 3600


def _check_expires_after(seconds: int | None, field_name: str = "expires_after") -> None:
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


def _check_priority(priority: int, field_name: str = "priority") -> None:
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
    if len(name) > 200:
        raise InvalidInput(f"{where}name: at most 200 characters", field=f"{where}name")
    if (priority := spec.priority) is None:
        priority = suite.priority if suite else DEFAULT_PRIORITY
    _check_priority(priority, f"{where}priority")
    if not 0 <= spec.max_retries <= 100:
        raise InvalidInput(f"{where}max_retries must be 0–100", field=f"{where}max_retries")
    timeout = spec.timeout or timedelta(seconds=settings.JOB_DEFAULT_TIMEOUT)
    if timeout <= timedelta(0):
        raise InvalidInput(f"{where}timeout must be positive", field=f"{where}timeout")
    labels = labels_validate(spec.labels, field=f"{where}labels")
    expires_after = spec.expires_after
    _check_expires_after(expires_after, f"{where}expires_after")
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


def _check_suite(*, name: str, priority: int, min_duts: int, max_duts: int | None) -> None:
    if not (name or "").strip():
        raise InvalidInput("name is required", field="name")
    if len(name.strip()) > 200:
        raise InvalidInput("name: at most 200 characters", field="name")
    _check_priority(priority)
    if isinstance(min_duts, bool) or not isinstance(min_duts, int) or min_duts < 0:
        raise InvalidInput("min_duts must be a whole number ≥ 0", field="min_duts")
    if max_duts is not None and (not isinstance(max_duts, int) or max_duts < 1):
        raise InvalidInput("max_duts must be empty or ≥ 1", field="max_duts")
    if max_duts is not None and min_duts > max_duts:
        raise InvalidInput("min_duts cannot exceed max_duts", field="min_duts")


@transaction.atomic
def suite_submit(
    *,
    owner: Actor,
    rerun_of: Suite | None = None,
    cloned_from: Suite | None = None,
    now: datetime | None = None,
    **fields: Any,
) -> Suite:
    """Submit a suite with its jobs, or a fan-out suite with one job per matching host.

    `fields` are `suite_prepare`'s (name, jobs, build, priority, quotas, fan-out, expiry,
    allow_unmatched); it checks them all, then the submitter's limits apply. A fan-out suite
    follows the lab until `fanout_until` (jobs/scheduling/fanout.py).
    A job no host in the lab could run (its labels, or its pinned host) is refused, naming
    what matches nothing, unless `allow_unmatched`: the tester waits for such hosts to come.
    `rerun_of` and `cloned_from` link the new suite to the one it was made from.
    """
    now = now or timezone.now()
    suite, rows = suite_prepare(owner=owner, now=now, **fields)
    suite.rerun_of, suite.cloned_from = rerun_of, cloned_from
    if (user := actor_user(owner)) is not None:
        limits.submission_check(
            user=user,
            priority=suite.priority,
            job_priorities=[row.priority for row in rows],
            min_duts=suite.min_duts,
            new_jobs=len(rows),
            now=now,
        )
    suite.save()  # after the checks: the rate limit counts the user's suites saved before
    Job.objects.bulk_create(rows)
    request_tick("suite submitted")
    return suite


def suite_prepare(
    *,
    owner: Actor,
    name: str,
    jobs: Sequence[JobSpec] = (),
    build: str = "",
    priority: int = DEFAULT_PRIORITY,
    min_duts: int = 0,
    max_duts: int | None = None,
    fanout_labels: Sequence[str] | None = None,
    fanout_name: str = "",
    fanout_until: datetime | None = None,
    expires_after: int | None = None,
    allow_unmatched: bool = False,
    now: datetime,
) -> tuple[Suite, list[Job]]:
    """Check a suite as `suite_submit` does and build it with its jobs, unsaved.

    Everything but the submitter's limits: what-if plans (jobs/scheduling/whatif.py) preview
    a suite with the rows this returns and never save them.
    """
    _check_suite(name=name, priority=priority, min_duts=min_duts, max_duts=max_duts)
    _check_expires_after(expires_after)
    suite = Suite(
        name=name.strip(),
        build=(build or "")[:200],
        priority=priority,
        min_duts=min_duts,
        max_duts=max_duts,
        owner=actor_user(owner),
        created_at=now,
        fanout_labels=encode_labels(fanout_labels) if fanout_labels is not None else "",
        fanout_until=fanout_until if fanout_labels is not None else None,
        expires_after=expires_after,
    )
    if fanout_labels is not None:
        if jobs:
            raise InvalidInput("a fan-out suite takes labels, not a job list", field="jobs")
        jobs = _fanout_specs(fanout_labels, fanout_name or name)
    if not jobs:
        raise InvalidInput("a suite needs at least one job", field="jobs")
    if len(jobs) > settings.MAX_JOBS_PER_SUITE:
        raise InvalidInput(
            f"a suite may have at most {settings.MAX_JOBS_PER_SUITE} jobs", field="jobs"
        )
    rows = [
        job_from_spec(spec, suite=suite, owner=owner, now=now, index=i)
        for i, spec in enumerate(jobs)
    ]
    for row in rows:
        row.fanout = fanout_labels is not None
    if min_duts > len(rows):
        raise InvalidInput(
            f"min_duts ({min_duts}) is more than the suite's {len(rows)} "
            f"job{'s' * (len(rows) != 1)}: the quota could never be met",
            field="min_duts",
        )
    if not allow_unmatched:
        _check_matched(rows, indexed=True)
    return suite, rows


def _check_matched(jobs: Sequence[Job], *, indexed: bool) -> None:
    """Refuse a job that no host in the lab, retired ones aside, could ever take."""
    lab = Host.objects.exclude(status=HostStatus.RETIRED)
    known = set(Label.objects.filter(hosts__in=lab).values_list("name", flat=True).distinct())
    fits: dict[str, bool] = {}  # label_key -> some host carries them all: one query per set
    pinned = {job.host_id for job in jobs if job.host_id is not None}
    carries = {h.pk: h for h in lab.filter(pk__in=pinned).prefetch_related("labels")}
    for i, job in enumerate(jobs):
        where = f"jobs[{i}]." if indexed else ""
        labels = decode_labels(job.label_key)
        if job.host_id is not None:
            host = carries.get(job.host_id)
            on_pin = host is not None and job_fits_host(
                labels=set(labels),
                pinned_host_id=job.host_id,
                host_id=host.pk,
                host_labels=set(host.label_names),
            )
            if not on_pin:
                lacks = missing_labels(set(labels), set(host.label_names)) if host else []
                why = f"lacks {', '.join(lacks)}" if host else "is retired"
                raise InvalidInput(
                    f"{where}host: {job.host.hostname} {why}, so the job could never run; "
                    "allow unmatched jobs to submit it anyway",
                    field=f"{where}host",
                )
            continue
        if missing := [name for name in labels if name not in known]:
            what = f"label{'s' * (len(missing) > 1)} {', '.join(missing)}"
        else:
            if job.label_key not in fits:
                fits[job.label_key] = lab.fitting(labels).exists()
            if fits[job.label_key]:
                continue
            what = f"{', '.join(labels)} together" if labels else "anything: it has no hosts"
        raise InvalidInput(
            f"{where}labels: no host in the lab carries {what}; allow unmatched jobs to "
            "submit it anyway and wait for such a host",
            field=f"{where}labels",
        )


# A fan-out gives no job to a host that will run nothing: retired, or its repairs gave up.
FANOUT_GONE = (HostStatus.RETIRED, HostStatus.REPAIR_FAILED)


def fanout_lab(labels: Sequence[str]) -> HostQuerySet:
    """The hosts a fan-out over `labels` runs on: every host carrying them all, gone ones aside."""
    return Host.objects.exclude(status__in=FANOUT_GONE).carrying(list(labels))


def fanout_spec(labels: Sequence[str], job_name: str, host: Host) -> JobSpec:
    """The job a fan-out named `job_name` gives `host`: NAME@HOSTNAME, pinned to it."""
    return JobSpec(name=f"{job_name}@{host.hostname}", labels=labels, host=host)


def _fanout_specs(labels: Sequence[str], job_name: str) -> list[JobSpec]:
    names = sorted(set(labels))
    if not names:
        raise InvalidInput("fan-out needs at least one label", field="fanout_labels")
    hosts = list(fanout_lab(names).order_by("hostname"))
    if not hosts:
        raise InvalidInput(
            f"no host carries {', '.join(names)}: a fan-out suite would be empty",
            field="fanout_labels",
        )
    return [fanout_spec(names, job_name, h) for h in hosts]


@transaction.atomic
def job_submit(
    *, owner: Actor, spec: JobSpec, allow_unmatched: bool = False, now: datetime | None = None
) -> Job:
    """Submit a standalone job; as in `suite_submit`, one no host could run is refused."""
    now = now or timezone.now()
    job = job_from_spec(spec, suite=None, owner=owner, now=now)
    if not allow_unmatched:
        _check_matched([job], indexed=False)
    if (user := actor_user(owner)) is not None:
        limits.submission_check(
            user=user, priority=None, job_priorities=[job.priority], new_jobs=1, now=now
        )
    job.save()
    request_tick("job submitted")
    return job
