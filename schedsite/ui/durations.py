"""Durations on pages: chart gridlines here; human_duration lives in schedsite.durations."""

from __future__ import annotations

from schedsite.durations import human_duration

__all__ = ["axis_duration", "human_duration"]


def axis_duration(seconds: float) -> str:
    """A gridline label in whole clock units: 45s, 5m, 1h, 1h 30m."""
    s = int(round(seconds))
    h, rest = divmod(s, 3600)
    m, s = divmod(rest, 60)
    parts = [f"{h}h" if h else "", f"{m}m" if m else "", f"{s}s" if s else ""]
    return " ".join(p for p in parts if p) or "0s"
