"""The runner's REST client: token auth, JSON, and retries with backoff for transient failures."""

from __future__ import annotations

import copy
import logging
import random
import time
from collections.abc import Callable, Iterator
from typing import Any

import requests

log = logging.getLogger("schedsite.runner")

# Answers worth retrying: the server or a proxy in front of it is overloaded or restarting.
TRANSIENT_STATUSES = frozenset({429, 500, 502, 503, 504})
# The longest Retry-After the runner waits out in one call; a longer one (a lockout) fails the
# call, and the runner's loop comes back to it.
MAX_RETRY_AFTER = 300.0


class ApiError(Exception):
    """The API answered with an error status."""

    def __init__(self, status: int, body: Any, method: str, url: str) -> None:
        detail = body.get("detail", body) if isinstance(body, dict) else body
        super().__init__(f"{method} {url}: HTTP {status}: {detail}")
        self.status = status
        self.body = body


class ApiUnavailable(ApiError):
    """The API could not be reached, or kept failing, through every retry."""


class Api:
    """A small REST client: token auth, JSON, retries with backoff for transient failures."""

    def __init__(
        self,
        base_url: str,
        token: str,
        *,
        timeout: float = 15.0,
        retries: int = 5,
        backoff: float = 0.5,
        max_backoff: float = 10.0,
        session: requests.Session | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.base_url = base_url.rstrip("/") + "/"
        self.timeout = timeout
        self.retries = retries
        self.backoff = backoff
        self.max_backoff = max_backoff
        self.session = session or requests.Session()
        self.session.headers.update(
            {"Authorization": f"Token {token}", "Accept": "application/json"}
        )
        self.sleep = sleep
        # GET answers that came with an ETag, by URL: the next GET of the URL sends it in
        # If-None-Match, and a 304 answers with the remembered payload (the worker's lease
        # list, polled every few seconds, costs the server a fingerprint while unchanged).
        self.validated: dict[str, tuple[str, Any]] = {}

    def url(self, path: str) -> str:
        return (
            path if path.startswith(("http://", "https://")) else self.base_url + path.lstrip("/")
        )

    def call(self, method: str, path: str, body: dict | None = None) -> Any:
        """Send one request; retry connection errors and 429/5xx; raise ApiError on a 4xx."""
        url = self.url(path)
        remembered = self.validated.get(url) if method == "GET" else None
        # Only a conditional GET carries headers of its own (the session's are the rest).
        extra = {"headers": {"If-None-Match": remembered[0]}} if remembered else {}
        error: ApiError | None = None
        for attempt in range(self.retries + 1):
            wait: float | None = None
            try:
                response = self.session.request(
                    method, url, json=body, timeout=self.timeout, **extra
                )
            except requests.RequestException as exc:
                error = ApiUnavailable(0, str(exc), method, url)
            else:
                if response.status_code == 304 and remembered:
                    return copy.deepcopy(remembered[1])
                payload = _json(response)
                if response.status_code < 400:
                    if method == "GET":
                        self._remember(url, response, payload)
                    return payload
                if response.status_code not in TRANSIENT_STATUSES:
                    raise ApiError(response.status_code, payload, method, url)
                error = ApiUnavailable(response.status_code, payload, method, url)
                wait = _retry_after(response)
                if wait is not None and wait > MAX_RETRY_AFTER:
                    raise error
            if attempt < self.retries:
                delay = min(self.backoff * 2**attempt, self.max_backoff)
                delay *= random.uniform(0.5, 1.0)  # jitter: runners do not stampede
                if wait is not None:
                    # A throttled runner that came back sooner would only be refused again.
                    delay = max(delay, wait * random.uniform(1.0, 1.1))
                log.warning("%s; retry %d/%d in %.1f s", error, attempt + 1, self.retries, delay)
                self.sleep(delay)
        assert error is not None
        raise error

    def _remember(self, url: str, response: requests.Response, payload: Any) -> None:
        headers = getattr(response, "headers", None) or {}
        etag = headers.get("ETag")
        if etag:
            self.validated[url] = (etag, copy.deepcopy(payload))
        else:
            self.validated.pop(url, None)

    def pages(self, path: str) -> Iterator[dict]:
        """Yield every result of a paginated list, following `next` links."""
        url: str | None = path
        while url:
            page = self.call("GET", url)
            yield from page["results"]
            url = page.get("next")


def _retry_after(response: requests.Response) -> float | None:
    """Seconds the server asked us to wait (Retry-After in seconds), if it said."""
    headers = getattr(response, "headers", None) or {}
    value = headers.get("Retry-After")
    try:
        return max(float(value), 0.0) if value is not None else None
    except ValueError:
        return None  # an HTTP date: DRF never sends one; fall back to the backoff


def _json(response: requests.Response) -> Any:
    if not response.content:
        return None
    try:
        return response.json()
    except ValueError:
        return response.text[:500]
