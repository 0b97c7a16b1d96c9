"""The tick's maintenance phase: expire jobs that waited too long, then verify and repair hosts.

Runs inside the tick's transaction, after lease expiry and before the planner, so a host due a
verify or a repair gets it before any test job (docs/health.md).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable
from datetime import datetime, timedelta

from django.conf import settings
from django.db.models import Count, Exists, F, OuterRef, Q, QuerySet, Subquery

from hosts import audit
from hosts.audit import SCHEDULER
from hosts.choices import AWAITING_MAINTENANCE, IN_MAINTENANCE, EventKind, HostStatus
from hosts.models import HealthPolicy, Host, Worker
from hosts.rules import job_fits_host
from jobs import selectors, transitions
from jobs.choices import MAINTENANCE_KINDS, JobKind, JobStatus
from jobs.models import Job, Lease, decode_labels
from jobs.recovery import fresh_repair_round, sooner_gaps
from jobs.transitions import Mover

MAINTENANCE_PRIORITY = 100

# The queued test jobs a sooner automatic repair reads at most, from the head of the queue in
# the planner's order (docs/health.md#sooner-when-jobs-need-it): the jobs a wanted host would
# serve first, and a bound on the cost of asking at 100,000 queued jobs.
DEMAND_SCAN = 1000

# The host statuses a maintenance job of each kind may start from, and the one it holds.
STARTS_FROM = {
    JobKind.VERIFY: (HostStatus.READY, HostStatus.NEEDS_VERIFY),
    JobKind.REPAIR: (HostStatus.NEEDS_REPAIR,),
}
HOLDS = {JobKind.VERIFY: HostStatus.VERIFYING, JobKind.REPAIR: HostStatus.REPAIRING}


def maintenance_phase(*, now: datetime, due: bool | None = None) -> tuple[int, list[dict]]:
    """Expire overdue queued jobs, create due maintenance jobs, lease those whose host is free.

    Returns how many jobs expired, and the leases made (as the tick reports them). `due`:
    whether `maintenance_work` found any, if the caller asked already.
    """
    if not (_anything_to_do(now=now) if due is None else due):
        return 0, []
    expired = expire_queued(now=now)
    release_orphans(now=now)
    retry_repair_failed(now=now)
    create_due(now=now)
    return expired, lease_maintenance(now=now)


def _anything_to_do(*, now: datetime) -> bool:
    """One query for the common case, a lab with nothing to expire, check or repair."""
    work = maintenance_work(now)
    # Uncorrelated EXISTS on any one row; with no host at all, look the long way.
    row = (
        Host.objects.annotate(**{name: Exists(qs) for name, qs in work.items()})
        .values_list(*work)
        .first()
    )
    return row is None or any(row)


def maintenance_work(now: datetime) -> dict[str, QuerySet]:
    """What the maintenance phase acts on, by kind: any row of any of them is work to do."""
    return {
        "expiring": Job.objects.queued().filter(expires_at__lt=now),
        "maintenance": Job.objects.queued().filter(kind__in=MAINTENANCE_KINDS),
        "hosts": Host.objects.filter(status__in=(*AWAITING_MAINTENANCE, *IN_MAINTENANCE)),
        "repair_failed": _repair_failed_due(now),
        "repair_failed_sooner": _repair_failed_sooner(now),
        "policies": HealthPolicy.objects.filter(enabled=True),
    }


def expire_queued(*, now: datetime) -> int:
    """End queued jobs past their expires_at, saying why they waited."""
    overdue = list(
        Job.objects.select_for_update(skip_locked=True, of=("self",))
        .queued()
        .filter(expires_at__lt=now)
        .select_related("host__worker")
    )
    if not overdue:
        return 0
    reasons = selectors.wait_reasons_for(overdue)
    said: dict[str, list[int]] = defaultdict(list)  # one UPDATE per message, not per job
    for job in overdue:
        why = reasons.get(job.pk, {}).get("message", "no reason recorded")
        text = f"expired after {job.expires_after} s in the queue; it waited because: {why}"
        said[text].append(job.pk)
    for text, ids in said.items():
        transitions.move_jobs(
            ids, to=JobStatus.EXPIRED, mover=Mover.SCHEDULER, at=now, message=text
        )
    return len(overdue)


def release_orphans(*, now: datetime) -> None:
    """Send back hosts left verifying or repairing with no maintenance job holding them.

    A verify or repair job can end other than by its result: aborted by staff or its runner,
    timed out, its lease released by hand. Its host would then wait in `verifying` or
    `repairing` for a job that never comes; instead it waits for a new one.
    """
    held = Lease.objects.active().filter(host=OuterRef("pk"), job__kind__in=MAINTENANCE_KINDS)
    orphans = Host.objects.filter(status__in=IN_MAINTENANCE).exclude(Exists(held))
    back = {
        HostStatus.VERIFYING: HostStatus.NEEDS_VERIFY,
        HostStatus.REPAIRING: HostStatus.NEEDS_REPAIR,
    }
    for status, to in back.items():
        ids = list(orphans.filter(status=status).values_list("pk", flat=True))
        if ids:
            transitions.move_hosts(
                ids,
                to=to,
                mover=Mover.SCHEDULER,
                by=SCHEDULER,
                why="its maintenance job ended without a result (aborted, timed out or released)",
                at=now,
            )


def _repair_failed_due(now: datetime) -> QuerySet[Host]:
    """repair_failed hosts whose automatic repair is due; with it turned off, every one that
    still shows a time (to clear it)."""
    if settings.REPAIR_FAILED_RETRY_SECONDS <= 0:
        return Host.objects.filter(next_repair_at__isnull=False)
    return Host.objects.filter(status=HostStatus.REPAIR_FAILED, next_repair_at__lte=now)


def _repair_failed_sooner(now: datetime) -> QuerySet[Host]:
    """repair_failed hosts in service whose automatic repair is not due yet but would come now
    if queued jobs need them: REPAIR_FAILED_DEMAND_SECONDS (doubled per failed round) since
    the give-up have passed. Plain comparisons, one per count of rounds
    (jobs.recovery.sooner_gaps)."""
    gaps = sooner_gaps()
    if not gaps:
        return Host.objects.none()
    window = Q()
    for rounds, gap in gaps.items():
        count = Q(repair_rounds__gte=rounds) if rounds == 32 else Q(repair_rounds=rounds)
        window |= count & Q(next_repair_at__lte=now + gap)
    failed = Host.objects.in_service(now).filter(status=HostStatus.REPAIR_FAILED)
    return failed.filter(next_repair_at__gt=now).filter(window)


def _queue_head(now: datetime) -> list[tuple[frozenset[str], int | None, datetime]]:
    """The first DEMAND_SCAN queued test jobs in the planner's order that could run now (not
    waiting out a retry's backoff), one-host jobs only: their labels, pin and submission."""
    head = (
        Job.objects.queued()
        .filter(kind=JobKind.TEST)
        .order_by("-priority", "submitted_at", "id")  # the index job_queue_order
        .values_list("label_key", "host_id", "submitted_at", "not_before", "roles")
    )[:DEMAND_SCAN]
    return [
        (frozenset(decode_labels(label_key)), pinned, submitted_at)
        for label_key, pinned, submitted_at, not_before, roles in head
        if not roles and (not_before is None or not_before <= now)
    ]


def _labels_of(host_ids: Iterable[int]) -> dict[int, set[str]]:
    labels_of: dict[int, set[str]] = {host_id: set() for host_id in host_ids}
    carried = Host.labels.through.objects.filter(host_id__in=labels_of)
    for host_id, name in carried.values_list("host_id", "label__name"):
        labels_of[host_id].add(name)
    return labels_of


def jobs_waiting_for(
    hosts: list[Host], *, now: datetime, head: list | None = None
) -> dict[int, int]:
    """For each host, how many queued test jobs that fit it (labels and pin, hosts.rules) have
    waited REPAIR_FAILED_DEMAND_SECONDS or more since submission, among the first DEMAND_SCAN
    of the queue in the planner's order. One-host jobs only; a job waiting out a retry's
    backoff does not count."""
    cutoff = now - timedelta(seconds=settings.REPAIR_FAILED_DEMAND_SECONDS)
    labels_of = _labels_of(host.pk for host in hosts)
    counts = dict.fromkeys(labels_of, 0)
    for labels, pinned, submitted_at in _queue_head(now) if head is None else head:
        if submitted_at > cutoff:
            continue
        for host_id, host_labels in labels_of.items():
            if job_fits_host(
                labels=labels, pinned_host_id=pinned, host_id=host_id, host_labels=host_labels
            ):
                counts[host_id] += 1
    return counts


def idle_slots(
    worker_ids: set[int], *, now: datetime, head: list | None = None
) -> dict[int, int | None]:
    """For each worker, how many of its free slots no queued test job waits for (None:
    unlimited, docs/scheduling.md#worker-capacity): its capacity less the jobs it runs, the
    maintenance jobs queued for its hosts, and the queued test jobs (the head of the queue, as
    `jobs_waiting_for` reads it) that fit one of its free ready hosts. A round of repairs on a
    host of a worker with a slot left over costs nothing anyone waits for."""
    workers = Worker.objects.filter(pk__in=worker_ids)
    loads = workers.worker_loads()
    names = dict(workers.values_list("pk", "name"))
    slots: dict[int, int | None] = dict.fromkeys(worker_ids, None)
    limited = {pk for pk, name in names.items() if name in loads}
    if not limited:
        return slots
    pending = Counter(
        Job.objects.queued()
        .filter(kind__in=MAINTENANCE_KINDS, host__worker_id__in=limited)
        .values_list("host__worker_id", flat=True)
    )
    free = dict(
        Host.objects.in_service(now)
        .filter(status=HostStatus.READY, worker_id__in=limited)
        .unleased()
        .values_list("pk", "worker_id")
    )
    labels_of = _labels_of(free)
    wanted: Counter[int] = Counter()
    for labels, pinned, _submitted_at in _queue_head(now) if head is None else head:
        fitting = {
            free[host_id]
            for host_id, host_labels in labels_of.items()
            if job_fits_host(
                labels=labels, pinned_host_id=pinned, host_id=host_id, host_labels=host_labels
            )
        }
        wanted.update(fitting)  # a job that fits hosts of two workers may take either's slot
    for pk in limited:
        load = loads[names[pk]]
        slots[pk] = max(0, (load.limit or 0) - load.running - pending[pk] - wanted[pk])
    return slots


def retry_repair_failed(*, now: datetime) -> list[Job]:
    """Give each repair_failed host whose next_repair_at has come an automatic repair round,
    and one that queued jobs need, or that the lab is idle for, its round sooner.

    The host goes to needs_repair (a status event by the scheduler saying it is automatic) with
    a fresh round of REPAIR_MAX_ATTEMPTS repairs, as staff's Repair now gives
    (jobs.recovery.fresh_repair_round), and one more round counted (Host.repair_rounds): a
    round that fails sends the host back to repair_failed with twice the wait
    (jobs.recovery.repair_failed_retry). A locked host, a retired one or one whose worker is
    paused or offline is left alone; it keeps its time and gets the round once it is back in
    service.

    Sooner: a host whose REPAIR_FAILED_DEMAND_SECONDS since the give-up have passed (doubled
    per failed round, jobs.recovery.repair_failed_demand_wait) gets its round now when queued
    test jobs that fit it have waited that long too (`jobs_waiting_for`), or when the lab is
    idle for it: its worker has a free slot that no queued test job waits for (`idle_slots`);
    its status event says which, and how many jobs.
    """
    due = _repair_failed_due(now)
    if settings.REPAIR_FAILED_RETRY_SECONDS <= 0:
        due.update(next_repair_at=None)
        return []
    ids = list(
        due.filter(pk__in=Host.objects.in_service(now).values("pk"))
        .order_by("pk")
        .values_list("pk", flat=True)
    )
    tries = f"a new round of {settings.REPAIR_MAX_ATTEMPTS} tries"
    moved = _start_round(
        ids,
        why=f"automatic repair: its next_repair_at came (REPAIR_FAILED_RETRY_SECONDS); {tries}",
        now=now,
    )
    jobs = _queue_repairs(moved, why="automatic repair of repair_failed", now=now)
    sooner = list(
        _repair_failed_sooner(now).only("id", "next_repair_at", "worker_id").order_by("pk")
    )
    if not sooner:
        return jobs
    minutes = settings.REPAIR_FAILED_DEMAND_SECONDS // 60
    head = _queue_head(now)
    counts = jobs_waiting_for(sooner, now=now, head=head)
    unwanted = {host.worker_id for host in sooner if not counts[host.pk]}
    slots = idle_slots(unwanted, now=now, head=head) if unwanted else {}
    for host in sooner:
        waiting = counts[host.pk]
        was = f"its next_repair_at was {host.next_repair_at:%Y-%m-%d %H:%M} UTC"
        if waiting:
            jobs_words = "1 queued test job" if waiting == 1 else f"{waiting} queued test jobs"
            why = (
                f"automatic repair, sooner: {jobs_words} that fit it waited {minutes} min or "
                f"more (REPAIR_FAILED_DEMAND_SECONDS; {was}); {tries}"
            )
        elif slots.get(host.worker_id, 0) != 0:
            where = "its worker has" if host.worker_id else "it has no worker, so it takes"
            why = (
                f"automatic repair, sooner: the lab is idle for it ({where} a free slot no "
                f"queued test job waits for; {minutes} min or more since the give-up, "
                f"REPAIR_FAILED_DEMAND_SECONDS; {was}); {tries}"
            )
        else:
            continue
        moved = _start_round([host.pk], why=why, now=now)
        left = slots.get(host.worker_id)
        if moved and not waiting and left is not None:
            slots[host.worker_id] = left - 1  # its repair takes one of the slots
        jobs += _queue_repairs(moved, why="automatic repair of repair_failed, sooner", now=now)
    return jobs


def _start_round(ids: list[int], *, why: str, now: datetime) -> list[int]:
    """Move repair_failed hosts to needs_repair for a fresh, counted automatic round."""
    if not ids:
        return []
    return transitions.move_hosts(
        ids,
        to=HostStatus.NEEDS_REPAIR,
        mover=Mover.SCHEDULER,
        by=SCHEDULER,
        why=why,
        at=now,
        sources=(HostStatus.REPAIR_FAILED,),
        **fresh_repair_round(),
        repair_rounds=F("repair_rounds") + 1,
    )


def _queue_repairs(moved: list[int], *, why: str, now: datetime) -> list[Job]:
    if not moved:
        return []
    hosts = Host.objects.filter(pk__in=moved).exclude(_unfinished_maintenance())
    due_jobs = [(host, JobKind.REPAIR) for host in hosts.only("id", "hostname").order_by("pk")]
    return create_maintenance_jobs(due_jobs, now=now, why=why)


def _unfinished_maintenance() -> Exists:
    return Exists(Job.objects.unfinished().filter(kind__in=MAINTENANCE_KINDS, host=OuterRef("pk")))


def create_due(*, now: datetime) -> list[Job]:
    """Create a verify or repair job for each host that needs one and has none yet."""
    hosts = Host.objects.in_service(now).exclude(_unfinished_maintenance())
    repair_due = Q(status=HostStatus.NEEDS_REPAIR) & (
        Q(repair_not_before__isnull=True) | Q(repair_not_before__lte=now)
    )
    waiting = hosts.filter(repair_due | Q(status=HostStatus.NEEDS_VERIFY)).only(
        "id", "hostname", "status"
    )
    kind_of = {HostStatus.NEEDS_REPAIR: JobKind.REPAIR, HostStatus.NEEDS_VERIFY: JobKind.VERIFY}
    due = [(host, kind_of[host.status]) for host in waiting]
    due += [(host, JobKind.VERIFY) for host in _policy_due(hosts, now=now)]
    return create_maintenance_jobs(due, now=now, why="due")


def _policy_due(hosts: Iterable[Host], *, now: datetime) -> list[Host]:
    """Free ready hosts that an enabled health policy says are due a verify."""
    policies = list(HealthPolicy.objects.filter(enabled=True))
    if not policies:
        return []
    free = (
        Host.objects.filter(pk__in=hosts.values("pk"))  # type: ignore[attr-defined]
        .filter(status=HostStatus.READY)
        .unleased()
        .prefetch_related("labels")
    )
    due = []
    for policy in policies:
        matching = free.carrying(policy.labels) if policy.labels else free
        never = Q(last_verified_at__isnull=True)
        if policy.every_hours:
            never |= Q(last_verified_at__lt=now - timedelta(hours=policy.every_hours))
        due += list(matching.filter(never).only("id", "hostname"))
        if policy.every_jobs:
            due += _busy_since_verify(matching.exclude(never), policy.every_jobs)
    return list({host.pk: host for host in due}.values())


def _busy_since_verify(hosts: Iterable[Host], every_jobs: int) -> list[Host]:
    """Hosts that ran `every_jobs` test jobs or more since their last verify."""
    runs = (
        Lease.objects.filter(
            host=OuterRef("pk"),
            job__kind=JobKind.TEST,
            acquired_at__gt=OuterRef("last_verified_at"),
        )
        .values("host")
        .annotate(n=Count("id"))
        .values("n")
    )
    counted = hosts.annotate(runs=Subquery(runs))  # type: ignore[attr-defined]
    return list(counted.filter(runs__gte=every_jobs).only("id", "hostname"))


def create_maintenance_jobs(
    due: Iterable[tuple[Host, str]], *, now: datetime, why: str, by: audit.Actor = SCHEDULER
) -> list[Job]:
    """Create queued maintenance jobs pinned to their hosts, and note each on its host."""
    due = list(due)
    if not due:
        return []
    jobs = Job.objects.bulk_create(
        [
            Job(
                kind=kind,
                name=f"{kind} {host.hostname}",
                host=host,
                priority=MAINTENANCE_PRIORITY,
                timeout=timedelta(seconds=settings.MAINTENANCE_TIMEOUT),
                created_at=now,
                submitted_at=now,
            )
            for host, kind in due
        ]
    )
    events = []
    for (host, kind), job in zip(due, jobs, strict=True):
        text = f"{kind} job {job.pk} queued ({why})"
        events.append(
            audit.entry(EventKind.UPDATED, actor=by, host=host, job_id=job.pk, at=now, message=text)
        )
    audit.record_many(events)
    return jobs


def _within_capacity(pairs: list[tuple[Host, int, str]]) -> list[tuple[Host, int, str]]:
    """Keep the pairs a worker can run: a verify or repair job takes a slot of its capacity
    like a test (docs/scheduling.md#worker-capacity); the rest wait for a later tick."""
    worker_ids = {host.worker_id for host, _job, _kind in pairs if host.worker_id}
    if not worker_ids:
        return pairs
    loads = Worker.objects.filter(pk__in=worker_ids).worker_loads()
    room = {
        name: load.limit - load.running for name, load in loads.items() if load.limit is not None
    }
    kept = []
    for host, job_id, kind in pairs:
        name = host.worker.name if host.worker_id else ""
        if name in room:
            if room[name] <= 0:
                continue
            room[name] -= 1
        kept.append((host, job_id, kind))
    return kept


def lease_maintenance(*, now: datetime) -> list[dict]:
    """Lease every queued maintenance job whose host is free; end those that no longer fit."""
    waiting = Job.objects.queued().filter(kind__in=MAINTENANCE_KINDS)
    host_ids = sorted(set(waiting.values_list("host_id", flat=True)))
    if not host_ids:
        return []
    # The one lock order (docs/architecture.md#lock-order): jobs, then hosts; a job someone
    # else holds waits for a later tick.
    queued = list(
        waiting.select_for_update(skip_locked=True)
        .order_by("id")
        .values_list("id", "kind", "host_id")
    )
    hosts = {
        host.pk: host
        for host in Host.objects.select_for_update(of=("self",))
        .select_related("worker")
        .filter(pk__in=host_ids)
        .order_by("pk")
    }
    free = set(
        Host.objects.in_service(now).unleased().filter(pk__in=host_ids).values_list("pk", flat=True)
    )
    misfits: dict[str, list[int]] = defaultdict(list)  # why → jobs: one UPDATE per reason
    pairs: list[tuple[Host, int, str]] = []
    for job_id, kind, host_id in queued:
        host = hosts.get(host_id)
        if host is None or host.status not in (*STARTS_FROM[kind], *HOLDS.values()):
            misfits[f"host is {host.status if host else 'gone'}"].append(job_id)
        elif host_id in free and host.status in STARTS_FROM[kind]:
            pairs.append((host, job_id, kind))
            free.discard(host_id)
    pairs = _within_capacity(pairs)
    for why, ids in misfits.items():
        text = f"not needed any more: {why}"
        transitions.move_jobs(
            ids, to=JobStatus.ABORTED, mover=Mover.SCHEDULER, at=now, message=text
        )
    if not pairs:
        return []
    # Each host's status event comes before its `leased` event, as a person would tell it.
    for kind in MAINTENANCE_KINDS:
        of_kind = [h for h, _j, k in pairs if k == kind]
        transitions.move_hosts(
            [h.pk for h in of_kind], to=HOLDS[kind], mover=Mover.SCHEDULER, by=SCHEDULER,
            why=f"{kind} job leased", at=now,
        )  # fmt: skip
    transitions.lease_jobs(
        [(h.pk, j) for h, j, _k in pairs], mover=Mover.SCHEDULER, by=SCHEDULER, at=now,
        subjects=[h.hostname for h, _j, _k in pairs],
        messages=[f"leased to {kind} job {j}" for _h, j, kind in pairs],
        attempts=1, message="",
    )  # fmt: skip
    made = []
    for host, job_id, kind in pairs:
        made.append(
            {"job": f"{kind} {host.hostname}", "job_id": job_id, "suite": None,
             "host": host.hostname, "kind": kind}
        )  # fmt: skip
    return made
