"""The tick's fan-out phase: a fan-out suite follows the lab, as Nomad's sysbatch jobs do.

A fan-out suite is open while it has a job queued, leased or running and was not aborted. On
every tick, for each open one:

- a host that carries its labels and has no job of it (it joined the lab, its labels started
  matching, or it came back from `repair_failed` after its job was skipped) gets a job, unless
  the suite's `fanout_until` has passed;
- a queued job whose host will not run it ends `skipped`, saying why: the host was retired, its
  repairs gave up (`repair_failed`), or it no longer carries the labels.

Runs inside the tick's transaction, before the plan, so a job added here is leased by this very
tick when its host is free. The tick runs it only when its change log says something was
written since the last tick (everything the phase reads is logged); then, with no open fan-out
suite, it costs one query. The database keeps one unskipped job per (suite, host)
(`one_fanout_job_per_host`): two ticks racing past the tick lock add a host's job once.
docs/scheduling.md#fan-out-follows-the-lab.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime

from django.db.models import Exists, OuterRef, Q, QuerySet

from hosts.choices import HostStatus
from hosts.models import Host
from jobs import transitions
from jobs.choices import JobStatus
from jobs.job_specs import FANOUT_GONE, fanout_lab, fanout_spec, job_from_spec
from jobs.models import Job, Suite, decode_labels
from jobs.suite_body import fanout_name
from jobs.transitions import Mover
from schedsite.prepared import PreparedQuery


@dataclass
class FanoutResult:
    """What one fan-out phase did."""

    added: int = 0  # jobs given to hosts that joined
    skipped: int = 0  # queued jobs whose host will not run them


def open_fanout_suites() -> QuerySet[Suite]:
    """Fan-out suites not aborted with a job still to run: those that follow the lab."""
    return (
        Suite.objects.unfinished()
        .exclude(fanout_labels="")
        .filter(aborted_at__isnull=True)
        .select_related("owner")
    )


# Compiled once per process (schedsite.prepared): every tick after a change asks, and building
# the query's SQL cost more CPU than running it (most labs have no open fan-out suite).
_OPEN_FANOUT_SUITES = PreparedQuery(open_fanout_suites)


def fanout_phase(*, now: datetime) -> FanoutResult:
    """Give each open fan-out suite's new hosts their job; skip jobs whose host is gone."""
    result = FanoutResult()
    for suite in _OPEN_FANOUT_SUITES.all():
        labels = decode_labels(suite.fanout_labels)
        if suite.fanout_until is None or now < suite.fanout_until:
            result.added += add_joined(suite, joined_hosts(suite, labels), labels, now=now)
        result.skipped += skip_gone(suite, labels, now=now)
    return result


def _has_job(suite: Suite) -> Exists:
    """True for a host (the outer row) that has a job of the fan-out not skipped."""
    jobs = Job.objects.filter(suite=suite, fanout=True, host=OuterRef("pk"))
    return Exists(jobs.exclude(status=JobStatus.SKIPPED))


def joined_hosts(suite: Suite, labels: list[str]) -> list[tuple[int, str]]:
    """(id, hostname) of the hosts the fan-out runs on that have no job of it yet: one query."""
    lab = fanout_lab(labels).exclude(_has_job(suite)).order_by("hostname")
    return list(lab.values_list("pk", "hostname"))


def add_joined(
    suite: Suite, hosts: list[tuple[int, str]], labels: list[str], *, now: datetime
) -> int:
    """Create the fan-out's job on each host; one a racing tick made already is left alone."""
    if not hosts:
        return 0
    name = fanout_name(suite, suite.jobs.filter(fanout=True).values_list("name", flat=True)[:1])
    rows = []
    for pk, hostname in hosts:
        host = Host(pk=pk, hostname=hostname)  # the fields the spec reads: no read per host
        job = job_from_spec(fanout_spec(labels, name, host), suite=suite, owner=None, now=now)
        job.owner, job.fanout = suite.owner, True
        rows.append(job)
    # ON CONFLICT DO NOTHING: the unique (suite, host) index turns a racing duplicate into a
    # no-op instead of an error that would roll the whole tick back.
    Job.objects.bulk_create(rows, ignore_conflicts=True)
    made = suite.jobs.filter(fanout=True, created_at=now, host_id__in=[pk for pk, _ in hosts])
    return made.count()


# Why a queued fan-out job will not run on its host, by the host's status.
GONE_REASONS = {
    HostStatus.RETIRED: "host {host} was retired",
    HostStatus.REPAIR_FAILED: "host {host} is repair_failed: its repairs gave up",
}
NO_LONGER_MATCHES = "host {host} no longer carries {labels}"


def skip_gone(suite: Suite, labels: list[str], *, now: datetime) -> int:
    """End `skipped` the suite's queued jobs whose host is gone or no longer matches."""
    carrying = Host.objects.carrying(labels).values("pk")
    waiting = Job.objects.queued().filter(suite=suite, fanout=True)
    gone = waiting.filter(Q(host__status__in=FANOUT_GONE) | ~Q(host__in=carrying))
    said: dict[str, list[int]] = defaultdict(list)
    for pk, hostname, status in gone.values_list("pk", "host__hostname", "host__status"):
        why = GONE_REASONS.get(status, NO_LONGER_MATCHES)
        said[why.format(host=hostname, labels=", ".join(labels))].append(pk)
    skipped = 0
    for why, ids in said.items():
        skipped += transitions.move_jobs(
            ids,
            to=JobStatus.SKIPPED,
            mover=Mover.SCHEDULER,
            at=now,
            message=f"skipped: {why}, so the fan-out does not wait for it",
        )
    return skipped
