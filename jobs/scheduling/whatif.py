"""What-if plans: what the next tick would lease if a change were made, written nowhere.

The snapshot is read once; the change (a suite to submit, workers to pause, hosts to lock,
suites' new priority and quotas, new scheduler settings) is applied to its plain values in
memory with `dataclasses.replace`, and the pure planner runs on the lab as it is and as it would be
(docs/scheduling.md#what-if-plans).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime

from hosts.rules import job_fits_host
from jobs.models import Job, SchedulerSettings, Suite
from jobs.scheduling import planner, provision_cost
from jobs.scheduling.labstate import scheduler_snapshot
from jobs.scheduling.planner.preemption import Preemption, Victim, preemptions
from jobs.scheduling.planner.types import RoleNeed
from jobs.scheduling.preemption import candidates
from jobs.scheduling.snapshot import Snapshot, run_time_medians

# The proposed suite and its jobs have no ids yet: negative ids keep them apart from every
# saved row in the planner's dicts, and the answer names them by their index instead. The
# jobs' ids ascend with their index, as saved ones would: the tick takes a suite's jobs in
# id order.
NEW_SUITE_ID = -1
_NEW_JOB_BASE = -(2**62)


def new_job_id(index: int) -> int:
    return _NEW_JOB_BASE + index


def new_job_index(job_id: int) -> int | None:
    return job_id - _NEW_JOB_BASE if job_id < 0 else None


@dataclass(frozen=True)
class SuiteChange:
    """A queued suite's new priority and quotas; None keeps the value it has."""

    suite_id: int
    priority: int | None = None
    min_duts: int | None = None
    max_duts: int | None = None
    clear_max_duts: bool = False  # max_duts: null in the request, i.e. no cap


@dataclass(frozen=True)
class Change:
    """A proposed change, with every name already resolved to ids."""

    new_suite: Suite | None = None  # unsaved, with `new_jobs` its unsaved jobs
    new_jobs: Sequence[Job] = ()
    pause_host_ids: frozenset[int] = frozenset()  # the hosts of the workers to pause
    lock_host_ids: frozenset[int] = frozenset()
    lock_reason: str = ""
    suite_changes: Sequence[SuiteChange] = ()
    # New scheduler settings (the current ones with some fields changed); None keeps them.
    policy: planner.Policy | None = None


@dataclass
class WhatIf:
    """The next tick's plan with the change, and how it differs from the plan without it."""

    snapshot: Snapshot
    jobs: dict[int, planner.JobState]  # every queued job with the change, the new ones too
    before: planner.Plan
    after: planner.Plan
    would_start: list[int] = field(default_factory=list)  # saved jobs leased only after
    would_lose: list[int] = field(default_factory=list)  # saved jobs leased only before
    stranded: list[int] = field(default_factory=list)  # lose every host that could run them
    # A stranded multi-host job's role no set of hosts could serve after the change.
    stranded_roles: dict[int, str] = field(default_factory=dict)
    new_started: list[int] = field(default_factory=list)  # indexes of the proposed jobs
    new_waiting: list[int] = field(default_factory=list)
    # Running jobs the tick's preemption phase would stop after the plan (preemption on).
    preempted: list[Preemption] = field(default_factory=list)
    # The plan's (job id, host id) with the change whose host would be provisioned first, to
    # the build (the planner's Plan.provisions: the rule a lease's provision_to follows).
    provisions: dict[tuple[int, int], str] = field(default_factory=dict)

    def provisioning_jobs(self) -> dict[int, str]:
        """Job id -> the build, for the jobs of the plan with the change that would provision
        (a multi-host job once, whichever of its hosts it is)."""
        return {job_id: build for (job_id, _host), build in self.provisions.items()}

    def leased_hosts(self) -> dict[int, int]:
        """Job id -> host id for the plan with the change (a multi-host job's slot 0: the
        host whose worker runs it)."""
        return {a.job_id: a.host_id for a in self.after.assignments if a.slot == 0}

    def job_hosts(self) -> dict[int, list[planner.Assignment]]:
        """Job id -> every host the plan with the change gives it, by slot; jobs in the
        plan's order."""
        hosts: dict[int, list[planner.Assignment]] = {}
        for a in self.after.assignments:
            hosts.setdefault(a.job_id, []).append(a)
        for assignments in hosts.values():
            assignments.sort(key=lambda a: a.slot)
        return hosts


def plan_change(change: Change, *, now: datetime) -> WhatIf:
    """Plan the next tick as it is and with the change; read the lab once, write nothing."""
    policy = SchedulerSettings.load().policy()
    new = change.policy or policy
    snapshot = scheduler_snapshot(
        now=now,
        policy=policy,
        # What the new settings need and the current ones do not read.
        with_sizes=new.ordering != "fifo",
        with_last_used=new.host_choice == "spread",
        with_usage=new.fair_share,
    )
    victims, spare = candidates() if new.preemption else ([], {})
    return compare(
        snapshot,
        change,
        victims=victims,
        spare=spare,
    )


def compare(
    snapshot: Snapshot,
    change: Change,
    *,
    victims: Sequence[Victim] = (),
    spare: Mapping[int, int] | None = None,
) -> WhatIf:
    """Run the pure planner on the snapshot and on the snapshot with the change applied; with
    `victims`, also what the preemption phase would stop after the changed plan."""
    hosts, jobs, suites = apply(snapshot, change)
    policy = change.policy or snapshot.policy
    before = _plan(snapshot, snapshot.hosts, snapshot.jobs, snapshot.suites, snapshot.policy)
    after = _plan(snapshot, hosts, jobs, suites, policy)
    leased_before = {a.job_id for a in before.assignments}
    leased_after = {a.job_id for a in after.assignments}
    result = WhatIf(snapshot=snapshot, jobs={j.id: j for j in jobs}, before=before, after=after)
    result.provisions = {
        (a.job_id, a.host_id): after.provisions[a.host_id]
        for a in after.assignments
        if a.host_id in after.provisions
    }
    for job in jobs:
        index = new_job_index(job.id)
        if index is not None:
            (result.new_started if job.id in leased_after else result.new_waiting).append(index)
        elif job.id in leased_after and job.id not in leased_before:
            result.would_start.append(job.id)
        elif job.id in leased_before and job.id not in leased_after:
            result.would_lose.append(job.id)
    result.new_started.sort()
    result.new_waiting.sort()
    changed = change.pause_host_ids | change.lock_host_ids
    if changed:
        result.stranded_roles = stranded_roles = {}
        result.stranded = stranded_jobs(
            snapshot.hosts, hosts, snapshot.jobs, changed, roles=stranded_roles
        )
    if victims and policy.preemption:
        taken = {a.host_id for a in after.assignments}
        waiting = [job for job in jobs if job.id in after.wait_reasons]
        result.preempted = preemptions(
            waiting=planner.main_phase_order(waiting, policy, snapshot.now, snapshot.usage),
            reasons=after.wait_reasons,
            victims=[v for v in victims if v.host_id not in taken],
            hosts_by_id={h.id: h for h in hosts},
            spare=spare or {},
            policy=policy,
        )
    return result


def _plan(
    snapshot: Snapshot,
    hosts: Sequence[planner.HostState],
    jobs: Sequence[planner.JobState],
    suites: Sequence[planner.SuiteState],
    policy: planner.Policy,
) -> planner.Plan:
    return planner.plan(
        hosts=hosts,
        jobs=jobs,
        suites=suites,
        policy=policy,
        now=snapshot.now,
        workers=snapshot.workers,
        usage=snapshot.usage,
    )


def apply(
    snapshot: Snapshot, change: Change
) -> tuple[list[planner.HostState], list[planner.JobState], list[planner.SuiteState]]:
    """Return the snapshot's hosts, jobs and suites as they would be after the change."""
    hosts = [
        _changed_host(host, change) if host.id in _touched(change) else host
        for host in snapshot.hosts
    ]
    edits = {c.suite_id: c for c in change.suite_changes}
    suites = [_changed_suite(s, edits[s.id]) if s.id in edits else s for s in snapshot.suites]
    old_priority = {s.id: s.priority for s in snapshot.suites}
    new_priority = {s.id: s.priority for s in suites}
    jobs = [
        # A job follows its suite's new priority unless it was given one of its own.
        replace(job, priority=new_priority[job.suite_id])
        if job.suite_id in edits and job.priority == old_priority[job.suite_id]
        else job
        for job in snapshot.jobs
    ]
    if change.new_suite is not None:
        policy = change.policy or snapshot.policy
        sized = policy.ordering != "fifo"
        suite, new = proposed(change.new_suite, change.new_jobs, sized=sized)
        if sized and suite.build and snapshot.now is not None:
            # As the tick would size them once saved (provision_cost.with_provisioning).
            medians = provision_cost.provision_medians(now=snapshot.now)
            new = provision_cost.with_provisioning(
                new,
                builds={job.id: suite.build for job in new},
                carried=provision_cost.carried_builds(snapshot.hosts),
                medians=medians,
                default_s=policy.default_duration_s,
            )
        suites.append(suite)
        jobs.extend(new)
    return hosts, jobs, suites


def _touched(change: Change) -> frozenset[int]:
    return change.pause_host_ids | change.lock_host_ids


def _changed_host(host: planner.HostState, change: Change) -> planner.HostState:
    if host.id in change.lock_host_ids and not host.locked:
        host = replace(host, locked=True, lock_reason=change.lock_reason)
    if host.id in change.pause_host_ids:
        host = replace(host, worker_paused=True)
    return host


def _changed_suite(suite: planner.SuiteState, edit: SuiteChange) -> planner.SuiteState:
    return replace(
        suite,
        priority=suite.priority if edit.priority is None else edit.priority,
        min_duts=suite.min_duts if edit.min_duts is None else edit.min_duts,
        max_duts=None
        if edit.clear_max_duts
        else (suite.max_duts if edit.max_duts is None else edit.max_duts),
    )


def proposed(
    suite: Suite, jobs: Sequence[Job], *, sized: bool = False
) -> tuple[planner.SuiteState, list[planner.JobState]]:
    """Read an unsaved suite and its unsaved jobs as planner values, with placeholder ids.

    `sized`: each job's size is its estimated_duration, else its name's median run time (one
    query, for the jobs without an estimate): what the tick would read once they are saved.
    """
    sizes: dict[int, float | None] = {}
    if sized:
        medians = run_time_medians({job.name for job in jobs if job.estimated_duration is None})
        for i, job in enumerate(jobs):
            estimate = job.estimated_duration
            sizes[i] = estimate.total_seconds() if estimate else medians.get(job.name)
    state = planner.SuiteState(
        id=NEW_SUITE_ID,
        name=suite.name,
        priority=suite.priority,
        created_at=suite.created_at,
        min_duts=suite.min_duts,
        max_duts=suite.max_duts,
        build=suite.build,
    )
    return state, [
        planner.JobState(
            id=new_job_id(i),
            name=job.name,
            suite_id=NEW_SUITE_ID,
            priority=job.priority,
            submitted_at=suite.created_at,
            labels=frozenset(job.labels),
            pinned_host_id=job.host_id,
            size_s=sizes.get(i),
            roles=role_needs(job),
            together_by=job.together_by,
        )
        for i, job in enumerate(jobs)
    ]


def role_needs(job: Job) -> tuple[RoleNeed, ...]:
    """A job's stored roles as the planner reads them: each role's labels with the job's."""
    labels = frozenset(job.labels)
    return tuple(
        RoleNeed(
            name=role["name"],
            labels=labels | frozenset(role["labels"]),
            count=role["count"],
            max=role["max"],
        )
        for role in job.roles
    )


def stranded_jobs(
    before: Sequence[planner.HostState],
    after: Sequence[planner.HostState],
    jobs: Iterable[planner.JobState],
    changed: frozenset[int],
    *,
    roles: dict[int, str] | None = None,
) -> list[int]:
    """Return the queued jobs that some hosts could run before the change and none after.

    "Could run" ignores leases (a busy host frees up when its job ends): the host is ready,
    unlocked and on a worker that is up. A multi-host job needs a host of its own for each
    essential host of every role at once (with one `together_by` value): it is stranded when
    the hosts could serve all its roles before and cannot after, and `roles` gets the role
    they can no longer serve. Only the changed hosts can make a job lose its last hosts, so a
    class of identical jobs (a shape of multi-host job) is looked at only if a changed host
    fits it (one of its roles).
    """
    usable_before = [h for h in before if h.usable_when_freed]
    usable_after = [h for h in after if h.usable_when_freed]
    changed_hosts = [h for h in usable_before if h.id in changed]
    verdict: dict[tuple[frozenset[str], int | None], bool] = {}
    shapes: dict[tuple, str | None] = {}  # multi-host shape -> the role lost, None if none
    stranded = []
    for job in jobs:
        if job.roles:
            shape = (job.labels, job.roles, job.together_by)
            if shape not in shapes:
                shapes[shape] = _role_lost(job, changed_hosts, usable_before, usable_after)
            if shapes[shape] is not None:
                stranded.append(job.id)
                if roles is not None:
                    roles[job.id] = shapes[shape]  # type: ignore[assignment]
            continue
        key = (job.labels, job.pinned_host_id)
        if key not in verdict:
            fits_changed = any(_fits(h, key) for h in changed_hosts)
            verdict[key] = fits_changed and not any(_fits(h, key) for h in usable_after)
        if verdict[key]:
            stranded.append(job.id)
    return stranded


def _role_lost(
    job: planner.JobState,
    changed: Sequence[planner.HostState],
    before: Sequence[planner.HostState],
    after: Sequence[planner.HostState],
) -> str | None:
    """The role of a multi-host job that the hosts could serve (with its other roles, with
    one `together_by` value) before the change and no longer can with any value; None if they
    still can, or never could. Of several, the first short with the first value lost."""
    if not any(role.labels <= h.labels for h in changed for role in job.roles):
        return None
    lost = None
    for value in _values(job, before):
        if _short_role(job, value, before) is None:
            short = _short_role(job, value, after)
            if short is None:
                return None  # still served with this value
            lost = lost or short
    return lost


def _values(job: planner.JobState, hosts: Sequence[planner.HostState]) -> list[str | None]:
    """The together_by values the hosts carry, sorted ([None] for a job not kept together)."""
    if not job.together_by:
        return [None]
    head = f"{job.together_by}:"
    return sorted(
        {label[len(head) :] for h in hosts for label in h.labels if label.startswith(head)}
    )


def _short_role(
    job: planner.JobState, value: str | None, hosts: Sequence[planner.HostState]
) -> str | None:
    """None if the hosts can give every essential host of the job a host of its own at once,
    all with this together_by value; else the role of the first that gets none."""
    extra = {f"{job.together_by}:{value}"} if value is not None else set()
    units = [(role.name, role.labels | extra) for role in job.roles for _ in range(role.count)]
    fitting = [h for h in hosts if any(labels <= h.labels for _n, labels in units)]
    short = _place_units([labels for _n, labels in units], fitting)
    return None if short is None else units[short][0]


def _place_units(units: list[frozenset[str]], hosts: Sequence[planner.HostState]) -> int | None:
    """Give each unit (labels) a host of its own that carries them (augmenting paths); the
    first unit that gets none, or None if all do."""
    host_unit: dict[int, int] = {}

    def place(u: int, seen: set[int]) -> bool:
        for h, host in enumerate(hosts):
            if h in seen or not units[u] <= host.labels:
                continue
            seen.add(h)
            if h not in host_unit or place(host_unit[h], seen):
                host_unit[h] = u
                return True
        return False

    return next((u for u in range(len(units)) if not place(u, set())), None)


def _fits(host: planner.HostState, key: tuple[frozenset[str], int | None]) -> bool:
    labels, pinned = key
    return job_fits_host(
        labels=labels, pinned_host_id=pinned, host_id=host.id, host_labels=host.labels
    )


# --- in words ------------------------------------------------------------------------------


def summary(result: WhatIf) -> str:
    """Say in one line what the change would do to the next tick."""
    parts = []
    total = len(result.new_started) + len(result.new_waiting)
    if total:
        part = f"{len(result.new_started)} of your {_count(total, 'job')} would start now"
        part += _reimages(result, [new_job_id(i) for i in result.new_started])
        if result.new_waiting:
            reasons = [result.after.wait_reasons[new_job_id(i)] for i in result.new_waiting]
            part += f"; {len(result.new_waiting)} wait: {_reasons(reasons)}"
        parts.append(part)
        parts += _multi_host_starts(result)
    if result.stranded:
        n = len(result.stranded)
        its = "its" if n == 1 else "their"
        part = f"{_count(n, 'queued job')} would lose {its} only matching host"
        if result.stranded_roles:
            names = {result.jobs[j].name: role for j, role in result.stranded_roles.items()}
            shown = sorted(names.items())[:MULTI_HOST_SHOWN]
            part += (
                " ("
                + "; ".join(f"{name}: no hosts left for role {role}" for name, role in shown)
                + ")"
            )
        parts.append(part)
    if result.would_lose:
        n = len(result.would_lose)
        parts.append(f"{_count(n, 'job')} the next tick would start would wait instead")
    if result.would_start:
        part = f"{_count(len(result.would_start), 'other queued job')} would start"
        parts.append(part + _reimages(result, result.would_start))
    if result.preempted:
        n = len(result.preempted)
        parts.append(f"{_count(n, 'running job')} would be preempted to make room")
    if not parts:
        return "The next tick would lease the same hosts with or without this change."
    return ". ".join(parts) + "."


MULTI_HOST_SHOWN = 3  # multi-host jobs whose hosts the one-line summary names


def _multi_host_starts(result: WhatIf) -> list[str]:
    """'bt_Pair would run on a1 (dut), a3 (peer)' for the first proposed multi-host jobs."""
    hosts = result.snapshot.hosts_by_id
    every = result.job_hosts()
    lines = []
    for index in result.new_started:
        job = result.jobs[new_job_id(index)]
        if job.roles and len(lines) < MULTI_HOST_SHOWN:
            on = ", ".join(f"{hosts[a.host_id].hostname} ({a.role})" for a in every[job.id])
            lines.append(f"{job.name} would run on {on}")
    return lines


def _reimages(result: WhatIf, job_ids: Iterable[int]) -> str:
    """', 2 of them after a reimage to R121' for the jobs whose host would be provisioned
    first; '' when none would."""
    provisioning, job_ids = result.provisioning_jobs(), list(job_ids)
    builds = [provisioning[j] for j in job_ids if j in provisioning]
    if not builds:
        return ""
    them = "" if len(job_ids) == 1 else f"{len(builds)} of them "
    return f", {them}after a reimage to {' or '.join(sorted(set(builds)))}"


def _count(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def _reasons(reasons: list[planner.WaitReason]) -> str:
    """Group wait reasons by message, most common first: '3 × No host has label x; 1 × …'."""
    counts: dict[str, int] = {}
    for reason in reasons:
        counts[reason.message] = counts.get(reason.message, 0) + 1
    ranked = sorted(counts.items(), key=lambda item: -item[1])
    if len(ranked) == 1:
        return ranked[0][0]
    return "; ".join(f"{n} × {message}" for message, n in ranked)
