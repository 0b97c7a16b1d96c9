"""The real web process: gunicorn with gunicorn.conf.py, several workers, the production headers."""

from __future__ import annotations

import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

from tests.reliability.support import ROOT, live_database_url, subprocess_env, wait_until

pytestmark = [pytest.mark.postgres, pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def web(tmp_path: Path) -> Iterator[str]:
    """gunicorn on 127.0.0.1 with three workers, the default rates, against the test database."""
    port = free_port()
    env = subprocess_env(
        DATABASE_URL=live_database_url("gunicorn-test"),
        GUNICORN_BIND=f"127.0.0.1:{port}",
        WEB_CONCURRENCY="3",
        DEBUG="0",
        ALLOWED_HOSTS="127.0.0.1",
    )
    for name in [n for n in env if n.startswith("THROTTLE_")]:
        del env[name]  # the suite's generous rates: this process runs with the defaults
    log = (tmp_path / "gunicorn.log").open("wb")
    proc = subprocess.Popen(
        [sys.executable, "-m", "gunicorn", "-c", "gunicorn.conf.py"],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"

    def up() -> bool:
        try:
            return requests.get(f"{url}/accounts/login/", timeout=5).status_code == 200
        except requests.RequestException:  # not listening yet, or its workers still booting
            return False

    try:
        wait_until(up, timeout=30, what=lambda: (tmp_path / "gunicorn.log").read_text())
        yield url
    finally:
        proc.terminate()
        proc.wait(20)
        log.close()


def test_no_server_banner_and_the_security_headers_are_sent(web: str) -> None:
    response = requests.get(f"{web}/accounts/login/", timeout=5)
    assert "gunicorn" not in response.headers.get("Server", "").lower()
    policy = response.headers["Content-Security-Policy"]
    directives = dict(d.strip().split(" ", 1) for d in policy.split(";"))
    assert (directives["script-src"], directives["style-src"]) == ("'self'", "'self'")
    assert response.headers["X-Frame-Options"] == "DENY"
    assert response.headers["X-Content-Type-Options"] == "nosniff"
    assert response.headers["Referrer-Policy"] == "same-origin"
    api = requests.get(f"{web}/api/hosts/", timeout=5)
    assert api.status_code == 401
    assert "gunicorn" not in api.headers.get("Server", "").lower()


def test_every_worker_counts_against_one_limit(web: str) -> None:
    # A fresh connection each time, so the three workers share the requests between them; a
    # count kept in each worker's memory would allow three times the rate.
    codes = [
        requests.post(
            f"{web}/api/token/", data={"username": f"user{i}", "password": "guess"}, timeout=5
        ).status_code
        for i in range(21)
    ]
    assert codes == [400] * 20 + [429]
