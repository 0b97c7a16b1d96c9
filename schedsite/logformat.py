"""A JSON log formatter: one object per line, with every `extra=` field of the logging call."""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime
from typing import Any

# Attributes every LogRecord has; anything else on a record came from `extra=`.
_STANDARD = frozenset(
    vars(logging.LogRecord("x", logging.INFO, "x", 0, "x", None, None)).keys()
    | {"message", "asctime", "taskName"}
)


class JsonFormatter(logging.Formatter):
    """Format a record as one line of JSON: time, level, logger, message, then the extras."""

    def format(self, record: logging.LogRecord) -> str:
        data: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, tz=UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
            "process": record.process,
        }
        for key, value in vars(record).items():
            # An extra never overwrites the fixed fields: a shipper relies on their meaning.
            if key not in _STANDARD and not key.startswith("_") and key not in data:
                data[key] = value
        if record.exc_info:
            data["exc"] = self.formatException(record.exc_info)
        if record.stack_info:
            data["stack"] = self.formatStack(record.stack_info)
        # default=str: a datetime or a model instance in `extra` must not lose the log line.
        return json.dumps(data, default=str, ensure_ascii=False)
