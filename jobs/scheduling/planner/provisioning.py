"""The fewest provisions: give a plan's leased jobs the free hosts that need the fewest of them
reimaged to their build (docs/scheduling.md#provisioning).

The matching fixes which jobs are leased and in which host classes; `assign_hosts` then hands
out concrete hosts first-fit (a host already on the job's build if one is left, in queue
order). That can reimage hosts it need not: with hosts h1 on R1 and h2 on R2 both fitting jobs
a (R3, first) and b (R1), first-fit gives a h1 and b h2, two provisions, where a→h2, b→h1 needs
one. `fewest_provisions` re-chooses the hosts of the same units as a minimum-cost flow:

    source → unit group → host group → (binding worker) → sink

A unit group is the units of one job class, build and kind (a one-host job or held host, which
takes a job slot of a binding worker; or a multi-host job's host, which stays off binding
workers); a retried job's unit is a group of its own. A host group is the free hosts of one
build within one *super class*: the host classes eligible for the same unit groups (and on the
same binding worker), interchangeable for the flow. An edge costs 1 where the unit's build
differs from the hosts' (a provision), and more than all provisions together where the host is
one the retried job failed on (docs/health.md#retries-after-an-infrastructure-failure) — for a
leased job more than that for every held host besides (`_avoid_weights`). Units
pinned to a host, and a multi-host job's hosts on binding workers (where the job counts on
that worker, Matching.staying), keep their first-fit host.

The flow starts from first-fit's assignment with the units that pay something taken out; every
residual edge then costs ≥ 0 and those units are routed back by successive shortest paths
(Dijkstra with potentials, all shortest paths of one length at once as in Dinic), which is
exact. Units keep their first-fit hosts in the super classes where the flow changed nothing;
in the others the hosts are handed out again in host-choice order (`_realize`).
"""

from __future__ import annotations

import heapq
from collections import defaultdict
from collections.abc import Mapping, Sequence

from jobs.scheduling.planner.matching import Matching, bit_indexes
from jobs.scheduling.planner.types import HostState, JobState

Unit = tuple[JobState, int, str, str, int]  # as leasing.Unit: (job, class, build, role, slot)


def needs_provision(build: str, host: HostState) -> bool:
    """Whether a unit of this build on this host must reimage it first."""
    return bool(build) and host.current_build != build


def provisions_of(
    units: Sequence[Unit], host_ids: Sequence[int], hosts_by_id: Mapping[int, HostState]
) -> dict[int, str]:
    """Host id -> build, for each leased host (held ones excluded) that needs a provision."""
    return {
        host_id: build
        for (_job, _j, build, _role, slot), host_id in zip(units, host_ids, strict=True)
        if slot >= 0 and needs_provision(build, hosts_by_id[host_id])
    }


def fewest_provisions(
    matching: Matching,
    units: Sequence[Unit],
    hosts_by_id: Mapping[int, HostState],
    placed: Mapping[int, Mapping[int, int]],
    first_fit: list[int],
) -> list[int]:
    """The host of each unit (in order) needing the fewest provisions, retried jobs kept off
    the hosts they failed on first; `first_fit`: assign_hosts' answer, where it starts."""
    big = _avoid_weights(units)
    costs = [_cost(unit, hosts_by_id[h], big) for unit, h in zip(units, first_fit, strict=True)]
    if not any(costs):
        return first_fit  # nothing to save: first-fit is optimal
    flexible = _flexible(matching, units, placed, first_fit)
    if not any(costs[u] for u in flexible):
        return first_fit
    problem = _Problem(matching, units, hosts_by_id, first_fit, flexible, big)
    moved = problem.solve(costs)
    if moved is None:
        return first_fit  # no feasible routing found: cannot happen, first-fit is one
    return [moved.get(u, h) for u, h in enumerate(first_fit)]


def _avoid_weights(units: Sequence[Unit]) -> tuple[int, int]:
    """What a host the job failed on costs, (held, leased), in units of one provision: a
    leased job's outweighs every held host's and provision together, a held host's every
    provision (held hosts need none), so the flow minimizes them in that order."""
    held = sum(1 for *_rest, slot in units if slot < 0)
    return len(units) + 1, (held + 1) * (len(units) + 1)


def _cost(unit: Unit, host: HostState, big: tuple[int, int]) -> int:
    job, _j, build, _role, slot = unit
    avoid = big[slot >= 0] if host.id in job.avoid_hosts else 0
    return avoid + needs_provision(build, host)


def _flexible(
    matching: Matching,
    units: Sequence[Unit],
    placed: Mapping[int, Mapping[int, int]],
    first_fit: Sequence[int],
) -> list[int]:
    """The units whose host the flow may change: not pinned, and not a multi-host job's host on
    a binding worker (there it stays where the trial put it)."""
    flexible = []
    for u, (job, _j, _build, _role, slot) in enumerate(units):
        if job.roles and slot >= 0:  # a multi-host job's host (a held one moves like a job)
            if slot in placed.get(job.id, {}):
                continue
            if matching.worker_of[matching.class_of_host[first_fit[u]]] >= 0:
                continue  # not expected (only placed hosts are on binding workers), kept safe
        elif not job.roles and job.pinned_host_id is not None:
            continue  # a multi-host job's pin is ignored (docs/scheduling.md#known-limits)
        flexible.append(u)
    return flexible


class _Problem:
    """The flow network of one plan's flexible units and the free hosts they may take."""

    def __init__(
        self,
        matching: Matching,
        units: Sequence[Unit],
        hosts_by_id: Mapping[int, HostState],
        first_fit: Sequence[int],
        flexible: list[int],
        big: tuple[int, int],
    ) -> None:
        self.m, self.units, self.hosts_by_id, self.big = matching, units, hosts_by_id, big
        self.first_fit, self.flexible = first_fit, flexible
        # Each host's place in its class's host-choice order.
        self.position = {h.id: i for members in matching.hosts for i, h in enumerate(members)}
        fixed = set(range(len(units))).difference(flexible)
        self.fixed_hosts = {first_fit[u] for u in fixed}
        self._unit_groups()
        self._super_classes()
        self._host_groups()

    # --- the nodes ------------------------------------------------------------------------------

    def _unit_groups(self) -> None:
        """Group the flexible units: (job class, multi-host?, build), a retried job alone."""
        m = self.m
        avoided: set[int] = set()
        for u in self.flexible:
            avoided |= self.units[u][0].avoid_hosts
        self.avoided = avoided & m.class_of_host.keys()
        self.group_of: dict[int, int] = {}
        self.g_type: list[tuple[int, bool]] = []  # (job class, multi-host)
        self.g_build: list[str] = []
        self.g_avoid: list[frozenset[int]] = []
        self.g_leased: list[bool] = []  # a retried job's own group: leased, not held
        self.g_units: list[list[int]] = []
        keys: dict[object, int] = {}
        for u in self.flexible:
            job, j, build, _role, slot = self.units[u]
            kind = (j, bool(job.roles) and slot >= 0)  # a held host takes a job slot
            retried = bool(job.avoid_hosts & self.avoided)
            key: object = ("retried", u) if retried else (kind, build)
            g = keys.get(key)
            if g is None:
                g = keys[key] = len(self.g_type)
                self.g_type.append(kind)
                self.g_build.append(build)
                self.g_avoid.append(job.avoid_hosts if retried else frozenset())
                self.g_leased.append(slot >= 0)
                self.g_units.append([])
            self.group_of[u] = g
            self.g_units[g].append(u)

    def _super_classes(self) -> None:
        """Merge the host classes eligible for the same kinds of unit, on the same binding
        worker (or none): the flow cannot tell them apart."""
        m = self.m
        sig: dict[int, list[int]] = defaultdict(list)  # host class -> kinds eligible
        kinds = sorted(set(self.g_type))
        for t, (j, multi) in enumerate(kinds):
            bits = m.eligible[j] & ~m.binding_bits if multi else m.eligible[j]
            for c in bit_indexes(bits):
                sig[c].append(t)
        index: dict[tuple[tuple[int, ...], int], int] = {}
        self.sc_classes: list[list[int]] = []
        self.sc_worker: list[int] = []
        self.sc_of_class: dict[int, int] = {}
        self.sc_of_kind: dict[tuple[int, bool], list[int]] = defaultdict(list)
        for c in sorted(sig):  # class index order: host choice's class preference
            key = (tuple(sig[c]), m.worker_of[c])
            s = index.get(key)
            if s is None:
                s = index[key] = len(self.sc_classes)
                self.sc_classes.append([])
                self.sc_worker.append(m.worker_of[c])
                for t in key[0]:
                    self.sc_of_kind[kinds[t]].append(s)
            self.sc_classes[s].append(c)
            self.sc_of_class[c] = s

    def _host_groups(self) -> None:
        """Split each super class's hosts (free, or first-fit's for a flexible unit) by build:
        one group per build some unit wants, one for the rest, one per host a retried job
        avoids. Hosts in host-choice order (class, then the class's own order)."""
        wanted = set(self.g_build) - {""}
        self.h_hosts: list[list[HostState]] = []
        self.h_build: list[str | None] = []  # None: builds no unit wants
        self.h_sc: list[int] = []
        self.sc_groups: list[list[int]] = []
        self.group_of_host: dict[int, int] = {}
        for s, classes in enumerate(self.sc_classes):
            groups: dict[object, int] = {}
            for c in classes:
                for host in self.m.hosts[c]:
                    if host.id in self.fixed_hosts:
                        continue
                    if host.id in self.avoided:
                        key: object = ("host", host.id)
                    else:
                        key = host.current_build if host.current_build in wanted else None
                    h = groups.get(key)
                    if h is None:
                        h = groups[key] = len(self.h_hosts)
                        self.h_hosts.append([])
                        self.h_build.append(None if key is None else host.current_build)
                        self.h_sc.append(s)
                    self.h_hosts[h].append(host)
                    self.group_of_host[host.id] = h
            self.sc_groups.append(list(groups.values()))

    def _edge_cost(self, g: int, h: int) -> int:
        build, hosts = self.g_build[g], self.h_hosts[h]
        failed = len(hosts) == 1 and hosts[0].id in self.g_avoid[g]
        avoid = self.big[self.g_leased[g]] if failed else 0
        return avoid + (1 if build and build != self.h_build[h] else 0)

    # --- the flow -------------------------------------------------------------------------------

    def solve(self, costs: Sequence[int]) -> dict[int, int] | None:
        """Route the flexible units at least cost; return unit -> host for those that moved,
        or None if some unit found no route."""
        n_g, n_h = len(self.g_type), len(self.h_hosts)
        workers = sorted({w for w in self.sc_worker if w >= 0})
        w_node = {w: 2 + n_g + n_h + i for i, w in enumerate(workers)}
        net = _Network(2 + n_g + n_h + len(workers))
        source, sink = 0, 1
        # First-fit's flow, without the units that pay something (taken out, routed again).
        flow: dict[tuple[int, int], int] = defaultdict(int)
        excess = [0] * n_g
        for u in self.flexible:
            g = self.group_of[u]
            if costs[u]:
                excess[g] += 1
            else:
                flow[g, self.group_of_host[self.first_fit[u]]] += 1
        used = [0] * n_h
        for (_g, h), n in flow.items():
            used[h] += n
        edge: dict[tuple[int, int], int] = {}
        for g, (kind, units) in enumerate(zip(self.g_type, self.g_units, strict=True)):
            if excess[g]:
                net.add(source, 2 + g, excess[g], 0)
            for s in self.sc_of_kind[kind]:
                for h in self.sc_groups[s]:
                    cost = self._edge_cost(g, h)
                    edge[g, h] = net.add(2 + g, 2 + n_g + h, len(units), cost, flow[g, h])
        slots = self._worker_slots()
        on_worker: dict[int, int] = defaultdict(int)
        for h in range(n_h):
            w = self.sc_worker[self.h_sc[h]]
            to = sink if w < 0 else w_node[w]
            net.add(2 + n_g + h, to, len(self.h_hosts[h]), 0, used[h])
            if w >= 0:
                on_worker[w] += used[h]
        for w in workers:
            # Never fewer slots than first-fit's units there use: first-fit is feasible.
            cap = max(slots[w], on_worker[w])
            net.add(w_node[w], sink, cap, 0, on_worker[w])
        need = sum(excess)
        if net.min_cost_flow(source, sink, need) < need:
            return None
        counts = {gh: net.flow(e) for gh, e in edge.items()}
        return self._realize(counts)

    def _worker_slots(self) -> dict[int, int]:
        """Job slots each binding worker has for flexible units (one-host jobs, held hosts): its
        room less the multi-host jobs (once each) and pinned jobs holding fixed hosts on it."""
        m = self.m
        jobs: dict[int, set[object]] = defaultdict(set)
        for u, host_id in enumerate(self.first_fit):
            w = m.worker_of[m.class_of_host[host_id]]
            if w >= 0 and host_id in self.fixed_hosts:
                job, _j, _build, _role, slot = self.units[u]
                jobs[w].add(job.id if job.roles and slot >= 0 else ("unit", u))
        return {
            w: m.worker_room[w] - m.worker_grant[w] - len(jobs[w])
            for w in range(len(m.worker_room))
        }

    def _realize(self, counts: Mapping[tuple[int, int], int]) -> dict[int, int]:
        """Concrete hosts for the flow's counts: unit -> host, for the units of the super
        classes where the flow changed something (the others keep first-fit's hosts).

        A unit stays in its first-fit host group while the counts leave room there; the others
        of its unit group, earlier ones first, take its new host groups in host-choice order.
        Then each changed super class hands out its hosts afresh (`_realize_super_class`)."""
        left = dict(counts)
        in_sc: dict[int, list[tuple[int, int]]] = defaultdict(list)  # super class -> (unit, h)
        movers: dict[int, list[int]] = defaultdict(list)
        changed: set[int] = set()
        for g, units in enumerate(self.g_units):
            for u in units:
                h = self.group_of_host[self.first_fit[u]]
                if left.get((g, h), 0) > 0:
                    left[g, h] -= 1
                    in_sc[self.h_sc[h]].append((u, h))
                else:
                    movers[g].append(u)
                    changed.add(self.h_sc[h])
        openings: dict[int, list[int]] = defaultdict(list)
        for (g, h), n in left.items():
            openings[g].extend([h] * n)
        for g, units in movers.items():
            for u, h in zip(units, sorted(openings[g], key=self._rank), strict=True):
                in_sc[self.h_sc[h]].append((u, h))
                changed.add(self.h_sc[h])
        host_of: dict[int, int] = {}
        for s in changed:
            host_of.update(self._realize_super_class(s, sorted(in_sc[s])))
        return host_of

    def _realize_super_class(self, s: int, placed: list[tuple[int, int]]) -> dict[int, int]:
        order = [host for h in self.sc_groups[s] for host in self.h_hosts[h]]
        order.sort(key=self._host_rank)
        taken: set[int] = set()
        host_of: dict[int, int] = {}
        rest = []
        for u, h in placed:  # retried jobs: the host group the flow chose, nothing else
            if self.g_avoid[self.group_of[u]]:
                host = next(x for x in self.h_hosts[h] if x.id not in taken)
                taken.add(host.id)
                host_of[u] = host.id
            else:
                rest.append((u, h))
        by_build: dict[str, list[HostState]] = defaultdict(list)
        for host in reversed(order):
            by_build[host.current_build].append(host)  # pop() gives the first
        last = []
        for u, h in rest:  # on their build
            build = self.units[u][2]
            if build and build == self.h_build[h]:
                pool = by_build[build]
                while pool[-1].id in taken:
                    pool.pop()
                host = pool.pop()
                taken.add(host.id)
                host_of[u] = host.id
            else:
                last.append(u)
        free = (host for host in order if host.id not in taken)
        for u in last:  # the rest: the first host left
            host_of[u] = next(free).id
        return host_of

    def _rank(self, h: int) -> int:
        """Where a host group's first host stands in host-choice order."""
        return self._host_rank(self.h_hosts[h][0])

    def _host_rank(self, host: HostState) -> tuple[int, int]:
        c = self.m.class_of_host[host.id]
        return (c, self.position[host.id])


class _Network:
    """A residual graph with integer capacities and costs; edges in pairs (e, e ^ 1)."""

    def __init__(self, n: int) -> None:
        self.adj: list[list[int]] = [[] for _ in range(n)]
        self.to: list[int] = []
        self.cap: list[int] = []
        self.cost: list[int] = []

    def add(self, u: int, v: int, cap: int, cost: int, flow: int = 0) -> int:
        e = len(self.to)
        self.to += [v, u]
        self.cap += [cap - flow, flow]
        self.cost += [cost, -cost]
        self.adj[u].append(e)
        self.adj[v].append(e + 1)
        return e

    def flow(self, e: int) -> int:
        return self.cap[e ^ 1]

    def min_cost_flow(self, s: int, t: int, need: int) -> int:
        """Send up to `need` more units from s to t at least cost; how many were sent.

        Every residual edge must cost ≥ 0 to start with (the potentials start at 0). Each round
        finds the shortest distances by Dijkstra on reduced costs, then sends a blocking flow
        along the edges of reduced cost 0 (levels by breadth-first search, as in Dinic)."""
        n = len(self.adj)
        potential = [0] * n
        sent = 0
        while sent < need:
            dist = self._dijkstra(s, t, potential)
            if dist is None:
                break
            for v in range(n):
                potential[v] += dist[v]
            while sent < need:
                level = self._levels(s, t, potential)
                if level is None:
                    break
                sent += self._blocking(s, t, level, potential, need - sent)
        return sent

    def _dijkstra(self, s: int, t: int, potential: list[int]) -> list[int] | None:
        inf = float("inf")
        dist: list = [inf] * len(self.adj)
        dist[s] = 0
        heap = [(0, s)]
        to, cap, cost, adj = self.to, self.cap, self.cost, self.adj
        done = [False] * len(adj)
        while heap:
            d, v = heapq.heappop(heap)
            if done[v]:
                continue
            done[v] = True
            if v == t:
                break
            base = d + potential[v]
            for e in adj[v]:
                if cap[e] > 0:
                    w = to[e]
                    nd = base + cost[e] - potential[w]
                    if nd < dist[w]:
                        dist[w] = nd
                        heapq.heappush(heap, (nd, w))
        if not done[t]:
            return None
        d_t = dist[t]
        return [d if d < d_t else d_t for d in dist]

    def _levels(self, s: int, t: int, potential: list[int]) -> list[int] | None:
        """Breadth-first levels over residual edges of reduced cost 0; None if t is unreached."""
        level = [-1] * len(self.adj)
        level[s] = 0
        queue = [s]
        to, cap, cost, adj = self.to, self.cap, self.cost, self.adj
        for v in queue:
            pv = potential[v]
            for e in adj[v]:
                w = to[e]
                if level[w] < 0 and cap[e] > 0 and cost[e] + pv - potential[w] == 0:
                    level[w] = level[v] + 1
                    queue.append(w)
        return level if level[t] >= 0 else None

    def _blocking(self, s: int, t: int, level: list[int], potential: list[int], need: int) -> int:
        """Send flow along level-increasing edges of reduced cost 0 until none is left."""
        to, cap, cost, adj = self.to, self.cap, self.cost, self.adj
        cursor = [0] * len(adj)
        sent = 0
        path: list[int] = []
        v = s
        while sent < need:
            if v == t:
                f = min(need - sent, *(cap[e] for e in path))
                for e in path:
                    cap[e] -= f
                    cap[e ^ 1] += f
                sent += f
                path.clear()
                v = s
                continue
            edges, i = adj[v], cursor[v]
            while i < len(edges):
                e = edges[i]
                w = to[e]
                if (
                    cap[e] > 0
                    and level[w] == level[v] + 1
                    and cost[e] + potential[v] - potential[w] == 0
                ):
                    break
                i += 1
            cursor[v] = i
            if i < len(edges):
                path.append(edges[i])
                v = to[edges[i]]
            elif not path:
                break  # nothing more from s
            else:
                level[v] = -2  # a dead end for this round
                e = path.pop()
                v = to[e ^ 1]
                cursor[v] += 1
        return sent
