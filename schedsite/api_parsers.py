"""The API's JSON parser: DRF's, with a nesting limit, so a deeply nested body is a 400."""

from __future__ import annotations

from typing import Any

from rest_framework import parsers
from rest_framework.exceptions import ParseError

# No request body of the API nests deeper than a handful of levels (a suite's jobs' labels are
# four); the limit stops a body built to exhaust the stack of whatever walks it next.
MAX_JSON_DEPTH = 32
TOO_DEEP = f"JSON nested too deeply (at most {MAX_JSON_DEPTH} levels)."


def nested_deeper_than(data: Any, limit: int) -> bool:
    """Whether lists and objects in data nest more than limit levels (iteratively: no stack)."""
    pending = [(data, 1)]
    while pending:
        value, depth = pending.pop()
        if isinstance(value, dict):
            children = value.values()
        elif isinstance(value, list):
            children = value
        else:
            continue
        if depth > limit:
            return True
        # Only lists and objects go on: a runner's heartbeat names hundreds of plain ids.
        pending.extend((child, depth + 1) for child in children if isinstance(child, dict | list))
    return False


class JSONParser(parsers.JSONParser):
    """DRF's JSONParser; a body nested past MAX_JSON_DEPTH is a 400 "JSON nested too deeply"."""

    def parse(
        self, stream: Any, media_type: str | None = None, parser_context: dict | None = None
    ) -> Any:
        try:
            data = super().parse(stream, media_type, parser_context)
        except RecursionError:
            # The json module recurses once per level: a body of 100,000 "[" ends here.
            raise ParseError(TOO_DEEP) from None
        if nested_deeper_than(data, MAX_JSON_DEPTH):
            raise ParseError(TOO_DEEP)
        return data
