"""The hosts as a plan counts them, kept by a caller that keeps its lab between plans."""

from __future__ import annotations

from collections.abc import Iterable

from hosts.rules import LEASED
from hosts.rules import host_blocker as the_rule
from jobs.scheduling.planner.types import HostState

# (labels, what keeps the hosts from work, the priority of the jobs they run if busy)
KeptKey = tuple[frozenset[str], str, int | None]


def host_blocker(host: HostState) -> str | None:
    """Why a host cannot take work whatever this tick leases, the most lasting cause first;
    None if it is free (schedulable). The rule of hosts/rules.py, with a lease told apart as a
    job's ("busy") or a manual reservation ("reserved")."""
    blocker = the_rule(host)
    if blocker == LEASED:
        return "busy" if host.lease_priority is not None else "reserved"
    return blocker


class HostIndex:
    """The free hosts, each worker's leased hosts, and the other hosts counted by kind.

    A plan matches the free hosts; `host_choice: pack` ranks workers by their leased hosts;
    the wait reasons count the hosts of each label set that are busy (and at what priority),
    locked, paused, … . `HostIndex.of(hosts)` counts them all; a caller that keeps its hosts
    between plans keeps an index too, with `put` for each host that changed, and saves a pass
    over every host of the lab per plan.
    """

    __slots__ = ("free", "kept", "leased_on")

    def __init__(self) -> None:
        self.free: dict[int, HostState] = {}  # by id
        self.leased_on: dict[str, int] = {}  # worker -> its hosts holding a lease
        self.kept: dict[KeptKey, int] = {}  # hosts not free, by kind

    @classmethod
    def of(cls, hosts: Iterable[HostState]) -> HostIndex:
        index = cls()
        for host in hosts:
            index.put(None, host)
        return index

    def put(self, old: HostState | None, new: HostState | None) -> None:
        """Count `new` in place of `old` (None: a host added, or removed)."""
        if old is not None:
            self._count(old, -1)
        if new is not None:
            self._count(new, +1)

    def _count(self, host: HostState, sign: int) -> None:
        if host.leased and host.worker:
            _add(self.leased_on, host.worker, sign)
        blocker = host_blocker(host)
        if blocker is None:
            if sign > 0:
                self.free[host.id] = host
            else:
                del self.free[host.id]
            return
        # The wait reasons say what priority busy hosts run; a locked host may run a job too,
        # but is counted as locked.
        priority = host.lease_priority if blocker == "busy" else None
        _add(self.kept, (host.labels, blocker, priority), sign)


def _add(counts: dict, key: object, n: int) -> None:
    """Add n to a count, dropping it at zero: a count of none must not be seen."""
    left = counts.get(key, 0) + n
    if left:
        counts[key] = left
    else:
        del counts[key]
