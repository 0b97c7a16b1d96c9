"""The hosts as a plan counts them, kept by a caller that keeps its lab between plans."""

from __future__ import annotations

from bisect import bisect_left, insort
from collections.abc import Iterable
from operator import attrgetter

from hosts.rules import LEASED
from hosts.rules import host_blocker as the_rule
from jobs.scheduling.planner.types import HostState

# (labels, what keeps the hosts from work, the priority of the jobs they run if busy)
KeptKey = tuple[frozenset[str], str, int | None]
# The order in which busy hosts are expected to free up (multihost.MultiHost.expected_start).
BUSY_ORDER = attrgetter("busy_until", "hostname")


def busy_until_known(host: HostState) -> bool:
    """A busy host with an expected end that could work once freed: one that a multi-host
    job's hold may count on."""
    return host.leased and host.busy_until is not None and host.usable_when_freed


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
    over every host of the lab per plan. It also keeps the busy hosts a multi-host job's hold
    may wait for (`busy_until_known`), by label set, each set's in `BUSY_ORDER`.
    """

    __slots__ = ("busy", "free", "kept", "leased_on")

    def __init__(self) -> None:
        self.free: dict[int, HostState] = {}  # by id
        self.leased_on: dict[str, int] = {}  # worker -> its hosts holding a lease
        self.kept: dict[KeptKey, int] = {}  # hosts not free, by kind
        self.busy: dict[frozenset[str], list[HostState]] = {}

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

    def busy_by_labels(self) -> list[tuple[frozenset[str], list[HostState]]]:
        """The busy hosts by label set as `multihost._busy_by_labels` lists them."""
        return [(labels, hosts) for labels, hosts in self.busy.items() if hosts]

    def _count(self, host: HostState, sign: int) -> None:
        if host.leased and host.worker:
            _add(self.leased_on, host.worker, sign)
        if busy_until_known(host):
            group = self.busy.setdefault(host.labels, [])
            if sign > 0:
                insort(group, host, key=BUSY_ORDER)
            else:
                at = bisect_left(group, BUSY_ORDER(host), key=BUSY_ORDER)
                assert group[at] == host, "a host put back that the index does not hold"
                del group[at]
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
