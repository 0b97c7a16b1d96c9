"""Fixtures of the notification tests: subscribers, deliveries sent inline, a webhook receiver."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from django_q.conf import Conf

from notifications import services


@pytest.fixture
def sync_tasks(monkeypatch: pytest.MonkeyPatch, settings) -> None:  # noqa: ANN001
    """django-q2 tasks run inline, as a cluster's worker would run them; http to loopback ok."""
    monkeypatch.setattr(Conf, "SYNC", True)
    settings.NOTIFY_WEBHOOK_ALLOW_LOOPBACK_HTTP = True


@dataclass
class Receiver:
    """A webhook receiver on 127.0.0.1: what it was sent, and what it answers."""

    url: str
    answers: list[int] = field(default_factory=list)  # status codes, in turn; then 200
    received: list[dict] = field(default_factory=list)

    def bodies(self) -> list[dict]:
        return [json.loads(r["body"]) for r in self.received]


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    """A real HTTP server in a thread, recording each POST's headers and body."""
    box: dict[str, Receiver] = {}

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 — the standard library's name
            length = int(self.headers.get("Content-Length", 0))
            body = self.rfile.read(length)
            rec = box["receiver"]
            rec.received.append({"headers": dict(self.headers), "body": body, "path": self.path})
            code = rec.answers.pop(0) if rec.answers else 200
            self.send_response(code)
            self.end_headers()
            self.wfile.write(b"ok")

        def log_message(self, *_args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    box["receiver"] = Receiver(f"http://127.0.0.1:{server.server_port}/hook")
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield box["receiver"]
    server.shutdown()
    server.server_close()


def subscribe(user, *, events=("suite_finished",), email=True, webhook="") -> object:  # noqa: ANN001
    """Turn on the user's notifications, as the profile form does."""
    if email and not user.email:
        user.email = f"{user.get_username()}@lab.example"
        user.save()
    return services.subscription_update(
        user=user, email=email, webhook_url=webhook, events=list(events)
    )
