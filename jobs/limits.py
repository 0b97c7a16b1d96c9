"""Submission limits: the bounds of every submitted value, what a user may submit, and the check
every submission passes (docs/security.md#submission-limits)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser

from jobs.choices import priority_name
from jobs.models import Job, SubmitLimit, Suite
from schedsite import roles
from schedsite.errors import InvalidInput, LimitExceeded

RATE_WINDOW = timedelta(seconds=60)


@dataclass(frozen=True)
class Bounds:
    """The smallest and largest value of a field; for text, its length."""

    low: int
    high: int


DAY = 24 * 3600
# The one table of what any submission may hold, whoever sends it: the API, the submit form,
# suite templates, re-run and clone, a lab file and a what-if plan all read it (the form's
# timeout is in minutes). The per-user limits below only ever lower these for testers.
SUBMISSION_LIMITS: dict[str, Bounds] = {
    "name": Bounds(1, 200),  # a suite's or a job's name, characters
    "build": Bounds(0, 200),
    "min_duts": Bounds(0, 100_000),
    "max_duts": Bounds(1, 100_000),
    "max_retries": Bounds(0, 100),
    "timeout": Bounds(1, 30 * DAY),  # seconds
    "estimated_duration": Bounds(1, 30 * DAY),
    "expires_after": Bounds(1, 30 * DAY),
    "labels": Bounds(0, 64),  # labels one job asks for
    "label": Bounds(1, 100),  # characters of one label
    "host": Bounds(1, 255),  # a pinned host's name
    "fanout_name": Bounds(0, 150),
    # A multi-host job (docs/api.md#multi-host-jobs): its roles, one role's name, the hosts one
    # role asks for (count and max), and the hosts of the whole job (the sum of its roles' max).
    "roles": Bounds(0, 8),
    "role_name": Bounds(1, 50),
    "role_count": Bounds(1, 16),
    "job_hosts": Bounds(1, 16),
    "together_by": Bounds(0, 50),  # characters of the label prefix
}


def bounds(name: str) -> Bounds:
    """The table's bounds of one field."""
    return SUBMISSION_LIMITS[name]


@dataclass(frozen=True)
class SubmitLimits:
    """What one user may submit; None is no limit (lab staff)."""

    max_priority: int | None = None
    max_min_duts: int | None = None
    max_queued_jobs: int | None = None
    rate_per_minute: int | None = None


UNLIMITED = SubmitLimits()


def submit_limits_for(user: AbstractBaseUser) -> SubmitLimits:
    """None for staff; else the most generous of the site defaults and the groups' grants."""
    if roles.is_staff(user):
        return UNLIMITED
    values = {
        "max_priority": settings.SUBMIT_MAX_PRIORITY,
        "max_min_duts": settings.SUBMIT_MAX_MIN_DUTS,
        "max_queued_jobs": settings.SUBMIT_MAX_QUEUED_JOBS,
        "rate_per_minute": settings.SUBMIT_RATE_PER_MINUTE,
    }
    for grant in SubmitLimit.objects.filter(group__user=user):
        for name, value in values.items():
            granted = getattr(grant, name)
            if granted is not None and granted > value:
                values[name] = granted
    return SubmitLimits(**values)


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}{'s' * (count != 1)}"


def _priority_name(value: int) -> str:
    name = priority_name(value)
    return f"{value} ({name})" if name else str(value)


def priority_check(priority: int, *, user: AbstractBaseUser | None) -> None:
    """Refuse a priority outside 0–100, or above the user's cap (a tester's: cq, 70), as a
    submission would; `user` None is a system actor, never capped."""
    # jobs.job_specs.check_priority's rule (that module imports this one).
    if isinstance(priority, bool) or not isinstance(priority, int) or not 0 <= priority <= 100:
        raise InvalidInput("priority must be an integer from 0 to 100", field="priority")
    if user is None:
        return
    top = submit_limits_for(user).max_priority
    if top is not None and priority > top:
        raise InvalidInput(
            f"priority {priority} is above your limit: you may submit at most "
            f"{_priority_name(top)}",
            field="priority",
        )


def submission_check(
    *,
    user: AbstractBaseUser,
    priority: int | None,
    job_priorities: Sequence[int],
    min_duts: int = 0,
    new_jobs: int,
    now: datetime,
) -> None:
    """Refuse a submission beyond the user's limits; call it inside the submit transaction."""
    limits = submit_limits_for(user)
    if limits == UNLIMITED:
        return
    top = limits.max_priority
    if top is not None:
        too_high = f"is above your limit: you may submit at most {_priority_name(top)}"
        if priority is not None and priority > top:
            raise InvalidInput(f"priority {priority} {too_high}", field="priority")
        for i, value in enumerate(job_priorities):
            if value > top:
                where = f"jobs[{i}].priority" if priority is not None else "priority"
                raise InvalidInput(f"{where} {value} {too_high}", field=where)
    if limits.max_min_duts is not None and min_duts > limits.max_min_duts:
        raise InvalidInput(
            f"min_duts {min_duts} is above your limit: you may ask for at most "
            f"{limits.max_min_duts}",
            field="min_duts",
        )
    # One submission of a user at a time from here to the commit, so fifty at once cannot all
    # count the same queue and overshoot it. NO KEY UPDATE, so inserts that merely reference the
    # user (a lease they hold, their suites) are not blocked by it.
    list(
        get_user_model()
        .objects.select_for_update(no_key=True)
        .filter(pk=user.pk)
        .values_list("pk", flat=True)
    )
    if limits.rate_per_minute is not None:
        _check_rate(user, limits.rate_per_minute, now=now)
    if limits.max_queued_jobs is not None:
        queued = Job.objects.queued().filter(owner=user).count()
        if queued + new_jobs > limits.max_queued_jobs:
            raise InvalidInput(
                f"you have {_plural(queued, 'queued job')} and may have at most "
                f"{limits.max_queued_jobs}: this submission of {_plural(new_jobs, 'job')} "
                "would exceed it",
                field="jobs",
            )


def _check_rate(user: AbstractBaseUser, rate: int, *, now: datetime) -> None:
    """A submission is a suite or a standalone job; count the user's in the last minute."""
    since = now - RATE_WINDOW
    times = sorted(
        [
            *Suite.objects.filter(owner=user, created_at__gt=since).values_list(
                "created_at", flat=True
            ),
            *Job.objects.filter(owner=user, suite=None, created_at__gt=since).values_list(
                "created_at", flat=True
            ),
        ]
    )
    if len(times) < rate:
        return
    # The one that must age out of the window before one more fits.
    frees_at = times[len(times) - rate] + RATE_WINDOW
    retry_after = int(-(-(frees_at - now).total_seconds() // 1))  # whole seconds, rounded up
    raise LimitExceeded(
        f"you made {_plural(len(times), 'submission')} in the last minute and may make at most "
        f"{rate} per minute: try again in {_plural(max(1, retry_after), 'second')}",
        retry_after=retry_after,
    )
