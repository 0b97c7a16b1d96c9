"""The inventory's rules on plain facts: which hosts may take work, which jobs a host fits.

Written once here, on plain values, so that the planner (which must never import Django), the
snapshot, the API and the pages all ask the same function. This module imports nothing from
Django, and neither does `hosts/__init__.py`. Each rule has an SQL twin in hosts/querysets.py
for counts and filters (`Host.objects.schedulable(now)`, `Host.objects.fitting(...)`), held to
the same table of cases by tests/hosts/test_querysets.py and tests/hosts/test_rules.py.
"""

from __future__ import annotations

from collections.abc import Set
from dataclasses import dataclass
from typing import Protocol

# What keeps a host from taking a lease, the most lasting cause first (host_blocker).
LOCKED = "locked"
PAUSED = "paused"  # its worker is paused
OFFLINE = "offline"  # its worker is offline
NOT_READY = "not_ready"  # its status is not ready (being verified, repaired, retired ...)
LEASED = "leased"  # an active lease or manual reservation holds it
BLOCKERS = (LOCKED, PAUSED, OFFLINE, NOT_READY, LEASED)


class HostFacts(Protocol):
    """What the rule decides on; the planner's HostState is one, `Facts` another."""

    @property
    def ready(self) -> bool: ...  # its status is ready
    @property
    def locked(self) -> bool: ...
    @property
    def leased(self) -> bool: ...  # an active lease or manual reservation holds it
    @property
    def worker_paused(self) -> bool: ...  # False for a host with no worker
    @property
    def worker_offline(self) -> bool: ...  # False for a host with no worker


@dataclass(frozen=True, slots=True)
class Facts:
    """A host's facts read by hand (the API, a page), for `host_blocker`."""

    ready: bool
    locked: bool
    leased: bool
    worker_paused: bool
    worker_offline: bool


def host_blocker(host: HostFacts, *, once_freed: bool = False) -> str | None:
    """Why a host cannot take a lease now, the most lasting cause first; None if it can.

    The "schedulable host" rule itself: a host takes a lease when it is ready, unlocked and
    unleased, and its worker (if it has one) is neither paused nor offline. `once_freed`: as
    if its lease (if any) had ended, whether it could take work then (preemption, the what-if
    plan, a maintenance job waiting for its host).
    """
    if host.locked:
        return LOCKED
    if host.worker_paused:
        return PAUSED
    if host.worker_offline:
        return OFFLINE
    if not host.ready:
        return NOT_READY
    if host.leased and not once_freed:
        return LEASED
    return None


def host_is_schedulable(
    *, ready: bool, locked: bool, leased: bool, worker_paused: bool, worker_offline: bool
) -> bool:
    """Whether a host may take a lease: nothing keeps it from work (`host_blocker`)."""
    facts = Facts(ready, locked, leased, worker_paused, worker_offline)
    return host_blocker(facts) is None


def job_fits_host(
    *, labels: Set[str], pinned_host_id: int | None, host_id: int, host_labels: Set[str]
) -> bool:
    """Whether a job fits a host: the host carries every label the job needs, and is the job's
    pinned host if it has one. Whether the host is free is another rule (`host_blocker`)."""
    return (pinned_host_id is None or pinned_host_id == host_id) and labels <= host_labels


def missing_labels(labels: Set[str], host_labels: Set[str]) -> list[str]:
    """The labels a job needs that a host lacks, sorted: what a refusal names."""
    return sorted(labels - host_labels)
