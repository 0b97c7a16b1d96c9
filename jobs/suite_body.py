"""A suite written back as the body that submits it (`POST /api/suites/`, docs/api.md).

Re-run, clone and suite templates all start from this body, so a suite made from it is submitted
through the same validation as one a tester sends.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import timedelta
from typing import Any

from django.conf import settings

from jobs.choices import JobKind
from jobs.models import Job, Suite, decode_labels


def _seconds(value: timedelta | None) -> int | None:
    return int(value.total_seconds()) if value is not None else None


def job_body(job: Job, suite: Suite) -> dict[str, Any]:
    """One job as an entry of the body's `jobs`: only what differs from the defaults."""
    body: dict[str, Any] = {"name": job.name, "labels": decode_labels(job.label_key)}
    if job.host_id is not None:
        body["host"] = job.host.hostname
    if job.priority != suite.priority:
        body["priority"] = job.priority
    if job.max_retries:
        body["max_retries"] = job.max_retries
    if job.timeout != timedelta(seconds=settings.JOB_DEFAULT_TIMEOUT):
        body["timeout"] = _seconds(job.timeout)
    if job.estimated_duration is not None:
        body["estimated_duration"] = _seconds(job.estimated_duration)
    if job.expires_after is not None and job.expires_after != suite.expires_after:
        body["expires_after"] = job.expires_after
    if job.preemptible:
        body["preemptible"] = True
    if job.roles:
        body["roles"] = [dict(role) for role in job.roles]
    if job.together_by:
        body["together_by"] = job.together_by
    return body


def job_hosts(body_job: dict[str, Any]) -> int:
    """The essential hosts a body's job needs: its roles' counts, or 1."""
    roles = body_job.get("roles") or ()
    return sum(role.get("count", 1) for role in roles) if roles else 1


def fanout_name(suite: Suite, job_names: Iterable[str]) -> str:
    """The test name a fan-out suite's jobs were given (they are named NAME@HOSTNAME)."""
    for name in job_names:
        return name.rpartition("@")[0] or name
    return suite.name


def suite_body(suite: Suite, jobs: Iterable[Job] | None = None) -> dict[str, Any]:
    """The body that submits `suite` again: with `jobs` given, only those (a re-run).

    A fan-out suite asked for all its jobs stays a fan-out (it runs on the hosts that carry
    its labels now); asked for some of them, it becomes a suite of those jobs, each pinned
    to the host it was made for.
    """
    body: dict[str, Any] = {
        "name": suite.name,
        "build": suite.build,
        "priority": suite.priority,
        "min_duts": suite.min_duts,
        "max_duts": suite.max_duts,
        "expires_after": suite.expires_after,
    }
    if suite.fanout_labels and jobs is None:
        names = suite.jobs.order_by("id").values_list("name", flat=True)[:1]
        body["fanout"] = {
            "labels": decode_labels(suite.fanout_labels),
            "name": fanout_name(suite, names),
        }
        if suite.fanout_until is not None:
            body["fanout"]["until"] = suite.fanout_until.isoformat()
        return body
    chosen = suite.jobs.select_related("host") if jobs is None else jobs
    tests = sorted((job for job in chosen if job.kind == JobKind.TEST), key=lambda j: j.pk)
    body["jobs"] = [job_body(job, suite) for job in tests]
    # min_duts counts hosts: a re-run of fewer jobs lowers it to what they can still hold.
    body["min_duts"] = min(body["min_duts"], sum(job_hosts(job) for job in body["jobs"]))
    return body
