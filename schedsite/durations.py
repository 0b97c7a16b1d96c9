"""Durations as people say them (42s, 5m 03s, 3h 02m): plain Python for services and pages."""

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
