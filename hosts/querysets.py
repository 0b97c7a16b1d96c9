"""The inventory's rules as queries: which workers are online, how loaded, which hosts may work."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta

from django.conf import settings
from django.db import models
from django.db.models import Count, Exists, IntegerField, OuterRef, Q, Subquery
from django.db.models.functions import Coalesce

from hosts.capacity import WorkerLoad
from hosts.choices import HostStatus


def online_cutoff(now: datetime) -> datetime:
    """The oldest heartbeat that still counts as online at `now`."""
    return now - timedelta(seconds=settings.WORKER_OFFLINE_TIMEOUT)


def seen_online(last_seen: datetime | None, now: datetime) -> bool:
    """Whether a worker whose runner last heartbeated at `last_seen` is online at `now`."""
    return last_seen is not None and last_seen >= online_cutoff(now)


def worker_capacity(max_jobs: int | None, runner_concurrency: int | None) -> int | None:
    """The most jobs a worker runs at once: the smaller of the limits set, None if neither is."""
    limits = [n for n in (max_jobs, runner_concurrency) if n is not None]
    return min(limits) if limits else None


class WorkerQuerySet(models.QuerySet):
    def online(self, now: datetime) -> WorkerQuerySet:
        """Workers whose runner heartbeated within WORKER_OFFLINE_TIMEOUT of `now`."""
        return self.filter(last_seen__gte=online_cutoff(now))

    def offline(self, now: datetime) -> WorkerQuerySet:
        """Workers not online at `now`, those whose runner never heartbeated included."""
        return self.exclude(last_seen__gte=online_cutoff(now))

    def worker_loads(self) -> dict[str, WorkerLoad]:
        """Worker name → its capacity and the jobs it runs now, for the workers with a capacity.

        One query however many workers. Running: the jobs whose active leases hold its hosts,
        each once however many of its hosts it holds (HostQuerySet.taking_capacity); a manual
        reservation runs nothing on the runner, so it takes none of the capacity.
        """
        host = self.model._meta.get_field("hosts").related_model
        running = (
            host.objects.taking_capacity()
            .filter(worker=OuterRef("pk"))
            .order_by()
            .values("worker_id")
            .annotate(n=Count("pk"))
            .values("n")
        )
        rows = (
            self.filter(Q(max_jobs__isnull=False) | Q(runner_concurrency__isnull=False))
            .annotate(running=Coalesce(Subquery(running, output_field=IntegerField()), 0))
            .values_list("name", "max_jobs", "runner_concurrency", "running")
            .order_by()
        )
        return {
            name: WorkerLoad(limit=worker_capacity(max_jobs, concurrency), running=n)
            for name, max_jobs, concurrency, n in rows
        }


class HostQuerySet(models.QuerySet):
    def carrying(self, labels: list[str]) -> HostQuerySet:
        """Hosts that carry every one of the labels."""
        names = set(labels)
        if not names:
            return self
        # One grouped subquery however many labels: a join per label made PostgreSQL's planner
        # take seconds at 60 labels (and a request of 200 ran for minutes).
        through = self.model.labels.through.objects.filter(label__name__in=names)
        ids = (
            through.values("host_id")
            .annotate(n=models.Count("label_id", distinct=True))
            .filter(n=len(names))
            .values("host_id")
        )
        return self.filter(pk__in=ids)

    def fitting(self, labels: list[str], pinned_host_id: int | None = None) -> HostQuerySet:
        """Hosts a job needing `labels` (pinned to `pinned_host_id`, if any) fits: the SQL twin
        of hosts.rules.job_fits_host, held to its cases by tests/hosts/test_rules.py."""
        hosts = self.carrying(labels)
        return hosts if pinned_host_id is None else hosts.filter(pk=pinned_host_id)

    def _holding_a_lease(self, among: Sequence[int] | None = None) -> Exists:
        """True for a host (the outer row) that an active lease or reservation holds.

        `among`: the outer rows are some of these hosts, and only their leases are looked at.
        PostgreSQL may otherwise answer the few hosts a tick re-checks by hashing every
        active lease of the lab (2–3 ms at 10,000 hosts, against 0.2 for their own).
        """
        # Leases belong to the jobs app, which builds on this one: reach the model through
        # the reverse relation it declares, so hosts imports nothing from jobs.
        lease = self.model._meta.get_field("leases").related_model
        leases = lease.objects.active().filter(host=OuterRef("pk"))
        if among is not None:
            leases = leases.filter(host_id__in_array=among)
        return Exists(leases)

    def _running_a_job(self) -> Exists:
        """True for a host (the outer row) that an active job lease holds (not a reservation)."""
        lease = self.model._meta.get_field("leases").related_model
        return Exists(lease.objects.active().filter(host=OuterRef("pk"), job__isnull=False))

    def running_a_job(self) -> HostQuerySet:
        """Hosts held by an active job lease (not a reservation)."""
        return self.filter(self._running_a_job())

    def taking_capacity(self) -> HostQuerySet:
        """Hosts that each take one of their worker's capacity: of the hosts an active job
        lease holds, the first (lowest id) of each job on its worker. A multi-host job counts
        once on each worker it holds a host on (docs/scheduling.md#multi-host-jobs)."""
        lease = self.model._meta.get_field("leases").related_model
        job_lease = lease.objects.active().filter(job__isnull=False)
        # An earlier host of the same job on the same worker (the outer lease's).
        earlier = job_lease.filter(
            job_id=OuterRef("job_id"),
            host__worker_id=OuterRef("host__worker_id"),
            host_id__lt=OuterRef("host_id"),
        )
        first = job_lease.filter(host=OuterRef("pk")).filter(~Exists(earlier))
        return self.filter(Exists(first))

    def leased(self) -> HostQuerySet:
        """Hosts held by an active lease or reservation."""
        return self.filter(self._holding_a_lease())

    def unleased(self, among: Sequence[int] | None = None) -> HostQuerySet:
        """Hosts no active lease or reservation holds (`among`: see `_holding_a_lease`)."""
        return self.exclude(self._holding_a_lease(among))

    def with_leased(self) -> HostQuerySet:
        """Annotate each host with `is_leased`, for counting leased hosts in an aggregate."""
        return self.annotate(is_leased=self._holding_a_lease())

    def in_service(self, now: datetime) -> HostQuerySet:
        """Hosts someone may work on at `now`: unlocked, not retired, worker absent or up.

        What a maintenance job needs of its host besides being free; a test job also needs
        the host `ready` (`schedulable`).
        """
        worker_takes_work = Q(worker__isnull=True) | Q(
            worker__paused=False, worker__last_seen__gte=online_cutoff(now)
        )
        return (
            self.filter(locked=False).exclude(status=HostStatus.RETIRED).filter(worker_takes_work)
        )

    def schedulable(self, now: datetime, among: Sequence[int] | None = None) -> HostQuerySet:
        """Hosts that may take a lease at `now`: ready, unlocked, unleased, worker absent or up.

        The SQL twin of `hosts.rules.host_is_schedulable`, which the planner asks on the
        snapshot's plain data; tests/hosts/test_querysets.py holds the two to the same table of
        cases.

        `among`: the queryset is already limited to some of these hosts (by id), as the
        tick's re-check of the hosts it is about to lease is; the lease lookup then reads only
        theirs.
        """
        hosts = self.in_service(now).filter(status=HostStatus.READY)
        return hosts.unleased(among)
