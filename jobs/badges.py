"""How a job looks on a page: its wait reason's badge and its priority chip.

Plain functions, for the rows made in Python (jobs/rows.py) and, registered as tags, for the
templates (jobs/templatetags/schedsite_ui.py): a row builder imports no template tag library.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple

from django.utils.html import format_html
from django.utils.safestring import SafeString
from django.utils.text import capfirst

from jobs import choices
from jobs.choices import Priority
from jobs.scheduling.planner import WaitCode


class WaitKind(NamedTuple):
    """How a wait reason looks on the queue page."""

    tone: str
    title: str  # short: the badge's text


# Every wait-reason code (planner.WaitCode) grouped by what the tester should do about it: red,
# change the job; amber, the lab must change; blue, wait its turn; purple, its own suite's cap;
# slate, only time. tests/jobs/test_wait_codes.py fails on a code without its badge.
WAIT_KINDS: dict[WaitCode, WaitKind] = {
    WaitCode.PENDING_TICK: WaitKind("slate", "Pending"),
    WaitCode.RETRY_BACKOFF: WaitKind("slate", "Retry backoff"),
    WaitCode.MAINTENANCE_WAITING: WaitKind("slate", "Maintenance"),
    WaitCode.NO_MATCHING_HOST: WaitKind("red", "No such host"),
    WaitCode.PINNED_HOST_MISSING: WaitKind("red", "No such host"),
    WaitCode.PINNED_HOST_LACKS_LABELS: WaitKind("red", "Cannot run"),
    WaitCode.HOSTS_UNAVAILABLE: WaitKind("amber", "Hosts unavailable"),
    WaitCode.PINNED_HOST_LOCKED: WaitKind("amber", "Host locked"),
    WaitCode.PINNED_HOST_PAUSED: WaitKind("amber", "Worker paused"),
    WaitCode.PINNED_HOST_OFFLINE: WaitKind("amber", "Worker offline"),
    WaitCode.PINNED_HOST_NOT_READY: WaitKind("amber", "Host not ready"),
    WaitCode.PINNED_HOST_BUSY: WaitKind("blue", "Host busy"),
    WaitCode.PINNED_HOST_AT_CAPACITY: WaitKind("blue", "Worker full"),
    WaitCode.OUTRANKED: WaitKind("blue", "Outranked"),
    WaitCode.HOLDING_HOSTS: WaitKind("blue", "Holding hosts"),
    WaitCode.SUITE_AT_MAX_DUTS: WaitKind("purple", "At max DUTs"),
}


def wait_tone(reason: Mapping | None) -> str:
    if not reason:
        return "slate"
    code = reason.get("code", "")
    if code == WaitCode.HOSTS_UNAVAILABLE:
        details = reason.get("details") or {}
        # Every matching host is merely busy: the job is waiting its turn, nothing is wrong.
        if details.get("matching") and details.get("busy") == details.get("matching"):
            return "blue"
    return WAIT_KINDS[code].tone if code in WAIT_KINDS else "slate"


def wait_title(reason: Mapping | None) -> str:
    if not reason:
        return ""
    code = reason.get("code", "")
    if wait_tone(reason) == "blue" and code == WaitCode.HOSTS_UNAVAILABLE:
        return "Hosts busy"
    return WAIT_KINDS[code].title if code in WAIT_KINDS else capfirst(code.replace("_", " "))


def priority_name(value: int | None) -> str:
    try:
        return choices.priority_name(int(value))  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return ""


def priority(value: int) -> SafeString:
    """The priority as its named level and number, e.g. 'cq 70'."""
    name = priority_name(value)
    tier = "high" if value >= Priority.CQ else "mid" if value >= Priority.BUILD else "low"
    return format_html(
        '<span class="prio prio-{}" title="priority {}">{}{}</span>',
        tier,
        value,
        f"{name} " if name else "",
        value,
    )
