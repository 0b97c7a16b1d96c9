"""The small pieces of HTML every page and table row shares: status badges, icons, times.

Plain functions, so that the rows made in Python (jobs/rows.py, jobs/host_rows.py) call them
without going through a template tag library; the `schedsite_ui` tags expose them to templates.
"""

from __future__ import annotations

from datetime import datetime

from django.utils import timezone
from django.utils.html import format_html
from django.utils.safestring import SafeString

from schedsite.ui.durations import human_duration

# Colour of each status badge; the palette itself lives in static/css/schedsite.css.
TONES: dict[str, dict[str, str]] = {
    "host": {
        "ready": "green",
        "needs_verify": "teal",
        "verifying": "indigo",
        "needs_repair": "amber",
        "repairing": "blue",
        "repair_failed": "red",
        "retired": "grey",
    },
    "job": {
        "queued": "slate",
        "leased": "indigo",
        "running": "blue",
        "passed": "green",
        "failed": "red",
        "aborted": "grey",
        "error": "red",
        "expired": "amber",
        "skipped": "grey",
    },
    "suite": {"queued": "slate", "running": "blue", "completed": "green", "aborted": "grey"},
    "run": {"created": "green", "skipped": "amber", "error": "red"},
    "worker": {"online": "green", "offline": "red", "paused": "amber"},
    "delivery": {"pending": "amber", "sent": "green", "failed": "red"},
    "lease": {
        "active": "blue",
        "completed": "green",
        "aborted": "grey",
        "expired": "amber",
        "released": "grey",
        "timeout": "amber",
    },
    "event": {
        "locked": "purple",
        "unlocked": "green",
        "leased": "indigo",
        "started": "blue",
        # Neutral: a completed job may have failed. Where its result is known the page shows
        # that instead (jobs.views_hosts.event_outcomes).
        "completed": "slate",
        "released": "grey",
        "expired": "amber",
        "timed_out": "amber",
        "reserved": "teal",
        "extended": "teal",
        "paused": "amber",
        "resumed": "green",
        "capacity": "slate",
        "status": "amber",
        "created": "slate",
        "updated": "slate",
        "deleted": "red",
        # A failed provisioning shows as "Provisioning failed" in the job's red
        # (hosts.views_timeline.provision_outcomes).
        "provisioned": "green",
    },
}


def badge(kind: str, value: str, label: str = "") -> SafeString:
    """A coloured status badge whose text says the status (colour is never the only cue)."""
    tone = TONES.get(kind, {}).get(str(value), "slate")
    text = label or str(value).replace("_", " ")
    return format_html('<span class="badge tone-{}">{}</span>', tone, text)


def icon(name: str) -> SafeString:
    """An icon from the sprite in partials/icons.html; decorative, so hidden from readers."""
    return format_html(
        '<svg class="icon" aria-hidden="true" focusable="false"><use href="#i-{}"></use></svg>',
        name,
    )


# url name -> the navigation entry it belongs to
def _time_tag(when: datetime, text: str) -> SafeString:
    local = timezone.localtime(when)
    return format_html(
        '<time datetime="{}" title="{}">{}</time>',
        when.isoformat(),
        local.strftime("%Y-%m-%d %H:%M:%S %Z"),
        text,
    )


def ago(when: datetime | None, now: datetime | None = None) -> SafeString | str:
    """'5m 03s ago' in a <time> element carrying the exact time."""
    if when is None:
        return "—"
    now = now or timezone.now()
    return _time_tag(when, f"{human_duration((now - when).total_seconds())} ago")


def until(when: datetime | None, now: datetime | None = None) -> SafeString | str:
    """'in 4m' for a future time, 'overdue 2m' for a past one."""
    if when is None:
        return "—"
    now = now or timezone.now()
    left = (when - now).total_seconds()
    text = f"in {human_duration(left)}" if left >= 0 else f"overdue {human_duration(-left)}"
    return _time_tag(when, text)
