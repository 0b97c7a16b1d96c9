"""Model fields the apps declare alike."""

from __future__ import annotations

import orjson
from django.conf import settings
from django.db import models


def account_link(related_name: str) -> models.ForeignKey:
    """An optional link to a user account that outlives it: emptied when the account is deleted.

    Deleting an account must not delete the suites, jobs, leases, holds and deliveries that
    name it: they are the lab's history.
    """
    return models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name=related_name,
    )


class JSONText(models.TextField):
    """A JSON value stored as its text: written whole and read whole by key, never queried
    inside. PostgreSQL stores `jsonb` parsed, so every write parses it; a table rewritten by
    the hundreds of rows a tick (the wait reasons) writes text faster
    (docs/performance.md#the-wait-reason-table). Python sees the decoded value, as with
    JSONField."""

    def from_db_value(self, value, expression, connection):  # noqa: ANN001 - Django's signature
        return None if value is None else orjson.loads(value)

    def to_python(self, value):  # noqa: ANN001
        return orjson.loads(value) if isinstance(value, str) else value

    def get_prep_value(self, value):  # noqa: ANN001
        return None if value is None else dumps_compact(value)


def dumps_compact(value: object) -> str:
    """JSON text with no spaces and non-ASCII characters as they are: the text
    `json.dumps(value, separators=(",", ":"), ensure_ascii=False)` writes for the values stored
    here (strings, numbers, lists, dicts, keys that are strings or integers), by orjson. A tick
    after a hundred changes encodes about a thousand wait reasons, half a megabyte: 2 ms
    instead of 9–11 with the standard library's C encoder (docs/performance.md).

    Where the two differ it is on values the standard library writes as invalid JSON or
    refuses: NaN and infinities become null, a datetime its ISO text."""
    return orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS).decode()
