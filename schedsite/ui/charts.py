"""Chart and bar geometry for the server-rendered SVGs; plain Python, no Django.

Templates only draw what is laid out here (`partials/chart.html`, the stacked bars), so the
layout is tested without a database or a browser, and the pages need no inline styles (CSP).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, tzinfo

from schedsite.ui.durations import axis_duration, human_duration


@dataclass(frozen=True)
class Segment:
    """One coloured piece of a stacked progress bar."""

    key: str
    label: str
    count: int
    pct: float
    start: float = 0  # where it begins, in percent: bars are SVG, no style attributes (CSP)


def stacked_segments(
    counts: Mapping[str, int] | None, order: Sequence[tuple[str, str]]
) -> list[Segment]:
    """Split counts into stacked-bar segments, in `order` ((key, label) pairs), as percentages."""
    counts = counts or {}
    total = sum(counts.values())
    if not total:
        return []
    segments = []
    done = 0
    for key, label in order:
        if counts.get(key):
            start = round(100 * done / total, 2)
            done += counts[key]
            pct = round(100 * done / total, 2) - start
            segments.append(Segment(key=key, label=label, count=counts[key], pct=pct, start=start))
    return segments


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
    tz: tzinfo = UTC,
) -> Chart:
    """Lay out step lines over time (a tick's values hold until the next tick) as SVG paths.

    The time axis is labelled in `tz`; the views pass the timezone the page is shown in.
    """
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
    start, end = times[0].astimezone(tz), times[-1].astimezone(tz)
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
