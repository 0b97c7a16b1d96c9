"""Host and test reliability over a range, read from the audit trail in a few grouped queries.

Each statistic is one aggregate query grouped by host or by test name, whatever the size of
the lab: no query per host (docs/performance.md#statistics). What each figure counts is
docs/api.md#statistics.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.db.models import (
    Case,
    Count,
    DateTimeField,
    DurationField,
    ExpressionWrapper,
    F,
    Max,
    Q,
    Sum,
    Value,
    When,
)

from hosts.choices import HostStatus
from hosts.models import Host, HostEvent
from jobs.choices import JobKind, JobStatus
from jobs.models import Job, Lease
from schedsite.errors import InvalidInput
from stats.ranges import TimeRange

# Out of service: broken, being repaired, or given up on. A verify is routine, not an outage.
OUT_OF_SERVICE = (HostStatus.NEEDS_REPAIR, HostStatus.REPAIRING, HostStatus.REPAIR_FAILED)
# The results a run counts for: a test that ran to its end. Aborted, expired, skipped and
# error jobs say nothing of the test or of the host.
RESULTS = (JobStatus.PASSED, JobStatus.FAILED)


@dataclass(frozen=True)
class HostReliability:
    """One host's breaks, repairs, outage and jobs over a range."""

    hostname: str
    status: str  # now
    breaks: int
    repairs: int
    failed_repairs: int
    mtbf_hours: float | None  # hours in service per break; None without a break
    hours_out_of_service: float
    jobs: int
    passed: int

    @property
    def pass_rate(self) -> float | None:
        return self.passed / self.jobs if self.jobs else None


@dataclass(frozen=True)
class TestReliability:
    """One test name's runs over a range, whether it is flaky, and the hosts it failed on."""

    __test__ = False  # not a pytest test class, whatever its name

    name: str
    runs: int
    passed: int
    last_run: datetime
    flaky_builds: list[str] = field(default_factory=list)
    failed_on: list[tuple[str, int]] = field(default_factory=list)  # (hostname, failures)

    @property
    def failed(self) -> int:
        return self.runs - self.passed

    @property
    def pass_rate(self) -> float:
        return self.passed / self.runs

    @property
    def flaky(self) -> bool:
        return bool(self.flaky_builds)


def _since(end: datetime) -> ExpressionWrapper:
    """The time from a row's created_at to `end`, summable on PostgreSQL and SQLite alike."""
    return ExpressionWrapper(
        Value(end, output_field=DateTimeField()) - F("created_at"), output_field=DurationField()
    )


def _hours(value: timedelta | None) -> float:
    return value.total_seconds() / 3600 if value else 0.0


def _final_attempt() -> Q:
    """A lease of its job's last attempt: the one the job's result belongs to."""
    return Q(attempt=F("job__attempts")) | Q(attempt__isnull=True)


def hosts_reliability(window: TimeRange, *, label: str | None = None) -> list[HostReliability]:
    """Every host's reliability over the window, in hostname order (four queries); only the
    hosts carrying `label` when one is given (a label's page).

    Hours out of service are summed from the status events in the window: each move into an
    out-of-service status adds the time from it to the end, each move out subtracts it, and
    a host that was out of service as the window began (its status now, less the moves in
    it) adds the whole window. No event before the window is read.
    """
    start, end = window.start, window.end
    of_label = Q(host__labels__name=label) if label is not None else Q()
    hosts = list(
        Host.objects.filter(created_at__lt=end)
        .filter(Q(labels__name=label) if label is not None else Q())
        # A retired host is listed for the ranges it was still in use in.
        .filter(~Q(status=HostStatus.RETIRED) | Q(updated_at__gte=start))
        .order_by("hostname")
        # Only a host created inside the window needs its creation time: reading (and
        # parsing) 10,000 timestamps cost more than every other step (bench/stats.py).
        .annotate(since=Case(When(created_at__gt=start, then=F("created_at")), default=None))
        .values_list("pk", "hostname", "status", "since")
    )
    entering = Q(new_status__in=OUT_OF_SERVICE) & ~Q(old_status__in=OUT_OF_SERVICE)
    leaving = Q(old_status__in=OUT_OF_SERVICE) & ~Q(new_status__in=OUT_OF_SERVICE)
    moves = {
        row["host_id"]: row
        for row in HostEvent.objects.filter(
            of_label, host__isnull=False, created_at__gte=start, created_at__lte=end
        )
        .exclude(new_status="")
        .values("host_id")
        .annotate(
            # A break: a host in service goes to needs_repair. A failed repair sends it back
            # there too; that is the same break, counted under failed repairs.
            breaks=Count(
                "pk",
                filter=Q(new_status=HostStatus.NEEDS_REPAIR) & ~Q(old_status__in=OUT_OF_SERVICE),
            ),
            entered=Count("pk", filter=entering),
            left=Count("pk", filter=leaving),
            entered_for=Sum(_since(end), filter=entering),
            left_for=Sum(_since(end), filter=leaving),
        )
        .order_by()
    }
    repairs = {
        row["host_id"]: row
        for row in Job.objects.filter(
            of_label,
            kind=JobKind.REPAIR,
            status__in=RESULTS,
            finished_at__gte=start,
            finished_at__lte=end,
            host__isnull=False,
        )
        .values("host_id")
        .annotate(repairs=Count("pk"), failed=Count("pk", filter=Q(status=JobStatus.FAILED)))
        .order_by()
    }
    runs = {
        row["host_id"]: row
        for row in Lease.objects.filter(
            of_label,
            job__kind=JobKind.TEST,
            job__status__in=RESULTS,
            job__finished_at__gte=start,
            job__finished_at__lte=end,
        )
        .filter(_final_attempt())
        .values("host_id")
        .annotate(
            # One lease per host and attempt: counting leases counts each job once per host.
            jobs=Count("pk"),
            passed=Count("pk", filter=Q(job__status=JobStatus.PASSED)),
        )
        .order_by()
    }
    rows = []
    for pk, hostname, status, since in hosts:
        began = since or start
        window_hours = (end - began).total_seconds() / 3600
        m = moves.get(pk, {})
        entered, left = m.get("entered", 0), m.get("left", 0)
        # Out of service at the window's start: as now, less the moves made since.
        was_out = (status in OUT_OF_SERVICE) - entered + left
        out = _hours(m.get("entered_for")) - _hours(m.get("left_for"))
        out += window_hours if was_out > 0 else 0.0
        out = min(max(out, 0.0), window_hours)
        breaks = m.get("breaks", 0)
        r, j = repairs.get(pk, {}), runs.get(pk, {})
        rows.append(
            HostReliability(
                hostname=hostname,
                status=status,
                breaks=breaks,
                repairs=r.get("repairs", 0),
                failed_repairs=r.get("failed", 0),
                mtbf_hours=(window_hours - out) / breaks if breaks else None,
                hours_out_of_service=out,
                jobs=j.get("jobs", 0),
                passed=j.get("passed", 0),
            )
        )
    return rows


def tests_reliability(window: TimeRange) -> list[TestReliability]:
    """Every test name run in the window, by name (three queries).

    Flaky: on one build it both passed and failed. A job with no build (neither its suite nor
    itself names one) makes no test flaky: nothing says two such runs tested the same thing.
    """
    finished = Job.objects.filter(
        kind=JobKind.TEST,
        status__in=RESULTS,
        finished_at__gte=window.start,
        finished_at__lte=window.end,
    )
    names = (
        finished.values("name")
        .annotate(
            runs=Count("pk"),
            passed=Count("pk", filter=Q(status=JobStatus.PASSED)),
            last_run=Max("finished_at"),
        )
        .order_by("name")
    )
    flaky: dict[str, list[str]] = defaultdict(list)
    pairs = (
        # The build a job tested: its suite's, or its own for a standalone job (Job.build_to_test).
        finished.annotate(
            tested=Case(When(suite__isnull=False, then=F("suite__build")), default=F("build"))
        )
        .exclude(tested="")
        .values("name", "tested")
        .annotate(
            passed=Count("pk", filter=Q(status=JobStatus.PASSED)),
            failed=Count("pk", filter=Q(status=JobStatus.FAILED)),
        )
        .filter(passed__gt=0, failed__gt=0)
        .order_by("name", "tested")
    )
    for row in pairs:
        flaky[row["name"]].append(row["tested"])
    failed_on: dict[str, list[tuple[str, int]]] = defaultdict(list)
    failures = (
        Lease.objects.filter(
            job__kind=JobKind.TEST,
            job__status=JobStatus.FAILED,
            job__finished_at__gte=window.start,
            job__finished_at__lte=window.end,
        )
        .filter(_final_attempt())
        .values("job__name", "host__hostname")
        .annotate(failures=Count("job_id", distinct=True))
        .order_by("job__name", "-failures", "host__hostname")
    )
    for row in failures:
        failed_on[row["job__name"]].append((row["host__hostname"], row["failures"]))
    return [
        TestReliability(
            name=row["name"],
            runs=row["runs"],
            passed=row["passed"],
            last_run=row["last_run"],
            flaky_builds=flaky.get(row["name"], []),
            failed_on=failed_on.get(row["name"], []),
        )
        for row in names
    ]


# The columns a list sorts by (?ordering=breaks, -breaks for the most first), for each list.
HOST_ORDERINGS = (
    "hostname",
    "status",
    "breaks",
    "repairs",
    "failed_repairs",
    "mtbf_hours",
    "hours_out_of_service",
    "jobs",
    "pass_rate",
)
TEST_ORDERINGS = ("name", "runs", "passed", "failed", "pass_rate", "flaky", "last_run")


def ordered(rows: list, ordering: str | None, *, columns: tuple[str, ...], default: str) -> list:
    """The rows sorted by one column ("-" first: descending); a row without a value goes last.

    The name column breaks ties, so a page of equal counts reads in name order. An unknown
    column is an InvalidInput (a 400 that names the columns).
    """
    ordering = (ordering or default).strip()
    column = ordering.removeprefix("-")
    if column not in columns:
        raise InvalidInput(
            f"ordering must be one of {', '.join(columns)} (with - for descending), "
            f"not {ordering!r}",
            field="ordering",
        )
    name = columns[0]
    rows = sorted(rows, key=lambda row: getattr(row, name))
    present = [row for row in rows if getattr(row, column) is not None]
    missing = [row for row in rows if getattr(row, column) is None]
    present.sort(key=lambda row: getattr(row, column), reverse=ordering.startswith("-"))
    return present + missing
