"""What one tick keeps: jobs leased whole, in order, with the hold and its backfill.

`Leaser` keeps the jobs of a plan one at a time (docs/scheduling.md#the-promise): a one-host
job with one more unit of the matching, a multi-host job with all its essential units or none
(docs/scheduling.md#multi-host-jobs). Once the tick's holder is chosen, its hold units sit in
the matching like kept jobs: a later job is kept if it fits with them, or, when it is short
enough to end before the holder's expected start, if it fits with the kept jobs alone, the
hold then taking what is left (docs/scheduling.md#holds-and-backfill).

Why the caches stay true (the tick's speed depends on them): write K for the kept jobs and H
for the hold. A class or shape marked dead cannot be added to K ∪ H. K only grows, and a
backfill replaces K ∪ H by K' ∪ H' with K' = K + the backfilled job and H' the largest hold
that fits with K' (taken greedily, roles in order), whose span contains K ∪ H; by
submodularity what is dependent on K ∪ H stays dependent on K' ∪ H'. A mark of "cannot be
added to K alone" (bf_dead) stays true because K only grows. Only the matching's dead host
classes are dropped when hold units leave it.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime

from jobs.scheduling.planner.matching import Matching, bit_indexes
from jobs.scheduling.planner.multihost import Hold, MultiHost, Spec
from jobs.scheduling.planner.types import HostState, JobState, Policy

# One host a kept job gets: (job, matching class, build, role, slot); slot -1: a held host.
Unit = tuple[JobState, int, str, str, int]
# A multi-host job's hosts on binding workers: slot -> host class.
Placed = dict[int, int]


class Leaser:
    def __init__(
        self,
        matching: Matching,
        hosts: list[HostState],
        room: dict[int, int],
        build_of: Mapping[int, str],
        policy: Policy,
        now: datetime | None,
    ) -> None:
        self.matching = matching
        self.dead = matching.dead
        self.room = room  # hosts each capped suite may still take this tick
        self.build_of = build_of
        self.policy = policy
        self.now = now
        self.units: list[Unit] = []  # in lease order
        self.leased_ids: set[int] = set()
        self.multi = MultiHost(matching, hosts)
        self.multi_leased: list[tuple[JobState, Spec, str | None]] = []
        self.placed: dict[int, Placed] = {}  # job id -> its hosts on binding workers
        self.holder: Hold | None = None
        self.bf_dead: list[bool] = []  # one-host classes: cannot be added to the kept jobs alone
        self.bf_probed: set[int] = set()
        self._reach: int | None = None  # see reach(); None: to compute again
        self._backfilled: Placed | None = None  # where the last backfill put its hosts
        self.version = 0  # counts changes of what reach() reads

    # --- keeping a job ------------------------------------------------------------------------

    def build(self, job: JobState) -> str:
        """The build the job's hosts must carry: its suite's, or its own for a standalone job."""
        if job.suite_id is None:
            return job.build
        return self.build_of.get(job.suite_id, "")

    def capped(self, job: JobState) -> bool:
        left = self.room.get(job.suite_id)  # type: ignore[arg-type]
        return left is not None and left < job.hosts_needed

    def lease(self, job: JobState, j: int) -> bool:
        """Keep a one-host job if it can be matched together with every job kept so far."""
        left = self.room.get(job.suite_id)  # type: ignore[arg-type]
        if left is not None and left <= 0:
            return False
        build = self.build(job)
        if not self.matching.add(j, build):
            return False
        self._keep(job, [(-1, j)], build, None)
        return True

    def _keep(
        self,
        job: JobState,
        units: list[tuple[int, int]],
        build: str,
        value: str | None,
        placed: Placed | None = None,
    ) -> None:
        self._reach = None
        self.version += 1
        if job.suite_id in self.room:
            self.room[job.suite_id] -= len(units)  # type: ignore[index]
        if job.roles:
            roles = job.roles
            self.units.extend(
                (job, j, build, roles[r].name, slot) for slot, (r, j) in enumerate(units)
            )
            self.multi_leased.append((job, self.multi.spec(job), value))
            if placed:
                self.placed[job.id] = placed
        else:
            self.units.append((job, units[0][1], build, "", 0))
        self.leased_ids.add(job.id)

    def lease_multi(self, job: JobState) -> bool:
        """Keep a multi-host job if all its essential hosts can be matched at once together with
        every job kept so far (and the hold); together_by values in sorted order."""
        if self.capped(job):
            return False
        spec = self.multi.spec(job)
        if spec.dead:
            return False
        matching = self.matching
        eligible = matching.eligible
        build = self.build(job)
        for value in self.multi.values(spec):
            if not matching.free:
                break  # no job slot left: the job's first host would need one
            units = self.multi.units(spec, value)
            if not all(eligible[j] for _r, j in units):
                # A role no free host fits: no trial could place it (most shapes, most ticks).
                continue
            placed = self.trial(units, build)
            if placed is not None:
                self._keep(job, units, build, value, placed)
                return True
        spec.dead = True
        if self.holder is None:
            spec.bf_dead = True  # no hold: the kept jobs alone refused it
        return False

    def trial(self, units: list[tuple[int, int]], build: str) -> Placed | None:
        """Match all the units of one multi-host job at once, or none (the matching rolled
        back); return where they went on binding workers, or None.

        A job counts once on each worker it holds a host on
        (docs/scheduling.md#worker-capacity). Its hosts are placed one by one (`place`), each
        where the matching finds room, else on a free host of a worker it already counts on;
        if that fails and some worker's capacity binds, again with the free hosts of the
        workers it counts on tried first, then once more per such worker that could take two
        of its hosts, that worker tried first for each host."""
        placed = self._try(units, build, False, None)
        if placed is not None or not self.matching.binding_bits:
            return placed
        for first in [None, *self._bundles(units)]:
            placed = self._try(units, build, True, first)
            if placed is not None:
                return placed
        return None

    def _try(
        self, units: list[tuple[int, int]], build: str, free_first: bool, first: int | None
    ) -> Placed | None:
        matching = self.matching
        saved = matching.checkpoint()
        placed = self.place(units, build, first=first, free_first=free_first)
        if placed is None:
            matching.restore(saved)
        else:
            matching.commit()
        return placed

    def _bundles(self, units: list[tuple[int, int]]) -> list[int]:
        """The binding workers with free hosts for two or more of the units (their jobs may
        move elsewhere), in name order."""
        m = self.matching
        found = []
        for w, bits in enumerate(m.worker_bits):
            if not bits & m.open_bits:
                continue
            hosts = 0
            for c in bit_indexes(bits):
                if any(m.eligible[j] >> c & 1 for _r, j in units):
                    hosts += m.capacity[c]
            if hosts >= 2:
                found.append(w)
        return found

    def place(
        self,
        units: list[tuple[int, int]],
        build: str,
        *,
        first: int | None = None,
        free_first: bool = False,
        placed: Placed | None = None,
        slot: int = 0,
    ) -> Placed | None:
        """Add the units of one multi-host job to the matching (within a trial): each where
        the matching finds room (on worker `first` if it can, when given), else on a free host
        of a binding worker the job already holds a host on, without a job slot
        (Matching.place_on); `free_first`: that free host first. A host placed on a worker the
        job already counts on by moving another job off it gives that job's slot back. Its
        hosts on binding workers stay there for the tick (Matching.staying). Returns their
        host classes by slot (`slot`: the first unit's; added to `placed`, the job's earlier
        ones), or None if a unit does not fit."""
        m = self.matching
        placed = {} if placed is None else placed
        mine: set[int] = {m.worker_of[c] for c in placed.values()}
        for at, (_r, j) in enumerate(units, start=slot):
            c = self._place_on(j, mine) if free_first else -1
            if c < 0:
                if (
                    first is not None
                    and first not in mine
                    and m.add(j, build, m.worker_bits[first])
                ) or m.add(j, build):
                    c = m.last
                    if m.worker_of[c] in mine:
                        # It took a host of a worker the job counts on by moving another job
                        # off it: the slot that job left is free.
                        m.grant(m.worker_of[c], 1)
                elif not free_first:
                    c = self._place_on(j, mine)
                if c < 0:
                    return None
            w = m.worker_of[c]
            if w >= 0:
                mine.add(w)
                placed[at] = c
        return placed

    def _place_on(self, j: int, workers: set[int]) -> int:
        """A unit of class j on a free host of one of these workers, without a job slot; its
        host class, or -1."""
        for w in sorted(workers):
            c = self.matching.place_on(j, w)
            if c >= 0:
                return c
        return -1

    # --- the main phase, with the hold --------------------------------------------------------

    def consider(self, job: JobState, j: int) -> None:
        """Take one job of the main phase (j: its class; -1 for a multi-host job)."""
        if job.id in self.leased_ids:
            return
        if job.roles:
            self._consider_multi(job)
        elif self.holder is None:
            if not self.dead[j]:
                self.lease(job, j)
        else:
            self._consider_with_hold(job, j)

    def _consider_multi(self, job: JobState) -> None:
        if self.capped(job):
            return
        spec = self.multi.spec(job)
        if not self.matching.free:
            spec.dead = True  # nothing can be added to the kept jobs and the hold
            spec.bf_dead |= self.holder is None
        if self.lease_multi(job):
            return
        hold = self.holder
        if hold is None:
            if self.policy.holds:
                self._try_hold(job, spec)
            return
        if spec.bf_dead or not hold.total or not self.policy.backfill:
            spec.bf_dead = True
            return
        build = self.build(job)
        if self._run_s(job) > hold.limit_s:
            # Too long to backfill; learn once whether the shape could at all (see below).
            if not spec.bf_probed:
                spec.bf_probed = True
                if not any(
                    self._backfill(self.multi.units(spec, value), build, commit=False)
                    for value in self.multi.values(spec)
                ):
                    spec.bf_dead = True
            return
        for value in self.multi.values(spec):
            units = self.multi.units(spec, value)
            if self._backfill(units, build, commit=True):
                self._keep(job, units, build, value, self._backfilled)
                return
        spec.bf_dead = True

    def _consider_with_hold(self, job: JobState, j: int) -> None:
        dead = self.dead
        if not dead[j]:
            if self.matching.free:
                if self.lease(job, j):
                    return
            else:
                dead[j] = True  # no host left but held ones: nothing fits with the hold
        hold = self.holder
        assert hold is not None
        if not hold.total:
            self.bf_dead[j] = dead[j]  # no hold left: backfilling is leasing
        elif dead[j] and not self.matching.eligible[j] & self.reach():
            # No path of moves leads from its hosts to a held one: with the kept jobs alone it
            # would not fit either (a path not through a held host would have fitted it).
            self.bf_dead[j] = True
        if self.capped(job) or self.bf_dead[j]:
            return
        if not self.policy.backfill:
            self.bf_dead[j] = True  # held hosts go to the holder alone
            return
        build = self.build(job)
        if self._run_s(job) > hold.limit_s:
            # Too long to backfill. Learn once whether the class could backfill at all, so that
            # a class that cannot is skipped whole (the queue may be long).
            if j not in self.bf_probed:
                self.bf_probed.add(j)
                if not self._backfill([(-1, j)], build, commit=False):
                    self.bf_dead[j] = True
            return
        if self._backfill([(-1, j)], build, commit=True):
            self._keep(job, [(-1, j)], build, None)
        else:
            self.bf_dead[j] = True

    def reach(self) -> int:
        """The host classes from which a path of moves ends where a hold gives up a host: a
        class with held hosts, or a class with a free host on a worker at capacity that holds
        a host too. While no host is free but held ones, a job whose classes miss these can
        backfill nothing (a necessary condition; the trial decides)."""
        if self._reach is not None:
            return self._reach
        m = self.matching
        hold = self.holder
        held = 0
        if hold is not None:
            for jh in hold.classes:
                for c in bit_indexes(m.eligible[jh]):
                    if m.occupants[c].get(jh):
                        held |= 1 << c
        blocked_open = m.open_bits & m.blocked_bits
        reach = held
        for bits in m.worker_bits:
            if bits & held:
                reach |= bits & blocked_open
        changed = True
        while changed:
            changed = False
            for c, occupants in enumerate(m.occupants):
                if reach >> c & 1:
                    continue
                if any(m.eligible[x] & reach for x in occupants) or (
                    blocked_open >> c & 1 and m.worker_bits[m.worker_of[c]] & reach
                ):
                    reach |= 1 << c
                    changed = True
        self._reach = reach
        return reach

    def hopeless(self, c: object) -> bool:
        """While no host is free but held ones: whether no job of this group's class (one-host
        class index) or shape (Spec) can backfill; marks it so (monotone, see above)."""
        if isinstance(c, int):
            if (
                not self.bf_dead[c]
                and not self.matching.free
                and not self.matching.eligible[c] & self.reach()
            ):
                self.bf_dead[c] = True
            return self.bf_dead[c]
        spec: Spec = c  # type: ignore[assignment]
        if not spec.bf_dead and not self.matching.free:
            reach, eligible = self.reach(), self.matching.eligible
            spec.bf_dead = not any(
                all(eligible[j] & reach for j in self.multi.classes(spec, value))
                for value in self.multi.values(spec)
            )
        return spec.bf_dead

    @property
    def holding(self) -> bool:
        """Whether some free host is held: a job may still get one by backfilling."""
        return self.holder is not None and self.holder.total > 0

    def skippable(self, j: int) -> bool:
        """Whether every later job of one-host class j would be refused (the merge drops it)."""
        if not self.dead[j]:
            return False
        return not self.holding or self.bf_dead[j]

    def _run_s(self, job: JobState) -> float:
        size = job.size_s
        return size if size is not None and size > 0 else self.policy.default_duration_s

    def _backfill(self, units: list[tuple[int, int]], build: str, *, commit: bool) -> bool:
        """Match the units with the kept jobs alone (the hold given up), then hold again what
        still fits; keep that if `commit`, else only say whether it fits."""
        hold = self.holder
        assert hold is not None
        matching, dead = self.matching, self.dead
        saved = matching.checkpoint()
        for jh in hold.classes:
            matching.remove(jh)
        was = [dead[j] for _r, j in units]
        for _r, j in units:
            matching.set_dead(j, False)  # its marks were made with the hold in place
        if units[0][0] >= 0:  # a multi-host job's
            self._backfilled = self.place(units, build)
            fits = self._backfilled is not None
        else:
            fits = matching.add(units[0][1], build)
        if not fits or not commit:
            matching.restore(saved)
            return fits
        for (_r, j), mark in zip(units, was, strict=True):
            dead[j] = dead[j] or mark
        for jh in hold.classes:
            dead[jh] = False
        hold.held = self._hold_greedy(hold.spec, hold.classes)
        matching.commit()
        self._reach = None
        self.version += 1
        return True

    # --- the hold -------------------------------------------------------------------------------

    def _hold_greedy(self, spec: Spec, classes: list[int]) -> list[int]:
        """Hold as many free hosts per role as fit with the kept jobs, roles in order."""
        held = []
        for role, jh in zip(spec.roles, classes, strict=True):
            n = 0
            while n < role.count and self.matching.add(jh, ""):
                n += 1
            held.append(n)
        return held

    def _try_hold(self, job: JobState, spec: Spec) -> None:
        """Make the job the tick's holder if it can hold a free host and the busy hosts can
        complete it; the together_by value with the earliest expected start (then sorted)."""
        now = self.now
        if now is None or spec.hold_failed or not self.matching.free:
            return
        best: tuple[datetime, str | None] | None = None
        eligible = self.matching.eligible
        for value in self.multi.values(spec):
            classes = self.multi.hold_classes(spec, value)
            if not any(eligible[jh] for jh in classes):
                continue  # no free host fits any role: nothing to hold
            saved = self.matching.checkpoint()
            held = self._hold_greedy(spec, classes)
            self.matching.restore(saved)
            if not any(held):
                continue
            missing = [role.count - n for role, n in zip(spec.roles, held, strict=True)]
            start = self.multi.expected_start(spec, value, missing)
            if start is not None and (best is None or start < best[0]):
                best = (start, value)
        if best is None:
            spec.hold_failed = True
            return
        start, value = best
        classes = self.multi.hold_classes(spec, value)
        self.matching.checkpoint()
        held = self._hold_greedy(spec, classes)
        self.matching.commit()
        start = max(start, now)
        self.holder = Hold(job, spec, value, classes, held, start, (start - now).total_seconds())
        self._reach = None
        self.version += 1
        self.bf_dead = self.dead.copy()  # dead without a hold: dead with the kept jobs alone

    # --- after the main phase -----------------------------------------------------------------

    def elastic(self) -> None:
        """Grant elastic hosts (up to each role's max) to the multi-host jobs leased in this
        tick, in lease order, from hosts no job took or holds, within the suites' max_duts."""
        for job, spec, value in self.multi_leased:
            build = self.build(job)
            classes = self.multi.classes(spec, value)
            slot = job.hosts_needed
            placed = self.placed.get(job.id, {})
            for r, (role, j) in enumerate(zip(spec.roles, classes, strict=True)):
                for _ in range(role.max - role.count):
                    left = self.room.get(job.suite_id)  # type: ignore[arg-type]
                    if left is not None and left <= 0:
                        break
                    if self.place([(r, j)], build, placed=placed, slot=slot) is None:
                        break
                    if left is not None:
                        self.room[job.suite_id] = left - 1  # type: ignore[index]
                    self.units.append((job, j, build, role.name, slot))
                    slot += 1
            if placed:
                self.placed[job.id] = placed

    def hold_units(self) -> list[Unit]:
        """The held hosts as units (slot -1), for the assignment of concrete hosts."""
        hold = self.holder
        if hold is None:
            return []
        held = hold.held
        return [
            (hold.job, jh, "", role.name, -1)
            for role, jh, n in zip(hold.spec.roles, hold.classes, held, strict=True)
            for _ in range(n)
        ]
