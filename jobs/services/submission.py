"""Submitting suites and jobs: validation, label fan-out, limits."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from hosts.audit import Actor, actor_user
from hosts.choices import HostStatus
from hosts.models import Host, Label
from hosts.rules import job_fits_host, missing_labels
from jobs import limits
from jobs.choices import DEFAULT_PRIORITY
from jobs.job_specs import MAX_EXPIRES_AFTER as MAX_EXPIRES_AFTER
from jobs.job_specs import (
    JobSpec,
    check_expires_after,
    check_priority,
    fanout_lab,
    fanout_spec,
    job_from_spec,
)
from jobs.models import Job, Suite, decode_labels, encode_labels
from jobs.scheduling.triggers import request_tick
from schedsite.errors import InvalidInput


def _check_suite(*, name: str, priority: int, min_duts: int, max_duts: int | None) -> None:
    if not (name or "").strip():
        raise InvalidInput("name is required", field="name")
    longest = limits.bounds("name").high
    if len(name.strip()) > longest:
        raise InvalidInput(f"name: at most {longest} characters", field="name")
    check_priority(priority)
    low, high = limits.bounds("min_duts").low, limits.bounds("min_duts").high
    if isinstance(min_duts, bool) or not isinstance(min_duts, int) or not low <= min_duts <= high:
        raise InvalidInput(
            f"min_duts must be a whole number from {low} to {high}", field="min_duts"
        )
    low, high = limits.bounds("max_duts").low, limits.bounds("max_duts").high
    if max_duts is not None and (not isinstance(max_duts, int) or not low <= max_duts <= high):
        raise InvalidInput(f"max_duts must be empty or from {low} to {high}", field="max_duts")
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
    check_expires_after(expires_after)
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
