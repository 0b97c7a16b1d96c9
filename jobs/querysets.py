"""The jobs app's rules as queries: which leases are active, which jobs are queued or unfinished,
which suites are finished."""

from __future__ import annotations

from collections.abc import Mapping

from django.db import models
from django.db.models import Exists, OuterRef, Q

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


def unfinished_jobs(counts: Mapping[str, int]) -> int:
    """How many of a suite's jobs, given as counts by status, are queued, leased or running."""
    return sum(counts.get(status, 0) for status in UNFINISHED_JOB_STATUSES)


def suite_finished(counts: Mapping[str, int]) -> bool:
    """THE rule: a suite is finished when none of its jobs is queued, leased or running.

    However its jobs ended (passed, failed, aborted, skipped, expired), and also when it has
    no job at all. `SuiteQuerySet.finished` is the same rule in SQL; tests/jobs/
    test_suite_finished_rule.py holds the two to each other.
    """
    return unfinished_jobs(counts) == 0


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


class SuiteQuerySet(models.QuerySet):
    def _has_unfinished_job(self) -> Exists:
        job = self.model.jobs.rel.related_model  # Job, which imports this module
        return Exists(job.objects.filter(suite=OuterRef("pk"), status__in=UNFINISHED_JOB_STATUSES))

    def finished(self) -> SuiteQuerySet:
        """Suites with no job queued, leased or running: `suite_finished` in SQL."""
        return self.exclude(self._has_unfinished_job())

    def unfinished(self) -> SuiteQuerySet:
        """Suites with a job still queued, leased or running."""
        return self.filter(self._has_unfinished_job())
