"""The lab's history as series over a range, read from the rollups (docs/api.md#statistics).

1h and 24h read minute rows, 7d and 30d hour rows: at most 1,440 rows of one label.
"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError

from hosts.validators import label_validator
from schedsite.errors import InvalidInput
from stats.models import LabHour, LabMinute, LabRollup
from stats.ranges import TimeRange

PREFIXES = ("pool:", "board:")
LAB = ""  # the label of the lab-wide rows


def tracked(label: str) -> bool:
    """Whether a label has rows of its own: pool: and board: labels."""
    return label.startswith(PREFIXES)


# The ranges read from minute rows; the others from hour rows.
MINUTE_RANGES = ("1h", "24h")
FIELDS = (
    "hosts",
    "hosts_total",
    "leased",
    "held",
    "queued",
    "queued_total",
    "wait_p50_s",
    "wait_p95_s",
    "finished",
    "provisions",
    "provisions_failed",
    "repairs",
    "repairs_failed",
    "samples",
)


def history_label(value: str | None) -> str:
    """The label a history is asked for: "" (the lab) or a pool: or board: label; any other
    value is an InvalidInput (a 400)."""
    label = (value or "").strip()
    if label == LAB:
        return LAB
    try:
        label_validator(label)
    except ValidationError:
        raise InvalidInput(f"{label!r} is not a label", field="label") from None
    if not tracked(label):
        raise InvalidInput(
            f"history is kept for pool: and board: labels only, not {label!r}", field="label"
        )
    return label


def resolution(window: TimeRange) -> str:
    return "minute" if window.name in MINUTE_RANGES else "hour"


def rollup_model(window: TimeRange) -> type[LabRollup]:
    return LabMinute if resolution(window) == "minute" else LabHour


def lab_series(*, window: TimeRange, label: str) -> list[dict[str, Any]]:
    """One point per bucket in the window, oldest first: `t` (the bucket's start) and FIELDS.

    A minute the rollup did not run for (no scheduler cluster up) has no point.
    """
    rows = (
        rollup_model(window)
        .objects.filter(label=label, bucket__gte=window.start, bucket__lt=window.end)
        .order_by("bucket")
        .values("bucket", *FIELDS)
    )
    return [{"t": row.pop("bucket"), **row} for row in rows]
