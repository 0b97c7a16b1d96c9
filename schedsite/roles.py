"""Who may do what (docs/security.md#roles): staff, testers, runners. The API and UI ask here."""

from __future__ import annotations

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
