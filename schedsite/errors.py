"""Errors that services raise; the API maps them to HTTP status codes, the UI to messages."""

from __future__ import annotations


class ServiceError(Exception):
    """A request that cannot be carried out; nothing was changed."""

    status_code = 400

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.field = field


class Conflict(ServiceError):
    """The object is not in a state that allows the change (HTTP 409)."""

    status_code = 409


class InvalidInput(ServiceError):
    """The input is wrong (HTTP 400); `field` names the offending field when there is one."""

    status_code = 400


class Forbidden(ServiceError):
    """The actor may not do this (HTTP 403)."""

    status_code = 403


class LimitExceeded(ServiceError):
    """Too many requests for now (HTTP 429); `retry_after` says in how many seconds to retry."""

    status_code = 429

    def __init__(self, message: str, *, retry_after: int, field: str | None = None) -> None:
        super().__init__(message, field=field)
        self.retry_after = max(1, retry_after)


class Unavailable(ServiceError):
    """The database could not carry the change out now (HTTP 503); nothing was changed.

    `retry_after` says in how many seconds to try again.
    """

    status_code = 503

    def __init__(self, message: str, *, retry_after: int) -> None:
        super().__init__(message)
        self.retry_after = max(1, retry_after)
