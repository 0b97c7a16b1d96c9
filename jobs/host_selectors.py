"""Reads for the host health card that count a host's jobs: the next check, maintenance history."""

from __future__ import annotations

from datetime import datetime

from hosts.choices import HostStatus
from hosts.models import HealthPolicy, Host
from hosts.selectors import (
    NO_POLICY,
    NOT_BY_POLICY,
    NextCheck,
    policies_applying,
    policy_check,
)
from jobs.choices import MAINTENANCE_KINDS, JobKind
from jobs.models import Job, Lease

HISTORY_SHOWN = 10  # maintenance jobs on a host's page


def next_check(host: Host, *, now: datetime) -> tuple[NextCheck, list[HealthPolicy]]:
    """When the host is verified next, and every enabled policy that applies to it."""
    applying = policies_applying(host.label_names, HealthPolicy.objects.order_by("name"))
    if host.status in NOT_BY_POLICY:
        return NextCheck(
            NOT_BY_POLICY[host.status], host.status == HostStatus.NEEDS_VERIFY
        ), applying
    if not applying:
        return NextCheck(NO_POLICY), applying
    runs = test_runs_since(host, host.last_verified_at)
    checks = [
        policy_check(p, last_verified_at=host.last_verified_at, runs_since=runs, now=now)
        for p in applying
    ]
    # A due policy first; otherwise the first by name (jobs and hours do not compare).
    return min(checks, key=lambda c: not c.due), applying


def test_runs_since(host: Host, since: datetime | None) -> int:
    """Test jobs leased on the host since `since` (all of them when it is None)."""
    leases = Lease.objects.filter(host=host, job__kind=JobKind.TEST)
    if since is not None:
        leases = leases.filter(acquired_at__gt=since)
    return leases.count()


def maintenance_history(host: Host, *, limit: int = HISTORY_SHOWN) -> list[Job]:
    """The host's latest verify and repair jobs, newest first."""
    jobs = Job.objects.filter(host=host, kind__in=MAINTENANCE_KINDS)
    return list(jobs.order_by("-created_at", "-id")[:limit])


def has_maintenance_job(host: Host) -> bool:
    """Whether a verify or repair job is queued or running on the host."""
    return Job.objects.unfinished().filter(host=host, kind__in=MAINTENANCE_KINDS).exists()
