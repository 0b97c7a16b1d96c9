"""The periodic django-q2 schedules the apps install after migrating."""

from __future__ import annotations


def install_every(name: str, func: str, minutes: int, *, args: str | None = None) -> None:
    """Install (or update) a schedule that runs `func` every `minutes`, forever; idempotent
    across migrations and restarts."""
    from django_q.models import Schedule  # noqa: PLC0415 — django-q's models need the registry

    defaults: dict[str, object] = {
        "func": func,
        "schedule_type": Schedule.MINUTES,
        "minutes": minutes,
        "repeats": -1,
    }
    if args is not None:
        defaults["args"] = args
    Schedule.objects.update_or_create(name=name, defaults=defaults)
