"""Wait reasons: why each job a tick left queued still waits, worded once per class."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping, Sequence, Set
from dataclasses import dataclass, field

from hosts.rules import job_fits_host, missing_labels
from jobs.scheduling.planner.hostindex import HostIndex, host_blocker
from jobs.scheduling.planner.matching import Matching, bit_indexes
from jobs.scheduling.planner.types import HostState, JobState, SuiteState, WaitCode, WaitReason

# Workers at capacity after a tick: name -> (jobs running, capacity).
Full = Mapping[str, tuple[int, int]]


@dataclass(frozen=True, slots=True)
class _Capacity:
    """Workers the tick filled, and the hosts it leased (those count as free: they went to jobs
    ahead); another free host on a full worker is kept from work by the worker's capacity."""

    full: Full = field(default_factory=dict)
    leased: frozenset[int] = frozenset()


def _blocker(host: HostState, capacity: _Capacity) -> str | None:
    """Return why a host cannot take work now, the most lasting cause first; None if it can."""
    blocker = host_blocker(host)
    if blocker is None and host.worker in capacity.full and host.id not in capacity.leased:
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
            counts[state] += n
        for worker, n in other.on_full_workers.items():
            self.on_full_workers[worker] = self.on_full_workers.get(worker, 0) + n
        if other.max_priority is not None:
            self._see_priority(other.max_priority)

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


class Explainer:
    """Word the wait reason of each class of waiting jobs, once per class."""

    def __init__(
        self,
        hosts_by_id: Mapping[int, HostState],
        index: HostIndex,
        matching: Matching,
        suite_by_id: Mapping[int, SuiteState],
        room: Mapping[int, int],
        full: Full,
        leased_hosts: frozenset[int],
    ) -> None:
        self.matching = matching
        self.suite_by_id = suite_by_id
        self.room = room  # hosts each capped suite could still take after this tick
        self.capacity = _Capacity(full, leased_hosts)
        self.hosts_by_id = hosts_by_id
        tallies: dict[frozenset[str], _Tally] = defaultdict(lambda: _Tally(self.capacity))
        for (labels, blocker, priority), n in index.kept.items():
            tallies[labels].add_kept(blocker, priority, n)
        for host in index.free.values():  # free, or kept from work by a worker this tick filled
            tallies[host.labels].add_free(host)
        self.groups = list(tallies.items())
        self.group_bits: dict[str, int] = defaultdict(int)  # label -> groups carrying it
        for g, (labels, _tally) in enumerate(self.groups):
            for label in labels:
                self.group_bits[label] |= 1 << g
        self.tallies: dict[int, _Tally] = {}  # by the host groups they count
        self.structural_of: dict[int, WaitReason | None] = {}  # per job class
        self.availability_of: dict[int, WaitReason] = {}  # per job class
        self.suite_full_of: dict[int, WaitReason] = {}  # per suite

    def explain(
        self, labels: frozenset[str], pinned_host_id: int | None, suite_id: int | None, j: int
    ) -> WaitReason:
        """Return the reason the jobs of class j (these labels and pin) in a suite still wait."""
        # Order matters: a job no host could ever take says so first; then the suite cap, which
        # blocks it whatever the hosts do; then the state of the matching hosts.
        if j not in self.structural_of:
            self.structural_of[j] = self.structural(labels, pinned_host_id)
        reason = self.structural_of[j]
        if reason is not None:
            return reason
        if suite_id is not None and self.room.get(suite_id, 1) <= 0:
            if suite_id not in self.suite_full_of:
                self.suite_full_of[suite_id] = self.suite_full(self.suite_by_id[suite_id])
            return self.suite_full_of[suite_id]
        if j not in self.availability_of:
            self.availability_of[j] = self.availability(labels, pinned_host_id, j)
        return self.availability_of[j]

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
        # Work conservation: every free matching host was leased this tick, to jobs ahead.
        went = sum(self.matching.used[c] for c in bit_indexes(self.matching.eligible[j]))
        jobs = "a job" if went == 1 else f"{went} jobs"
        message = f"{_plural(went, 'free host')} went to {jobs} ahead of it in the queue"
        others = tally.total - tally.counts["free"]
        if others:
            message += "; " + tally.say(
                others, "the other one", "the other {n}", "of the other {n}, "
            )
        return WaitReason(WaitCode.OUTRANKED, message, {**tally.details(), "outranked_by": went})

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
    ) -> None:
        self._jobs, self._leased, self._class_ids, self._by_class = (
            jobs,
            leased,
            class_ids,
            by_class,
        )
        self._waiting: dict[int, JobState] | None = None

    def _index(self) -> dict[int, JobState]:
        if self._waiting is None:
            self._waiting = {job.id: job for job in self._jobs if job.id not in self._leased}
        return self._waiting

    def __getitem__(self, job_id: int) -> WaitReason:
        job = self._index()[job_id]
        return self._by_class[self._class_ids[job.labels, job.pinned_host_id], job.suite_id]

    def __contains__(self, job_id: object) -> bool:
        return job_id in self._index()

    def __iter__(self) -> Iterator[int]:
        return iter(self._index())

    def __len__(self) -> int:
        return len(self._index())
