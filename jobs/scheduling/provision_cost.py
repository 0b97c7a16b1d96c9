"""What provisioning adds to a job's expected run time, and which leases of a plan provision.

A job whose build no host of its board carries must have a host reimaged before its test
runs: its expected run time is its test's plus the median provisioning time of its board
(docs/scheduling.md#provisioning-in-the-size-estimate). The decision is per (board, build),
read from the hosts the snapshot already holds, and the medians are read at most once per
PROVISION_CACHE_S per process: a tick adds no query per job and reads no history every tick.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from datetime import datetime, timedelta

from django.db.models import F, Window
from django.db.models.functions import RowNumber

from hosts.choices import HostStatus, ProvisionResult
from hosts.models import Host, Provision
from jobs.scheduling import planner

BOARD_PREFIX = "board:"
PROVISION_WINDOW = timedelta(days=7)  # provisionings older than this say nothing of today's
PROVISION_HISTORY = 100  # the most recent provisionings per board a median is taken over
PROVISION_CACHE_S = 300.0  # how long a process keeps the medians before reading them again

# (board label or None for "any board", build): a ready host of that board carries the build.
Carried = frozenset[tuple[str | None, str]]


def board_of(labels: Iterable[str]) -> str | None:
    """A job's or host's board label ("board:eve"); the first in order if several, else None."""
    boards = sorted(label for label in labels if label.startswith(BOARD_PREFIX))
    return boards[0] if boards else None


def carried_builds(hosts: Iterable[planner.HostState]) -> Carried:
    """Which builds the ready hosts carry, per board label and across all boards (None)."""
    carried: set[tuple[str | None, str]] = set()
    for host in hosts:
        if host.ready and host.current_build:
            carried.add((None, host.current_build))
            for label in host.labels:
                if label.startswith(BOARD_PREFIX):
                    carried.add((label, host.current_build))
    return frozenset(carried)


def read_carried_builds() -> Carried:
    """`carried_builds` read from the database (one query), for a reader with no snapshot."""
    carried: set[tuple[str | None, str]] = set()
    ready = Host.objects.filter(status=HostStatus.READY).exclude(current_build="")
    for build in ready.order_by().values_list("current_build", flat=True).distinct():
        carried.add((None, build))
    rows = (
        Host.labels.through.objects.filter(
            label__name__startswith=BOARD_PREFIX,
            host__status=HostStatus.READY,
        )
        .exclude(host__current_build="")
        .order_by()
        .values_list("label__name", "host__current_build")
        .distinct()
    )
    carried.update(rows)
    return frozenset(carried)


def needs_provision(labels: Iterable[str], build: str, carried: Carried) -> bool:
    """Whether a job with these labels and build is expected to provision its host: it has a
    build and no ready host of its board (of any board, for a job with no board label) carries
    it."""
    return bool(build) and (board_of(labels), build) not in carried


def job_builds(
    jobs: Iterable[planner.JobState], suites: Iterable[planner.SuiteState]
) -> dict[int, str]:
    """Each job's build to test: its suite's, or its own for a standalone job ("" none)."""
    suite_build = {s.id: s.build for s in suites}
    return {j.id: j.build if j.suite_id is None else suite_build.get(j.suite_id, "") for j in jobs}


# --- the medians, kept per process ------------------------------------------------------------

_cache: tuple[datetime, dict[str | None, float]] | None = None


def read_provision_medians(*, now: datetime) -> dict[str | None, float]:
    """Median seconds of the successful provisionings of each board over PROVISION_WINDOW
    (its last PROVISION_HISTORY), and under None the median of all of those together."""
    ranked = (
        Provision.objects.filter(
            result=ProvisionResult.OK,
            seconds__isnull=False,
            created_at__gte=now - PROVISION_WINDOW,
        )
        .annotate(
            rank=Window(
                RowNumber(),
                partition_by=[F("board")],
                order_by=[F("created_at").desc(), F("id").desc()],
            )
        )
        .filter(rank__lte=PROVISION_HISTORY)
        .values_list("board", "seconds")
    )
    by_board: dict[str | None, list[float]] = {}
    for board, seconds in ranked:  # board "": hosts with no board label
        by_board.setdefault(board, []).append(seconds)
        by_board.setdefault(None, []).append(seconds)
    return {board: statistics.median(values) for board, values in by_board.items()}


def provision_medians(*, now: datetime) -> dict[str | None, float]:
    """`read_provision_medians`, read again only once PROVISION_CACHE_S passed since."""
    global _cache
    if _cache is not None:
        at, medians = _cache
        if timedelta(0) <= now - at < timedelta(seconds=PROVISION_CACHE_S):
            return medians
    medians = read_provision_medians(now=now)
    _cache = (now, medians)
    return medians


def forget() -> None:
    """Drop the kept medians: the next reader reads them (tests; a change of history)."""
    global _cache
    _cache = None


# --- the estimate -------------------------------------------------------------------------------


def provision_seconds(labels: Iterable[str], medians: Mapping[str | None, float]) -> float | None:
    """The expected provisioning time of a job with these labels: its board's median, else the
    median over every board; None with no history at all."""
    labels = list(labels)
    board = board_of(labels)
    seconds = medians.get(board) if board is not None else None
    return seconds if seconds is not None else medians.get(None)


def with_provisioning(
    jobs: Sequence[planner.JobState],
    *,
    builds: Mapping[int, str],
    carried: Carried,
    medians: Mapping[str | None, float],
    default_s: float,
) -> list[planner.JobState]:
    """The jobs with their board's provisioning time added to the size of those expected to
    provision. A job of unknown size counts `default_s` for its test, as the ordering would."""
    if not medians:
        return list(jobs)
    added: dict[tuple[frozenset[str], str], float | None] = {}
    out = []
    for job in jobs:
        build = builds.get(job.id, "")
        if not build:
            out.append(job)
            continue
        key = (job.labels, build)
        if key not in added:
            added[key] = (
                provision_seconds(job.labels, medians)
                if needs_provision(job.labels, build, carried)
                else None
            )
        extra = added[key]
        if extra is None:
            out.append(job)
            continue
        size = job.size_s if job.size_s is not None and job.size_s > 0 else default_s
        out.append(replace(job, size_s=size + extra))
    return out
