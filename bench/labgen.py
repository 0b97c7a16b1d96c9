"""Generate realistic labs deterministically from a seed, as plain planner data (no Django)."""

from __future__ import annotations

import argparse
import json
import random
from collections import defaultdict
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta

from jobs.scheduling.planner import HostState, JobState, SuiteState

# Kept free of Django like the planner: the planner benchmark and the tests of bench/ build
# labs in plain Python. bench/dbload.py writes a generated lab into a database.

T0 = datetime(2024, 5, 6, 9, 0)

# Real ChromeOS board names, so a generated lab reads like one; a suffix makes more.
BOARD_NAMES = [
    *("eve", "nami", "coral", "octopus", "hatch", "volteer", "dedede", "brya", "zork", "grunt"),
    *("kukui", "jacuzzi", "trogdor", "guybrush", "nissa", "skyrim", "rex", "corsola", "cherry"),
    *("asurada", "strongbad", "puff", "drallion", "sarien", "kalista"),
]
# Pools with their share of hosts; a suite runs in one pool, like Autotest's pool labels.
POOLS = (("cq", 0.35), ("bvt", 0.30), ("suites", 0.25), ("quota", 0.10))
# Peripherals a host may carry, each with the share of hosts that has it.
CAPS = (("servo", 0.5), ("bt", 0.3), ("audio_box", 0.15), ("touch", 0.1), ("chameleon", 0.08))
# Named priority levels (jobs.choices.Priority) with how often suites use them.
PRIORITIES = ((10, 0.10), (20, 0.15), (30, 0.15), (40, 0.30), (50, 0.10), (60, 0.08), (70, 0.10))
LABEL_SETS_PER_BOARD = 8  # four pools plus about as many heterogeneous variants


@dataclass(frozen=True)
class LabShape:
    """What to generate: the sizes of the lab and the mix of its hosts, suites and jobs."""

    hosts: int
    jobs: int
    suites: int
    label_sets: int
    seed: int = 0
    pinned: float = 0.01  # share of jobs pinned to one host
    standalone: float = 0.05  # share of jobs outside any suite
    hetero: float = 0.5  # share of label sets needing more than board and pool
    quota: float = 0.3  # share of suites with a min_duts quota
    capped: float = 0.0  # share of suites with a max_duts cap
    busy: float = 0.0  # share of hosts already running a job (planner-only labs)
    unavailable: float = 0.05  # share of hosts locked or not ready
    hosts_per_worker: int = 50
    paused_workers: float = 0.02
    offline_workers: float = 0.01


# The lab's size on a benchmark's command line, with the defaults of the tick benchmark.
SIZE_ARGUMENTS = (("--hosts", 1000), ("--jobs", 10000), ("--suites", 50), ("--label-sets", 40))


def add_shape_arguments(parser: argparse.ArgumentParser, *, required: bool = False) -> None:
    """--hosts, --jobs, --suites and --label-sets (required, or these defaults), and --seed."""
    for flag, default in SIZE_ARGUMENTS:
        if required:
            parser.add_argument(flag, type=int, required=True)
        else:
            parser.add_argument(flag, type=int, default=default)
    parser.add_argument("--seed", type=int, default=0)


def shape_from(args: argparse.Namespace, **mix: float) -> LabShape:
    """The lab the size arguments ask for, with the mix given (the shares of LabShape)."""
    return LabShape(args.hosts, args.jobs, args.suites, args.label_sets, seed=args.seed, **mix)


@dataclass(frozen=True)
class WorkerSpec:
    """A lab server of a generated lab."""

    name: str
    paused: bool = False
    offline: bool = False


@dataclass
class Lab:
    """A generated lab: planner data plus what a database needs to hold the same lab."""

    shape: LabShape
    hosts: list[HostState]
    jobs: list[JobState]
    suites: list[SuiteState]
    workers: list[WorkerSpec]
    worker_of: dict[int, int]  # host id -> index into workers
    label_sets: list[frozenset[str]] = field(default_factory=list)

    def describe(self) -> dict[str, object]:
        """Return the sizes a benchmark reports next to its timings."""
        return {
            "hosts": len(self.hosts),
            "jobs": len(self.jobs),
            "suites": len(self.suites),
            "label_sets": len(self.label_sets),
            "host_classes": len({h.labels for h in self.hosts}),
            "schedulable": sum(h.schedulable for h in self.hosts),
            "pinned": sum(j.pinned_host_id is not None for j in self.jobs),
            "seed": self.shape.seed,
        }


def _pick(rng: random.Random, weighted: tuple[tuple[object, float], ...]) -> object:
    values, weights = zip(*weighted, strict=True)
    return rng.choices(values, weights)[0]


def _board_names(n: int) -> list[str]:
    names = []
    for i in range(n):
        base = BOARD_NAMES[i % len(BOARD_NAMES)]
        names.append(base if i < len(BOARD_NAMES) else f"{base}{i // len(BOARD_NAMES) + 1}")
    return names


def generate(shape: LabShape) -> Lab:  # noqa: C901, PLR0915 — one seeded stream: order matters
    """Return the lab described by `shape`; the same shape always gives the same lab."""
    rng = random.Random(shape.seed)
    n_boards = max(1, round(shape.label_sets / LABEL_SETS_PER_BOARD))
    boards = _board_names(n_boards)
    models = {b: [f"model:{b}-{k}" for k in range(rng.randint(1, 3))] for b in boards}
    builds = {b: [f"R{120 + k}-{b}" for k in range(3)] for b in boards}
    board_weight = {b: rng.uniform(0.5, 1.5) for b in boards}  # some boards are more common

    # Workers: a few paused or offline, as in a real lab on a bad day.
    n_workers = max(1, -(-shape.hosts // shape.hosts_per_worker))
    workers = []
    for w in range(n_workers):
        roll = rng.random()
        workers.append(
            WorkerSpec(
                name=f"w{w:03d}",
                paused=roll < shape.paused_workers,
                offline=shape.paused_workers <= roll < shape.paused_workers + shape.offline_workers,
            )
        )

    # Hosts: a board, one of its models, a pool and some peripherals.
    hosts: list[HostState] = []
    worker_of: dict[int, int] = {}
    board_list, weights = list(board_weight), list(board_weight.values())
    for i in range(shape.hosts):
        board = rng.choices(board_list, weights)[0]
        labels = {f"board:{board}", rng.choice(models[board]), f"pool:{_pick(rng, POOLS)}"}
        labels.update(cap for cap, share in CAPS if rng.random() < share)
        w = rng.randrange(n_workers)
        worker_of[i + 1] = w
        roll = rng.random()
        busy = roll < shape.busy
        locked = shape.busy <= roll < shape.busy + shape.unavailable / 2
        not_ready = shape.busy + shape.unavailable / 2 <= roll < shape.busy + shape.unavailable
        hosts.append(
            HostState(
                id=i + 1,
                # Row, rack and host like a lab's DNS names; unique for every i.
                hostname=f"cros{i // 400 + 1}-row{(i // 20) % 20 + 1}-host{i % 20 + 1}",
                labels=frozenset(labels),
                current_build=rng.choice([*builds[board], ""]),
                ready=not not_ready,
                locked=locked,
                lock_reason="debugging a flaky servo" if locked else "",
                worker_paused=workers[w].paused,
                worker_offline=workers[w].offline,
                leased=busy,
                lease_priority=_pick(rng, PRIORITIES) if busy else None,  # type: ignore[arg-type]
            )
        )

    # Label sets jobs ask for: (board, pool) bases and heterogeneous variants that add a
    # model or a peripheral (or both), so that hosts of one board are not interchangeable.
    combos = [(b, p) for b in boards for p, _share in POOLS]
    rng.shuffle(combos)
    n_hetero = round(shape.label_sets * shape.hetero)
    n_base = min(len(combos), shape.label_sets - n_hetero)
    n_hetero = shape.label_sets - n_base
    chosen: list[frozenset[str]] = []
    groups: dict[tuple[str, str], list[frozenset[str]]] = defaultdict(list)
    for board, pool in combos[:n_base]:
        ls = frozenset({f"board:{board}", f"pool:{pool}"})
        chosen.append(ls)
        groups[board, pool].append(ls)
    # Variants go to any (board, pool), also one without a base set: there every job needs
    # more than board and pool, the most heterogeneous corner of the lab.
    homes = combos
    seen = set(chosen)
    attempts = 0
    while n_hetero and attempts < 100 * shape.label_sets:
        attempts += 1
        board, pool = rng.choice(homes)
        extra = {rng.choice(models[board])} if rng.random() < 0.4 else set()
        if not extra or rng.random() < 0.3:
            extra.add(str(_pick(rng, tuple((c, s) for c, s in CAPS))))
        ls = frozenset({f"board:{board}", f"pool:{pool}", *extra})
        if ls in seen:
            continue
        seen.add(ls)
        chosen.append(ls)
        groups[board, pool].append(ls)
        n_hetero -= 1
    group_keys = list(groups)

    # Hosts by board, for pinning a job to a host that can run it.
    by_board: dict[str, list[HostState]] = defaultdict(list)
    for h in hosts:
        by_board[next(lbl for lbl in h.labels if lbl.startswith("board:"))].append(h)

    def pin_for(labels: frozenset[str]) -> int | None:
        if rng.random() >= shape.pinned:
            return None
        board = next(lbl for lbl in labels if lbl.startswith("board:"))
        fitting = [h for h in by_board.get(board, ()) if labels <= h.labels]
        pool = fitting or by_board.get(board) or hosts
        return rng.choice(pool).id if pool else None

    # Suites: each runs on one (board, pool); most of its jobs need just that, some more.
    n_standalone = round(shape.jobs * shape.standalone) if shape.suites else shape.jobs
    suite_total = shape.jobs - n_standalone
    n_suites = min(shape.suites, suite_total)
    sizes = _split(rng, suite_total, n_suites)
    suites: list[SuiteState] = []
    # (submitted_at, tie, suite index or None, labels list) in submission order
    events: list[tuple[datetime, int, int | None, object]] = []
    # Every (board, pool) gets suites in turn, as in a lab where every pool has its testers;
    # random picks would leave some pools without work and their hosts idle.
    rng.shuffle(group_keys)
    for s in range(n_suites):
        board, pool = group_keys[s % len(group_keys)]
        created = T0 + timedelta(seconds=30 * s)
        size = sizes[s]
        min_duts = rng.randint(1, 6) if rng.random() < shape.quota else 0
        min_duts = min(min_duts, size)
        max_duts = None
        if rng.random() < shape.capped:
            max_duts = max(1, min_duts) + rng.randint(0, 8)
        suites.append(
            SuiteState(
                id=s + 1,
                name=f"{pool}-{board}-{s + 1}",
                priority=_pick(rng, PRIORITIES),  # type: ignore[arg-type]
                created_at=created,
                min_duts=min_duts,
                max_duts=max_duts,
                build=rng.choice(builds[board]),
            )
        )
        events.append((created, s, s, (board, pool, size)))
    for k in range(n_standalone):
        at = T0 + timedelta(seconds=rng.randrange(30 * max(n_suites, 1)))
        events.append((at, n_suites + k, None, None))
    events.sort(key=lambda e: (e[0], e[1]))

    jobs: list[JobState] = []
    for at, _tie, s, info in events:
        if s is None:
            labels = rng.choice(chosen)
            jobs.append(
                JobState(
                    id=len(jobs) + 1,
                    name=f"solo-{len(jobs) + 1}",
                    suite_id=None,
                    priority=_pick(rng, PRIORITIES),  # type: ignore[arg-type]
                    submitted_at=at,
                    labels=labels,
                    pinned_host_id=pin_for(labels),
                )
            )
            continue
        suite = suites[s]
        board, pool, size = info  # type: ignore[misc]
        options = groups[board, pool]
        base = frozenset({f"board:{board}", f"pool:{pool}"})
        for t in range(size):
            # Most tests need only the board and pool; the rest need a peripheral or model.
            labels = base if base in options and rng.random() < 0.6 else rng.choice(options)
            jobs.append(
                JobState(
                    id=len(jobs) + 1,
                    name=f"{suite.name}-t{t}",
                    suite_id=suite.id,
                    priority=suite.priority,
                    submitted_at=suite.created_at,
                    labels=labels,
                    pinned_host_id=pin_for(labels),
                )
            )
    return Lab(
        shape=shape,
        hosts=hosts,
        jobs=jobs,
        suites=suites,
        workers=workers,
        worker_of=worker_of,
        label_sets=chosen,
    )


def _split(rng: random.Random, total: int, parts: int) -> list[int]:
    """Split total into parts ≥ 1 of uneven sizes (from a few jobs to several times the mean)."""
    if parts <= 0:
        return []
    weights = [0.25 + rng.expovariate(1.0) for _ in range(parts)]
    scale = (total - parts) / sum(weights)
    sizes = [1 + int(w * scale) for w in weights]
    for i in range(total - sum(sizes)):
        sizes[i % parts] += 1
    return sizes


def main() -> None:
    """Print the summary of a generated lab (its sizes), for a look before benchmarking."""
    parser = argparse.ArgumentParser(description=main.__doc__)
    add_shape_arguments(parser)
    args = parser.parse_args()
    shape = shape_from(args)
    print(json.dumps({"shape": asdict(shape), **generate(shape).describe()}))


if __name__ == "__main__":
    main()
