"""Template helpers for the web UI: badges, ages, priorities, bars and server-rendered charts."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from django import template
from django.utils import timezone
from django.utils.html import format_html
from django.utils.safestring import SafeString
from django.utils.text import capfirst

from jobs.choices import JobStatus, Priority
from jobs.models import decode_labels
from schedsite import roles

register = template.Library()

# Colour of each status badge; the palette itself lives in static/css/schedsite.css.
TONES: dict[str, dict[str, str]] = {
    "host": {
        "ready": "green",
        "needs_repair": "amber",
        "repairing": "blue",
        "repair_failed": "red",
    },
    "job": {
        "queued": "slate",
        "leased": "indigo",
        "running": "blue",
        "passed": "green",
        "failed": "red",
        "aborted": "grey",
        "error": "red",
    },
    "suite": {"queued": "slate", "running": "blue", "completed": "green", "aborted": "grey"},
    "worker": {"online": "green", "offline": "red", "paused": "amber"},
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
        "completed": "green",
        "released": "grey",
        "expired": "amber",
        "timed_out": "amber",
        "reserved": "teal",
        "extended": "teal",
        "paused": "amber",
        "resumed": "green",
        "status": "amber",
        "created": "slate",
        "updated": "slate",
        "deleted": "red",
    },
}

# Wait-reason codes (jobs/scheduler/planner.py) grouped by what the tester should do about them.
WAIT_KINDS: dict[str, tuple[str, str]] = {  # code: (tone, short title)
    "pending_tick": ("slate", "Pending"),
    "no_matching_host": ("red", "No such host"),
    "pinned_host_missing": ("red", "No such host"),
    "pinned_host_lacks_labels": ("red", "Cannot run"),
    "hosts_unavailable": ("amber", "Hosts unavailable"),
    "pinned_host_locked": ("amber", "Host locked"),
    "pinned_host_paused": ("amber", "Worker paused"),
    "pinned_host_offline": ("amber", "Worker offline"),
    "pinned_host_not_ready": ("amber", "Host not ready"),
    "pinned_host_busy": ("blue", "Host busy"),
    "outranked": ("blue", "Outranked"),
    "suite_at_max_duts": ("purple", "At max DUTs"),
}


@register.simple_tag
def badge(kind: str, value: str, label: str = "") -> SafeString:
    """A coloured status badge whose text says the status (colour is never the only cue)."""
    tone = TONES.get(kind, {}).get(str(value), "slate")
    text = label or str(value).replace("_", " ")
    return format_html('<span class="badge tone-{}">{}</span>', tone, text)


@register.simple_tag
def icon(name: str) -> SafeString:
    """An icon from the sprite in partials/icons.html; decorative, so hidden from readers."""
    return format_html(
        '<svg class="icon" aria-hidden="true" focusable="false"><use href="#i-{}"></use></svg>',
        name,
    )


# url name -> the navigation entry it belongs to
SECTIONS = {
    "dashboard": "dashboard",
    "profile": "profile",
    "hosts:host_list": "hosts",
    "hosts:host_detail": "hosts",
    "hosts:worker_list": "workers",
    "hosts:worker_detail": "workers",
    "jobs:queue": "queue",
    "jobs:suite_list": "suites",
    "jobs:suite_detail": "suites",
    "jobs:suite_create": "submit",
    "jobs:lease_list": "leases",
}


@register.simple_tag(takes_context=True)
def nav_link(context: template.Context, url_name: str, label: str) -> SafeString:
    """A navigation link marked aria-current when the page belongs to its section."""
    from django.urls import reverse

    request = context.get("request")
    match = getattr(request, "resolver_match", None)
    current = SECTIONS.get(match.view_name) if match else None
    if current is not None and current == SECTIONS.get(url_name):
        return format_html('<a href="{}" aria-current="page">{}</a>', reverse(url_name), label)
    return format_html('<a href="{}">{}</a>', reverse(url_name), label)


@register.filter
def wait_tone(reason: Mapping | None) -> str:
    if not reason:
        return "slate"
    code = reason.get("code", "")
    if code == "hosts_unavailable":
        details = reason.get("details") or {}
        # Every matching host is merely busy: the job is waiting its turn, nothing is wrong.
        if details.get("matching") and details.get("busy") == details.get("matching"):
            return "blue"
    return WAIT_KINDS.get(code, ("slate", ""))[0]


@register.filter
def wait_title(reason: Mapping | None) -> str:
    if not reason:
        return ""
    code = reason.get("code", "")
    if wait_tone(reason) == "blue" and code == "hosts_unavailable":
        return "Hosts busy"
    return WAIT_KINDS.get(code, ("slate", capfirst(code.replace("_", " "))))[1]


@register.filter
def lab_staff(user: object) -> bool:
    """Whether the user is lab staff (schedsite.roles), for showing staff-only controls."""
    return roles.is_staff(user)  # type: ignore[arg-type]


@register.filter
def priority_name(value: int | None) -> str:
    try:
        return Priority(int(value)).label  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return ""


@register.simple_tag
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


def human_duration(seconds: float) -> str:
    """Say a duration the way people read it: 42s, 5m 03s, 3h 02m, 2d 4h."""
    s = max(0, int(round(seconds)))
    if s < 60:
        return f"{s}s"
    m, s = divmod(s, 60)
    if m < 10:
        return f"{m}m {s:02d}s"
    if m < 60:
        return f"{m}m"
    h, m = divmod(m, 60)
    if h < 24:
        return f"{h}h {m:02d}m"
    d, h = divmod(h, 24)
    return f"{d}d {h}h"


@register.filter
def duration(seconds: float | None) -> str:
    return "—" if seconds is None else human_duration(seconds)


@register.filter
def timedelta_text(value: object) -> str:
    total = getattr(value, "total_seconds", None)
    return human_duration(total()) if total else "—"


def _time_tag(when: datetime, text: str) -> SafeString:
    local = timezone.localtime(when)
    return format_html(
        '<time datetime="{}" title="{}">{}</time>',
        when.isoformat(),
        local.strftime("%Y-%m-%d %H:%M:%S %Z"),
        text,
    )


@register.simple_tag
def ago(when: datetime | None, now: datetime | None = None) -> SafeString | str:
    """'5m 03s ago' in a <time> element carrying the exact time."""
    if when is None:
        return "—"
    now = now or timezone.now()
    return _time_tag(when, f"{human_duration((now - when).total_seconds())} ago")


@register.simple_tag
def until(when: datetime | None, now: datetime | None = None) -> SafeString | str:
    """'in 4m' for a future time, 'overdue 2m' for a past one."""
    if when is None:
        return "—"
    now = now or timezone.now()
    left = (when - now).total_seconds()
    text = f"in {human_duration(left)}" if left >= 0 else f"overdue {human_duration(-left)}"
    return _time_tag(when, text)


@register.filter
def percent(part: float | None, whole: float | None) -> int:
    if not whole:
        return 0
    return max(0, min(100, round(100 * (part or 0) / whole)))


@dataclass(frozen=True)
class Segment:
    """One coloured piece of a stacked progress bar."""

    key: str
    label: str
    count: int
    pct: float
    start: float = 0  # where it begins, in percent: bars are SVG, no style attributes (CSP)


# Finished states first (left), then work in flight, then what still waits.
_COMPLETION_ORDER = [
    (JobStatus.PASSED, "passed"),
    (JobStatus.FAILED, "failed"),
    (JobStatus.ERROR, "error"),
    (JobStatus.ABORTED, "aborted"),
    (JobStatus.RUNNING, "running"),
    (JobStatus.LEASED, "leased"),
    (JobStatus.QUEUED, "queued"),
]


@register.filter
def completion_segments(counts: Mapping[str, int] | None) -> list[Segment]:
    """Split a suite's job counts into stacked-bar segments (percentages of the total)."""
    counts = counts or {}
    total = sum(counts.values())
    if not total:
        return []
    segments = []
    done = 0
    for status, label in _COMPLETION_ORDER:
        if counts.get(status):
            start = round(100 * done / total, 2)
            done += counts[status]
            pct = round(100 * done / total, 2) - start
            segments.append(
                Segment(key=status, label=label, count=counts[status], pct=pct, start=start)
            )
    return segments


@register.filter
def done_count(counts: Mapping[str, int] | None) -> int:
    counts = counts or {}
    return sum(counts.get(s, 0) for s in ("passed", "failed", "error", "aborted"))


@register.filter
def unfinished_count(counts: Mapping[str, int] | None) -> int:
    counts = counts or {}
    return sum(counts.get(s, 0) for s in ("queued", "leased", "running"))


@register.filter
def total_count(counts: Mapping[str, int] | None) -> int:
    return sum((counts or {}).values())


@register.filter
def label_list(key: str) -> list[str]:
    """The labels of a stored label key (',a,b,')."""
    return decode_labels(key or "")


@register.filter
def get_item(mapping: Mapping | None, key: object) -> object:
    return (mapping or {}).get(key)


# --- charts ----------------------------------------------------------------------------------


@dataclass
class Series:
    """One line of a chart."""

    name: str
    values: Sequence[float]
    tone: str = "blue"
    area: bool = False  # shade the area under the line
    dashed: bool = False


@dataclass
class Chart:
    """Everything partials/chart.html needs to draw an SVG line chart."""

    id: str
    title: str
    summary: str = ""
    description: str = ""
    width: int = 380
    height: int = 170
    empty: bool = True
    paths: list[dict[str, str]] = field(default_factory=list)
    grid: list[dict[str, object]] = field(default_factory=list)
    xlabels: list[dict[str, object]] = field(default_factory=list)
    legend: list[dict[str, str]] = field(default_factory=list)
    plot: dict[str, float] = field(default_factory=dict)


COUNT_STEPS = (1, 1.5, 2, 3, 4, 5, 6, 8)
SECOND_STEPS = (1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 14400, 43200, 86400)


def nice_ceiling(value: float, *, seconds: bool = False) -> float:
    """Round a chart's maximum up to a value with readable gridlines (1-2-3-5…, clock units)."""
    if value <= 0:
        return 1
    if seconds:
        for step in SECOND_STEPS:
            if value <= step:
                return step
        return math.ceil(value / 86400) * 86400
    magnitude = 10 ** math.floor(math.log10(value))
    for step in COUNT_STEPS:
        if value <= step * magnitude:
            return round(step * magnitude, 6)
    return 10 * magnitude


def axis_duration(seconds: float) -> str:
    """A gridline label in whole clock units: 45s, 5m, 1h, 1h 30m."""
    s = int(round(seconds))
    h, rest = divmod(s, 3600)
    m, s = divmod(rest, 60)
    parts = [f"{h}h" if h else "", f"{m}m" if m else "", f"{s}s" if s else ""]
    return " ".join(p for p in parts if p) or "0s"


def _fmt_count(value: float) -> str:
    return f"{value:g}" if value < 10000 else f"{value / 1000:g}k"


def line_chart(
    *,
    chart_id: str,
    title: str,
    times: Sequence[datetime],
    series: Sequence[Series],
    seconds: bool = False,
    summary: str = "",
    width: int = 380,
    height: int = 170,
) -> Chart:
    """Lay out step lines over time (a tick's values hold until the next tick) as SVG paths."""
    chart = Chart(id=chart_id, title=title, summary=summary, width=width, height=height)
    chart.legend = [
        {"name": s.name, "tone": s.tone, "dashed": "1" if s.dashed else ""} for s in series
    ]
    if len(times) < 2 or times[-1] <= times[0]:
        chart.description = "Not enough scheduler ticks yet to draw a chart."
        return chart
    chart.empty = False
    left, right, top, bottom = 46.0, 10.0, 10.0, 24.0
    plot_w, plot_h = width - left - right, height - top - bottom
    chart.plot = {
        "left": left,
        "right": left + plot_w,
        "top": top,
        "width": plot_w,
        "height": plot_h,
        "bottom": top + plot_h,
    }
    t0, span = times[0], (times[-1] - times[0]).total_seconds()
    xs = [left + plot_w * (t - t0).total_seconds() / span for t in times]
    peak = max((max(s.values, default=0) for s in series), default=0)
    ymax = nice_ceiling(peak, seconds=seconds)
    fmt: Callable[[float], str] = axis_duration if seconds else _fmt_count

    def y_of(value: float) -> float:
        return top + plot_h - plot_h * (value / ymax)

    for fraction in (0, 0.5, 1):
        value = ymax * fraction
        if not seconds and fraction == 0.5 and value != int(value):
            continue  # no '0.5 jobs' gridline
        chart.grid.append({"y": round(y_of(value), 1), "label": fmt(value)})
    for s in series:
        points = [(x, y_of(v)) for x, v in zip(xs, s.values, strict=True)]
        d = f"M{points[0][0]:.1f},{points[0][1]:.1f}"
        for (_x0, y0), (x1, y1) in zip(points, points[1:], strict=False):
            d += f" H{x1:.1f}" + (f" V{y1:.1f}" if y1 != y0 else "")
        if s.area:
            base = top + plot_h
            chart.paths.append(
                {"d": f"{d} V{base:.1f} H{points[0][0]:.1f} Z", "cls": f"area tone-{s.tone}"}
            )
        chart.paths.append({"d": d, "cls": f"line tone-{s.tone}" + (" dashed" if s.dashed else "")})
    start, end = timezone.localtime(times[0]), timezone.localtime(times[-1])
    chart.xlabels = [
        {"x": left, "label": start.strftime("%H:%M"), "anchor": "start"},
        {
            "x": round(left + plot_w / 2, 1),
            "label": f"{human_duration(span)} span",
            "anchor": "middle",
        },
        {"x": left + plot_w, "label": end.strftime("%H:%M:%S"), "anchor": "end"},
    ]
    say: Callable[[float], str] = human_duration if seconds else _fmt_count
    parts = []
    for s in series:
        values = list(s.values)
        parts.append(
            f"{s.name}: now {say(values[-1])}, peak {say(max(values))}, low {say(min(values))}"
        )
    chart.description = (
        f"{len(times)} ticks from {start:%H:%M} to {end:%H:%M:%S}. " + "; ".join(parts) + "."
    )
    return chart
