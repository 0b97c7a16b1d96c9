"""Write the lab out in the format jobs.labfile reads: workers, hosts, unfinished test jobs.

Maintenance jobs stay behind: the health loop makes them again for the hosts that need them.
"""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import yaml
from django.conf import settings

from hosts.models import Host, Worker
from jobs.choices import JobKind
from jobs.models import Job, Lease, Suite, decode_labels


def export_lab() -> dict:
    """Write the lab (workers, hosts, unfinished suites and jobs) in the import format."""
    # A multi-host job is written queued (with its roles): its import leases its hosts anew.
    running = dict(
        Lease.objects.active()
        .filter(job__isnull=False, job__roles=[])
        .values_list("job_id", "host__hostname")
    )

    def job_out(job: Job, suite: Suite | None) -> dict:
        out: dict[str, Any] = {
            "name": job.name,
            "labels": decode_labels(job.label_key),
            "host": job.host.hostname if job.host else None,
            "running_on": running.get(job.pk),
        }
        if suite is None or job.priority != suite.priority:
            out["priority"] = job.priority
        if job.max_retries:
            out["max_retries"] = job.max_retries
        if job.timeout != timedelta(seconds=settings.JOB_DEFAULT_TIMEOUT):
            out["timeout"] = int(job.timeout.total_seconds())
        if job.roles:
            out["roles"] = [dict(role) for role in job.roles]
        if job.together_by:
            out["together_by"] = job.together_by
        return out

    suites = []
    for suite in Suite.objects.filter(aborted_at__isnull=True).order_by("created_at", "id"):
        jobs = list(suite.jobs.unfinished().select_related("host").order_by("id"))
        if jobs:
            suites.append(
                {
                    "name": suite.name,
                    "priority": suite.priority,
                    "min_duts": suite.min_duts,
                    "max_duts": suite.max_duts,
                    "build": suite.build,
                    "jobs": [job_out(j, suite) for j in jobs],
                }
            )
    return {
        "workers": [
            {
                "name": w.name,
                "paused": w.paused,
                **({"paused_reason": w.paused_reason} if w.paused else {}),
            }
            for w in Worker.objects.order_by("name")
        ],
        "hosts": [
            {
                "hostname": h.hostname,
                "worker": h.worker.name if h.worker else None,
                "labels": h.label_names,
                "status": h.status,
                "locked": h.locked,
                "lock_reason": h.lock_reason,
                "current_build": h.current_build,
            }
            for h in Host.objects.select_related("worker")
            .prefetch_related("labels")
            .order_by("hostname")
        ],
        "suites": suites,
        "jobs": [
            job_out(j, None)
            for j in Job.objects.unfinished()
            .filter(suite__isnull=True, kind=JobKind.TEST)
            .select_related("host")
            .order_by("submitted_at", "id")
        ],
    }


def dump(data: dict, fmt: str) -> str:
    if fmt == "yaml":
        return yaml.safe_dump(data, sort_keys=False)
    return json.dumps(data, indent=2) + "\n"
