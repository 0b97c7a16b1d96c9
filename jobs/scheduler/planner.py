"""Pure scheduling core: decide which queued jobs get which free hosts in one tick."""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from operator import attrgetter

# This module must never import Django: the property tests, the benchmarks and any
# what-if simulator run it on plain data.


@dataclass(frozen=True, slots=True)
class HostState:
    """One host as the tick sees it: labels, build and why (if at all) it cannot take work."""

    id: int
    hostname: str
    labels: frozenset[str]
    current_build: str = ""
    ready: bool = True  # status == ready
    locked: bool = False
    worker_paused: bool = False
    worker_offline: bool = False
    leased: bool = False  # holds an active lease (job or manual reservation)
    lease_priority: int | None = None  # priority of the job holding it; None if free or reserved
    lock_reason: str = ""  # shown in a pinned job's wait reason

    @property
    def schedulable(self) -> bool:
        return host_is_schedulable(
            ready=self.ready,
            locked=self.locked,
            leased=self.leased,
            worker_paused=self.worker_paused,
            worker_offline=self.worker_offline,
        )


def host_is_schedulable(
    *, ready: bool, locked: bool, leased: bool, worker_paused: bool, worker_offline: bool
) -> bool:
    """Whether a host may take a lease: ready, unlocked, unleased, its worker (if any) up.

    The rule itself, on plain facts. The snapshot and the API read the facts from the
    database and ask this function; `Host.objects.schedulable(now)` (hosts/querysets.py) is
    its SQL twin for counts and filters, held to the same cases by tests/hosts/test_querysets.py.
    A host with no worker is neither paused nor offline.
    """
    return ready and not locked and not leased and not worker_paused and not worker_offline


@dataclass(frozen=True, slots=True)
class SuiteState:
    """One suite with queued jobs: its ordering keys, quota, cap and hosts already held."""

    id: int
    name: str
    priority: int
    created_at: datetime
    min_duts: int = 0
    max_duts: int | None = None
    held: int = 0  # hosts its jobs hold through active leases right now
    build: str = ""


@dataclass(frozen=True, slots=True)
class JobState:
    """One queued job: what it needs and where it stands in the order."""

    id: int
    name: str
    suite_id: int | None
    priority: int
    submitted_at: datetime  # the suite's created_at, or the job's own for a standalone job
    labels: frozenset[str] = frozenset()
    pinned_host_id: int | None = None


@dataclass(frozen=True, slots=True)
class WaitReason:
    """Why a job is still queued after a tick: a stable code, plain words and the numbers."""

    code: str
    message: str
    details: Mapping[str, object] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Assignment:
    job_id: int
    host_id: int


@dataclass(frozen=True, slots=True)
class Plan:
    """What one tick decided."""

    assignments: tuple[Assignment, ...]
    wait_reasons: Mapping[int, WaitReason]  # job id -> reason, for every job left queued
    # class_key(job) -> reason, one entry per class of identical waiting jobs; what a tick at
    # 100,000 queued jobs stores instead of rewriting every job (docs/scheduling.md#wait-reasons).
    class_reasons: Mapping[str, WaitReason] = field(default_factory=dict)


# --- order of consideration ------------------------------------------------------------------


def _suite_order_key(suite: SuiteState) -> tuple[int, datetime, int]:
    return (-suite.priority, suite.created_at, suite.id)


def _job_order_key(job: JobState) -> tuple[int, datetime, int]:
    return (-job.priority, job.submitted_at, job.id)


def _main_phase_order(jobs: Iterable[JobState]) -> list[JobState]:
    """Return the jobs sorted by _job_order_key: priority desc, then submission time, then id.

    Three stable sorts on single attributes, last key first, give the same order as one sort
    on the tuple key, without calling a Python function per job: at 100,000 jobs that is
    most of the sort's time. (reverse=True keeps equal elements in their order.)
    """
    ordered = sorted(jobs, key=attrgetter("id"))
    ordered.sort(key=attrgetter("submitted_at"))
    ordered.sort(key=attrgetter("priority"), reverse=True)
    return ordered


def _quota_suites(suites: Iterable[SuiteState]) -> list[SuiteState]:
    """Return the suites holding fewer hosts than their minimum, in quota-phase order."""
    return sorted((s for s in suites if s.held < s.min_duts), key=_suite_order_key)


def _jobs_by_suite(jobs: Iterable[JobState]) -> dict[int, list[JobState]]:
    """Group suite jobs by suite, each group in job order (id)."""
    groups: dict[int, list[JobState]] = defaultdict(list)
    for job in jobs:
        if job.suite_id is not None:
            groups[job.suite_id].append(job)
    for group in groups.values():
        group.sort(key=lambda job: job.id)
    return groups


def quota_candidates(*, jobs: Iterable[JobState], suites: Iterable[SuiteState]) -> list[int]:
    """Return the quota-phase candidates in the order the tick tries them, assuming each succeeds.

    For every suite short of `min_duts` (priority desc, created_at, id): its first
    `min(min_duts, max_duts) - held` queued jobs by id.
    """
    by_suite = _jobs_by_suite(jobs)
    order: list[int] = []
    for suite in _quota_suites(suites):
        want = suite.min_duts - suite.held
        if suite.max_duts is not None:
            want = min(want, suite.max_duts - suite.held)
        order.extend(job.id for job in by_suite.get(suite.id, [])[: max(want, 0)])
    return order


def consideration_order(*, jobs: Iterable[JobState], suites: Iterable[SuiteState]) -> list[int]:
    """Return every queued job id in the order a tick takes them, for the queue page.

    First the quota-phase candidates (`quota_candidates`), then every other job in main-phase
    order (priority desc, submission time, id). A candidate that turns out unsatisfiable makes
    the real tick try the suite's next job instead; that needs the hosts, so it is not
    predicted here.
    """
    jobs = list(jobs)
    order = quota_candidates(jobs=jobs, suites=suites)
    first = set(order)
    order.extend(job.id for job in _main_phase_order(jobs) if job.id not in first)
    return order


def class_key(job: JobState) -> str:
    """Return the key of the job's wait-reason class: its sorted labels, pinned host and suite.

    Jobs with the same key always get the same WaitReason from `plan` (the reason depends only on
    the labels, the pinned host and the suite's cap), so a tick can store one reason per key in
    `Plan.class_reasons` and resolve a job's reason when it is read. Format:
    `["board:x","pool:bvt"]|pin=-|suite=12`; stable across ticks and processes.
    """
    return _class_key(_labels_key(job.labels), job.pinned_host_id, job.suite_id)


def _labels_key(labels: frozenset[str]) -> str:
    # JSON keeps any label text unambiguous inside the key.
    return json.dumps(sorted(labels), separators=(",", ":"))


def _class_key(labels_key: str, pinned_host_id: int | None, suite_id: int | None) -> str:
    pin = "-" if pinned_host_id is None else pinned_host_id
    suite = "-" if suite_id is None else suite_id
    return f"{labels_key}|pin={pin}|suite={suite}"


# --- bitsets over host classes ---------------------------------------------------------------


def _lowest(bits: int) -> int:
    """Return the index of the lowest set bit (bits must be non-zero)."""
    return (bits & -bits).bit_length() - 1


def _members(bits: int) -> Iterator[int]:
    """Yield the indexes of the set bits, lowest first."""
    while bits:
        low = bits & -bits
        yield low.bit_length() - 1
        bits ^= low


# --- class-level matching --------------------------------------------------------------------


class _Matching:
    """Grow a matching of jobs to free hosts one job at a time (docs/scheduling.md#matching).

    Hosts with one label set form a host class and jobs with one (labels, pinned host) form a
    job class; a host class's hosts are interchangeable for every job, so the matching only
    counts how many jobs of each job class sit in each host class. A pinned job also needs its
    host not to be taken by another pinned job; inside its class the others can always make
    room for it. Host classes are indexed by preference (fewer labels, then lowest hostname),
    so the lowest set bit of a bitset of classes is the preferred one.
    """

    def __init__(self, free_hosts: Sequence[HostState], builds: set[str]) -> None:
        groups: dict[frozenset[str], list[HostState]] = defaultdict(list)
        for host in free_hosts:
            groups[host.labels].append(host)
        for members in groups.values():
            members.sort(key=lambda host: host.hostname)
        ranked = sorted(groups.values(), key=lambda m: (len(m[0].labels), m[0].hostname))
        self.hosts: list[list[HostState]] = ranked  # per host class, by hostname
        self.capacity = [len(members) for members in ranked]
        self.used = [0] * len(ranked)
        self.class_of_host = {h.id: c for c, members in enumerate(ranked) for h in members}
        self.label_bits: dict[str, int] = defaultdict(int)
        for c, members in enumerate(ranked):
            for label in members[0].labels:
                self.label_bits[label] |= 1 << c
        self.all_bits = (1 << len(ranked)) - 1
        self.open_bits = self.all_bits  # classes with a free host left
        # Full classes from which no augmenting path can ever leave (see _augment).
        self.dead_bits = 0
        self.free = len(free_hosts)
        self.occupants: list[dict[int, int]] = [{} for _ in ranked]  # job class -> jobs

        self.eligible: list[int] = []  # per job class: bitset of host classes
        self.pinned: list[int | None] = []
        self.dead: list[bool] = []
        self.pins_taken: set[int] = set()

        # Build affinity at class level: hosts per (class, build) not yet promised to a job of
        # that build. Augmenting moves do not update it (which job moves is not tracked), so it
        # only guides the choice; the final assignment matches builds exactly within classes.
        self.affine_left: dict[tuple[int, str], int] = {}
        self.affine_bits: dict[str, int] = defaultdict(int)
        for c, members in enumerate(ranked):
            for build, n in Counter(h.current_build for h in members).items():
                if build in builds:
                    self.affine_left[c, build] = n
                    self.affine_bits[build] |= 1 << c

    def job_class(self, labels: frozenset[str], pinned_host_id: int | None) -> int:
        """Register a job class and return its index."""
        if pinned_host_id is None:
            bits = self.all_bits
            for label in labels:
                bits &= self.label_bits.get(label, 0)
        else:
            c = self.class_of_host.get(pinned_host_id)
            bits = 0 if c is None or not labels <= self.hosts[c][0].labels else 1 << c
        self.eligible.append(bits)
        self.pinned.append(pinned_host_id)
        self.dead.append(not bits)
        return len(self.eligible) - 1

    def add(self, j: int, build: str) -> bool:
        """Match one more job of class j, moving earlier jobs if needed; False if impossible."""
        if self.dead[j]:
            return False
        pin = self.pinned[j]
        if pin is not None and pin in self.pins_taken:
            # Pins are never released within a tick.
            self.dead[j] = True
            return False
        eligible = self.eligible[j] & ~self.dead_bits
        open_ = eligible & self.open_bits
        if open_:
            affine = open_ & self.affine_bits.get(build, 0) if build else 0
            start = _lowest(affine or open_)
            self._fill(start)
        else:
            start = self._augment(eligible)
            if start is None:
                # The kept jobs plus this one cannot be matched. Kept jobs are never dropped, so
                # every later job of this class meets a superset of them and fails too
                # (dependent sets stay dependent in a matroid): skip them in O(1).
                self.dead[j] = True
                return False
        self.occupants[start][j] = self.occupants[start].get(j, 0) + 1
        if build and self.affine_left.get((start, build), 0) > 0:
            self.affine_left[start, build] -= 1
            if not self.affine_left[start, build]:
                self.affine_bits[build] &= ~(1 << start)
        if pin is not None:
            self.pins_taken.add(pin)
        return True

    def _fill(self, c: int) -> None:
        self.used[c] += 1
        self.free -= 1
        if self.used[c] == self.capacity[c]:
            self.open_bits &= ~(1 << c)

    def _augment(self, eligible: int) -> int | None:
        """Find room in one of the (full) eligible classes by moving matched jobs along a path.

        Breadth-first over host classes: from a full class, one of its jobs of class j can move
        to any class eligible for j. Returns the class where the new job goes, or None.
        """
        if not eligible:
            return None
        parent: dict[int, tuple[int, int] | None] = dict.fromkeys(_members(eligible))
        queue = list(parent)
        visited = eligible
        expanded: set[int] = set()  # a job class reaches the same classes from anywhere
        for c in queue:
            for j in self.occupants[c]:
                if j in expanded:
                    continue
                expanded.add(j)
                targets = self.eligible[j] & ~visited & ~self.dead_bits
                if not targets:
                    continue
                open_ = targets & self.open_bits
                if open_:
                    end = _lowest(open_)
                    parent[end] = (c, j)
                    return self._shift(end, parent)
                visited |= targets
                for t in _members(targets):
                    parent[t] = (c, j)
                    queue.append(t)
        # Every class reached is full and its jobs can only move among them. No future path
        # can enter that set (entering means displacing a job that cannot leave), so it stays
        # full and closed for the rest of the tick: later searches skip it.
        self.dead_bits |= visited
        return None

    def _shift(self, end: int, parent: dict[int, tuple[int, int] | None]) -> int:
        """Move one job along each edge of the path ending at open class `end`; return start."""
        self._fill(end)
        c = end
        while (step := parent[c]) is not None:
            src, j = step
            occupants = self.occupants[src]
            occupants[j] -= 1
            if not occupants[j]:
                del occupants[j]
            self.occupants[c][j] = self.occupants[c].get(j, 0) + 1
            c = src
        return c


def _assign_hosts(
    matching: _Matching,
    leased: Sequence[tuple[JobState, int, str]],
    hosts_by_id: Mapping[int, HostState],
) -> tuple[Assignment, ...]:
    """Give each leased job a concrete host within the host classes the matching chose.

    Pinned jobs take their host first; then each job whose suite has a build takes a host
    already on that build (no re-provisioning); the rest take the lowest hostname. Jobs earlier
    in the order choose first.
    """
    slots: dict[tuple[int, int], int] = {}  # (job class, host class) -> jobs to place there
    slot_bits: dict[int, int] = defaultdict(int)
    for c, occupants in enumerate(matching.occupants):
        for j, n in occupants.items():
            slots[j, c] = n
            slot_bits[j] |= 1 << c
    taken: set[int] = set()
    host_of: dict[int, int] = {}

    def take(job: JobState, j: int, c: int, host: HostState) -> None:
        slots[j, c] -= 1
        if not slots[j, c]:
            slot_bits[j] &= ~(1 << c)
        taken.add(host.id)
        host_of[job.id] = host.id

    for job, j, _build in leased:
        pin = job.pinned_host_id
        if pin is not None:
            take(job, j, matching.class_of_host[pin], hosts_by_id[pin])

    _place_on_builds(matching, leased, slot_bits, taken, host_of, take)

    cursor = [0] * len(matching.hosts)
    for job, j, _build in leased:
        if job.id in host_of:
            continue
        c = _lowest(slot_bits[j])
        members = matching.hosts[c]
        while members[cursor[c]].id in taken:
            cursor[c] += 1
        take(job, j, c, members[cursor[c]])
    return tuple(Assignment(job.id, host_of[job.id]) for job, _j, _b in leased)


def _place_on_builds(
    matching: _Matching,
    leased: Sequence[tuple[JobState, int, str]],
    slot_bits: Mapping[int, int],
    taken: set[int],
    host_of: Mapping[int, int],
    take: Callable[[JobState, int, int, HostState], None],
) -> None:
    """Give each unplaced job whose suite has a build a free host already on that build."""
    pools: dict[tuple[int, str], list[HostState]] = {}  # by hostname, descending: pop() lowest
    pool_bits: dict[str, int] = defaultdict(int)
    for c, build in matching.affine_left:
        pools[c, build] = [h for h in reversed(matching.hosts[c]) if h.current_build == build]
        pool_bits[build] |= 1 << c
    for job, j, build in leased:
        if job.id in host_of or not build:
            continue
        candidates = slot_bits[j] & pool_bits.get(build, 0)
        while candidates:
            c = _lowest(candidates)
            pool = pools[c, build]
            while pool and pool[-1].id in taken:
                pool.pop()
            if pool:
                take(job, j, c, pool.pop())
                break
            pool_bits[build] &= ~(1 << c)
            candidates &= ~(1 << c)


# --- wait reasons ----------------------------------------------------------------------------


def _blocker(host: HostState) -> str | None:
    """Return why a host cannot take work now, the most lasting cause first; None if it can."""
    if host.locked:
        return "locked"
    if host.worker_paused:
        return "paused"
    if host.worker_offline:
        return "offline"
    if not host.ready:
        return "not_ready"
    if host.leased:
        return "busy" if host.lease_priority is not None else "reserved"
    return None


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def _names(labels: Iterable[str]) -> str:
    return ", ".join(sorted(labels))


@dataclass(slots=True)
class _Tally:
    """Hosts counted by what keeps them from taking work."""

    total: int = 0
    counts: Counter[str] = field(default_factory=Counter)
    max_priority: int | None = None  # highest priority among jobs running on busy hosts

    def add(self, host: HostState) -> None:
        self.total += 1
        self.counts[_blocker(host) or "free"] += 1
        if host.leased and host.lease_priority is not None:
            self._see_priority(host.lease_priority)

    def merge(self, other: _Tally) -> None:
        self.total += other.total
        self.counts.update(other.counts)
        if other.max_priority is not None:
            self._see_priority(other.max_priority)

    def _see_priority(self, priority: int) -> None:
        if self.max_priority is None or priority > self.max_priority:
            self.max_priority = priority

    def unavailable(self) -> str:
        """Describe the unusable hosts, e.g. '2 busy (running priority ≤ 70), 1 locked'."""
        parts = []
        busy, reserved = self.counts["busy"], self.counts["reserved"]
        if busy or reserved:
            notes = []
            if busy:
                notes.append(f"running priority ≤ {self.max_priority}")
            if reserved:
                notes.append(f"{reserved} reserved manually")
            parts.append(f"{busy + reserved} busy ({', '.join(notes)})")
        for key, words in (
            ("locked", "locked"),
            ("paused", "on a paused worker"),
            ("offline", "on an offline worker"),
            ("not_ready", "not ready"),
        ):
            if self.counts[key]:
                parts.append(f"{self.counts[key]} {words}")
        return ", ".join(parts)

    def details(self) -> dict[str, object]:
        return {
            "matching": self.total,
            "free_at_start": self.counts["free"],
            "busy": self.counts["busy"] + self.counts["reserved"],
            "reserved": self.counts["reserved"],
            "max_running_priority": self.max_priority,
            "locked": self.counts["locked"],
            "paused": self.counts["paused"],
            "offline": self.counts["offline"],
            "not_ready": self.counts["not_ready"],
        }


class _Explainer:
    """Word the wait reason of each class of waiting jobs, once per class."""

    def __init__(
        self,
        hosts: Sequence[HostState],
        matching: _Matching,
        suite_by_id: Mapping[int, SuiteState],
        room: Mapping[int, int],
    ) -> None:
        self.matching = matching
        self.suite_by_id = suite_by_id
        self.room = room  # hosts each capped suite could still take after this tick
        self.hosts_by_id = {host.id: host for host in hosts}
        tallies: dict[frozenset[str], _Tally] = defaultdict(_Tally)
        for host in hosts:
            tallies[host.labels].add(host)
        self.groups = list(tallies.items())
        self.group_bits: dict[str, int] = defaultdict(int)  # label -> groups carrying it
        for g, (labels, _tally) in enumerate(self.groups):
            for label in labels:
                self.group_bits[label] |= 1 << g
        self.structural_of: dict[int, WaitReason | None] = {}  # per job class
        self.availability_of: dict[int, WaitReason] = {}  # per job class
        self.suite_full_of: dict[int, WaitReason] = {}  # per suite

    def explain(self, job: JobState, j: int) -> WaitReason:
        """Return the reason a job of class j still waits; equal for its whole class."""
        # Order matters: a job no host could ever take says so first; then the suite cap, which
        # blocks it whatever the hosts do; then the state of the matching hosts.
        if j not in self.structural_of:
            self.structural_of[j] = self.structural(job)
        reason = self.structural_of[j]
        if reason is not None:
            return reason
        suite_id = job.suite_id
        if suite_id is not None and self.room.get(suite_id, 1) <= 0:
            if suite_id not in self.suite_full_of:
                self.suite_full_of[suite_id] = self.suite_full(self.suite_by_id[suite_id])
            return self.suite_full_of[suite_id]
        if j not in self.availability_of:
            self.availability_of[j] = self.availability(job, j)
        return self.availability_of[j]

    def suite_full(self, suite: SuiteState) -> WaitReason:
        # room = max_duts - held - leased this tick; the suite now holds the rest of its cap.
        holds = (suite.max_duts or 0) - self.room[suite.id]
        return WaitReason(
            "suite_at_max_duts",
            f"Suite {suite.name} holds {holds} of max {suite.max_duts} hosts",
            {"suite": suite.name, "suite_id": suite.id, "held": holds, "max_duts": suite.max_duts},
        )

    def structural(self, job: JobState) -> WaitReason | None:
        """Return the reason no host could ever take the job as it stands, if there is one."""
        if job.pinned_host_id is not None:
            host = self.hosts_by_id.get(job.pinned_host_id)
            if host is None:
                return WaitReason(
                    "pinned_host_missing",
                    f"Pinned host #{job.pinned_host_id} does not exist",
                    {"host_id": job.pinned_host_id},
                )
            missing = sorted(job.labels - host.labels)
            if missing:
                return WaitReason(
                    "pinned_host_lacks_labels",
                    f"Pinned host {host.hostname} lacks "
                    f"{'label' if len(missing) == 1 else 'labels'} {_names(missing)}",
                    {"host": host.hostname, "missing_labels": missing},
                )
            return None
        if self.tally(job.labels).total:
            return None
        missing = sorted(label for label in job.labels if label not in self.group_bits)
        labels = sorted(job.labels)
        if not labels:
            message = "The lab has no hosts"
        elif missing:
            message = f"No host has {'label' if len(missing) == 1 else 'labels'} {_names(missing)}"
        else:
            message = f"No host has all of {_names(labels)} together"
        return WaitReason(
            "no_matching_host", message, {"labels": labels, "missing_labels": missing}
        )

    def tally(self, labels: frozenset[str]) -> _Tally:
        """Count every host (usable or not) carrying all the labels, by state."""
        bits = (1 << len(self.groups)) - 1
        for label in labels:
            bits &= self.group_bits.get(label, 0)
        total = _Tally()
        for g in _members(bits):
            total.merge(self.groups[g][1])
        return total

    def availability(self, job: JobState, j: int) -> WaitReason:
        """Return why hosts that could take the job did not (busy, locked, ... or outranked)."""
        if job.pinned_host_id is not None:
            return self._pinned(self.hosts_by_id[job.pinned_host_id])
        tally = self.tally(job.labels)
        if not tally.counts["free"]:
            return WaitReason(
                "hosts_unavailable",
                f"{_plural(tally.total, 'matching host')}: {tally.unavailable()}",
                tally.details(),
            )
        # Work conservation: every free matching host was leased this tick, to jobs ahead.
        went = sum(self.matching.used[c] for c in _members(self.matching.eligible[j]))
        message = (
            f"Outranked: {_plural(went, 'matching host')} went to "
            f"{_plural(went, 'job')} ahead of it this tick"
        )
        others = tally.total - tally.counts["free"]
        if others:
            message += f"; {_plural(others, 'other')}: {tally.unavailable()}"
        return WaitReason("outranked", message, {**tally.details(), "outranked_by": went})

    def _pinned(self, host: HostState) -> WaitReason:
        name = host.hostname
        blocker = _blocker(host)
        details: dict[str, object] = {"host": name}
        if blocker is None:
            return WaitReason(
                "outranked",
                f"Outranked: pinned host {name} went to a job ahead of it this tick",
                {**details, "outranked_by": 1},
            )
        if blocker == "locked":
            why = f": {host.lock_reason}" if host.lock_reason else ""
            return WaitReason(
                "pinned_host_locked",
                f"Pinned host {name} is locked{why}",
                {**details, "lock_reason": host.lock_reason},
            )
        if blocker in ("busy", "reserved"):
            note = (
                f"running priority {host.lease_priority}"
                if blocker == "busy"
                else "reserved manually"
            )
            return WaitReason(
                "pinned_host_busy",
                f"Pinned host {name} is busy ({note})",
                {**details, "running_priority": host.lease_priority},
            )
        words = {
            "paused": "is on a paused worker",
            "offline": "is on an offline worker",
            "not_ready": "is not ready",
        }
        return WaitReason(f"pinned_host_{blocker}", f"Pinned host {name} {words[blocker]}", details)


# --- the planner -----------------------------------------------------------------------------


def _job_classes(
    jobs: Iterable[JobState], matching: _Matching
) -> tuple[dict[tuple[frozenset[str], int | None], int], dict[int, int]]:
    """Give jobs that need the same hosts (labels and pin) one job class of the matching."""
    class_ids: dict[tuple[frozenset[str], int | None], int] = {}
    job_class: dict[int, int] = {}
    for job in jobs:
        key = (job.labels, job.pinned_host_id)
        j = class_ids.get(key)
        if j is None:
            j = class_ids[key] = matching.job_class(*key)
        job_class[job.id] = j
    return class_ids, job_class


def _explain_waits(
    waiting: Iterable[JobState], job_class: Mapping[int, int], explainer: _Explainer
) -> tuple[dict[int, WaitReason], dict[tuple[int, int | None], WaitReason]]:
    """Say why each waiting job waits; jobs of one class in one suite share one reason."""
    by_class: dict[tuple[int, int | None], WaitReason] = {}
    wait_reasons: dict[int, WaitReason] = {}
    for job in waiting:
        key = (job_class[job.id], job.suite_id)
        reason = by_class.get(key)
        if reason is None:
            reason = by_class[key] = explainer.explain(job, key[0])
        wait_reasons[job.id] = reason
    return wait_reasons, by_class


def plan(
    *,
    hosts: Iterable[HostState],
    jobs: Iterable[JobState],
    suites: Iterable[SuiteState],
) -> Plan:
    """Lease free hosts to queued jobs (docs/scheduling.md#the-promise)."""
    hosts = list(hosts)
    jobs = list(jobs)
    suites = list(suites)
    suite_by_id = {suite.id: suite for suite in suites}
    hosts_by_id = {host.id: host for host in hosts}
    matching = _Matching(
        [host for host in hosts if host.schedulable],
        builds={suite.build for suite in suites if suite.build},
    )

    class_ids, job_class = _job_classes(jobs, matching)
    build_of = {suite.id: suite.build for suite in suites}
    # Hosts each capped suite may still take this tick; held hosts count against the cap.
    room = {s.id: s.max_duts - s.held for s in suites if s.max_duts is not None}
    leased: list[tuple[JobState, int, str]] = []  # (job, job class, build), in lease order
    leased_ids: set[int] = set()

    def lease(job: JobState) -> bool:
        """Keep the job if it can be matched together with every job kept so far."""
        left = room.get(job.suite_id)
        if left is not None and left <= 0:
            return False
        j = job_class[job.id]
        build = build_of.get(job.suite_id, "")
        if not matching.add(j, build):
            return False
        if left is not None:
            room[job.suite_id] = left - 1
        leased.append((job, j, build))
        leased_ids.add(job.id)
        return True

    by_suite = _jobs_by_suite(jobs)
    for suite in _quota_suites(suites):
        # The quota counts hosts actually leased, not jobs tried: a job no host can take must
        # not use up the suite's minimum, its next job may fit (Autotest's min-DUT rule).
        need = suite.min_duts - suite.held
        for job in by_suite.get(suite.id, ()):
            if not need or not matching.free or room.get(suite.id, 1) <= 0:
                break
            if lease(job):
                need -= 1

    dead = matching.dead
    for job in _main_phase_order(jobs):
        if not matching.free:
            break  # every schedulable host is leased: the rest can only wait
        # A dead class cannot take a host for the rest of the tick (see _Matching.add), so its
        # jobs are skipped without a call; in a full lab that is nearly every job.
        if job.id not in leased_ids and not dead[job_class[job.id]]:
            lease(job)

    assignments = _assign_hosts(matching, leased, hosts_by_id)

    explainer = _Explainer(hosts, matching, suite_by_id, room)
    waiting = [job for job in jobs if job.id not in leased_ids]
    wait_reasons, by_class = _explain_waits(waiting, job_class, explainer)

    labels_keys = {j: _labels_key(labels) for (labels, _pin), j in class_ids.items()}
    class_reasons = {
        _class_key(labels_keys[j], matching.pinned[j], suite_id): reason
        for (j, suite_id), reason in by_class.items()
    }

    return Plan(assignments=assignments, wait_reasons=wait_reasons, class_reasons=class_reasons)
