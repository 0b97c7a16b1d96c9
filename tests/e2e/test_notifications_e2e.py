"""End to end: a suite run by the runner ends, and the real cluster calls the owner's webhook."""

from __future__ import annotations

import hashlib
import hmac

import pytest

from hosts import services as host_services
from notifications.models import Delivery, Subscription
from tests import factories as f
from tests.e2e.support import token_for, wait_for
from tests.notifications.conftest import Receiver, receiver  # noqa: F401 — the fixture

pytestmark = [pytest.mark.postgres, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

COMMAND = ["sh", "-c", 'case "$SCHEDSITE_JOB_NAME" in pass*) exec true;; *) exec false;; esac']


def test_the_cluster_delivers_a_signed_webhook_when_the_suite_finishes(
    settings,
    live_server,
    children,
    api_as,
    alice,
    sam,
    receiver: Receiver,  # noqa: F811
):  # noqa: ANN001
    children.share(settings, LEASE_TTL=30)
    worker, runner = host_services.worker_runner_ensure(worker_name="w1", by=sam)
    f.host("a.lab", ["board:x"], worker=worker)
    sub = Subscription.objects.create(user=alice, webhook_url=receiver.url, suite_finished=False)
    children.start_cluster()
    children.start_runner(
        worker="w1", api=f"{live_server.url}/api/", token=token_for(runner), command=COMMAND
    )

    suite = api_as(alice).post(
        "/suites/",
        {
            "name": "e2e-notify",
            "jobs": [
                {"name": "pass-1", "labels": ["board:x"]},
                {"name": "fail-1", "labels": ["board:x"]},
            ],
            "notify": ["webhook"],
        },
        expect=201,
    )

    wait_for("the webhook call", lambda: receiver.received, timeout=90, details=children.logs)
    (request,) = receiver.received
    expected = (
        "sha256=" + hmac.new(sub.secret.encode(), request["body"], hashlib.sha256).hexdigest()
    )
    assert hmac.compare_digest(expected, request["headers"]["X-Schedsite-Signature"])
    body = receiver.bodies()[0]
    assert body["suite"]["id"] == suite["id"]
    assert body["suite"]["outcome"] == f.outcome(passed=1, failed=1)
    wait_for("the delivery marked sent", lambda: Delivery.objects.filter(status="sent").exists())
