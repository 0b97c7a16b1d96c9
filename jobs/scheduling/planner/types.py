"""The planner's plain values: hosts, jobs and suites in; assignments and wait reasons out."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum

# A worker's load is the inventory's value: hosts.querysets counts it, the planner reads it.
from hosts.capacity import WorkerLoad as WorkerLoad
from hosts.rules import host_blocker, job_fits_host


@dataclass(frozen=True, slots=True)
class HostState:
    """One host as the tick sees it: labels, build and why (if at all) it cannot take work."""

    id: int
    hostname: str
    labels: frozenset[str]
    current_build: str = ""
    ready: bool = True  # status == ready
    locked: bool = False
    worker_paused: bool = False
    worker_offline: bool = False
    leased: bool = False  # holds an active lease (job or manual reservation)
    lease_priority: int | None = None  # priority of the job holding it; None if free or reserved
    lock_reason: str = ""  # shown in a pinned job's wait reason
    worker: str = ""  # its worker's name; "" for a host with no worker
    # When its last lease ended (None: never leased); `host_choice: spread` takes the oldest.
    last_used: datetime | None = None
    # When the job it runs is expected to end (its lease's start plus the job's expected run
    # time); None if free, reserved by hand or unknown. A multi-host job's expected start
    # is read from these (docs/scheduling.md#holds-and-backfill).
    busy_until: datetime | None = None

    def blocker(self, *, once_freed: bool = False) -> str | None:
        """What keeps it from a lease, by the one rule (hosts.rules.host_blocker); None if
        nothing does. `once_freed`: as if its lease (if any) had ended."""
        return host_blocker(self, once_freed=once_freed)

    @property
    def schedulable(self) -> bool:
        """Whether it may take a lease now (hosts.rules.host_is_schedulable)."""
        return self.blocker() is None

    @property
    def usable_when_freed(self) -> bool:
        """Whether it could take work once its lease ends: schedulable but for that lease."""
        return self.blocker(once_freed=True) is None


@dataclass(frozen=True, slots=True)
class SuiteState:
    """One suite with queued jobs: its ordering keys, quota, cap and hosts already held."""

    id: int
    name: str
    priority: int
    created_at: datetime
    min_duts: int = 0
    max_duts: int | None = None
    held: int = 0  # hosts its jobs hold through active leases right now
    build: str = ""


@dataclass(frozen=True, slots=True)
class RoleNeed:
    """One role of a multi-host job: `count` essential hosts, up to `max` with elastic ones."""

    name: str
    labels: frozenset[str]  # the role's own labels together with the job's
    count: int = 1
    max: int = 1
    # Its hash, made once: a multi-host job's group key holds its roles, and a tick looks such
    # keys up thousands of times (a dataclass's own __hash__ hashes the fields each time).
    _hash: int = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_hash", hash((self.name, self.labels, self.count, self.max)))

    def __hash__(self) -> int:
        return self._hash

    def __reduce__(self) -> tuple[type[RoleNeed], tuple[str, frozenset[str], int, int]]:
        # Made again where it is unpickled: a string's hash differs between processes.
        return (RoleNeed, (self.name, self.labels, self.count, self.max))


@dataclass(frozen=True, slots=True)
class JobState:
    """One queued job: what it needs and where it stands in the order."""

    id: int
    name: str
    suite_id: int | None
    priority: int
    submitted_at: datetime  # the suite's created_at, or the job's own for a standalone job
    labels: frozenset[str] = frozenset()
    pinned_host_id: int | None = None
    # Hosts it failed on before (a retry after an infrastructure failure): placed elsewhere
    # when the matching leaves a choice (docs/health.md#retries-after-an-infrastructure-failure).
    avoid_hosts: frozenset[int] = frozenset()
    # Seconds it is expected to run: its estimated_duration, else the median of recent runs of
    # jobs with its name, else the settings' default (resolved by the snapshot); `size` orders
    # by it. None: unknown, ordered as the policy's default_duration.
    size_s: float | None = None
    owner: int | None = None  # the submitter's account id: fair share orders by its usage
    # A multi-host job's roles, in submission order (docs/scheduling.md#multi-host-jobs); empty
    # for a one-host job. Each role's labels include the job's own `labels`.
    roles: tuple[RoleNeed, ...] = ()
    together_by: str = ""  # a label prefix: every host of the job carries one `<prefix>:<value>`
    # A standalone job's own build (Job.build); a suite job's build is its suite's
    # (SuiteState.build), whatever this says. Its hosts must carry it
    # (docs/scheduling.md#provisioning).
    build: str = ""

    @property
    def multi_host(self) -> bool:
        return bool(self.roles)

    @property
    def hosts_needed(self) -> int:
        """Essential hosts: what it counts toward its suite's min_duts and max_duts."""
        return sum(role.count for role in self.roles) if self.roles else 1

    def fits(self, host: HostState) -> bool:
        """Whether the host carries its labels and is its pinned host, if it has one
        (hosts.rules.job_fits_host); whether the host is free is `host.blocker()`."""
        return job_fits_host(
            labels=self.labels,
            pinned_host_id=self.pinned_host_id,
            host_id=host.id,
            host_labels=host.labels,
        )


ORDERINGS = ("fifo", "size", "dynsize")
HOST_CHOICES = ("affinity", "spread", "pack")
BUILD_CHOICES = ("min-cost", "first-fit", "none")


@dataclass(frozen=True, slots=True)
class Policy:
    """The cluster's scheduler settings, as the planner reads them (docs/scheduling.md#policies).

    The default is the fixed policy the tick always had: FIFO within a priority, no aging,
    hosts chosen by build affinity.
    """

    ordering: str = "fifo"  # within a priority: fifo, size (shortest first), dynsize (aged size)
    aging_minutes: int = 0  # a queued job gains 1 priority per this many minutes waited; 0: off
    aging_cap: int = 20  # the most priority aging adds
    host_choice: str = "affinity"  # affinity (same build, fewer labels), spread (LRU), pack
    default_duration_s: float = 600.0  # the size of a job with no estimate and no history
    preemption: bool = False  # a job may stop a preemptible one preempt_margin levels below it
    preempt_margin: int = 20
    fair_share: bool = False  # within a priority, owners who used fewer host-seconds first
    fair_share_half_life_hours: int = 24
    # Within a priority, jobs a free host already carries the build of go before jobs that
    # would need a reimage, until those have waited this long; 0: off (same-build first).
    same_build_first_minutes: int = 0
    # Planner-internal switches, no scheduler setting: bench/multihost.py turns them off to
    # measure what holds and backfill buy (docs/scheduling.md#holds-and-backfill).
    holds: bool = True  # the highest-ranked waiting multi-host job holds free hosts
    backfill: bool = True  # a lower-ranked job may use a held host if it ends before the start
    # How builds steer which free host each leased job gets (docs/scheduling.md#provisioning):
    # "min-cost" (the fewest provisions), "first-fit" (a host already on the build if one is
    # left, in queue order; Autotest's preference) or "none" (builds ignored). bench/provision.py
    # compares them; the tick always uses min-cost.
    builds: str = "min-cost"


class WaitCode(StrEnum):
    """Why a queued job waits: every code a wait reason may carry, the only place they are
    written. The planner gives most; jobs/selectors.py the three the planner does not see
    (a retry's backoff, a maintenance job, a job newer than the latest tick). The API's
    `wait_reason.code` enum, the UI's badges (jobs/badges.py WAIT_KINDS) and
    docs/scheduling.md#wait-reasons are held to it by tests/jobs/test_wait_codes.py."""

    RETRY_BACKOFF = "retry_backoff"
    MAINTENANCE_WAITING = "maintenance_waiting"
    PINNED_HOST_MISSING = "pinned_host_missing"
    PINNED_HOST_LACKS_LABELS = "pinned_host_lacks_labels"
    NO_MATCHING_HOST = "no_matching_host"
    SUITE_AT_MAX_DUTS = "suite_at_max_duts"
    PINNED_HOST_LOCKED = "pinned_host_locked"
    PINNED_HOST_BUSY = "pinned_host_busy"
    PINNED_HOST_PAUSED = "pinned_host_paused"
    PINNED_HOST_OFFLINE = "pinned_host_offline"
    PINNED_HOST_NOT_READY = "pinned_host_not_ready"
    PINNED_HOST_AT_CAPACITY = "pinned_host_at_capacity"
    HOSTS_UNAVAILABLE = "hosts_unavailable"
    OUTRANKED = "outranked"
    HOLDING_HOSTS = "holding_hosts"
    PENDING_TICK = "pending_tick"


WAIT_CODES = tuple(code.value for code in WaitCode)  # as plain strings: the API's choices


@dataclass(frozen=True, slots=True)
class WaitReason:
    """Why a job is still queued after a tick: a stable code, plain words and the numbers."""

    code: WaitCode
    message: str
    details: Mapping[str, object] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Assignment:
    """One host a job gets. A multi-host job gets one per host: its slots numbered from 0 (the
    first essential host, whose worker runs the job), essential before elastic, by role."""

    job_id: int
    host_id: int
    role: str = ""  # a multi-host job's role; "" for a one-host job
    slot: int = 0


@dataclass(frozen=True, slots=True)
class Plan:
    """What one tick decided."""

    assignments: tuple[Assignment, ...]
    wait_reasons: Mapping[int, WaitReason]  # job id -> reason, for every job left queued
    # class_key(job) -> reason, one entry per class of identical waiting jobs; what a tick at
    # 100,000 queued jobs stores instead of rewriting every job (docs/scheduling.md#wait-reasons).
    class_reasons: Mapping[str, WaitReason] = field(default_factory=dict)
    hosts_free: int = 0  # the schedulable hosts it planned over
    # Free hosts held idle for a multi-host job that cannot start yet: host id -> job id
    # (docs/scheduling.md#holds-and-backfill).
    holds: Mapping[int, int] = field(default_factory=dict)
    # The leased hosts that must be provisioned before their test: host id -> the build to put
    # on it (the job's build, where the host's current_build differs). Keyed by host so that a
    # multi-host job counts each of its hosts; a one-host job's host is its assignment's. How
    # many of the plan's leases would reimage, and to what (docs/scheduling.md#provisioning).
    provisions: Mapping[int, str] = field(default_factory=dict)
