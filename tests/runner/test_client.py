"""The runner's REST client: retries, giving up, client errors, pagination."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest
import requests

from runner.client import Api, ApiError, ApiUnavailable


@dataclass
class FakeResponse:
    status_code: int
    body: Any = None
    headers: dict = field(default_factory=dict)

    @property
    def content(self) -> bytes:
        return b"" if self.body is None else b"x"

    def json(self) -> Any:
        return self.body


@dataclass
class FakeSession:
    """Answers requests from a script: a list of responses (or exceptions) per call."""

    script: list[Any]
    calls: list[tuple[str, str, Any]] = field(default_factory=list)
    headers: dict = field(default_factory=dict)
    sent: list[dict] = field(default_factory=list)  # each call's own headers

    def request(
        self, method: str, url: str, json: Any = None, timeout: float = 0, headers: Any = None
    ) -> Any:
        self.calls.append((method, url, json))
        self.sent.append(headers or {})
        answer = self.script.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer


def api(*script: Any, retries: int = 3) -> Api:
    return Api(
        "http://lab/api",
        "t0k",
        session=FakeSession(list(script)),
        retries=retries,
        sleep=lambda s: None,
    )


def test_transient_failures_are_retried_until_the_call_succeeds():
    client = api(
        requests.ConnectionError("refused"),
        FakeResponse(503, {"detail": "busy"}),
        FakeResponse(200, {"ok": True}),
    )
    assert client.call("POST", "workers/w1/heartbeat/") == {"ok": True}
    assert [c[1] for c in client.session.calls] == ["http://lab/api/workers/w1/heartbeat/"] * 3
    assert client.session.headers["Authorization"] == "Token t0k"


def test_the_client_gives_up_after_its_retries_with_api_unavailable():
    client = api(*[FakeResponse(502)] * 3, retries=2)
    with pytest.raises(ApiUnavailable) as info:
        client.call("GET", "jobs/")
    assert info.value.status == 502 and len(client.session.calls) == 3


def test_a_client_error_is_not_retried():
    client = api(FakeResponse(409, {"detail": "lease 3 is no longer active"}))
    with pytest.raises(ApiError) as info:
        client.call("POST", "leases/3/heartbeat/")
    assert info.value.status == 409 and "no longer active" in str(info.value)
    assert len(client.session.calls) == 1


def test_pages_follows_next_links():
    client = api(
        FakeResponse(200, {"results": [1, 2], "next": "http://lab/api/x/?page=2"}),
        FakeResponse(200, {"results": [3], "next": None}),
    )
    assert list(client.pages("x/")) == [1, 2, 3]
    assert client.session.calls[1][1] == "http://lab/api/x/?page=2"


def test_a_throttled_call_waits_at_least_as_long_as_the_server_asks():
    slept: list[float] = []
    client = Api(
        "http://lab/api",
        "t0k",
        session=FakeSession(
            [FakeResponse(429, {"detail": "slow down"}, {"Retry-After": "7"}), FakeResponse(200)]
        ),
        sleep=slept.append,
    )
    client.call("POST", "workers/w1/heartbeat/")
    assert len(slept) == 1 and 7 <= slept[0] <= 7.7


def test_a_retry_after_longer_than_the_runner_waits_fails_the_call_at_once():
    client = api(FakeResponse(429, {"detail": "locked out"}, {"Retry-After": "900"}))
    with pytest.raises(ApiUnavailable) as info:
        client.call("POST", "token/")
    assert info.value.status == 429 and len(client.session.calls) == 1


def test_a_list_answered_with_an_etag_is_asked_for_conditionally_and_a_304_reuses_it():
    page = {"results": [{"id": 7, "job": {"status": "leased"}}], "next": None}
    changed = {"results": [], "next": None}
    client = api(
        FakeResponse(200, page, {"ETag": '"v1"'}),
        FakeResponse(304),
        FakeResponse(304),
        FakeResponse(200, changed, {"ETag": '"v2"'}),
        FakeResponse(304),
    )
    path = "workers/w1/leases/"
    seen = [list(client.pages(path)) for _ in range(5)]
    assert seen == [page["results"]] * 3 + [[]] * 2
    assert [sent.get("If-None-Match") for sent in client.session.sent] == [
        None,
        '"v1"',
        '"v1"',
        '"v1"',
        '"v2"',
    ]
    # What a 304 gave is the caller's own: changing it does not change the remembered list.
    client = api(FakeResponse(200, page, {"ETag": '"v1"'}), FakeResponse(304), FakeResponse(304))
    list(client.pages(path))
    list(client.pages(path))[0]["job"]["status"] = "running"
    assert list(client.pages(path))[0]["job"]["status"] == "leased"


def test_a_304_for_a_get_it_never_saw_is_not_taken_for_a_list_and_posts_send_no_etag():
    client = api(FakeResponse(200, {"ok": 1}, {"ETag": '"p"'}), FakeResponse(200, {"ok": 2}))
    assert client.call("POST", "workers/w1/heartbeat/") == {"ok": 1}
    assert client.call("POST", "workers/w1/heartbeat/") == {"ok": 2}
    assert client.session.sent == [{}, {}] and client.validated == {}
    # An answer without an ETag forgets the one before.
    client = api(
        FakeResponse(200, {"results": [1]}, {"ETag": '"a"'}),
        FakeResponse(200, {"results": [2]}),
        FakeResponse(200, {"results": [3]}),
    )
    assert [client.call("GET", "x/")["results"] for _ in range(3)] == [[1], [2], [3]]
    assert [sent.get("If-None-Match") for sent in client.session.sent] == [None, '"a"', None]
