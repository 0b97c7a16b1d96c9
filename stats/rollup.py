"""The lab's history: one row set per minute, hours made from minutes, old rows pruned.

`lab_rollup(now=...)` runs once a minute (stats.tasks, a django-q2 schedule of its own, never
inside the scheduler's tick). It writes the minute that just ended: the state as it stands
(hosts by status, leased, held, queued by priority) and what happened in that minute (jobs
finished by result, waits of the jobs that got hosts, provisions, repairs), one row per
pool: and board: label and one for the whole lab (label ""). Its cost is a handful of
grouped queries over the lab as it is now, never over the history
(docs/performance.md#lab-history). A minute already written is left alone, and the
(bucket, label) unique constraints make two clusters write it once.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.conf import settings
from django.db.models import Count, Q

from hosts.choices import HostStatus, ProvisionResult
from hosts.models import Host, Provision
from jobs import selectors as job_selectors
from jobs.choices import JobKind, JobStatus
from jobs.models import Job, Lease, decode_labels
from stats.history import LAB, PREFIXES, tracked
from stats.models import LabHour, LabMinute, LabRollup

MINUTE = timedelta(minutes=1)
HOUR = timedelta(hours=1)
# Upper bounds, in seconds, of the wait histogram's buckets; the last bucket has none. An
# hour's percentiles are read from its minutes' summed histograms.
WAIT_BOUNDS = (5, 15, 30, 60, 120, 300, 600, 1800, 3600, 7200, 14400, 43200, 86400)
# Hours caught up at most after the rollup did not run: the minute rows kept cover no more.
CATCH_UP_HOURS = 48


def floor_minute(at: datetime) -> datetime:
    return at.replace(second=0, microsecond=0)


def floor_hour(at: datetime) -> datetime:
    return at.replace(minute=0, second=0, microsecond=0)


def _job_labels(label_key: str, roles: Sequence[dict] | None) -> set[str]:
    """The tracked labels a job asks for: its own and its roles' (a multi-host job)."""
    names = set(decode_labels(label_key))
    for role in roles or ():
        names.update(role.get("labels", ()))
    return {name for name in names if tracked(name)}


def histogram(waits: Iterable[float]) -> list[int]:
    counts = [0] * (len(WAIT_BOUNDS) + 1)
    for wait in waits:
        index = next((i for i, bound in enumerate(WAIT_BOUNDS) if wait <= bound), len(WAIT_BOUNDS))
        counts[index] += 1
    return counts


def exact_percentile(values: Sequence[float], q: float) -> float | None:
    """The nearest-rank percentile of the values (q in 0..1); None without any."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


def histogram_percentile(counts: Sequence[int], q: float) -> float | None:
    """A percentile read from a wait histogram, linear inside its bucket; None if empty.

    A wait past the last bound reads as that bound: the histogram says no more.
    """
    total = sum(counts)
    if not total:
        return None
    rank = max(1, math.ceil(q * total))
    seen = 0
    for index, count in enumerate(counts):
        if seen + count >= rank:
            if index == len(WAIT_BOUNDS):
                return float(WAIT_BOUNDS[-1])
            low = WAIT_BOUNDS[index - 1] if index else 0
            high = WAIT_BOUNDS[index]
            return low + (high - low) * (rank - seen) / count
        seen += count
    return float(WAIT_BOUNDS[-1])  # pragma: no cover - the ranks add up to the total


@dataclass
class _Figures:
    """One label's figures for a minute, as they are gathered."""

    hosts: Counter = field(default_factory=Counter)
    leased: int = 0
    held: int = 0
    queued: Counter = field(default_factory=Counter)
    waits: list[float] = field(default_factory=list)
    finished: Counter = field(default_factory=Counter)
    provisions: int = 0
    provisions_failed: int = 0
    repairs: int = 0
    repairs_failed: int = 0

    def row(self, model: type[LabRollup], bucket: datetime, label: str) -> LabRollup:
        return model(
            bucket=bucket,
            label=label,
            hosts=dict(sorted(self.hosts.items())),
            hosts_total=sum(self.hosts.values()),
            leased=self.leased,
            held=self.held,
            queued={str(p): n for p, n in sorted(self.queued.items(), reverse=True)},
            queued_total=sum(self.queued.values()),
            waits=histogram(self.waits),
            wait_p50_s=exact_percentile(self.waits, 0.5),
            wait_p95_s=exact_percentile(self.waits, 0.95),
            finished=dict(sorted(self.finished.items())),
            provisions=self.provisions,
            provisions_failed=self.provisions_failed,
            repairs=self.repairs,
            repairs_failed=self.repairs_failed,
        )


class _Minute:
    """The figures of one minute, per label, as they are gathered."""

    def __init__(self, bucket: datetime) -> None:
        self.start, self.end = bucket, bucket + MINUTE
        self.figures: dict[str, _Figures] = defaultdict(_Figures)
        self.host_labels: dict[int, list[str]] = defaultdict(list)

    def of(self, labels: Iterable[str]) -> list[_Figures]:
        """The figures a row of these tracked labels counts in: the lab's and each label's."""
        return [self.figures[LAB], *(self.figures[name] for name in labels)]

    def hosts(self) -> None:
        """Hosts by status, leased and held, under each of their tracked labels."""
        pairs = Host.labels.through.objects.filter(
            Q(label__name__startswith=PREFIXES[0]) | Q(label__name__startswith=PREFIXES[1])
        ).exclude(host__status=HostStatus.RETIRED)
        for host_id, name in pairs.values_list("host_id", "label__name"):
            self.host_labels[host_id].append(name)
        statuses = Host.objects.exclude(status=HostStatus.RETIRED).values_list("pk", "status")
        leased = set(Lease.objects.active().values_list("host_id", flat=True).order_by())
        held = set(job_selectors.current_holds()) - leased
        for host_id, status in statuses.order_by():
            for each in self.of(self.host_labels.get(host_id, ())):
                each.hosts[status] += 1
                each.leased += host_id in leased
                each.held += host_id in held

    def queue(self) -> None:
        """Queued jobs by priority: grouped by label set in the database, multi-host apart."""
        queued = Job.objects.queued()
        one_host = queued.filter(roles=[]).values("label_key", "priority").annotate(n=Count("pk"))
        for row in one_host.order_by():
            for each in self.of(_job_labels(row["label_key"], ())):
                each.queued[row["priority"]] += row["n"]
        multi = queued.exclude(roles=[]).values_list("label_key", "roles", "priority")
        for label_key, roles, priority in multi:
            for each in self.of(_job_labels(label_key, roles)):
                each.queued[priority] += 1

    def finished(self) -> None:
        """Test jobs that ended in the minute, by result."""
        ended = Job.objects.filter(
            kind=JobKind.TEST, finished_at__gte=self.start, finished_at__lt=self.end
        )
        for row in ended.values("label_key", "roles", "status").annotate(n=Count("pk")).order_by():
            for each in self.of(_job_labels(row["label_key"], row["roles"])):
                each.finished[row["status"]] += row["n"]

    def waits(self) -> None:
        """Each test job that got its (first) host in the minute: from submission to lease."""
        leases = Lease.objects.filter(
            acquired_at__gte=self.start, acquired_at__lt=self.end, slot=0, job__kind=JobKind.TEST
        ).values_list("job__label_key", "job__roles", "job__created_at", "acquired_at")
        for label_key, roles, created_at, acquired_at in leases.order_by():
            wait = max(0.0, (acquired_at - created_at).total_seconds())
            for each in self.of(_job_labels(label_key, roles)):
                each.waits.append(wait)

    def maintenance(self) -> None:
        """Repairs that ended and provisions reported in the minute, by their host's labels."""
        repairs = Job.objects.filter(
            kind=JobKind.REPAIR, finished_at__gte=self.start, finished_at__lt=self.end
        ).values_list("host_id", "status")
        for host_id, status in repairs.order_by():
            for each in self.of(self.host_labels.get(host_id, ())):
                each.repairs += 1
                each.repairs_failed += status != JobStatus.PASSED
        provisions = Provision.objects.filter(
            created_at__gte=self.start, created_at__lt=self.end
        ).values_list("host_id", "result")
        for host_id, result in provisions.order_by():
            for each in self.of(self.host_labels.get(host_id, ())):
                each.provisions += 1
                each.provisions_failed += result == ProvisionResult.FAILED


def minute_rows(*, bucket: datetime) -> list[LabMinute]:
    """The rows of the minute starting at `bucket`: the state now, the events in the minute.

    Ten queries whatever the lab's size or age; the Python work is one pass over the hosts.
    """
    minute = _Minute(bucket)
    minute.hosts()
    minute.queue()
    minute.finished()
    minute.waits()
    minute.maintenance()
    return [minute.figures[label].row(LabMinute, bucket, label) for label in sorted(minute.figures)]


def hour_rows(minutes: Sequence[LabMinute], *, bucket: datetime) -> list[LabHour]:
    """An hour's rows from its minute rows: gauges averaged over the minutes written, counters
    and wait histograms summed, percentiles read from the summed histogram."""
    by_label: dict[str, list[LabMinute]] = defaultdict(list)
    for row in minutes:
        by_label[row.label].append(row)
    rows = []
    for label, group in sorted(by_label.items()):
        n = len(group)

        def mean(values: Iterable[float], n: int = n) -> float:
            return round(sum(values) / n, 2)

        def mean_map(maps: Iterable[dict], n: int = n) -> dict[str, float]:
            total: Counter = Counter()
            for each in maps:
                total.update(each)
            return {key: round(value / n, 2) for key, value in total.items()}

        def sum_map(maps: Iterable[dict]) -> dict[str, int]:
            total: Counter = Counter()
            for each in maps:
                total.update(each)
            return dict(sorted(total.items()))

        waits = [sum(column) for column in zip(*(row.waits for row in group), strict=True)]
        rows.append(
            LabHour(
                bucket=bucket,
                label=label,
                samples=n,
                hosts=dict(sorted(mean_map(row.hosts for row in group).items())),
                hosts_total=mean(row.hosts_total for row in group),
                leased=mean(row.leased for row in group),
                held=mean(row.held for row in group),
                queued=dict(
                    sorted(
                        mean_map(row.queued for row in group).items(),
                        key=lambda item: -int(item[0]),
                    )
                ),
                queued_total=mean(row.queued_total for row in group),
                waits=waits,
                wait_p50_s=histogram_percentile(waits, 0.5),
                wait_p95_s=histogram_percentile(waits, 0.95),
                finished=sum_map(row.finished for row in group),
                provisions=sum(row.provisions for row in group),
                provisions_failed=sum(row.provisions_failed for row in group),
                repairs=sum(row.repairs for row in group),
                repairs_failed=sum(row.repairs_failed for row in group),
            )
        )
    return rows


@dataclass(frozen=True)
class RollupResult:
    minute: str | None  # the minute written, ISO 8601; None if it was there already
    minute_rows: int
    hours: list[str]  # the hours written
    pruned_minutes: int
    pruned_hours: int

    def as_dict(self) -> dict:
        return {
            "minute": self.minute,
            "minute_rows": self.minute_rows,
            "hours": self.hours,
            "pruned_minutes": self.pruned_minutes,
            "pruned_hours": self.pruned_hours,
        }


def lab_rollup(*, now: datetime) -> RollupResult:
    """Write the minute that ended last, the hours completed since the last hour written,
    and prune what is past keeping. Running it twice for one minute writes nothing more."""
    bucket = floor_minute(now) - MINUTE
    written = 0
    if not LabMinute.objects.filter(bucket=bucket, label=LAB).exists():
        # ignore_conflicts: a row another cluster wrote first stays as it is.
        written = len(
            LabMinute.objects.bulk_create(minute_rows(bucket=bucket), ignore_conflicts=True)
        )
    hours = roll_hours(upto=floor_hour(bucket + MINUTE))
    minutes_cut = now - timedelta(hours=settings.STATS_MINUTES_KEPT_HOURS)
    hours_cut = now - timedelta(days=settings.STATS_HOURS_KEPT_DAYS)
    pruned_minutes, _ = LabMinute.objects.filter(bucket__lt=minutes_cut).delete()
    pruned_hours, _ = LabHour.objects.filter(bucket__lt=hours_cut).delete()
    return RollupResult(
        minute=bucket.isoformat() if written else None,
        minute_rows=written,
        hours=[hour.isoformat() for hour in hours],
        pruned_minutes=pruned_minutes,
        pruned_hours=pruned_hours,
    )


def roll_hours(*, upto: datetime) -> list[datetime]:
    """Make the hour rows of each complete hour before `upto` not yet made, from the last hour
    written on (at most CATCH_UP_HOURS back). Usually one hour, or none: one query."""
    last = LabHour.objects.order_by("-bucket").values_list("bucket", flat=True).first()
    start = upto - CATCH_UP_HOURS * HOUR
    if last is not None:
        start = max(start, last + HOUR)
    if start >= upto:
        return []  # the last complete hour is written: no query more
    # The hours that have minute rows (the lab-wide row is written for every minute).
    hours = sorted(
        {
            floor_hour(bucket)
            for bucket in LabMinute.objects.filter(
                label=LAB, bucket__gte=start, bucket__lt=upto
            ).values_list("bucket", flat=True)
        }
    )
    for hour in hours:
        minutes = list(LabMinute.objects.filter(bucket__gte=hour, bucket__lt=hour + HOUR))
        LabHour.objects.bulk_create(hour_rows(minutes, bucket=hour), ignore_conflicts=True)
    return hours
