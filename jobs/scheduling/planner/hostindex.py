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

    For the wait reasons it also notes the label sets of the hosts put since the last plan
    (`touched`, which the plan takes) and keeps what the last plan worded (`memo`, an
    `explanations.Memo`): a plan words again only the classes whose hosts changed
    (docs/performance.md#wait-reasons-worded-for-what-changed). A label set that appears or
    disappears drops the memo: the reasons saying which labels no host has change with it.
    """

    __slots__ = ("busy", "free", "hosts_by_labels", "kept", "leased_on", "memo", "touched")

    def __init__(self) -> None:
        self.free: dict[int, HostState] = {}  # by id
        self.leased_on: dict[str, int] = {}  # worker -> its hosts holding a lease
        self.kept: dict[KeptKey, int] = {}  # hosts not free, by kind
        self.busy: dict[frozenset[str], list[HostState]] = {}
        self.hosts_by_labels: dict[frozenset[str], int] = {}
        self.touched: set[frozenset[str]] = set()  # label sets of the hosts put since a plan
        self.memo: object | None = None  # the wait reasons' memo (explanations.Memo)

    def take_touched(self) -> set[frozenset[str]]:
        """The label sets of the hosts put since the last call; forgets them."""
        touched, self.touched = self.touched, set()
        return touched

    @classmethod
    def of(cls, hosts: Iterable[HostState]) -> HostIndex:
        index = cls()
        for host in hosts:
            index.put(None, host)
        return index

    def put(self, old: HostState | None, new: HostState | None) -> None:
        """Count `new` in place of `old` (None: a host added, or removed)."""
        before = old.labels if old is not None else None
        after = new.labels if new is not None else None
        if before != after:
            self._count_labels(before, -1)
            self._count_labels(after, +1)
        if old is not None:
            self._count(old, -1)
        if new is not None:
            self._count(new, +1)

    def busy_by_labels(self) -> list[tuple[frozenset[str], list[HostState]]]:
        """The busy hosts by label set as `multihost._busy_by_labels` lists them."""
        return [(labels, hosts) for labels, hosts in self.busy.items() if hosts]

    def _count_labels(self, labels: frozenset[str] | None, sign: int) -> None:
        if labels is None:
            return
        present = self.hosts_by_labels.get(labels, 0)
        if present == 0 or present + sign == 0:
            self.memo = None  # a label set appears or disappears
        _add(self.hosts_by_labels, labels, sign)

    def _count(self, host: HostState, sign: int) -> None:
        self.touched.add(host.labels)
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
