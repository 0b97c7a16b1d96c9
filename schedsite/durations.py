"""Durations as people say them (42s, 5m 03s, 3h 02m): plain Python for services and pages."""

from __future__ import annotations

import re


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


_UNITS = {"d": 86400, "h": 3600, "m": 60, "s": 1}
_DURATION = re.compile(r"(?:(\d{1,6})d)?(?:(\d{1,6})h)?(?:(\d{1,6})m)?(?:(\d{1,9})s)?")


def parse_duration(value: object) -> int:
    """A duration as people write it (`2h`, `90m`, `1h30m`, `1d`) or whole seconds (7200,
    "7200"), as whole seconds; ValueError says what is wrong."""
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise ValueError("say 2h, 90m, 1h30m, 1d or a number of seconds")
    text = str(value).strip().lower()
    if text.isascii() and text.isdigit() and len(text) <= 9:
        seconds = int(text)
    else:
        match = _DURATION.fullmatch(text)
        if not text or match is None:
            raise ValueError(f"{str(value)[:40]!r} is not a duration: say 2h, 90m, 1h30m or 1d")
        seconds = sum(int(n) * _UNITS[u] for n, u in zip(match.groups(), "dhms", strict=True) if n)
    if seconds <= 0:
        raise ValueError("must be longer than 0")
    return seconds
