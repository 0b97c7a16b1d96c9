"""Multi-host jobs, holds and backfill on random small labs, against a brute-force reference.

docs/scheduling.md#multi-host-jobs and #holds-and-backfill state the rules; the reference below
writes them out again on concrete hosts: each host a job needs is a unit, and a set of units is
kept when a maximum flow (units → hosts → workers, tests/scheduler/test_planner_properties.py)
places them all. Every lab is drawn with a policy (every ordering, aging, host choice, fair
share) and worker capacities.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from itertools import permutations

from hypothesis import given, settings
from hypothesis import strategies as st

from jobs.scheduling.planner import (
    HostIndex,
    HostState,
    JobState,
    Plan,
    Policy,
    RoleNeed,
    SuiteState,
    WaitCode,
    WorkerLoad,
    group_jobs,
    plan,
    reason_keys,
)
from tests.scheduler.test_planner_properties import (
    MOMENTS,
    NOW,
    WORKERS,
    Lab,
    aged,
    fair_share_keys,
    max_matching,
    policies,
    size_order,
    usable,
)

LABELS = ["a", "b"]
CHAMBERS = [None, "chamber:1", "chamber:2"]
HOST_STATES = [
    {},
    {},
    {},
    {"busy": 1},
    {"busy": 5},
    {"busy": 20},
    {"busy": -3},  # past its expected end
    {"locked": True},
    {"leased": True},  # reserved by hand: no expected end
    {"locked": True, "busy": 5},  # locked while it runs: of no use once freed
]
loads = st.dictionaries(
    st.sampled_from(WORKERS[1:]),
    st.builds(WorkerLoad, limit=st.none() | st.integers(0, 3), running=st.integers(0, 2)),
)


# Labs where a multi-host job often cannot start: few labels, half the hosts busy for a while.
DENSE_STATES = [{}, {}, {}, {"busy": 2}, {"busy": 5}, {"busy": 30}, {"locked": True}]


@st.composite
def hosts_st(draw: st.DrawFn, dense: bool) -> list[HostState]:
    n = draw(st.integers(3, 6) if dense else st.integers(0, 6))
    names = draw(st.permutations([f"h{i}" for i in range(n)]))
    hosts = []
    for i in range(n):
        state = dict(draw(st.sampled_from(DENSE_STATES if dense else HOST_STATES)))
        busy = state.pop("busy", None)
        if busy is not None:
            state |= {
                "leased": True,
                "lease_priority": 40,
                "busy_until": NOW + timedelta(minutes=busy),
            }
        labels = set(draw(st.frozensets(st.sampled_from(LABELS[:1] if dense else LABELS))))
        chamber = draw(st.sampled_from(CHAMBERS[1:] if dense else CHAMBERS))
        if chamber:
            labels.add(chamber)
        hosts.append(
            HostState(
                id=i + 1,
                hostname=names[i],
                labels=frozenset(labels),
                current_build=draw(st.sampled_from(["", "R1"])),
                worker=draw(st.sampled_from(WORKERS)),
                last_used=draw(st.none() | st.sampled_from(MOMENTS)),
                **state,
            )
        )
    return hosts


@st.composite
def roles_st(draw: st.DrawFn, job_labels: frozenset[str], dense: bool) -> tuple[RoleNeed, ...]:
    roles = []
    for r in range(draw(st.integers(1, 2))):
        count = draw(st.integers(1, 2) if dense else st.integers(1, 3))
        pool = LABELS[:1] if dense else LABELS
        labels = draw(st.frozensets(st.sampled_from(pool), max_size=1)) | job_labels
        roles.append(RoleNeed(f"r{r}", labels, count, count + draw(st.integers(0, 1))))
    return tuple(roles)


@st.composite
def labs(draw: st.DrawFn) -> Lab:
    """Up to 6 hosts (some busy with an expected end), 2 suites, 5 jobs, some multi-host; half
    of them dense (few labels, many busy hosts), where holds and backfill are common."""
    dense = draw(st.booleans())
    hosts = draw(hosts_st(dense))
    suites = [
        SuiteState(
            id=i + 1,
            name=f"S{i + 1}",
            priority=draw(st.sampled_from([30, 40, 70])),
            created_at=draw(st.sampled_from(MOMENTS)),
            min_duts=draw(st.integers(0, 3)),
            max_duts=draw(st.none() | st.integers(0, 4)),
            held=draw(st.integers(0, 2)),
            build=draw(st.sampled_from(["", "R1"])),
        )
        for i in range(draw(st.integers(0, 2)))
    ]
    jobs = []
    for i in range(draw(st.integers(2 if dense else 0, 5))):
        of = draw(st.none() | st.sampled_from(suites)) if suites else None
        labels = draw(st.frozensets(st.sampled_from(LABELS[:1] if dense else LABELS), max_size=1))
        multi = draw(st.booleans())
        pinned = None
        if not multi and draw(st.integers(0, 4)) == 0:
            pinned = draw(st.integers(1, len(hosts) + 1))
        jobs.append(
            JobState(
                id=i + 1,
                name=f"J{i + 1}",
                suite_id=of.id if of else None,
                priority=draw(st.sampled_from([30, 40, 70])),
                submitted_at=of.created_at if of else draw(st.sampled_from(MOMENTS)),
                labels=labels,
                pinned_host_id=pinned,
                avoid_hosts=frozenset(draw(st.sampled_from([(), (1,), (2, 3)]))),
                size_s=draw(st.sampled_from([None, 60.0, 120.0, 600.0, 3600.0])),
                owner=draw(st.sampled_from([None, 1, 2])),
                roles=draw(roles_st(labels, dense)) if multi else (),
                together_by=draw(st.sampled_from(["", "chamber"])) if multi else "",
            )
        )
    return Lab(hosts, jobs, suites, draw(policies), draw(loads), {})


@st.composite
def holding_labs(draw: st.DrawFn) -> Lab:
    """A multi-host job first in line that needs more hosts than are free, some busy hosts
    ending at different times, and a stream of one-host jobs of every size behind it."""
    lab = draw(labs())
    free = draw(st.integers(1, 3))
    busy = draw(st.lists(st.sampled_from([-1, 2, 5, 30]), min_size=1, max_size=3))
    hosts = [
        HostState(
            id=i + 1,
            hostname=f"h{i}",
            labels=frozenset({"a"}),
            worker=draw(st.sampled_from(WORKERS)),
        )
        for i in range(free)
    ] + [
        HostState(
            id=free + i + 1,
            hostname=f"h{free + i}",
            labels=frozenset({"a"}),
            leased=True,
            lease_priority=40,
            busy_until=NOW + timedelta(minutes=m),
        )
        for i, m in enumerate(busy)
    ]
    first = JobState(
        id=100,
        name="M",
        suite_id=None,
        priority=70,
        submitted_at=MOMENTS[0],
        roles=(
            RoleNeed("dut", frozenset({"a"}), draw(st.integers(free + 1, free + len(busy))), 4),
        ),
        size_s=600.0,
    )
    stream = [
        JobState(
            id=101 + i,
            name=f"S{i}",
            suite_id=None,
            priority=draw(st.sampled_from([40, 70])),
            submitted_at=draw(st.sampled_from(MOMENTS)),
            labels=frozenset({"a"}) if draw(st.booleans()) else frozenset(),
            size_s=draw(st.sampled_from([None, 60.0, 180.0, 600.0, 3600.0])),
        )
        for i in range(draw(st.integers(1, 4)))
    ]
    return replace(
        lab,
        hosts=hosts,
        jobs=[first, *stream, *(replace(j, suite_id=None) for j in lab.jobs[:1])],
        suites=[],
        workers=draw(loads),
    )


@st.composite
def elastic_labs(draw: st.DrawFn) -> Lab:
    """Multi-host jobs that fit, with room for elastic hosts, a cap, and jobs behind them."""
    lab = draw(labs())
    hosts = [
        HostState(
            id=i + 1,
            hostname=f"h{i}",
            labels=frozenset({"a"} | ({f"chamber:{i % 2}"} if draw(st.booleans()) else set())),
            worker=draw(st.sampled_from(WORKERS)),
        )
        for i in range(draw(st.integers(3, 6)))
    ]
    cap = SuiteState(
        id=1,
        name="S1",
        priority=40,
        created_at=MOMENTS[0],
        max_duts=draw(st.none() | st.integers(1, 5)),
    )
    jobs = []
    for i in range(draw(st.integers(1, 3))):
        count = draw(st.integers(1, 2))
        jobs.append(
            JobState(
                id=200 + i,
                name=f"E{i}",
                suite_id=draw(st.sampled_from([None, 1])),
                priority=draw(st.sampled_from([40, 70])),
                submitted_at=MOMENTS[0],
                roles=tuple(
                    RoleNeed(f"r{r}", frozenset({"a"}), count, count + draw(st.integers(0, 3)))
                    for r in range(draw(st.integers(1, 2)))
                ),
                together_by=draw(st.sampled_from(["", "chamber"])),
            )
        )
    return replace(
        lab,
        hosts=hosts,
        jobs=[*jobs, *(replace(j, suite_id=None) for j in lab.jobs[:2])],
        suites=[cap],
        workers=draw(loads),
    )


@st.composite
def capacity_labs(draw: st.DrawFn) -> Lab:
    """Workers that may start fewer jobs than they have free hosts, multi-host jobs that could
    put several hosts on one of them (where a job counting once matters), one-host jobs around
    them, some pinned, and now and then a busy host for a hold."""
    lab = draw(labs())
    hosts = [
        HostState(
            id=i + 1,
            hostname=draw(st.sampled_from(["a", "b", "c"])) + str(i),
            labels=frozenset({"a"} | ({"b"} if draw(st.integers(0, 3)) == 0 else set())),
            worker=draw(st.sampled_from(["w1", "w1", "w2", "w2", ""])),
            **draw(st.sampled_from([{}, {}, {}, {"leased": True, "lease_priority": 40,
                                               "busy_until": NOW + timedelta(minutes=5)}])),
        )
        for i in range(draw(st.integers(2, 6)))
    ]  # fmt: skip
    jobs = []
    for i in range(draw(st.integers(1, 5))):
        multi = draw(st.booleans())
        count = draw(st.integers(1, 3))
        jobs.append(
            JobState(
                id=300 + i,
                name=f"C{i}",
                suite_id=None,
                priority=draw(st.sampled_from([40, 70])),
                submitted_at=draw(st.sampled_from(MOMENTS)),
                labels=frozenset(draw(st.sampled_from([(), (), ("a",), ("b",)]))),
                pinned_host_id=None if multi or draw(st.integers(0, 3)) else len(hosts),
                size_s=draw(st.sampled_from([None, 60.0, 3600.0])),
                roles=tuple(
                    RoleNeed(f"r{r}", frozenset(draw(st.sampled_from([(), (), ("b",)]))), count,
                             count + draw(st.integers(0, 1)))
                    for r in range(draw(st.integers(1, 2)))
                ) if multi else (),
            )
        )  # fmt: skip
    workers = {
        w: WorkerLoad(limit=draw(st.integers(1, 3)), running=draw(st.integers(0, 1)))
        for w in WORKERS[1:]
        if draw(st.integers(0, 4))
    }
    return replace(lab, hosts=hosts, jobs=jobs, suites=[], workers=workers)


# --- the reference ---------------------------------------------------------------------------


def unit(labels: frozenset[str], pin: int | None = None, of: int = 0) -> JobState:
    """One host a job needs (`of`: the job's id, which counts once on a worker)."""
    return JobState(
        id=of, name="unit", suite_id=None, priority=0, submitted_at=NOW, labels=labels,
        pinned_host_id=pin,
    )  # fmt: skip


def fits_once(units: list[JobState], lab: Lab) -> bool:
    """Whether every unit can have a host of its own that it fits (a pinned unit: that host; a
    unit named "elsewhere": one on no binding worker), each worker holding hosts of at most its
    room of distinct jobs (units of one job, `id`, count once on a worker): by trying every
    assignment, on concrete hosts."""
    hosts = [h for h in lab.hosts if usable(h)]
    if len(units) > len(hosts):
        return False
    order = sorted(range(len(units)), key=lambda u: units[u].pinned_host_id is None)
    used: set[int] = set()
    jobs_on: dict[str, dict[int, int]] = {}

    def place(i: int) -> bool:
        if i == len(order):
            return True
        u = units[order[i]]
        for h in hosts:
            if h.id in used or not u.labels <= h.labels or u.pinned_host_id not in (None, h.id):
                continue
            if u.name == "elsewhere" and binding(lab, h.worker):
                continue
            on = jobs_on.setdefault(h.worker, {})
            room = lab.room(h.worker)
            if u.id not in on and room is not None and len(on) >= room:
                continue
            used.add(h.id)
            on[u.id] = on.get(u.id, 0) + 1
            if place(i + 1):
                return True
            used.discard(h.id)
            on[u.id] -= 1
            if not on[u.id]:
                del on[u.id]
        return False

    return place(0)


def binding(lab: Lab, worker: str) -> bool:
    """Whether a worker may start fewer jobs than it has free hosts (the planner's binding
    workers, where a multi-host job's hosts stay where they were first placed)."""
    room = lab.room(worker)
    return room is not None and room < sum(usable(h) and h.worker == worker for h in lab.hosts)


def role_labels(job: JobState, role: RoleNeed, value: str | None) -> frozenset[str]:
    return role.labels | {f"{job.together_by}:{value}"} if value is not None else role.labels


def essential(job: JobState, value: str | None) -> list[JobState]:
    if not job.roles:
        return [unit(job.labels, job.pinned_host_id, job.id)]
    return [unit(role_labels(job, r, value), of=job.id) for r in job.roles for _ in range(r.count)]


def values(lab: Lab, job: JobState) -> list[str | None]:
    if not job.together_by:
        return [None]
    head = f"{job.together_by}:"
    return sorted(
        {x[len(head) :] for h in lab.hosts if usable(h) for x in h.labels if x.startswith(head)}
    )  # type: ignore[return-value]


def run_s(job: JobState, policy: Policy) -> float:
    return job.size_s if job.size_s and job.size_s > 0 else policy.default_duration_s


def busy_start(lab: Lab, needs: list[frozenset[str]]) -> datetime | None:
    """The earliest T such that hosts busy until T at the latest (usable once freed) can give
    each missing unit a host of its own: by trying every assignment."""
    busy = [
        h
        for h in lab.hosts
        if h.leased and h.busy_until is not None and h.usable_when_freed
    ]  # fmt: skip
    for t in sorted({h.busy_until for h in busy}):  # type: ignore[type-var]
        ready = [h for h in busy if h.busy_until <= t]  # type: ignore[operator]
        for chosen in permutations(ready, len(needs)):
            if all(n <= h.labels for n, h in zip(needs, chosen, strict=True)):
                return t
    return None


@dataclass
class Expected:
    hosts: dict[int, dict[str, int]] = field(default_factory=dict)  # job -> role -> hosts
    holder: int | None = None
    held: int = 0
    expected_start: datetime | None = None


def reference(lab: Lab, result: Plan) -> Expected:  # noqa: C901, PLR0915 - the rules, in one place
    """`result`: the plan checked, for where it put a multi-host job's hosts on a binding
    worker (a choice among equals the rules leave to the planner, which later jobs meet)."""
    policy = lab.policy
    host_by_id = {h.id: h for h in lab.hosts}
    suite_by_id = {s.id: s for s in lab.suites}
    kept: list[JobState] = []  # every unit kept, in order
    kept_jobs: list[tuple[JobState, str | None]] = []
    hold: list[JobState] = []
    out = Expected()
    holder: dict = {}
    taken: dict[int, int] = {}  # suite -> hosts taken this tick

    def matchable(units: list[JobState]) -> bool:
        return fits_once(units, lab)

    def capped(job: JobState, n: int) -> bool:
        s = suite_by_id.get(job.suite_id)  # type: ignore[arg-type]
        if s is None or s.max_duts is None:
            return False
        return s.held + taken.get(s.id, 0) + n > s.max_duts

    def greedy_hold(job: JobState, value: str | None, base: list[JobState]) -> list[JobState]:
        """As many units per role as fit with `base`, roles in order (each unit's role: .name)."""
        held: list[JobState] = []
        for role in job.roles:
            for _ in range(role.count):
                # Held hosts count one job each on their worker.
                u = replace(unit(role_labels(job, role, value), of=-1 - len(held)), name=role.name)
                if not matchable([*base, *held, u]):
                    break
                held.append(u)
        return held

    def elastic_of(job: JobState) -> list[tuple[str, int, int]]:
        """The plan's elastic hosts of the job: (role, host, slot), by slot."""
        return sorted(
            ((a.role, a.host_id, a.slot) for a in result.assignments if a.job_id == job.id),
            key=lambda x: x[2],
        )[job.hosts_needed :]

    def fix(u: JobState, role: str, where: list[tuple[str, int]]) -> JobState:
        """A kept multi-host unit of this role: on the plan's next host of the role on a binding
        worker if one is left in `where` (taken from it), else kept off binding workers."""
        found = next((x for x in where if x[0] == role), None)
        if found is None:
            return replace(u, name="elsewhere")
        where.remove(found)
        return replace(u, pinned_host_id=found[1])

    def keep(job: JobState, value: str | None, units: list[JobState]) -> None:
        if job.roles:
            # Its hosts on binding workers stay where the plan put them.
            essential_hosts = sorted(
                (a.slot, a.role, a.host_id) for a in result.assignments if a.job_id == job.id
            )[: job.hosts_needed]
            where = [
                (role, h)
                for _slot, role, h in essential_hosts
                if binding(lab, host_by_id[h].worker)
            ]
            # The others may move for a later job, to hosts on no binding worker.
            essential_roles = [r.name for r in job.roles for _ in range(r.count)]
            units = list(units)
            for i, name in enumerate(essential_roles):
                units[i] = fix(units[i], name, where)
        kept.extend(units)
        kept_jobs.append((job, value))
        if job.suite_id is not None:
            taken[job.suite_id] = taken.get(job.suite_id, 0) + len(units)
        out.hosts[job.id] = {
            (r.name if job.roles else ""): (r.count if job.roles else 1)
            for r in (job.roles or [None])  # type: ignore[list-item]
        }

    def consider(job: JobState) -> bool:
        if job.id in out.hosts or capped(job, job.hosts_needed):
            return False
        for value in values(lab, job):
            units = essential(job, value)
            if matchable([*kept, *hold, *units]):
                keep(job, value, units)
                return True
        if holder and run_s(job, policy) <= holder["limit"]:
            for value in values(lab, job):
                units = essential(job, value)
                if matchable([*kept, *units]):
                    keep(job, value, units)
                    hold[:] = greedy_hold(holder["job"], holder["value"], kept)
                    return True
        return False

    def try_hold(job: JobState) -> None:
        best = None
        for value in values(lab, job):
            held = greedy_hold(job, value, kept)
            if not held:
                continue
            needs = []
            for role in job.roles:
                got = sum(u.name == role.name for u in held)
                needs += [role_labels(job, role, value)] * (role.count - got)
            start = busy_start(lab, needs) if needs else None
            if start is not None and (best is None or start < best[0]):
                best = (start, value, held)
        if best is None:
            return
        start, value, held = best
        start = max(start, NOW)
        holder.update(job=job, value=value, limit=(start - NOW).total_seconds(), start=start)
        hold[:] = held

    for s in sorted(
        lab.suites, key=lambda s: (-aged(s.priority, s.created_at, policy), s.created_at, s.id)
    ):
        need = s.min_duts - s.held
        for job in sorted((j for j in lab.jobs if j.suite_id == s.id), key=lambda j: j.id):
            if need <= 0:
                break
            if consider(job):
                need -= job.hosts_needed
    virtual = fair_share_keys(lab)
    for job in sorted(
        lab.jobs,
        key=lambda j: (
            -aged(j.priority, j.submitted_at, policy),
            virtual[j.id],
            size_order(j, policy),
            j.submitted_at,
            j.id,
        ),
    ):
        if consider(job) or not job.roles or holder or job.id in out.hosts:
            continue
        if not capped(job, job.hosts_needed):
            try_hold(job)
    extra: list[JobState] = []
    for job, value in kept_jobs:
        for role in job.roles:
            for _ in range(role.max - role.count):
                u = unit(role_labels(job, role, value), of=job.id)
                if capped(job, 1) or not matchable([*kept, *hold, *extra, u]):
                    break
                # Then where the plan put this elastic host, if on a binding worker.
                got = out.hosts[job.id][role.name] - role.count
                mine = [h for r, h, slot in elastic_of(job) if r == role.name]
                if got < len(mine) and binding(lab, host_by_id[mine[got]].worker):
                    u = replace(u, pinned_host_id=mine[got])
                else:
                    u = replace(u, name="elsewhere")
                extra.append(u)
                taken[job.suite_id] = taken.get(job.suite_id, 0) + 1  # type: ignore[index]
                out.hosts[job.id][role.name] += 1
    if holder and hold:
        out.holder, out.held, out.expected_start = holder["job"].id, len(hold), holder["start"]
    return out


# --- properties ------------------------------------------------------------------------------

PROPERTY = settings(max_examples=400, deadline=None)


def plan_of(lab: Lab, **kept: object) -> Plan:
    return plan(
        hosts=lab.hosts,
        jobs=lab.jobs,
        suites=lab.suites,
        policy=lab.policy,
        now=NOW,
        workers=lab.workers,
        usage=lab.usage,
        **kept,  # type: ignore[arg-type]
    )


def got_hosts(result: Plan) -> dict[int, dict[str, int]]:
    got: dict[int, dict[str, int]] = {}
    for a in result.assignments:
        roles = got.setdefault(a.job_id, {})
        roles[a.role] = roles.get(a.role, 0) + 1
    return got


any_labs = st.one_of(labs(), holding_labs(), elastic_labs(), capacity_labs())


@PROPERTY
@given(any_labs)
def test_every_lease_and_hold_is_valid(lab: Lab) -> None:
    result = plan_of(lab)
    host_by_id = {h.id: h for h in lab.hosts}
    job_by_id = {j.id: j for j in lab.jobs}
    taken = [a.host_id for a in result.assignments] + list(result.holds)
    assert len(taken) == len(set(taken)), "a host leased or held twice"
    by_job: dict[int, list] = {}
    for a in result.assignments:
        by_job.setdefault(a.job_id, []).append(a)
    for job_id, assignments in by_job.items():
        job = job_by_id[job_id]
        hosts = [host_by_id[a.host_id] for a in assignments]
        assert all(usable(h) for h in hosts)
        assert [a.slot for a in assignments] == list(range(len(assignments)))
        if not job.roles:
            assert len(hosts) == 1 and job.labels <= hosts[0].labels
            assert job.pinned_host_id in (None, hosts[0].id)
            continue
        roles = {r.name: r for r in job.roles}
        counts = {name: 0 for name in roles}
        for a, h in zip(assignments, hosts, strict=True):
            assert roles[a.role].labels <= h.labels, f"{h.hostname} lacks role {a.role}'s labels"
            counts[a.role] += 1
        # All or nothing: every essential host, and no more than max.
        for name, role in roles.items():
            assert role.count <= counts[name] <= role.max
        # Essential hosts first, roles in submission order.
        order = [r.name for r in job.roles for _ in range(r.count)]
        assert [a.role for a in assignments[: len(order)]] == order
        if job.together_by:
            head = f"{job.together_by}:"
            kinds = [{lab_ for lab_ in h.labels if lab_.startswith(head)} for h in hosts]
            assert all(kinds) and len(set.intersection(*kinds)) >= 1, "not kept together"
    for host_id, job_id in result.holds.items():
        host, job = host_by_id[host_id], job_by_id[job_id]
        assert usable(host) and job.roles and job_id not in by_job
        assert any(r.labels <= host.labels for r in job.roles)
    assert len(set(result.holds.values())) <= 1, "more than one holder"
    # Caps count hosts; workers never start more than their room, a multi-host job once on
    # each worker it holds a host on.
    for s in lab.suites:
        got = sum(job_by_id[a.job_id].suite_id == s.id for a in result.assignments)
        if s.max_duts is not None:
            assert got == 0 or s.held + got <= s.max_duts
    for w in {h.worker for h in lab.hosts}:
        room = lab.room(w)
        started = {a.job_id for a in result.assignments if host_by_id[a.host_id].worker == w}
        assert room is None or len(started) <= max(room, 0)


@PROPERTY
@given(any_labs)
def test_the_plan_is_the_reference_s(lab: Lab) -> None:
    """Leased jobs and their hosts per role (essential and elastic), the holder and how many
    hosts it holds: the rules of docs/scheduling.md taken one job at a time on concrete hosts."""
    result = plan_of(lab)
    expected = reference(lab, result)
    assert got_hosts(result) == expected.hosts
    holders = set(result.holds.values())
    assert holders == ({expected.holder} if expected.holder else set())
    assert len(result.holds) == expected.held
    if expected.holder:
        reason = result.wait_reasons[expected.holder]
        assert reason.code == WaitCode.HOLDING_HOSTS
        assert reason.details["held"] == expected.held
        assert reason.details["expected_start"] == expected.expected_start.isoformat()  # type: ignore[union-attr]


@PROPERTY
@given(any_labs, st.sampled_from([1, 4, 30, 600]))
def test_a_tick_that_leases_nothing_leases_nothing_later_either(lab: Lab, minutes: int) -> None:
    """Time alone never turns a refused backfill into a lease (the unchanged-tick shortcut of
    docs/performance.md relies on it): under an order that does not change with time, a plan
    that leases nothing leases nothing later, and holds the same hosts for the same job."""
    lab = replace(
        lab, policy=replace(lab.policy, ordering="fifo", aging_minutes=0, fair_share=False)
    )
    now = plan_of(lab)
    if now.assignments:
        return
    later = plan(
        hosts=lab.hosts,
        jobs=lab.jobs,
        suites=lab.suites,
        policy=lab.policy,
        now=NOW + timedelta(minutes=minutes),
        workers=lab.workers,
    )
    assert later.assignments == ()
    assert later.holds == now.holds


@PROPERTY
@given(any_labs)
def test_a_job_kept_off_a_held_host_is_told_so(lab: Lab) -> None:
    result = plan_of(lab)
    if not result.holds:
        return
    (holder,) = set(result.holds.values())
    host_by_id = {h.id: h for h in lab.hosts}
    for job in lab.jobs:
        if job.roles or job.id not in result.wait_reasons:
            continue
        fits_held = [h for h in result.holds if job.fits(host_by_id[h])]
        reason = result.wait_reasons[job.id]
        if fits_held and reason.code == WaitCode.OUTRANKED and job.pinned_host_id is None:
            assert reason.details["held_for"] == holder
            assert f"held for job {holder}" in reason.message


def full_after(lab: Lab, result: Plan) -> set[str]:
    """The workers that may start no more jobs once the plan's leases start and its hold is
    kept: a job counts once on each worker it has a host on, a held host as one job of its
    own (docs/scheduling.md#worker-capacity)."""
    worker_of = {h.id: h.worker for h in lab.hosts}
    jobs_on: dict[str, set[object]] = {}
    for a in result.assignments:
        jobs_on.setdefault(worker_of[a.host_id], set()).add(a.job_id)
    for host_id in result.holds:
        jobs_on.setdefault(worker_of[host_id], set()).add(("held", host_id))
    return {
        w
        for w in set(worker_of.values())
        if (room := lab.room(w)) is not None and len(jobs_on.get(w, ())) >= room
    }


@PROPERTY
@given(any_labs)
def test_every_waiting_job_has_its_reason_under_its_keys(lab: Lab) -> None:
    result = plan_of(lab)
    leased = {a.job_id for a in result.assignments}
    assert leased | set(result.wait_reasons) == {j.id for j in lab.jobs}
    for job in lab.jobs:
        if job.id in leased:
            continue
        reason = result.wait_reasons[job.id]
        assert reason.message
        found = next(result.class_reasons[k] for k in reason_keys(job) if k in result.class_reasons)
        assert found == reason
        if not job.roles:
            continue
        # "Outranked" means enough hosts were free to serve every role at once (in some
        # chamber); "unavailable" that they were not. Free: schedulable and not on a worker
        # the plan filled (with its leases or its hold), unless the plan leased or held it.
        full = full_after(lab, result)
        taken = {a.host_id for a in result.assignments} | result.holds.keys()
        free = [h for h in lab.hosts if usable(h) and (h.worker not in full or h.id in taken)]
        could = any(
            max_matching(essential(job, v), free) == job.hosts_needed for v in values(lab, job)
        )
        if reason.code == WaitCode.OUTRANKED:
            assert could, reason.message
        if reason.code == WaitCode.HOSTS_UNAVAILABLE:
            assert not could, reason.message
            assert reason.details["role"] in {r.name for r in job.roles}


@PROPERTY
@given(any_labs)
def test_the_lab_kept_between_plans_plans_the_same(lab: Lab) -> None:
    lab = replace(lab, jobs=sorted(lab.jobs, key=lambda j: j.id))
    # The index as a kept lab has it: counted from other states of the hosts (busy ones free,
    # free ones busy until later), then each host put in place of its old state.
    before = [
        replace(h, leased=False, busy_until=None)
        if h.busy_until
        else replace(h, leased=True, lease_priority=40, busy_until=NOW + timedelta(minutes=9))
        for h in lab.hosts
    ]
    index = HostIndex.of(before)
    for old, new in zip(before, lab.hosts, strict=True):
        index.put(old, new)
    whole = plan_of(lab)
    grouped = plan_of(lab, groups=group_jobs(lab.jobs), host_index=index)
    assert grouped.assignments == whole.assignments
    assert grouped.holds == whole.holds
    assert grouped.class_reasons == whole.class_reasons


@PROPERTY
@given(any_labs)
def test_it_does_not_depend_on_input_order(lab: Lab) -> None:
    forward = plan_of(lab)
    backward = plan_of(replace(lab, hosts=lab.hosts[::-1], jobs=lab.jobs[::-1]))
    assert set(forward.assignments) == set(backward.assignments)
    assert forward.holds == backward.holds
    assert dict(forward.wait_reasons) == dict(backward.wait_reasons)
