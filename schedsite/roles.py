"""Who may do what (docs/security.md#roles): staff, testers, runners. The API and UI ask here."""

from __future__ import annotations

import enum
from dataclasses import dataclass

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.db.models import Q

STAFF_GROUP = "lab-staff"
RUNNER_GROUP = "runners"

User = AbstractBaseUser | AnonymousUser


def _groups(user: User) -> set[str]:
    if not user.is_authenticated:
        return set()
    cached = getattr(user, "_schedsite_groups", None)
    if cached is None:
        cached = set(user.groups.values_list("name", flat=True))  # type: ignore[union-attr]
        user._schedsite_groups = cached  # type: ignore[union-attr]
    return cached


def remember_groups(user: User, names: list[str]) -> None:
    """Keep the user's group names, read along with the user, for the checks below."""
    user._schedsite_groups = set(names)  # type: ignore[union-attr]


def is_staff(user: User) -> bool:
    """Lab staff manage workers, hosts, leases and any suite."""
    return bool(user.is_authenticated and (user.is_staff or STAFF_GROUP in _groups(user)))


def staff_q(prefix: str = "") -> Q:
    """`is_staff` as a query on users, or on rows whose `prefix` (e.g. "user__") leads to one.

    The same rule as `is_staff` for a signed-in account (tests/test_roles.py holds the two to
    each other); whether the account is active is the caller's own filter, as it is there.
    """
    return Q(**{f"{prefix}is_staff": True}) | Q(**{f"{prefix}groups__name": STAFF_GROUP})


def is_runner(user: User) -> bool:
    """Runners may call the runner protocol for their own worker's leases."""
    return bool(user.is_authenticated and RUNNER_GROUP in _groups(user))


def can_manage(user: User, owner_id: int | None) -> bool:
    """Staff manage anything; a tester manages what they own."""
    if is_staff(user):
        return True
    return bool(user.is_authenticated and owner_id is not None and owner_id == user.pk)


def runner_may_work(user: User, runner_id: int | None) -> bool:
    """Staff may act for any worker; a runner only for the workers it is the runner of.

    `runner_id` is the worker's own `runner_id`: the caller has the worker at hand, and the
    rule stays free of the apps' models.
    """
    if is_staff(user):
        return True
    return bool(is_runner(user) and runner_id is not None and runner_id == user.pk)


class Who(enum.Enum):
    """Who may take an action (docs/security.md#roles)."""

    OWNER = "its owner, or lab staff"  # the owner of a suite or template; a reservation's holder
    RUNNER = "a runner, or lab staff"  # the lease the runner names is checked by the service
    WORKER_RUNNER = "its worker's runner, or lab staff"
    STAFF = "lab staff"


@dataclass(frozen=True)
class Rule:
    """Who may take one action, and how a refusal names the action ("lock hosts")."""

    who: Who
    doing: str


def _staff(doing: str) -> Rule:
    return Rule(Who.STAFF, doing)


def _owner(doing: str) -> Rule:
    return Rule(Who.OWNER, doing)


# Every action that needs more than a signed-in user, keyed "<resource>.<action>" with the API's
# action names; the API's permissions (schedsite.api_permissions) and the pages' refusals
# (schedsite.ui.htmx) both read it, and tests/security/test_permission_table.py walks it.
PERMISSIONS: dict[str, Rule] = {
    "host.create": _staff("add hosts"),
    "host.import": _staff("import hosts"),
    "host.partial_update": _staff("edit hosts"),
    "host.destroy": _staff("retire hosts"),
    "host.lock": _staff("lock hosts"),
    "host.unlock": _staff("unlock hosts"),
    "host.bulk_lock": _staff("lock or unlock hosts"),
    "host.lock_impact": _staff("preview locking hosts"),
    "host.release": _staff("release leases"),
    "host.repair": _staff("repair hosts"),
    "host.verify": _staff("verify hosts"),
    "worker.create": _staff("add workers"),
    "worker.partial_update": _staff("edit workers"),
    "worker.destroy": _staff("delete workers"),
    "worker.pause": _staff("pause workers"),
    "worker.resume": _staff("resume workers"),
    "worker.pause_impact": _staff("preview pausing workers"),
    "worker.heartbeat": Rule(Who.WORKER_RUNNER, "send a worker's heartbeat"),
    "worker.leases": Rule(Who.WORKER_RUNNER, "read a worker's leases"),
    "healthpolicy.create": _staff("add health policies"),
    "healthpolicy.partial_update": _staff("change health policies"),
    "healthpolicy.destroy": _staff("delete health policies"),
    # The balancer's targets (docs/health.md#pool-targets): staff's alone, reads included.
    "pooltarget.list": _staff("see pool targets"),
    "pooltarget.retrieve": _staff("see pool targets"),
    "pooltarget.create": _staff("add pool targets"),
    "pooltarget.partial_update": _staff("change pool targets"),
    "pooltarget.destroy": _staff("delete pool targets"),
    "pooltarget.preview": _staff("preview the pool balancer"),
    "job.start": Rule(Who.RUNNER, "start jobs"),
    "job.complete": Rule(Who.RUNNER, "complete jobs"),
    "job.partial_update": _owner("change the priority of"),
    "lease.create": _staff("reserve hosts"),
    "lease.release": Rule(Who.WORKER_RUNNER, "release leases"),
    "lease.heartbeat": Rule(Who.WORKER_RUNNER, "send a lease's heartbeat"),
    # A manual reservation: its holder or staff extend or end it (Lease.managed_by).
    "reservation.manage": _owner("extend or end"),
    # A tester's reservation (/api/reservations/): its owner or staff.
    "reservation.extend": _owner("extend"),
    "reservation.end": _owner("end"),
    "suite.abort": _owner("abort"),
    "suite.rerun": _owner("re-run"),
    "suite.clone": _owner("clone"),
    "suite.save_as_template": _owner("save"),
    "template.partial_update": _owner("change"),
    "template.destroy": _owner("delete"),
    "template.dispatch_template": _owner("dispatch"),
    "scheduler.tick": _staff("run the scheduler"),
    "scheduler.scheduler_settings_update": _staff("change the scheduler settings"),
    "notification.deliveries": _staff("see the delivery log"),
}


def may(
    user: User, action: str, *, owner_id: int | None = None, runner_id: int | None = None
) -> bool:
    """Whether the user may take the action: `owner_id` or `runner_id` of the object acted on.

    An action not in PERMISSIONS is open to every signed-in user.
    """
    rule = PERMISSIONS.get(action)
    if rule is None:
        return bool(user.is_authenticated)
    if rule.who is Who.STAFF:
        return is_staff(user)
    if rule.who is Who.OWNER:
        return can_manage(user, owner_id)
    if rule.who is Who.RUNNER:
        return is_staff(user) or is_runner(user)
    return runner_may_work(user, runner_id)
