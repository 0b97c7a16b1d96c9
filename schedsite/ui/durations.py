"""Durations the way people read them (42s, 5m 03s, 3h 02m); plain Python, no Django."""

from __future__ import annotations


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


def axis_duration(seconds: float) -> str:
    """A gridline label in whole clock units: 45s, 5m, 1h, 1h 30m."""
    s = int(round(seconds))
    h, rest = divmod(s, 3600)
    m, s = divmod(rest, 60)
    parts = [f"{h}h" if h else "", f"{m}m" if m else "", f"{s}s" if s else ""]
    return " ".join(p for p in parts if p) or "0s"
