"""Reads for the host health card and the policies page: which policy applies, when it is due.

What needs the jobs a host ran (the next check, its maintenance history) is in
jobs/host_selectors.py.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db.models import Count, Q

from hosts.choices import HostStatus
from hosts.models import HealthPolicy, Host
from schedsite.durations import human_duration


def with_label_names(hosts: list[Host]) -> list[Host]:
    """Set each listed host's label names (Host.label_names) from one query of name pairs.

    What prefetching the labels gives, without building a Label for each of a page's 200-odd
    labels: a third of the time of reading a page of 50 hosts.
    """
    names: dict[int, list[str]] = {host.pk: [] for host in hosts}
    pairs = Host.labels.through.objects.filter(host_id__in=names)
    for host_id, name in pairs.values_list("host_id", "label__name"):
        names[host_id].append(name)
    for host in hosts:
        host.listed_label_names = sorted(names[host.pk])
    return hosts


# When a host that is not ready is checked next, whatever its policy says (docs/health.md).
NOT_BY_POLICY = {
    HostStatus.NEEDS_VERIFY: "due now: waiting for its verify job",
    HostStatus.VERIFYING: "being verified now",
    HostStatus.NEEDS_REPAIR: "after its repair (a passed repair counts as verified)",
    HostStatus.REPAIRING: "after its repair (a passed repair counts as verified)",
    HostStatus.REPAIR_FAILED: "after its repair: the automatic one, or staff press Repair now",
    HostStatus.RETIRED: "never: the host is retired",
}
NO_POLICY = "no policy: never verified automatically"


@dataclass(frozen=True)
class NextCheck:
    """When a host is verified next, and the policy that says so (None: no policy applies)."""

    text: str
    due: bool = False
    policy: HealthPolicy | None = None


def policy_check(
    policy: HealthPolicy, *, last_verified_at: datetime | None, runs_since: int, now: datetime
) -> NextCheck:
    """When one policy makes a ready host due (the rule of jobs/scheduling/maintenance.py)."""
    if last_verified_at is None:
        return NextCheck("due now: never verified", True, policy)
    parts = []
    if policy.every_jobs:
        left = policy.every_jobs - runs_since
        if left <= 0:
            return NextCheck(f"due now: {runs_since} jobs since its last verify", True, policy)
        parts.append(f"after {left} more job{'s' if left != 1 else ''}")
    if policy.every_hours:
        seconds = (last_verified_at + timedelta(hours=policy.every_hours) - now).total_seconds()
        if seconds <= 0:
            return NextCheck(
                f"due now: last verified over {policy.every_hours} h ago", True, policy
            )
        parts.append(f"in {human_duration(seconds)}")
    if not parts:
        return NextCheck("not again: the policy sets no period", False, policy)
    return NextCheck(
        " or ".join(parts) + (", whichever comes first" if len(parts) > 1 else ""), False, policy
    )


def policies_applying(
    labels: Iterable[str], policies: Iterable[HealthPolicy]
) -> list[HealthPolicy]:
    """The enabled policies whose every label the host carries, by name."""
    carried = set(labels)
    return [p for p in policies if p.enabled and set(p.labels) <= carried]


def policies_with_host_counts() -> list[HealthPolicy]:
    """Every policy by name, each with `n_hosts`: the hosts not retired that it selects."""
    policies = list(HealthPolicy.objects.order_by("name"))
    if not policies:
        return policies
    # One aggregate, one filtered count per policy: the page makes two queries however many.
    counts = Host.objects.exclude(status=HostStatus.RETIRED).aggregate(
        **{
            f"p{policy.pk}": Count(
                "pk", filter=Q(pk__in=Host.objects.carrying(policy.labels).values("pk"))
            )
            for policy in policies
        }
    )
    for policy in policies:
        policy.n_hosts = counts[f"p{policy.pk}"]
    return policies
