"""The ranges of time the statistics cover: ?range=1h|24h|7d|30d, ending now."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from schedsite.errors import InvalidInput

RANGES: dict[str, timedelta] = {
    "1h": timedelta(hours=1),
    "24h": timedelta(hours=24),
    "7d": timedelta(days=7),
    "30d": timedelta(days=30),
}


@dataclass(frozen=True)
class TimeRange:
    """The window [start, end) a statistic covers, by its name ("7d")."""

    name: str
    start: datetime
    end: datetime

    @property
    def hours(self) -> float:
        return (self.end - self.start).total_seconds() / 3600


def time_range(name: str | None, *, now: datetime, default: str) -> TimeRange:
    """The named range ending at `now`; a name not in RANGES is an InvalidInput (a 400)."""
    name = default if name is None else name.strip()
    if name not in RANGES:
        raise InvalidInput(f"range must be one of {', '.join(RANGES)}, not {name!r}", field="range")
    return TimeRange(name=name, start=now - RANGES[name], end=now)
