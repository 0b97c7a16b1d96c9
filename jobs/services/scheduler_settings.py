"""Staff change the cluster's scheduler settings: checked, compare-and-set, audited."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta

from django.db import transaction
from django.utils import timezone

from hosts.audit import Actor, actor_name
from hosts.services import reason_clean
from jobs.choices import HostChoice, SchedulerOrdering
from jobs.models import SchedulerSettings, SchedulerSettingsChange
from jobs.scheduling.triggers import request_tick
from schedsite.errors import Conflict, InvalidInput

SETTINGS_FIELDS = (
    "ordering",
    "aging_minutes",
    "aging_cap",
    "host_choice",
    "default_duration",
    "preemption",
    "preempt_margin",
    "fair_share",
    "fair_share_half_life_hours",
    "same_build_first_minutes",
)
PREEMPT_MARGIN_MAX = 100
HALF_LIFE_HOURS_MAX = 8760  # a year
SAME_BUILD_FIRST_MAX = 10080  # a week of minutes
AGING_CAP_MAX = 100  # the priority range: aging can at most lift a job from 0 to the top
AGING_MINUTES_MAX = 2**31 - 1  # the column's range
# An estimate for a job no one estimated: a week is already far past any test job.
DEFAULT_DURATION_MAX = timedelta(days=7)


def _whole(field: str, value: object, *, least: int, most: int) -> int:
    # bool is an int to Python, but `true` is no number of minutes.
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if not isinstance(value, int) or isinstance(value, bool) or not least <= value <= most:
        raise InvalidInput(f"{field}: a whole number from {least} to {most}", field=field)
    return value


def _flag(field: str, value: object) -> bool:
    if not isinstance(value, bool):
        raise InvalidInput(f"{field}: true or false", field=field)
    return value


def _choice(field: str, value: object, allowed: list[str]) -> str:
    if value not in allowed:
        raise InvalidInput(f"{field}: one of {', '.join(allowed)}", field=field)
    return str(value)


def _duration(value: object) -> timedelta:
    """A timedelta, or a number of seconds, as a positive duration of at most a week."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        seconds = float(value)
        value = timedelta(seconds=seconds) if 0 < seconds < 1e9 else None
    most = int(DEFAULT_DURATION_MAX.total_seconds())
    if not isinstance(value, timedelta) or not timedelta(0) < value <= DEFAULT_DURATION_MAX:
        raise InvalidInput(
            f"default_duration: more than 0 and at most {most} seconds", field="default_duration"
        )
    return value


def scheduler_settings_clean(fields: Mapping[str, object]) -> dict[str, object]:
    """The model's values for the given settings; InvalidInput names the first bad one.

    The one place the settings' rules live: the API, the web UI and the admin all ask it.
    """
    unknown = sorted(set(fields) - set(SETTINGS_FIELDS))
    if unknown:
        raise InvalidInput(
            f"unknown setting {unknown[0]}; the settings are {', '.join(SETTINGS_FIELDS)}",
            field=unknown[0],
        )
    out: dict[str, object] = {}
    if "ordering" in fields:
        out["ordering"] = _choice("ordering", fields["ordering"], SchedulerOrdering.values)
    if "aging_minutes" in fields:
        value = fields["aging_minutes"]
        out["aging_minutes"] = _whole("aging_minutes", value, least=0, most=AGING_MINUTES_MAX)
    if "aging_cap" in fields:
        out["aging_cap"] = _whole("aging_cap", fields["aging_cap"], least=0, most=AGING_CAP_MAX)
    if "host_choice" in fields:
        out["host_choice"] = _choice("host_choice", fields["host_choice"], HostChoice.values)
    if "default_duration" in fields:
        out["default_duration"] = _duration(fields["default_duration"])
    for flag in ("preemption", "fair_share"):
        if flag in fields:
            out[flag] = _flag(flag, fields[flag])
    if "preempt_margin" in fields:
        value = fields["preempt_margin"]
        out["preempt_margin"] = _whole("preempt_margin", value, least=1, most=PREEMPT_MARGIN_MAX)
    if "fair_share_half_life_hours" in fields:
        value = fields["fair_share_half_life_hours"]
        out["fair_share_half_life_hours"] = _whole(
            "fair_share_half_life_hours", value, least=1, most=HALF_LIFE_HOURS_MAX
        )
    if "same_build_first_minutes" in fields:
        value = fields["same_build_first_minutes"]
        out["same_build_first_minutes"] = _whole(
            "same_build_first_minutes", value, least=0, most=SAME_BUILD_FIRST_MAX
        )
    return out


def settings_value(field: str, value: object) -> object:
    """A setting's value as the API and the audit trail show it: a duration in seconds."""
    if isinstance(value, timedelta):
        seconds = value.total_seconds()
        return int(seconds) if seconds.is_integer() else seconds
    return value


@transaction.atomic
def update_scheduler_settings(
    actor: Actor, *, expected_version: int | None = None, reason: str = "", **fields: object
) -> SchedulerSettings:
    """Change the scheduler settings, unless they changed since `expected_version` (if given).

    Nothing is written when no value differs: no new version, no audit row, no tick.
    """
    values = scheduler_settings_clean(fields)
    reason = reason_clean(reason, what="change the scheduler settings", required=False)
    SchedulerSettings.load()  # the row exists before it can be locked
    current = SchedulerSettings.objects.select_for_update().get(pk=1)
    if expected_version is not None and expected_version != current.version:
        raise Conflict(
            f"the scheduler settings were changed by someone else (version {expected_version} "
            f"was read, they are now at version {current.version}); reload them and try again",
            field="version",
        )
    changes = {
        field: [settings_value(field, getattr(current, field)), settings_value(field, value)]
        for field, value in values.items()
        if getattr(current, field) != value
    }
    if not changes:
        return current
    now = timezone.now()
    for field in changes:
        setattr(current, field, values[field])
    current.version += 1
    current.updated_at = now
    current.updated_by = actor_name(actor)
    current.save()
    SchedulerSettingsChange.objects.create(
        at=now, actor=current.updated_by, changes=changes, reason=reason, version=current.version
    )
    request_tick("scheduler settings changed")
    return current
