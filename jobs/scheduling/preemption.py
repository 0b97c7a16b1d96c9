"""The preemption phase of the tick (opt-in): stop preemptible jobs for jobs far above them.

docs/scheduling.md#preemption. The planner decides who is stopped for whom
(`planner.preemption`); this reads the candidates and makes the moves, under row locks.
"""

from __future__ import annotations

from datetime import datetime

from django.db.models import Case, F, Value, When
from django.db.models.functions import Greatest

from hosts.audit import SCHEDULER
from jobs import selectors, transitions
from jobs.choices import ACTIVE_JOB_STATUSES, JobKind, JobStatus, ReleaseReason
from jobs.models import Lease, Suite
from jobs.scheduling import planner
from jobs.scheduling.planner.preemption import Preemption, Victim, preemptions
from jobs.scheduling.snapshot import Snapshot
from jobs.scheduling.triggers import request_tick
from jobs.transitions import Mover


def preemption_phase(
    *, snap: Snapshot, plan: planner.Plan, leased_now: set[int], now: datetime
) -> list[dict]:
    """Stop the preemptible jobs the plan's waiting jobs may take the hosts of; say which.

    Runs after the plan is applied, on what it left waiting. The freed hosts are leased by the
    next tick (asked for here), which gives each to the highest job in the queue that fits it:
    the job it was freed for, or one even higher. Three queries when preemption is on and some
    preemptible job holds a host; none when it is off.
    """
    policy = snap.policy
    if not policy.preemption:
        return []
    waiting = [job for job in snap.jobs if job.id in plan.wait_reasons]
    if not waiting:
        return []
    victims, spare = candidates(exclude_hosts=leased_now)
    if not victims:
        return []
    chosen = preemptions(
        waiting=planner.main_phase_order(waiting, policy, now, snap.usage),
        reasons=plan.wait_reasons,
        victims=victims,
        hosts_by_id=snap.hosts_by_id,
        spare=spare,
        policy=policy,
    )
    return _stop(chosen, now=now)


def candidates(
    *, exclude_hosts: set[int] | frozenset[int] = frozenset()
) -> tuple[list[Victim], dict[int, int]]:
    """The jobs preemption may stop, and the hosts each of their suites holds beyond its
    min_duts: what the tick's phase and a what-if plan read (one query, three with victims)."""
    victims = _victims(exclude_hosts=set(exclude_hosts))
    if not victims:
        return [], {}
    return victims, _spare_hosts({v.suite_id for v in victims if v.suite_id is not None})


def _victims(*, exclude_hosts: set[int]) -> list[Victim]:
    rows = (
        Lease.objects.active()
        .filter(
            job__preemptible=True,
            job__kind=JobKind.TEST,
            job__status__in=ACTIVE_JOB_STATUSES,
        )
        .values_list(
            "host_id", "job_id", "job__name", "job__priority", "job__suite_id", "acquired_at"
        )
    )
    return [
        Victim(host_id=h, job_id=j, name=name, priority=p, suite_id=s, acquired_at=at)
        for h, j, name, p, s, at in rows
        if h not in exclude_hosts
    ]


def _spare_hosts(suite_ids: set[int]) -> dict[int, int]:
    """Hosts each suite with a min_duts holds beyond it: how many of its jobs may be stopped."""
    minimums = dict(
        Suite.objects.filter(pk__in_array=suite_ids, min_duts__gt=0).values_list("id", "min_duts")
    )
    if not minimums:
        return {}
    held = selectors.suite_hosts_held(list(minimums))
    return {suite_id: held.get(suite_id, 0) - minimum for suite_id, minimum in minimums.items()}


def _stop(chosen: list[Preemption], *, now: datetime) -> list[dict]:
    """Release each victim's lease and requeue its job without using a retry, under locks."""
    if not chosen:
        return []
    by_job = {p.victim.job_id: p for p in chosen}
    leases = list(
        Lease.objects.select_for_update(of=("self",))
        .active()
        .filter(job_id__in=list(by_job), job__status__in=ACTIVE_JOB_STATUSES)
        .select_related("host", "job")
        .order_by("pk")  # every lease of each job (a multi-host job's all), in id order
    )
    if not leases:
        return []

    def said(lease: Lease) -> str:
        p = by_job[lease.job_id]
        return (
            f"job {lease.job.name} (priority {lease.job.priority}) preempted for job "
            f"{p.job.name} (#{p.job.id}, priority {p.job.priority}); requeued"
        )

    transitions.release_leases(
        leases,
        reason=ReleaseReason.PREEMPTED,
        mover=Mover.SCHEDULER,
        by=SCHEDULER,
        at=now,
        message=said,
    )
    messages = {
        lease.job_id: (
            f"preempted on {lease.host.hostname} for job {by_job[lease.job_id].job.name} "
            f"(#{by_job[lease.job_id].job.id}, priority {by_job[lease.job_id].job.priority}); "
            "requeued without using a retry"
        )
        for lease in leases
    }
    # One UPDATE for every victim, each with its own message. The lease that ends counted an
    # attempt; preemption takes it back.
    transitions.move_jobs(
        list(messages),
        to=JobStatus.QUEUED,
        mover=Mover.SCHEDULER,
        at=now,
        message=Case(*(When(pk=job_id, then=Value(text)) for job_id, text in messages.items())),
        attempts=Greatest(F("attempts") - 1, 0),
    )
    stopped = [
        {"job": lease.job.name, "host": lease.host.hostname, "for": by_job[lease.job_id].job.name}
        for lease in leases
    ]
    request_tick(f"preemption freed {len(stopped)} host(s)")
    return stopped
