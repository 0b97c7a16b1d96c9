"""The jobs app's rules as queries: which leases are active, which jobs are queued or unfinished."""

from __future__ import annotations

from django.db import models
from django.db.models import Q

from jobs.choices import ACTIVE_JOB_STATUSES, JobStatus

# A lease or reservation not yet released: it holds its host right now. The rule "lease is
# active", written once: `Lease.objects.active()` / `.released()`, the aggregates that count
# active and released leases in one pass, and the model's constraints and indexes read this Q;
# `Lease.active` is its Python twin and ACTIVE_LEASE_SQL its twin for raw SQL, held to it by
# tests/jobs/test_lease_active.py.
ACTIVE_LEASE = Q(released_at__isnull=True)
ACTIVE_LEASE_SQL = "released_at IS NULL"  # the lease table's own column, unqualified

# A job that is still to run or running; a suite with one is in progress.
UNFINISHED_JOB_STATUSES = (JobStatus.QUEUED, *ACTIVE_JOB_STATUSES)


class LeaseQuerySet(models.QuerySet):
    def active(self) -> LeaseQuerySet:
        """Leases and reservations not yet released: each holds its host right now."""
        return self.filter(ACTIVE_LEASE)

    def released(self) -> LeaseQuerySet:
        """Leases and reservations that ended: each held its host once."""
        return self.exclude(ACTIVE_LEASE)


class JobQuerySet(models.QuerySet):
    def queued(self) -> JobQuerySet:
        """Jobs waiting for a host."""
        return self.filter(status=JobStatus.QUEUED)

    def unfinished(self) -> JobQuerySet:
        """Jobs queued, leased or running: not yet in a final status."""
        return self.filter(status__in=UNFINISHED_JOB_STATUSES)
