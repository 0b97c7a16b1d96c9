"""Throttles: the documented default rates, per user and per address, 429 with Retry-After."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.core.cache import cache
from rest_framework import throttling
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from jobs import services
from jobs.models import Lease
from schedsite.throttles import RunnerThrottle
from tests import factories as f
from tests.reliability.test_production_settings import PRODUCTION, manage

pytestmark = pytest.mark.django_db

DOCS = Path(__file__).resolve().parents[2] / "docs" / "security.md"


def documented_rates() -> dict[str, str]:
    """Each scope's default rate, read from the table in docs/security.md#throttles-and-lockout."""
    rows = re.findall(r"^\| `(\w+)` \| `THROTTLE_\w+`, `([^`]+)` \|", DOCS.read_text(), re.M)
    return dict(rows)


DOCUMENTED = documented_rates()


def rates_in(env: dict[str, str]) -> dict[str, str]:
    result = manage(
        "shell",
        "-c",
        "import json; from django.conf import settings; "
        "print(json.dumps(settings.REST_FRAMEWORK['DEFAULT_THROTTLE_RATES']))",
        env=env,
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_the_default_rates_are_the_documented_ones() -> None:
    assert set(DOCUMENTED) == {  # the table was read
        *("anon", "login", "read", "write", "runner"),
        *("password_reset", "password_reset_email"),
    }
    assert rates_in(PRODUCTION) == DOCUMENTED


def test_each_rate_is_read_from_the_environment() -> None:
    env = {**PRODUCTION, "THROTTLE_RUNNER": "50/s", "THROTTLE_LOGIN": "5/min"}
    assert rates_in(env) == {**DOCUMENTED, "runner": "50/s", "login": "5/min"}


def test_a_malformed_rate_refuses_to_start_and_names_the_variable() -> None:
    result = manage("check", env={**PRODUCTION, "THROTTLE_WRITE": "lots"})
    assert result.returncode != 0
    assert "THROTTLE_WRITE must be a rate such as 60/min" in result.stderr


@pytest.fixture(autouse=True)
def real_rates(settings) -> Iterator[None]:  # noqa: ANN001
    """The documented rates (the suite runs with generous ones), a clean cache, a still clock."""
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": DOCUMENTED}
    cache.clear()
    # A frozen clock: every request of a test falls in the same window, however slow the run.
    original = throttling.SimpleRateThrottle.timer
    throttling.SimpleRateThrottle.timer = lambda self: 1_000_000.0
    yield
    throttling.SimpleRateThrottle.timer = original
    cache.clear()


def token_client(user: object, address: str = "10.0.0.1") -> APIClient:
    client = APIClient(REMOTE_ADDR=address)
    token, _ = Token.objects.get_or_create(user=user)
    client.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")
    return client


def assert_throttled(response) -> None:  # noqa: ANN001
    assert response.status_code == 429, response.content
    assert int(response["Retry-After"]) >= 1
    assert re.match(
        r"Request was throttled\. Expected available in \d+ seconds?\.", response.json()["detail"]
    )


def test_password_guesses_on_the_token_endpoint_are_slowed_per_address(db) -> None:  # noqa: ANN001
    guesser = APIClient(REMOTE_ADDR="203.0.113.9")
    # A different username each time, so only the per-address limit (not the lockout) applies.
    for i in range(20):
        response = guesser.post("/api/token/", {"username": f"user{i}", "password": "guess"})
        assert response.status_code == 400, (i, response.content)
    assert_throttled(guesser.post("/api/token/", {"username": "user20", "password": "guess"}))
    # Someone else, from another address, is not slowed by it.
    other = APIClient(REMOTE_ADDR="198.51.100.7")
    assert other.post("/api/token/", {"username": "x", "password": "y"}).status_code == 400


def test_a_busy_lab_does_not_push_a_live_count_out_of_the_cache(db) -> None:  # noqa: ANN001
    guesser = APIClient(REMOTE_ADDR="203.0.113.9")
    for i in range(20):
        guesser.post("/api/token/", {"username": f"user{i}", "password": "guess"})
    for n in range(500):  # five hundred other users' write counts, all still live
        cache.set(f"throttle_write_{n}", [1_000_000.0], 60)
    assert_throttled(guesser.post("/api/token/", {"username": "user20", "password": "guess"}))


def test_a_client_cannot_dodge_the_address_limit_with_x_forwarded_for(db) -> None:  # noqa: ANN001
    guesser = APIClient(REMOTE_ADDR="203.0.113.9")
    for i in range(20):
        guesser.post(
            "/api/token/",
            {"username": f"user{i}", "password": "guess"},
            HTTP_X_FORWARDED_FOR=f"192.0.2.{i}",
        )
    response = guesser.post(
        "/api/token/", {"username": "u", "password": "g"}, HTTP_X_FORWARDED_FOR="192.0.2.99"
    )
    assert_throttled(response)


@pytest.mark.parametrize("path", ["/accounts/login/", "/admin/login/"])
def test_the_login_forms_are_slowed_per_address(db, path: str) -> None:  # noqa: ANN001
    from django.test import Client

    guesser = Client(REMOTE_ADDR="203.0.113.9")
    for i in range(20):
        response = guesser.post(path, {"username": f"user{i}", "password": "guess"})
        assert response.status_code == 200, i  # the form again, with its error
    response = guesser.post(path, {"username": "user20", "password": "guess"})
    assert response.status_code == 429
    assert int(response["Retry-After"]) >= 1
    assert "Too many sign-in attempts from your address" in response.content.decode()
    assert Client(REMOTE_ADDR="198.51.100.7").get(path).status_code == 200


def test_password_reset_mails_are_limited_per_address(alice, mailoutbox) -> None:  # noqa: ANN001
    from django.test import Client

    alice.email = "alice@lab.example"
    alice.save()
    asker = Client(REMOTE_ADDR="203.0.113.9")
    for i in range(10):  # THROTTLE_PASSWORD_RESET, 10/hour: other inboxes each time
        email = "alice@lab.example" if i == 0 else f"nobody{i}@lab.example"
        assert asker.post("/accounts/password_reset/", {"email": email}).status_code == 302, i
    refused = asker.post("/accounts/password_reset/", {"email": "someone@lab.example"})
    assert refused.status_code == 429 and int(refused["Retry-After"]) >= 1
    assert "no mail was sent" in refused.content.decode()
    other = Client(REMOTE_ADDR="198.51.100.7")
    assert other.post("/accounts/password_reset/", {"email": "x@lab.example"}).status_code == 302
    assert len(mailoutbox) == 1


def test_password_reset_mails_to_one_email_are_limited_from_any_address(
    alice,  # noqa: ANN001
    mailoutbox,  # noqa: ANN001
) -> None:
    from django.test import Client

    alice.email = "alice@lab.example"
    alice.save()
    for i in range(3):  # THROTTLE_PASSWORD_RESET_EMAIL, 3/hour, each from another address
        asker = Client(REMOTE_ADDR=f"203.0.113.{i + 1}")
        response = asker.post("/accounts/password_reset/", {"email": "alice@lab.example"})
        assert response.status_code == 302, i
    fourth = Client(REMOTE_ADDR="203.0.113.50").post(
        "/accounts/password_reset/", {"email": " Alice@LAB.example "}
    )
    assert fourth.status_code == 429
    assert len(mailoutbox) == 3  # 25 in 5.5 s before
    bob_mail = Client(REMOTE_ADDR="203.0.113.50").post(
        "/accounts/password_reset/", {"email": "bob@lab.example"}
    )
    assert bob_mail.status_code == 302


def test_reads_are_limited_per_user(alice, bob) -> None:  # noqa: ANN001
    client = token_client(alice)
    for _ in range(600):
        assert client.get("/api/me/").status_code == 200
    assert_throttled(client.get("/api/me/"))
    # The limit is alice's, not her address's: bob, from the same address, reads on.
    assert token_client(bob).get("/api/me/").status_code == 200


def test_writes_are_limited_per_user_apart_from_reads(sam) -> None:  # noqa: ANN001
    f.host("h1.lab")
    client = token_client(sam)
    for i in range(120):
        action = "lock" if i % 2 == 0 else "unlock"
        response = client.post(f"/api/hosts/h1.lab/{action}/", {"reason": "rack move"})
        assert response.status_code == 200, (i, response.content)
    assert_throttled(client.post("/api/hosts/h1.lab/lock/", {"reason": "rack move"}))
    assert client.get("/api/hosts/h1.lab/").status_code == 200  # reads are counted apart


class StillCache(dict):
    """A cache whose entries never expire: the runner's one-second window, held still."""

    def get(self, key: str, default: object = None) -> object:
        return super().get(key, default)

    def set(self, key: str, value: object, timeout: float | None = None) -> None:
        self[key] = value


def test_runners_heartbeat_far_more_often_than_a_user_may_write(
    runner_user, monkeypatch: pytest.MonkeyPatch
) -> None:  # noqa: ANN001
    monkeypatch.setattr(RunnerThrottle, "cache", StillCache())
    worker = f.worker("w1")
    worker.runner = runner_user
    worker.save(update_fields=["runner"])
    f.host("h1.lab", ["board:eve"], worker=worker)
    f.job("login_Smoke", ["board:eve"])
    services.scheduler_tick()
    lease = Lease.objects.get(released_at=None)
    client = token_client(runner_user)
    # 200 a second: beyond a user's 120 writes a minute, and not counted against them.
    for i in range(200):
        response = client.post(f"/api/leases/{lease.pk}/heartbeat/")
        assert response.status_code == 200, (i, response.content)
    assert_throttled(client.post(f"/api/leases/{lease.pk}/heartbeat/"))
    assert client.post(f"/api/jobs/{lease.job_id}/abort/", {"reason": "x"}).status_code == 200


def test_a_runner_call_is_counted_in_the_web_process_not_in_the_shared_cache(
    runner_user,
) -> None:  # noqa: ANN001
    # The shared cache is a database table by default: counting there cost two statements on
    # every runner call (docs/security.md#throttles-and-lockout).
    RunnerThrottle.cache.clear()
    worker = f.worker("w1")
    worker.runner = runner_user
    worker.save(update_fields=["runner"])
    response = token_client(runner_user).post("/api/workers/w1/heartbeat/", {}, format="json")
    assert response.status_code == 200, response.content
    key = f"throttle_runner_{runner_user.pk}"
    assert cache.get(key) is None
    assert len(RunnerThrottle.cache.get(key)) == 1


def test_ui_writes_share_the_users_write_limit_with_the_api(sam) -> None:  # noqa: ANN001
    from django.test import Client

    from hosts.models import Host

    host = f.host("h1.lab")
    browser = Client(REMOTE_ADDR="10.0.0.1", headers={"HX-Request": "true"})
    browser.force_login(sam)
    for i in range(120):
        action = "lock" if i % 2 == 0 else "unlock"
        response = browser.post(f"/hosts/h1.lab/{action}/", {"reason": "rack move"})
        assert response.status_code == 200, (i, response.content[:300])
    refused = browser.post("/hosts/h1.lab/lock/", {"reason": "one too many"})
    assert refused.status_code == 429
    assert int(refused["Retry-After"]) >= 1
    assert refused["HX-Reswap"] == "none"  # the page stays as it is; the toast says why
    assert "Too many changes in a short time: nothing was changed." in refused.content.decode()
    assert not Host.objects.get(pk=host.pk).locked
    assert browser.get("/hosts/").status_code == 200  # reading goes on
    # The same count as the API's: sam's script is refused too.
    assert_throttled(token_client(sam).post("/api/hosts/h1.lab/lock/", {"reason": "x"}))
