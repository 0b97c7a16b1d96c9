"""Multi-host jobs in a plan: essential hosts all or nothing, kept together, the one hold of a
tick with its backfill, and elastic hosts (docs/scheduling.md#multi-host-jobs).

Each host a multi-host job needs is a *unit* of the matching: a job of a class of its own per
(job shape, role, together_by value), eligible for the host classes carrying the role's labels
(and `<prefix>:<value>`). A job is tried by adding its units one by one and rolling the whole
matching back if one does not fit, so the kept jobs (which may move along augmenting paths)
are never dropped and the job is kept only whole.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field
from datetime import datetime
from operator import attrgetter

from jobs.scheduling.planner.matching import Matching
from jobs.scheduling.planner.types import HostState, JobState, RoleNeed

SpecKey = tuple[frozenset[str], tuple[RoleNeed, ...], str]
_ENDS = attrgetter("busy_until", "hostname")


@dataclass(eq=False)
class Spec:
    """One shape of multi-host job (labels, roles, together_by) and what this tick learnt of it."""

    roles: tuple[RoleNeed, ...]
    together_by: str
    classes: dict[str | None, list[int]] = field(default_factory=dict)  # value -> class per role
    hold_classes: dict[str | None, list[int]] = field(default_factory=dict)
    # Its units cannot be matched together with the kept jobs and the hold (monotone: the kept
    # set only grows, the hold only gives up hosts to kept jobs; see Leaser).
    dead: bool = False
    bf_dead: bool = False  # nor with the kept jobs alone, the hold given up
    hold_failed: bool = False  # it cannot hold: nothing free fits, or the busy hosts are too few
    bf_probed: bool = False


def spec_key(job: JobState) -> SpecKey:
    return (job.labels, job.roles, job.together_by)


@dataclass(eq=False)
class Hold:
    """The tick's one hold: free hosts kept idle for a multi-host job that cannot start yet."""

    job: JobState
    spec: Spec
    value: str | None
    classes: list[int]  # the hold's own matching class per role
    held: list[int]  # hosts held per role
    expected_start: datetime
    limit_s: float  # a later job may take a held host if it runs at most this long

    @property
    def total(self) -> int:
        return sum(self.held)


class MultiHost:
    """The multi-host shapes of one plan, their classes in the matching and the busy hosts."""

    def __init__(self, matching: Matching, hosts: list[HostState]) -> None:
        self.matching = matching
        self.hosts = hosts
        self.specs: dict[SpecKey, Spec] = {}
        self._of_job: dict[int, Spec] = {}
        self._values: dict[str, list[str]] = {}
        # Busy hosts with an expected end that could work once freed, by label set, by end.
        self._busy: list[tuple[frozenset[str], list[HostState]]] | None = None

    def spec(self, job: JobState) -> Spec:
        spec = self._of_job.get(job.id)
        if spec is None:
            key = spec_key(job)
            spec = self.specs.get(key)
            if spec is None:
                spec = self.specs[key] = Spec(job.roles, job.together_by)
            self._of_job[job.id] = spec
        return spec

    def values(self, spec: Spec) -> list[str | None]:
        """The together_by values to try, in sorted order: those some free host carries."""
        prefix = spec.together_by
        if not prefix:
            return [None]
        values = self._values.get(prefix)
        if values is None:
            head = f"{prefix}:"
            values = self._values[prefix] = sorted(
                label[len(head) :] for label in self.matching.label_bits if label.startswith(head)
            )
        return values  # type: ignore[return-value]

    def role_labels(self, spec: Spec, r: int, value: str | None) -> frozenset[str]:
        labels = spec.roles[r].labels
        return labels | {f"{spec.together_by}:{value}"} if value is not None else labels

    def classes(self, spec: Spec, value: str | None) -> list[int]:
        """The matching class of each role's units under this together_by value."""
        found = spec.classes.get(value)
        if found is None:
            found = spec.classes[value] = self._register(spec, value)
            self.matching.staying.update(found)
        return found

    def hold_classes(self, spec: Spec, value: str | None) -> list[int]:
        """Classes of the hold's units: their own, so held hosts are told from leased ones."""
        found = spec.hold_classes.get(value)
        if found is None:
            found = spec.hold_classes[value] = self._register(spec, value)
        return found

    def _register(self, spec: Spec, value: str | None) -> list[int]:
        return [
            self.matching.job_class(self.role_labels(spec, r, value), None)
            for r in range(len(spec.roles))
        ]

    def units(self, spec: Spec, value: str | None) -> list[tuple[int, int]]:
        """(role index, class) of each essential host, roles in order."""
        classes = self.classes(spec, value)
        return [(r, classes[r]) for r, role in enumerate(spec.roles) for _ in range(role.count)]

    def use_busy(self, busy: list[tuple[frozenset[str], list[HostState]]]) -> None:
        """Take the busy hosts by label set from a kept host index (as `_busy_by_labels` lists
        them), instead of collecting them with a pass over every host."""
        self._busy = busy

    def expected_start(self, spec: Spec, value: str | None, missing: list[int]) -> datetime | None:
        """When busy hosts could supply the missing hosts of each role: the earliest time by
        which that many of them (each fitting its role) are expected to be freed; None if the
        busy hosts can never supply them. With one role, the k-th smallest busy_until."""
        units = [r for r, n in enumerate(missing) for _ in range(n)]
        if not units:
            return None
        if self._busy is None:
            self._busy = _busy_by_labels(self.hosts)
        labels = [self.role_labels(spec, r, value) for r in range(len(spec.roles))]
        # Bottleneck matching: add the busy hosts by when they free up until every missing
        # unit has one (Kuhn's augmenting paths over the hosts added so far).
        hosts: list[HostState] = []
        unit_host: dict[int, int] = {}  # unit -> index in hosts
        host_unit: dict[int, int] = {}

        def place(u: int, seen: set[int]) -> bool:
            for h, host in enumerate(hosts):
                if h in seen or not labels[units[u]] <= host.labels:
                    continue
                seen.add(h)
                if h not in host_unit or place(host_unit[h], seen):
                    host_unit[h] = u
                    unit_host[u] = h
                    return True
            return False

        fitting = [g for kind, g in self._busy if any(lab <= kind for lab in labels)]
        for host in heapq.merge(*fitting, key=_ENDS):
            hosts.append(host)
            for u in range(len(units)):
                if u not in unit_host and place(u, set()):
                    break  # one new host places at most one more unit
            if len(unit_host) == len(units):
                return host.busy_until
        return None


def _busy_by_labels(hosts: list[HostState]) -> list[tuple[frozenset[str], list[HostState]]]:
    """The busy hosts with an expected end that could work once freed, by label set, each set's
    by when they free up."""
    by_labels: dict[frozenset[str], list[HostState]] = {}
    for h in hosts:
        if h.leased and h.busy_until is not None and h.usable_when_freed:
            by_labels.setdefault(h.labels, []).append(h)
    for group in by_labels.values():
        group.sort(key=_ENDS)
    return list(by_labels.items())
