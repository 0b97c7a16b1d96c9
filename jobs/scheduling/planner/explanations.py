"""Wait reasons: why each job a tick left queued still waits, worded once per class."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping, MutableMapping, Sequence, Set
from dataclasses import dataclass, field
from operator import attrgetter

from hosts.rules import job_fits_host, missing_labels
from jobs.scheduling.planner.hostindex import HostIndex, host_blocker
from jobs.scheduling.planner.matching import Matching, bit_indexes
from jobs.scheduling.planner.multihost import Hold
from jobs.scheduling.planner.ordering import group_class_key, group_key, holder_key
from jobs.scheduling.planner.types import (
    HostState,
    JobState,
    RoleNeed,
    SuiteState,
    WaitCode,
    WaitReason,
)

# Workers at capacity after a tick: name -> (jobs running, capacity).
Full = Mapping[str, tuple[int, int]]


@dataclass(frozen=True, slots=True)
class _Capacity:
    """Workers the tick filled, and the hosts it leased or held (those count as free: they went
    to jobs ahead, or to the holder, whose hold may be what filled their worker); another free
    host on a full worker is kept from work by the worker's capacity."""

    full: Full = field(default_factory=dict)
    leased: frozenset[int] = frozenset()
    held: frozenset[int] = frozenset()


def _blocker(host: HostState, capacity: _Capacity) -> str | None:
    """Return why a host cannot take work now, the most lasting cause first; None if it can."""
    blocker = host_blocker(host)
    if (
        blocker is None
        and host.worker in capacity.full
        and host.id not in capacity.leased
        and host.id not in capacity.held
    ):
        return "capacity"
    return blocker


def _at_capacity(worker: str, full: Full) -> str:
    running, limit = full[worker]
    return f"worker {worker} at capacity ({running} of {limit})"


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def _names(labels: Iterable[str]) -> str:
    return ", ".join(sorted(labels))


# What _blocker says keeps a host from work, and "free".
_STATES = ("free", "locked", "paused", "offline", "not_ready", "busy", "reserved", "capacity")


@dataclass(slots=True)
class _Tally:
    """Hosts counted by what keeps them from taking work."""

    capacity: _Capacity = field(default_factory=_Capacity)
    total: int = 0
    # By what keeps them from work (_blocker), or "free"; every key present.
    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(_STATES, 0))
    max_priority: int | None = None  # highest priority among jobs running on busy hosts
    on_full_workers: dict[str, int] = field(default_factory=dict)  # free hosts, by worker

    def add_free(self, host: HostState) -> None:
        """Count a host free at the start of the tick (or kept from work by a full worker)."""
        self.total += 1
        if _blocker(host, self.capacity) == "capacity":
            self.counts["capacity"] += 1
            self.on_full_workers[host.worker] = self.on_full_workers.get(host.worker, 0) + 1
        else:
            self.counts["free"] += 1

    def add_kept(self, blocker: str, priority: int | None, n: int) -> None:
        """Count n hosts kept from work by `blocker`, running jobs of `priority` (if any)."""
        self.total += n
        self.counts[blocker] += n
        if priority is not None:
            self._see_priority(priority)

    def merge(self, other: _Tally) -> None:
        self.total += other.total
        counts = self.counts
        for state, n in other.counts.items():
            if n:  # most of a group's hosts are in one or two states
                counts[state] += n
        for worker, n in other.on_full_workers.items():
            self.on_full_workers[worker] = self.on_full_workers.get(worker, 0) + n
        if other.max_priority is not None:
            self._see_priority(other.max_priority)

    def merged_with(self, other: _Tally) -> _Tally:
        """This tally with `other`'s hosts added (returns itself)."""
        self.merge(other)
        return self

    def _see_priority(self, priority: int) -> None:
        if self.max_priority is None or priority > self.max_priority:
            self.max_priority = priority

    def unavailable_parts(self) -> list[str]:
        """The unusable hosts by cause, e.g. ['2 busy running priority ≤ 70 jobs', '1 locked']."""
        parts = []
        busy, reserved = self.counts["busy"], self.counts["reserved"]
        if busy == 1:
            parts.append(f"1 busy running a priority {self.max_priority} job")
        elif busy:
            parts.append(f"{busy} busy running priority ≤ {self.max_priority} jobs")
        if reserved:
            parts.append(f"{reserved} reserved by hand")
        for key, words in (
            ("locked", "locked"),
            ("paused", "on a paused worker"),
            ("offline", "on an offline worker"),
            ("not_ready", "not ready (being checked or repaired)"),
        ):
            if self.counts[key]:
                parts.append(f"{self.counts[key]} {words}")
        for worker, n in sorted(self.on_full_workers.items()):
            parts.append(f"{n} on {_at_capacity(worker, self.capacity.full)}")
        return parts

    def unavailable(self) -> str:
        """Describe the unusable hosts, e.g. '2 busy running priority ≤ 70 jobs, 1 locked'."""
        return ", ".join(self.unavailable_parts())

    def say(self, n: int, one: str, many: str, mixed: str) -> str:
        """Say why n hosts are not free: "All 3 … are locked" when one cause covers them all."""
        parts = self.unavailable_parts()
        if len(parts) > 1:
            return f"{mixed.format(n=n)}{', '.join(parts)}"
        cause = parts[0].split(" ", 1)[1]  # the count is said once, in the subject
        if n == 1:
            return f"{one} is {cause}"
        return f"{many.format(n=n)} are {cause}"

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
            "at_capacity": self.counts["capacity"],
            "workers_at_capacity": {
                worker: dict(zip(("running", "max_jobs"), self.capacity.full[worker], strict=True))
                for worker in sorted(self.on_full_workers)
            },
        }


class Memo:
    """What a plan worded, kept with the host index for the next plan to reuse.

    The host groups (one per label set of the lab, in a fixed order: the bits of `_groups`),
    the tally of each group's hosts that are not free, the tallies by groups, and the reasons
    that depend only on hosts that are not free, each with the groups it counted. A plan
    forgets what counted a group whose hosts changed since (`HostIndex.touched`) or that has a
    free host now (what the tick leases decides its words), and words again only those: a
    reason is a function of the hosts it counts, so one whose groups did not change reads the
    same (docs/performance.md#wait-reasons-worded-for-what-changed).
    """

    __slots__ = (
        "available",
        "group_bits",
        "groups",
        "kept",
        "multi",
        "multi_deps",
        "pinned",
        "position",
        "structural",
        "tallies",
        "with_free",
    )

    def __init__(self, label_sets: Iterable[frozenset[str]]) -> None:
        self.position = {labels: g for g, labels in enumerate(label_sets)}
        self.groups: list[tuple[frozenset[str], _Tally]] = [
            (labels, _Tally()) for labels in self.position
        ]
        self.group_bits: dict[str, int] = defaultdict(int)  # label -> groups carrying it
        for labels, g in self.position.items():
            for label in labels:
                self.group_bits[label] |= 1 << g
        self.kept: dict[frozenset[str], _Tally] = {}  # per group, its hosts not free
        self.tallies: dict[int, _Tally] = {}  # by the groups they count
        self.structural: dict[frozenset[str], WaitReason | None] = {}  # unpinned, by labels
        self.available: dict[frozenset[str], tuple[int, WaitReason]] = {}  # unpinned: groups
        self.pinned: dict[int, tuple[HostState, WaitReason]] = {}  # by pinned host: not free
        self.multi: dict[object, tuple[list[str | None] | WaitReason, WaitReason | None]] = {}
        self.multi_deps: dict[object, int] = {}
        self.with_free: set[frozenset[str]] = set()  # groups the last plan counted free hosts in

    @classmethod
    def of(cls, index: HostIndex) -> Memo:
        return cls(index.hosts_by_labels)

    def forget(self, dirty: int) -> None:
        """Drop what counted any of the `dirty` groups."""
        if not dirty:
            return
        self.tallies = {bits: t for bits, t in self.tallies.items() if not bits & dirty}
        self.available = {k: v for k, v in self.available.items() if not v[0] & dirty}
        deps = self.multi_deps
        self.multi = {k: v for k, v in self.multi.items() if not deps[k] & dirty}
        self.multi_deps = {k: deps[k] for k in self.multi}


class Explainer:
    """Word the wait reason of each class of waiting jobs, once per class; reuse the words of
    the last plan (`Memo`) for those whose hosts did not change."""

    def __init__(
        self,
        hosts_by_id: Mapping[int, HostState],
        index: HostIndex,
        matching: Matching,
        suite_by_id: Mapping[int, SuiteState],
        room: Mapping[int, int],
        full: Full,
        leased_hosts: frozenset[int],
        holder: Hold | None = None,
        held_hosts: frozenset[int] = frozenset(),
    ) -> None:
        self.matching = matching
        # The tick's holder, even when backfilled jobs took every host it held (it still holds
        # its place: its expected start decides who backfills); `holder` only while it holds.
        self.hold = holder
        self.holder = holder if holder is not None and holder.total else None
        self.suite_by_id = suite_by_id
        self.room = room  # hosts each capped suite could still take after this tick
        self.capacity = _Capacity(full, leased_hosts, held_hosts)
        self._leased_per_class: Counter[int] | None = None
        self.hosts_by_id = hosts_by_id
        memo = index.memo if isinstance(index.memo, Memo) else None
        touched = index.take_touched()
        if memo is None:
            memo = index.memo = Memo.of(index)
            touched = set(memo.position)
        self.memo = memo
        self.groups = memo.groups
        self.group_bits = memo.group_bits
        # The host groups that may have changed since the memo's words: those with a host put
        # since the last plan, and those with a free host (what the tick leased and held
        # decides their words).
        free_by_labels: dict[frozenset[str], list[HostState]] = defaultdict(list)
        for host in index.free.values():  # free, or kept from work by a worker this tick filled
            free_by_labels[host.labels].append(host)
        position = memo.position
        dirty = 0
        for labels in touched | free_by_labels.keys():
            dirty |= 1 << position[labels]
        memo.forget(dirty)
        if touched:
            kept: dict[frozenset[str], _Tally] = {labels: _Tally() for labels in touched}
            for (labels, blocker, priority), n in index.kept.items():
                if labels in kept:
                    kept[labels].add_kept(blocker, priority, n)
            memo.kept.update(kept)
        groups = self.groups
        for labels in touched | memo.with_free:  # back to their hosts not free
            groups[position[labels]] = (labels, memo.kept[labels])
        for labels, free in free_by_labels.items():
            tally = _Tally(self.capacity).merged_with(memo.kept[labels])
            for host in free:
                tally.add_free(host)
            groups[position[labels]] = (labels, tally)
        memo.with_free = set(free_by_labels)
        self.tallies = memo.tallies  # by the host groups they count
        self.deps = 0  # the host groups the reason being worded counts (_groups)
        self.structural_of: dict[int, WaitReason | None] = {}  # per job class
        self.availability_of: dict[int, WaitReason] = {}  # per job class
        self.suite_full_of: dict[int, WaitReason] = {}  # per suite
        self.multi_of = memo.multi

    def explain(
        self, labels: frozenset[str], pinned_host_id: int | None, suite_id: int | None, j: int
    ) -> WaitReason:
        """Return the reason the jobs of class j (these labels and pin) in a suite still wait."""
        # Order matters: a job no host could ever take says so first; then the suite cap, which
        # blocks it whatever the hosts do; then the state of the matching hosts.
        if j not in self.structural_of:
            if pinned_host_id is not None:
                self.structural_of[j] = self.structural(labels, pinned_host_id)
            else:
                structural = self.memo.structural
                if labels not in structural:
                    structural[labels] = self.structural(labels, None)
                self.structural_of[j] = structural[labels]
        reason = self.structural_of[j]
        if reason is not None:
            return reason
        if suite_id is not None and self.room.get(suite_id, 1) <= 0:
            if suite_id not in self.suite_full_of:
                self.suite_full_of[suite_id] = self.suite_full(self.suite_by_id[suite_id])
            return self.suite_full_of[suite_id]
        if j not in self.availability_of:
            self.availability_of[j] = self._available(labels, pinned_host_id, j)
        return self.availability_of[j]

    def _available(self, labels: frozenset[str], pinned_host_id: int | None, j: int) -> WaitReason:
        """`availability`, from the memo when the hosts it counts did not change."""
        memo = self.memo
        if pinned_host_id is not None:
            host = self.hosts_by_id[pinned_host_id]
            hit = memo.pinned.get(pinned_host_id)
            if hit is not None and hit[0] is host:
                return hit[1]
            reason = self._pinned(host)
            if host_blocker(host) is not None:  # not free: the tick's leases do not matter
                memo.pinned[pinned_host_id] = (host, reason)
            return reason
        found = memo.available.get(labels)
        if found is not None:
            return found[1]
        self.deps = 0
        reason = self.availability(labels, None, j)
        memo.available[labels] = (self.deps, reason)
        return reason

    def suite_full(self, suite: SuiteState) -> WaitReason:
        # room = max_duts - held - leased this tick; the suite now holds the rest of its cap.
        holds = (suite.max_duts or 0) - self.room[suite.id]
        return WaitReason(
            WaitCode.SUITE_AT_MAX_DUTS,
            f"Suite {suite.name} holds {holds} of max {suite.max_duts} hosts",
            {"suite": suite.name, "suite_id": suite.id, "held": holds, "max_duts": suite.max_duts},
        )

    def structural(self, labels: frozenset[str], pinned_host_id: int | None) -> WaitReason | None:
        """Return the reason no host could ever take such a job as it stands, if there is one."""
        if pinned_host_id is not None:
            host = self.hosts_by_id.get(pinned_host_id)
            if host is None:
                return WaitReason(
                    WaitCode.PINNED_HOST_MISSING,
                    f"Pinned host #{pinned_host_id} does not exist",
                    {"host_id": pinned_host_id},
                )
            if not job_fits_host(
                labels=labels,
                pinned_host_id=pinned_host_id,
                host_id=host.id,
                host_labels=host.labels,
            ):
                missing = missing_labels(labels, host.labels)
                return WaitReason(
                    WaitCode.PINNED_HOST_LACKS_LABELS,
                    f"Pinned host {host.hostname} lacks "
                    f"{'label' if len(missing) == 1 else 'labels'} {_names(missing)}",
                    {"host": host.hostname, "missing_labels": missing},
                )
            return None
        if self._groups(labels):
            return None  # some host has every label
        missing = sorted(label for label in labels if label not in self.group_bits)
        names = sorted(labels)
        if not names:
            message = "The lab has no hosts"
        elif missing:
            message = f"No host has {'label' if len(missing) == 1 else 'labels'} {_names(missing)}"
        else:
            message = f"No host has all of {_names(names)} together"
        return WaitReason(
            WaitCode.NO_MATCHING_HOST, message, {"labels": names, "missing_labels": missing}
        )

    def _groups(self, labels: frozenset[str]) -> int:
        """The host groups (bits) whose hosts carry all the labels."""
        bits = (1 << len(self.groups)) - 1
        for label in labels:
            bits &= self.group_bits.get(label, 0)
        self.deps |= bits
        return bits

    def tally(self, labels: frozenset[str]) -> _Tally:
        """Count every host (usable or not) carrying all the labels, by state (do not change
        it: label sets that match the same hosts share one)."""
        bits = self._groups(labels)
        total = self.tallies.get(bits)
        if total is None:
            total = self.tallies[bits] = _Tally(self.capacity)
            for g in bit_indexes(bits):
                total.merge(self.groups[g][1])
        return total

    def availability(
        self, labels: frozenset[str], pinned_host_id: int | None, j: int
    ) -> WaitReason:
        """Return why hosts that could take such a job did not (busy, locked, ... or outranked)."""
        if pinned_host_id is not None:
            return self._pinned(self.hosts_by_id[pinned_host_id])
        tally = self.tally(labels)
        if not tally.counts["free"]:
            message = tally.say(
                tally.total,
                "The only host that fits",
                "Both hosts that fit" if tally.total == 2 else "All {n} hosts that fit",
                "None of the {n} hosts that fit is free: ",
            )
            return WaitReason(WaitCode.HOSTS_UNAVAILABLE, message, tally.details())
        # Work conservation: every free matching host was leased this tick, to jobs ahead, or
        # is held for the tick's holder.
        eligible = list(bit_indexes(self.matching.eligible[j]))
        # The hosts as they were finally leased: the fewest provisions may have moved a job to
        # another class than the matching's (docs/scheduling.md#provisioning).
        went = self.leased_in(eligible)
        held = self.held_in(eligible)
        details: dict[str, object] = {}
        note = ""
        if held:
            hold = self.holder
            assert hold is not None
            note = (
                f"{'is' if held == 1 else 'are'} held for job {hold.job.id}, which needs "
                f"{hold.job.hosts_needed} hosts together ({self.expected(hold)})"
            )
            details = {"held_for": hold.job.id, "held": held}
        if went:
            jobs = "a job" if went == 1 else f"{went} jobs"
            message = f"{_plural(went, 'free host')} went to {jobs} ahead of it in the queue"
            if held:
                message += f"; {held} {note}"
        elif held:
            message = f"{_plural(held, 'free host')} {note}"
        else:  # not expected: every free host that fits is leased or held
            message = f"{_plural(tally.counts['free'], 'free host')} that fit went to jobs ahead"
        others = tally.total - tally.counts["free"]
        if others:
            message += "; " + tally.say(
                others, "the other one", "the other {n}", "of the other {n}, "
            )
        return WaitReason(
            WaitCode.OUTRANKED, message, {**tally.details(), "outranked_by": went, **details}
        )

    def leased_in(self, classes: Iterable[int]) -> int:
        """Hosts of these host classes leased this tick (held ones aside), counted per class
        once a plan."""
        if self._leased_per_class is None:
            class_of = self.matching.class_of_host
            self._leased_per_class = Counter(
                class_of[h] for h in self.capacity.leased if h in class_of
            )
        return sum(self._leased_per_class[c] for c in classes)

    def held_in(self, classes: Iterable[int]) -> int:
        """Hosts of these host classes held for the tick's holder."""
        hold = self.holder
        if hold is None:
            return 0
        occupants = self.matching.occupants
        return sum(occupants[c].get(jh, 0) for c in classes for jh in hold.classes)

    def expected(self, hold: Hold) -> str:
        return expected_words(hold.limit_s)

    # --- multi-host jobs ------------------------------------------------------------------------

    def values_of(self, prefix: str) -> list[str]:
        """Every value of a together_by prefix some host of the lab carries, sorted."""
        head = f"{prefix}:"
        return sorted(label[len(head) :] for label in self.group_bits if label.startswith(head))

    def multi(self, job: JobState, key: object) -> WaitReason:
        """Why a multi-host job (not the holder) waits, naming the role that cannot be had.
        `key`: the same for every job of its shape."""
        if key not in self.multi_of:
            self.deps = 0
            self.multi_of[key] = (self._multi_values(job), None)
            self.memo.multi_deps[key] = self.deps
        values, available = self.multi_of[key]
        if isinstance(values, WaitReason):
            return values
        need, suite_id = job.hosts_needed, job.suite_id
        if suite_id is not None and self.room.get(suite_id, need) < need:
            suite = self.suite_by_id[suite_id]
            holds = (suite.max_duts or 0) - self.room[suite_id]
            return WaitReason(
                WaitCode.SUITE_AT_MAX_DUTS,
                f"Suite {suite.name} holds {holds} of max {suite.max_duts} hosts; "
                f"this job needs {need}",
                {
                    "suite": suite.name,
                    "suite_id": suite_id,
                    "held": holds,
                    "max_duts": suite.max_duts,
                    "needed": need,
                },
            )
        if available is None:
            self.deps = 0
            available = self._multi_availability(job, values)
            self.multi_of[key] = (values, available)
            self.memo.multi_deps[key] |= self.deps
        return available

    def _multi_values(self, job: JobState) -> list[str | None] | WaitReason:
        """The together_by values (None: no together_by) whose hosts could ever serve the job,
        or why none could: a role no host fits, too few hosts, no value with them all."""
        roles, prefix, need = job.roles, job.together_by, job.hosts_needed
        for role in roles:
            reason = self._role_reason(role)
            if reason is not None:
                return reason
        total = attrgetter("total")  # every host that fits, whatever its state
        candidates: list[str | None] = list(self.values_of(prefix)) if prefix else [None]
        values = [v for v in candidates if self.unplaced(self.units(job, v), total) is None]
        if not values:
            details: dict[str, object] = {
                "needed": need,
                "labels": sorted(job.labels),
                "missing_labels": [],
            }
            if prefix:
                message = (
                    f"Needs {_plural(need, 'host')} together by {prefix}: no {prefix} has them all"
                )
                details["together_by"] = prefix
            else:
                message = (
                    f"Needs {_plural(need, 'host')}: the hosts that fit cannot serve every role "
                    "at once"
                )
            return WaitReason(WaitCode.NO_MATCHING_HOST, message, details)
        return values

    def units(self, job: JobState, value: str | None) -> list[tuple[int, frozenset[str]]]:
        """(role index, labels) of each essential host of the job, roles in order."""
        extra = {f"{job.together_by}:{value}"} if value is not None else set()
        return [
            (r, role.labels | extra) for r, role in enumerate(job.roles) for _ in range(role.count)
        ]

    def unplaced(
        self, units: list[tuple[int, frozenset[str]]], count: Callable[[_Tally], int]
    ) -> int | None:
        """The first unit (index) that cannot have a host of its own among the host groups,
        each offering `count(tally)` hosts; None if every unit can (augmenting paths)."""
        if len({labels for _r, labels in units}) == 1:  # one kind of host: count them
            return None if self._count(units[0][1], count) >= len(units) else 0
        placed: dict[int, list[int]] = defaultdict(list)  # host group -> units in it

        def place(u: int, seen: set[int]) -> bool:
            for g in bit_indexes(self._groups(units[u][1])):
                if g in seen:
                    continue
                seen.add(g)
                if len(placed[g]) < count(self.groups[g][1]):
                    placed[g].append(u)
                    return True
                for other in list(placed[g]):
                    if place(other, seen):
                        placed[g].remove(other)
                        placed[g].append(u)
                        return True
            return False

        return next((u for u in range(len(units)) if not place(u, set())), None)

    def _count(self, labels: frozenset[str], count: Callable[[_Tally], int]) -> int:
        return count(self.tally(labels))

    def _role_bits(self, job: JobState, value: str | None) -> int:
        """The matching's host classes some role of the job fits."""
        bits = 0
        for role in job.roles:
            labels = (
                role.labels | {f"{job.together_by}:{value}"} if value is not None else role.labels
            )
            bits |= self.matching.bits_of(labels)
        return bits

    def _role_reason(self, role: RoleNeed) -> WaitReason | None:
        """Why no set of hosts in the lab could ever serve the role, if none could."""
        reason = self.structural(role.labels, None)
        if reason is not None:
            return WaitReason(
                reason.code,
                f"Role {role.name}: {reason.message[0].lower()}{reason.message[1:]}",
                {**reason.details, "role": role.name},
            )
        total = self.tally(role.labels).total
        if total < role.count:
            return WaitReason(
                WaitCode.NO_MATCHING_HOST,
                f"Role {role.name} needs {_plural(role.count, 'host')}"
                f"{' with ' + _names(role.labels) if role.labels else ''}; the lab has {total}",
                {
                    "role": role.name,
                    "labels": sorted(role.labels),
                    "needed": role.count,
                    "matching": total,
                    "missing_labels": [],
                },
            )
        return None

    def _multi_availability(self, job: JobState, values: list[str | None]) -> WaitReason:
        """Hosts could serve it: say which role found too few free, or that they went ahead."""
        roles, prefix, need = job.roles, job.together_by, job.hosts_needed
        together = f" together by {prefix}" if prefix else " together"
        short: tuple[str | None, int, _Tally] | None = None  # the first value's first short role
        for value in values:
            lack = None
            units = self.units(job, value)
            u = self.unplaced(units, _free_at_start)
            if u is not None:
                r, labels = units[u]
                lack = (value, r, self.tally(labels))
            if lack is None:
                # Enough hosts were free at the start of the tick: they went to jobs ahead of it,
                # or are held.
                held = self.held_in(bit_indexes(self._role_bits(job, value)))
                message = (
                    f"Needs {_plural(need, 'host')}{together}: the free hosts that fit went to "
                    "jobs ahead of it in the queue"
                )
                details: dict[str, object] = {"needed": need}
                if held:
                    hold = self.holder
                    assert hold is not None
                    message += f" or are held for job {hold.job.id} ({self.expected(hold)})"
                    details |= {"held_for": hold.job.id, "held": held}
                return WaitReason(WaitCode.OUTRANKED, message, details)
            if short is None:
                short = lack
        assert short is not None
        value, r, tally = short
        role = roles[r]
        free = tally.counts["free"]
        where = f" in {prefix}:{value}" if value is not None else ""
        head = (
            f"Needs {_plural(need, 'host')}{together}; role {role.name} needs {role.count}{where}: "
        )
        if not free:
            message = head + tally.say(
                tally.total,
                "the only host that fits",
                "both hosts that fit" if tally.total == 2 else "all {n} hosts that fit",
                "none of the {n} hosts that fit is free: ",
            )
        else:
            message = (
                head
                + f"{free} of the {tally.total} hosts that fit "
                + ("is free" if free == 1 else "are free")
            )
            if tally.total > free:
                message += "; " + tally.say(
                    tally.total - free, "the other one", "the other {n}", "of the other {n}, "
                )
        return WaitReason(
            WaitCode.HOSTS_UNAVAILABLE,
            message,
            {
                **tally.details(),
                "role": role.name,
                "needed": role.count,
                **({"together_by": prefix, "value": value} if value is not None else {}),
            },
        )

    def holding(self, hold: Hold) -> WaitReason:
        job = hold.job
        held, need = hold.total, job.hosts_needed
        labels = set(job.labels)
        if hold.value is not None:
            labels.add(f"{job.together_by}:{hold.value}")
        if not labels:
            labels = {label for role in job.roles for label in role.labels}
        what = f" ({_names(labels)})" if labels else ""
        if held:
            message = f"Holding {held} of {need} hosts{what}; {self.expected(hold)}"
        else:
            # Backfilled jobs took every host it held: they end before it can start.
            message = (
                f"Holding none of its {need} hosts{what} for now: the hosts it held went to "
                f"shorter jobs that end before it can start; {self.expected(hold)}"
            )
        return WaitReason(
            WaitCode.HOLDING_HOSTS,
            message,
            {
                "held": held,
                "needed": need,
                "expected_start": hold.expected_start.isoformat(),
                "held_by_role": {
                    role.name: n for role, n in zip(job.roles, hold.held, strict=True)
                },
            },
        )

    def _pinned(self, host: HostState) -> WaitReason:
        name = host.hostname
        blocker = _blocker(host, self.capacity)
        details: dict[str, object] = {"host": name}
        if blocker is None:
            return WaitReason(
                WaitCode.OUTRANKED,
                f"Its pinned host {name} went to a job ahead of it in the queue",
                {**details, "outranked_by": 1},
            )
        if blocker == "locked":
            why = f": {host.lock_reason}" if host.lock_reason else ""
            return WaitReason(
                WaitCode.PINNED_HOST_LOCKED,
                f"Pinned host {name} is locked{why}",
                {**details, "lock_reason": host.lock_reason},
            )
        if blocker in ("busy", "reserved"):
            note = (
                f"running a priority {host.lease_priority} job"
                if blocker == "busy"
                else "reserved by hand"
            )
            return WaitReason(
                WaitCode.PINNED_HOST_BUSY,
                f"Pinned host {name} is busy ({note})",
                {**details, "running_priority": host.lease_priority},
            )
        if blocker == "capacity":
            running, limit = self.capacity.full[host.worker]
            return WaitReason(
                WaitCode.PINNED_HOST_AT_CAPACITY,
                f"Pinned host {name} is on {_at_capacity(host.worker, self.capacity.full)}",
                {**details, "worker": host.worker, "running": running, "max_jobs": limit},
            )
        code, words = {
            "paused": (WaitCode.PINNED_HOST_PAUSED, "is on a paused worker"),
            "offline": (WaitCode.PINNED_HOST_OFFLINE, "is on an offline worker"),
            "not_ready": (
                WaitCode.PINNED_HOST_NOT_READY,
                "is not ready (being checked or repaired)",
            ),
        }[blocker]
        return WaitReason(code, f"Pinned host {name} {words}", details)


def _free_at_start(tally: _Tally) -> int:
    return tally.counts["free"]


def expected_words(seconds: float) -> str:
    if seconds <= 0:
        return "expected start now: the hosts it waits for are past their expected end"
    if seconds < 90:
        return "expected start within a minute or two"
    return f"expected start in about {round(seconds / 60)} min"


def explain_multi(
    groups: Mapping[tuple, Sequence[JobState]],
    leased: Set[int],
    explainer: Explainer,
    class_reasons: MutableMapping[str, WaitReason],
) -> tuple[dict[tuple, WaitReason], WaitReason | None]:
    """Say why the waiting multi-host jobs wait: once per group (`group_key`: shape, suite),
    the holder apart. Adds them to `class_reasons` (the holder's under `holder_key`); returns
    the reason per group and the holder's."""
    hold = explainer.hold
    holder_id = hold.job.id if hold is not None else None
    by_group: dict[tuple, WaitReason] = {}
    for key, group in groups.items():
        job = group[0]
        if job.id in leased or job.id == holder_id:
            job = next((j for j in group if j.id not in leased and j.id != holder_id), None)
            if job is None:
                continue
        by_group[key] = reason = explainer.multi(job, (key[0], key[3], key[4]))
        class_reasons[group_class_key(key)] = reason
    if hold is None or holder_id in leased:
        return by_group, None
    reason = explainer.holding(hold)
    class_reasons[holder_key(hold.job.id)] = reason
    return by_group, reason


def explain_waits(
    waiting: Iterable[tuple[frozenset[str], int | None, int | None]],
    class_ids: Mapping[tuple[frozenset[str], int | None], int],
    explainer: Explainer,
) -> dict[tuple[int, int | None], WaitReason]:
    """Say why the jobs of each waiting (labels, pin, suite) wait: one reason per class, suite."""
    by_class: dict[tuple[int, int | None], WaitReason] = {}
    for labels, pin, suite_id in waiting:
        j = class_ids[labels, pin]
        by_class[j, suite_id] = explainer.explain(labels, pin, suite_id, j)
    return by_class


class WaitReasons(Mapping[int, WaitReason]):
    """Each waiting job's reason, its class's, looked up when asked (job id -> reason).

    A tick stores the reasons per class; only the what-if plans and preemption ask per job, so
    the job index is built on first use, not on every tick.
    """

    def __init__(
        self,
        jobs: Sequence[JobState],
        leased: Set[int],
        class_ids: Mapping[tuple[frozenset[str], int | None], int],
        by_class: Mapping[tuple[int, int | None], WaitReason],
        by_group: Mapping[tuple, WaitReason] | None = None,
        holder: tuple[int, WaitReason] | None = None,
    ) -> None:
        self._jobs, self._leased, self._class_ids, self._by_class = (
            jobs,
            leased,
            class_ids,
            by_class,
        )
        self._by_group = by_group or {}  # multi-host jobs, by group_key
        self._holder = holder
        self._waiting: dict[int, JobState] | None = None

    def _index(self) -> dict[int, JobState]:
        if self._waiting is None:
            self._waiting = {job.id: job for job in self._jobs if job.id not in self._leased}
        return self._waiting

    def __getitem__(self, job_id: int) -> WaitReason:
        job = self._index()[job_id]
        if job.roles:
            if self._holder is not None and job_id == self._holder[0]:
                return self._holder[1]
            return self._by_group[group_key(job)]
        return self._by_class[self._class_ids[job.labels, job.pinned_host_id], job.suite_id]

    def __contains__(self, job_id: object) -> bool:
        return job_id in self._index()

    def __iter__(self) -> Iterator[int]:
        return iter(self._index())

    def __len__(self) -> int:
        return len(self._index())
