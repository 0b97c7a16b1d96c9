"""Class-level matching of jobs to free hosts, then the concrete host each leased job gets."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from itertools import islice
from typing import Any

from hosts.rules import job_fits_host
from jobs.scheduling.planner.types import HostState, JobState

# --- bitsets over host classes ---------------------------------------------------------------


def lowest_bit(bits: int) -> int:
    """Return the index of the lowest set bit (bits must be non-zero)."""
    return (bits & -bits).bit_length() - 1


def bit_indexes(bits: int) -> Iterator[int]:
    """Yield the indexes of the set bits, lowest first."""
    while bits:
        low = bits & -bits
        yield low.bit_length() - 1
        bits ^= low


# --- class-level matching --------------------------------------------------------------------


class Matching:
    """Grow a matching of jobs to free hosts one job at a time (docs/scheduling.md#matching).

    Hosts with one label set form a host class and jobs with one (labels, pinned host) form a
    job class; a host class's hosts are interchangeable for every job, so the matching only
    counts how many jobs of each job class sit in each host class. A pinned job also needs its
    host not to be taken by another pinned job; inside its class the others can always make
    room for it. Host classes are indexed by preference (fewer labels, then lowest hostname),
    so the lowest set bit of a bitset of classes is the preferred one.
    """

    def __init__(
        self,
        free_hosts: Sequence[HostState],
        builds: set[str] | None,
        *,
        host_choice: str = "affinity",
        worker_room: Mapping[str, int] | None = None,
        worker_busy: Mapping[str, int] | None = None,
    ) -> None:
        """Group the free hosts into classes.

        `builds`: the builds jobs may ask for, to steer by under `host_choice: affinity` (None:
        every build; empty: builds ignored). `worker_room`: jobs each worker with a capacity may
        still start (docs/scheduling.md#
        worker-capacity); a worker with fewer than its free hosts is binding, and its hosts form
        classes of their own, counted against the worker. `worker_busy`: hosts each worker
        holds leased, for `host_choice: pack`.
        """
        room = dict(worker_room or {})
        on_worker = Counter(host.worker for host in free_hosts)
        # A worker with room for all its free hosts cannot bind: its hosts join the others.
        binding = {w for w, n in room.items() if w and n < on_worker[w]}
        groups: dict[tuple[frozenset[str], str], list[HostState]] = defaultdict(list)
        for host in free_hosts:
            groups[host.labels, host.worker if host.worker in binding else ""].append(host)
        member_key = _member_key(host_choice, worker_busy or {})
        for members in groups.values():
            members.sort(key=member_key)
        ranked = sorted(
            groups.values(),
            key=lambda m: (len(m[0].labels), min(h.hostname for h in m)),
        )
        self.hosts: list[list[HostState]] = ranked  # per host class, by host choice
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

        self._bind_workers(sorted(binding), room)
        # The most jobs this tick can still lease: each binding worker counts up to its room.
        self.free = sum(n for c, n in enumerate(self.capacity) if self.worker_of[c] < 0) + sum(
            max(0, n) for n in self.worker_room
        )
        self.occupants: list[dict[int, int]] = [{} for _ in ranked]  # job class -> jobs
        # The multi-host job classes (Leaser): their hosts on a binding worker never move, and
        # their others never move onto one, so that the workers a job counts on stay those its
        # trial found (see `place_on`).
        self.staying: set[int] = set()
        self.last = -1  # the host class the latest successful `add` put its job in

        self.eligible: list[int] = []  # per job class: bitset of host classes
        self.pinned: list[int | None] = []
        self.dead: list[bool] = []
        self.pins_taken: set[int] = set()
        # While a trial runs (see `checkpoint`): (container, key, old value) of each change.
        self._journal: list[tuple[Any, Any, Any]] | None = None

        # Build affinity at class level: hosts per (class, build) not yet promised to a job of
        # that build. Augmenting moves do not update it (which job moves is not tracked), so it
        # only guides the choice of classes (it never changes how many jobs are leased); the
        # fewest provisions are found after the matching, across classes
        # (provisioning.fewest_provisions). Other host choices order hosts by their own key.
        self.affine_left: dict[tuple[int, str], int] = {}
        self.affine_bits: dict[str, int] = defaultdict(int)
        if host_choice == "affinity":
            self._prefer_builds(builds)

    def _bind_workers(self, workers: list[str], room: Mapping[str, int]) -> None:
        """Index the binding workers: the classes of each, the jobs it may still start."""
        self.worker_of: list[int] = [-1] * len(self.hosts)  # per class: binding worker, or -1
        self.worker_bits = [0] * len(workers)
        index = {name: w for w, name in enumerate(workers)}
        for c, members in enumerate(self.hosts):
            w = index.get(members[0].worker, -1)
            if w >= 0:
                self.worker_of[c] = w
                self.worker_bits[w] |= 1 << c
        self.worker_names = workers
        self.worker_room = [room[name] for name in workers]
        self.worker_used = [0] * len(workers)
        # Room granted by `grant`: hosts of a multi-host job on a worker it already counts on.
        self.worker_grant = [0] * len(workers)
        self.binding_bits = 0  # the classes of every binding worker
        for bits in self.worker_bits:
            self.binding_bits |= bits
        self.blocked_bits = 0  # classes whose worker has started all it may
        for w, n in enumerate(self.worker_room):
            if n <= 0:
                self.blocked_bits |= self.worker_bits[w]

    def _prefer_builds(self, builds: set[str] | None) -> None:
        for c, members in enumerate(self.hosts):
            for build, n in Counter(h.current_build for h in members).items():
                if build and (builds is None or build in builds):
                    self.affine_left[c, build] = n
                    self.affine_bits[build] |= 1 << c

    def job_class(self, labels: frozenset[str], pinned_host_id: int | None) -> int:
        """Register a job class and return its index.

        Its eligible host classes are those whose hosts the job fits (hosts.rules.job_fits_host),
        found here with one AND of label bitsets per label; tests/hosts/test_rules.py holds the
        two to the same cases.
        """
        if pinned_host_id is None:
            bits = self.bits_of(labels)
        else:
            c = self.class_of_host.get(pinned_host_id)
            # The pinned host's class: every host of it carries the pinned host's labels.
            fits = c is not None and job_fits_host(
                labels=labels,
                pinned_host_id=pinned_host_id,
                host_id=pinned_host_id,
                host_labels=self.hosts[c][0].labels,
            )
            bits = 1 << c if fits else 0  # type: ignore[operator]
        self.eligible.append(bits)
        self.pinned.append(pinned_host_id)
        self.dead.append(not bits)
        return len(self.eligible) - 1

    def bits_of(self, labels: frozenset[str]) -> int:
        """The host classes whose hosts carry all the labels."""
        bits = self.all_bits
        for label in labels:
            bits &= self.label_bits.get(label, 0)
        return bits

    def add(self, j: int, build: str, only: int | None = None) -> bool:
        """Match one more job of class j, moving earlier jobs if needed; False if impossible.

        `only`: start it in these host classes only (a multi-host job tried on one worker
        first); a failure then says nothing of the class and marks nothing dead."""
        if self.dead[j]:
            return False
        pin = self.pinned[j]
        if pin is not None and pin in self.pins_taken:
            # Pins are never released within a tick.
            self._mark_dead(j)
            return False
        eligible = self.eligible[j] & ~self.dead_bits
        if only is not None:
            eligible &= only
        open_ = eligible & self.open_bits & ~self.blocked_bits
        if open_:
            affine = open_ & self.affine_bits.get(build, 0) if build else 0
            start = lowest_bit(affine or open_)
            self._fill(start)
        else:
            start = self._augment(eligible)
            if start is None:
                # The kept jobs plus this one cannot be matched. Kept jobs are never dropped, so
                # every later job of this class meets a superset of them and fails too
                # (dependent sets stay dependent in a matroid): skip them in O(1).
                if only is None:
                    self._mark_dead(j)
                return False
        self.last = start
        self._occupy(start, j, +1)
        if build and self.affine_left.get((start, build), 0) > 0:
            journal = self._journal
            if journal is not None:
                journal.append((self.affine_left, (start, build), self.affine_left[start, build]))
                journal.append((self.affine_bits, build, self.affine_bits[build]))
            self.affine_left[start, build] -= 1
            if not self.affine_left[start, build]:
                self.affine_bits[build] &= ~(1 << start)
        if pin is not None:
            if self._journal is not None:
                self._journal.append((self.pins_taken, pin, _ADDED))
            self.pins_taken.add(pin)
        return True

    def place_on(self, j: int, w: int) -> int:
        """Put one more job of class j on a free host of binding worker w without a job slot of
        it: a host of a multi-host job on a worker it already counts on
        (docs/scheduling.md#worker-capacity). A free host only, no move: nothing else gains
        from the slot. Returns the host class, or -1 if w has no free host for j."""
        # A free host is enough, in a class closed to searches too (dead_bits): it is closed
        # because its worker is full, and this host takes no slot of it.
        open_ = self.eligible[j] & self.worker_bits[w] & self.open_bits
        if not open_:
            return -1
        c = lowest_bit(open_)
        self.grant(w, 1)
        self._fill(c)
        self._occupy(c, j, +1)
        return c

    def grant(self, w: int, n: int) -> None:
        """Give binding worker w n more job slots this tick: n of its hosts taken by a job that
        counts on it once already (journalled, so a failed trial takes them back)."""
        journal = self._journal
        if journal is not None:
            journal.append((self.worker_room, w, self.worker_room[w]))
            journal.append((self.worker_grant, w, self.worker_grant[w]))
        self.worker_room[w] += n
        self.worker_grant[w] += n
        self.free += n
        if self.worker_used[w] < self.worker_room[w]:
            self.blocked_bits &= ~self.worker_bits[w]

    def _mark_dead(self, j: int) -> None:
        if self._journal is not None:
            self._journal.append((self.dead, j, self.dead[j]))
        self.dead[j] = True

    def _occupy(self, c: int, j: int, n: int) -> None:
        """Count n more (or fewer) jobs of class j in host class c."""
        occupants = self.occupants[c]
        old = occupants.get(j, 0)
        if self._journal is not None:
            self._journal.append((occupants, j, old or _ABSENT))
        if old + n:
            occupants[j] = old + n
        else:
            del occupants[j]

    # --- trials: a multi-host job is matched whole or not at all ------------------------------

    def checkpoint(self) -> tuple[int, int, int, int]:
        """Start a trial: what `restore` goes back to if it fails; trials do not nest.

        Everything `add` may change, the dead marks too (a mark made while a trial's first units
        were matched says nothing about the kept jobs alone): the scalars here, the rest in a
        journal of the entries changed, so a trial costs what it changes, not the lab's size.
        """
        self._journal = []
        return (self.open_bits, self.free, self.blocked_bits, self.dead_bits)

    def restore(self, saved: tuple[int, int, int, int]) -> None:
        """Undo everything since `checkpoint` returned `saved`."""
        journal, self._journal = self._journal or [], None
        for container, key, old in reversed(journal):
            if old is _ABSENT:
                del container[key]
            elif old is _ADDED:
                container.discard(key)
            else:
                container[key] = old
        self.open_bits, self.free, self.blocked_bits, self.dead_bits = saved

    def set_dead(self, j: int, dead: bool) -> None:
        """Set a class's dead mark by hand (journalled like `add`'s)."""
        if self._journal is not None:
            self._journal.append((self.dead, j, self.dead[j]))
        self.dead[j] = dead

    def commit(self) -> None:
        """Keep everything since `checkpoint`."""
        self._journal = None

    def remove(self, j: int) -> int:
        """Take every job of class j out of the matching (a hold given up); return how many.

        The kept set shrinks, so the host classes marked dead may no longer be: the marks are
        dropped (the job classes' dead marks stay true, see plan's holds).
        """
        removed = 0
        for c in bit_indexes(self.eligible[j]):
            occupants = self.occupants[c]
            n = occupants.get(j, 0)
            if not n:
                continue
            self._occupy(c, j, -n)
            removed += n
            for _ in range(n):
                self._give_host(c)
                self.free += 1
                w = self.worker_of[c]
                if w >= 0:
                    if self._journal is not None:
                        self._journal.append((self.worker_used, w, self.worker_used[w]))
                    self.worker_used[w] -= 1
                    if self.worker_used[w] < self.worker_room[w]:
                        self.blocked_bits &= ~self.worker_bits[w]
        if removed:
            self.dead_bits = 0
        return removed

    def _fill(self, c: int) -> None:
        """Take one more host of class c (and a job slot of its worker, if binding)."""
        self._take_host(c)
        self.free -= 1
        w = self.worker_of[c]
        if w >= 0:
            if self._journal is not None:
                self._journal.append((self.worker_used, w, self.worker_used[w]))
            self.worker_used[w] += 1
            if self.worker_used[w] >= self.worker_room[w]:
                self.blocked_bits |= self.worker_bits[w]

    def _take_host(self, c: int) -> None:
        if self._journal is not None:
            self._journal.append((self.used, c, self.used[c]))
        self.used[c] += 1
        if self.used[c] == self.capacity[c]:
            self.open_bits &= ~(1 << c)

    def _give_host(self, c: int) -> None:
        if self._journal is not None:
            self._journal.append((self.used, c, self.used[c]))
        self.used[c] -= 1
        self.open_bits |= 1 << c

    def _augment(self, eligible: int) -> int | None:
        """Find room for one more job in its eligible classes by moving matched jobs along a path.

        Breadth-first over host classes, each reached with one more job to place: a class with
        a free host on a worker with room ends the path. From a class, one of its jobs of class
        j can move on to any class eligible for j. A class with a free host whose worker has
        started all it may can take the job if another job of that worker moves elsewhere: the
        path goes on from every class of that worker (a "worker hop"). Returns the class where
        the new job goes, or None. (A residual-graph search over host classes and workers: the
        matchable sets of jobs still form a matroid, so the greedy order stays exact.)
        """
        if not eligible:
            return None
        parent: dict[int, tuple[int, int] | None] = dict.fromkeys(bit_indexes(eligible))
        queue = list(parent)
        visited = eligible
        expanded: set[int] = set()  # a job class reaches the same classes from anywhere
        hopped: set[int] = set()  # binding workers whose classes were queued
        for c in queue:
            w = self.worker_of[c]
            if (
                w >= 0
                and w not in hopped
                and self.open_bits >> c & 1
                and self.blocked_bits >> c & 1
            ):
                # c has a free host but its worker is at capacity: a job of the worker that
                # moves elsewhere makes room for one here.
                hopped.add(w)
                for t in bit_indexes(self.worker_bits[w] & ~visited & ~self.dead_bits):
                    if self.occupants[t]:
                        visited |= 1 << t
                        parent[t] = (c, _HOP)
                        queue.append(t)
            staying = self.staying if w >= 0 else ()
            for j in self.occupants[c]:
                if j in expanded or j in staying:
                    continue  # a multi-host job's host on a binding worker stays (place_on)
                expanded.add(j)
                targets = self.eligible[j] & ~visited & ~self.dead_bits
                if j in self.staying:
                    # Its other hosts move only off binding workers: where it counts stays known.
                    targets &= ~self.binding_bits
                if not targets:
                    continue
                open_ = targets & self.open_bits & ~self.blocked_bits
                if open_:
                    end = lowest_bit(open_)
                    parent[end] = (c, j)
                    return self._shift(end, parent)
                visited |= targets
                for t in bit_indexes(targets):
                    parent[t] = (c, j)
                    queue.append(t)
        # Every class reached can only pass jobs among the others: no future path can enter that
        # set (entering means displacing a job that cannot leave), so it stays closed for the
        # rest of the tick: later searches skip it.
        self.dead_bits |= visited
        return None

    def _shift(self, end: int, parent: dict[int, tuple[int, int] | None]) -> int:
        """Move one job along each edge of the path ending at open class `end`; return start."""
        self._fill(end)
        c = end
        while (step := parent[c]) is not None:
            src, j = step
            if j == _HOP:
                # src takes the job arriving there on one of its free hosts; c gives up one
                # job (moved on along the path) and with it the worker slot src now uses.
                self._take_host(src)
                self._give_host(c)
            else:
                self._occupy(src, j, -1)
                self._occupy(c, j, +1)
            c = src
        return c

    def at_capacity(self) -> dict[str, int]:
        """The binding workers this tick filled: name -> jobs it started (a multi-host job once)."""
        return {
            name: used - granted
            for name, used, room, granted in zip(
                self.worker_names,
                self.worker_used,
                self.worker_room,
                self.worker_grant,
                strict=True,
            )
            if used >= room
        }


_ABSENT = object()  # journal: the key was not there
_ADDED = object()  # journal: the element was added to a set
_HOP = -1  # a path step through a worker at capacity, not a job move (Matching._augment)


def _member_key(host_choice: str, worker_busy: Mapping[str, int]) -> Callable[[HostState], tuple]:
    """The order hosts of one class are taken in, by the scheduler's `host_choice`."""
    if host_choice == "spread":
        # Never used first, then the longest unused (the False/0 pair keeps None out of compares).
        return lambda h: (h.last_used is not None, h.last_used or 0, h.hostname)
    if host_choice == "pack":
        # The busiest worker first, then one worker's hosts together: whole workers stay free.
        return lambda h: (-worker_busy.get(h.worker, 0), h.worker, h.hostname)
    return lambda h: h.hostname


def assign_hosts(
    matching: Matching,
    leased: Sequence[tuple[JobState, int, str, str, int]],
    hosts_by_id: Mapping[int, HostState],
    placed: Mapping[int, Mapping[int, int]] | None = None,
) -> list[int]:
    """Give each leased unit (job, job class, build, role, slot) a concrete host within the host
    classes the matching chose; return the host id of each, in order.

    Pinned jobs take their host first; then `placed` (per multi-host job, the host class of
    each of its slots the matching put on a binding worker) a host there, so each such worker
    counts the job as the matching did (Leaser.place); then each retried job
    takes a host it has not failed on; then each job whose suite has a build takes a host
    already on that build (no re-provisioning); the rest take the lowest hostname. Units
    earlier in the order choose first.
    """
    slots: dict[tuple[int, int], int] = {}  # (job class, host class) -> units to place there
    slot_bits: dict[int, int] = defaultdict(int)
    for c, occupants in enumerate(matching.occupants):
        for j, n in occupants.items():
            slots[j, c] = n
            slot_bits[j] |= 1 << c
    taken: set[int] = set()
    host_of: dict[int, int] = {}  # unit index -> host id

    def take(u: int, j: int, c: int, host: HostState) -> None:
        slots[j, c] -= 1
        if not slots[j, c]:
            slot_bits[j] &= ~(1 << c)
        taken.add(host.id)
        host_of[u] = host.id

    for u, (job, j, _build, _role, _slot) in enumerate(leased):
        pin = job.pinned_host_id
        if pin is not None and not job.roles:
            take(u, j, matching.class_of_host[pin], hosts_by_id[pin])
    if placed:
        _place_as_matched(matching, leased, placed, taken, take)

    _place_away_from_failures(matching, leased, slot_bits, taken, host_of, take)
    _place_on_builds(matching, leased, slot_bits, taken, host_of, take)

    cursor = [0] * len(matching.hosts)
    for u, (_job, j, _build, _role, _slot) in enumerate(leased):
        if u in host_of:
            continue
        c = lowest_bit(slot_bits[j])
        members = matching.hosts[c]
        while members[cursor[c]].id in taken:
            cursor[c] += 1
        take(u, j, c, members[cursor[c]])
    return [host_of[u] for u in range(len(leased))]


def _place_as_matched(
    matching: Matching,
    leased: Sequence[tuple[JobState, int, str, str, int]],
    placed: Mapping[int, Mapping[int, int]],
    taken: set[int],
    take: Callable[[int, int, int, HostState], None],
) -> None:
    """Give each multi-host unit the matching put on a binding worker a host of that class:
    one it has not failed on if it can, then one already on its build if it can (these hosts
    stay as the trial placed them, docs/scheduling.md#provisioning)."""
    for u, (job, j, build, _role, slot) in enumerate(leased):
        c = placed.get(job.id, {}).get(slot) if slot >= 0 else None
        if c is None:
            continue
        members = [h for h in matching.hosts[c] if h.id not in taken]
        first = min(
            members,
            key=lambda h: (h.id in job.avoid_hosts, bool(build) and h.current_build != build),
        )
        take(u, j, c, first)


def _place_away_from_failures(
    matching: Matching,
    leased: Sequence[tuple[JobState, int, str, str, int]],
    slot_bits: Mapping[int, int],
    taken: set[int],
    host_of: Mapping[int, int],
    take: Callable[[int, int, int, HostState], None],
) -> None:
    """Give each retried job the lowest free host it has not failed on, where there is one."""
    # Per host class, how many of its first hosts are all taken: hosts taken stay taken, so
    # the search starts past them (a cold tick places thousands of retried jobs).
    skip = [0] * len(matching.hosts)
    for u, (job, j, _build, _role, _slot) in enumerate(leased):
        if (
            not job.avoid_hosts
            or (job.pinned_host_id is not None and not job.roles)
            or u in host_of
        ):
            continue
        for c in bit_indexes(slot_bits[j]):
            members = matching.hosts[c]
            while skip[c] < len(members) and members[skip[c]].id in taken:
                skip[c] += 1
            host = next(
                (
                    h
                    for h in islice(members, skip[c], None)
                    if h.id not in taken and h.id not in job.avoid_hosts
                ),
                None,
            )
            if host is not None:
                take(u, j, c, host)
                break


def _place_on_builds(
    matching: Matching,
    leased: Sequence[tuple[JobState, int, str, str, int]],
    slot_bits: Mapping[int, int],
    taken: set[int],
    host_of: Mapping[int, int],
    take: Callable[[int, int, int, HostState], None],
) -> None:
    """Give each unplaced unit whose suite has a build a free host already on that build."""
    pools: dict[tuple[int, str], list[HostState]] = {}  # by hostname, descending: pop() lowest
    pool_bits: dict[str, int] = defaultdict(int)
    for c, build in matching.affine_left:
        pools[c, build] = []
        pool_bits[build] |= 1 << c
    for c in {c for c, _build in pools}:  # one pass over each class
        for h in reversed(matching.hosts[c]):
            pool = pools.get((c, h.current_build))
            if pool is not None:
                pool.append(h)
    for u, (_job, j, build, _role, _slot) in enumerate(leased):
        if u in host_of or not build:
            continue
        candidates = slot_bits[j] & pool_bits.get(build, 0)
        while candidates:
            c = lowest_bit(candidates)
            pool = pools[c, build]
            while pool and pool[-1].id in taken:
                pool.pop()
            if pool:
                take(u, j, c, pool.pop())
                break
            pool_bits[build] &= ~(1 << c)
            candidates &= ~(1 << c)


def job_classes(
    alike: Iterable[tuple[frozenset[str], int | None, int | None]], matching: Matching
) -> dict[tuple[frozenset[str], int | None], int]:
    """Give jobs that need the same hosts (labels and pin) one job class of the matching.

    `alike`: each (labels, pin, suite) of the queue, in order of first appearance; classes are
    numbered in that order.
    """
    class_ids: dict[tuple[frozenset[str], int | None], int] = {}
    for labels, pin, _suite in alike:
        if (labels, pin) not in class_ids:
            class_ids[labels, pin] = matching.job_class(labels, pin)
    return class_ids
