"""Deliveries: a signed webhook a real server verifies, e-mail, retries with backoff, the log."""

from __future__ import annotations

import hashlib
import hmac
from datetime import timedelta

import pytest
from django.core import mail
from django.utils import timezone

from notifications import delivery, events
from notifications.choices import DeliveryStatus
from notifications.models import Attempt, Delivery, Subscription
from notifications.tasks import sweep
from tests.notifications.conftest import subscribe

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("sync_tasks")]


def announce(sam, capture) -> Delivery:  # noqa: ANN001
    """A host reaching repair_failed, told to Sam's subscription (a webhook, say)."""
    from tests import factories as f

    host = f.host("h9.lab", ["board:x"])
    with capture(execute=True):
        events.hosts_repair_failed(
            [host.pk], status="repair_failed", at=timezone.now(), why="repair failed 3 times"
        )
    return Delivery.objects.get()


def verify(secret: str, body: bytes, header: str) -> bool:
    """How a receiver checks the signature (the example of docs/notifications.md)."""
    expected = "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
    return hmac.compare_digest(expected, header)


def test_a_webhook_is_a_json_post_signed_with_the_subscription_secret(
    sam, receiver, django_capture_on_commit_callbacks
):
    sub = subscribe(sam, events=("host_repair_failed",), email=False, webhook=receiver.url)
    sent = announce(sam, django_capture_on_commit_callbacks)

    (request,) = receiver.received
    headers = request["headers"]
    assert headers["Content-Type"] == "application/json"
    assert headers["X-Schedsite-Event"] == "host_repair_failed"
    assert headers["X-Schedsite-Delivery"] == str(sent.pk)
    assert verify(sub.secret, request["body"], headers["X-Schedsite-Signature"])
    assert not verify("another secret", request["body"], headers["X-Schedsite-Signature"])
    body = receiver.bodies()[0]
    assert body["event"] == "host_repair_failed"
    assert body["host"]["hostname"] == "h9.lab"
    assert body["host"]["reason"] == "repair failed 3 times"
    assert body["host"]["url"].endswith("/hosts/h9.lab/")
    assert body["delivery"] == sent.pk and "time" in body

    sent.refresh_from_db()
    assert (sent.status, sent.attempts, sent.last_error) == (DeliveryStatus.SENT, 1, "")
    (attempt,) = Attempt.objects.filter(delivery=sent)
    assert attempt.ok and attempt.status_code == 200 and attempt.duration_ms >= 0


def test_a_failing_webhook_is_retried_with_backoff_then_marked_failed(
    sam, receiver, settings, django_capture_on_commit_callbacks
):
    settings.NOTIFY_MAX_ATTEMPTS = 3
    settings.NOTIFY_RETRY_BACKOFF = 60
    receiver.answers = [500, 503, 502]
    subscribe(sam, events=("host_repair_failed",), email=False, webhook=receiver.url)
    sent = announce(sam, django_capture_on_commit_callbacks)

    sent.refresh_from_db()
    assert sent.status == DeliveryStatus.PENDING and sent.attempts == 1
    assert sent.last_error == "HTTP 500 Internal Server Error"
    first = Attempt.objects.get(delivery=sent)
    assert sent.next_attempt_at == first.at + timedelta(seconds=60)

    assert sweep()["deliveries_due"] == 0  # not due yet: nothing is sent early
    assert len(receiver.received) == 1

    # The backoff passes; the sweep sends it again, and the wait doubles.
    Delivery.objects.filter(pk=sent.pk).update(next_attempt_at=timezone.now())
    assert sweep()["deliveries_due"] == 1
    sent.refresh_from_db()
    second = Attempt.objects.filter(delivery=sent).first()
    assert sent.attempts == 2 and sent.status == DeliveryStatus.PENDING
    assert sent.next_attempt_at == second.at + timedelta(seconds=120)

    Delivery.objects.filter(pk=sent.pk).update(next_attempt_at=timezone.now())
    sweep()
    sent.refresh_from_db()
    assert sent.status == DeliveryStatus.FAILED and sent.attempts == 3
    assert sent.last_error == "HTTP 502 Bad Gateway"
    codes = list(
        Attempt.objects.filter(delivery=sent)
        .order_by("at", "id")
        .values_list("status_code", flat=True)
    )
    assert codes == [500, 503, 502]

    # A failed delivery is never tried again.
    Delivery.objects.filter(pk=sent.pk).update(next_attempt_at=timezone.now())
    assert sweep()["deliveries_due"] == 0
    assert len(receiver.received) == 3


def test_an_unreachable_webhook_logs_the_connection_error(
    sam, settings, django_capture_on_commit_callbacks
):
    settings.NOTIFY_WEBHOOK_TIMEOUT = 1
    # Nothing listens on port 9 of the loopback: the connection is refused at once.
    subscribe(sam, events=("host_repair_failed",), email=False, webhook="http://127.0.0.1:9/")
    sent = announce(sam, django_capture_on_commit_callbacks)
    sent.refresh_from_db()
    assert sent.status == DeliveryStatus.PENDING
    assert sent.last_error.startswith("ConnectionError")
    attempt = Attempt.objects.get(delivery=sent)
    assert attempt.status_code is None and not attempt.ok


def test_a_redirect_is_not_followed(sam, receiver, django_capture_on_commit_callbacks):
    receiver.answers = [302]
    subscribe(sam, events=("host_repair_failed",), email=False, webhook=receiver.url)
    sent = announce(sam, django_capture_on_commit_callbacks)
    sent.refresh_from_db()
    assert sent.status == DeliveryStatus.PENDING and sent.last_error == "HTTP 302 Found"
    assert len(receiver.received) == 1


def test_an_email_failure_is_retried_like_a_webhook(
    sam, settings, django_capture_on_commit_callbacks
):
    settings.EMAIL_BACKEND = "tests.notifications.test_delivery.BrokenBackend"
    subscribe(sam, events=("host_repair_failed",))
    sent = announce(sam, django_capture_on_commit_callbacks)
    sent.refresh_from_db()
    assert sent.status == DeliveryStatus.PENDING
    assert sent.last_error == "SMTPException: the mail server is down"

    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    Delivery.objects.filter(pk=sent.pk).update(next_attempt_at=timezone.now())
    sweep()
    sent.refresh_from_db()
    assert sent.status == DeliveryStatus.SENT and sent.attempts == 2
    assert mail.outbox[0].to == ["sam@lab.example"]


def test_a_delivery_is_attempted_once_however_many_tasks_carry_it(
    sam, receiver, django_capture_on_commit_callbacks
):
    subscribe(sam, events=("host_repair_failed",), email=False, webhook=receiver.url)
    sent = announce(sam, django_capture_on_commit_callbacks)
    # The sweep's copy of the task comes late: the first already sent it.
    assert delivery.deliver(delivery_id=sent.pk, now=timezone.now()) == "not due"
    assert len(receiver.received) == 1


def test_a_new_secret_signs_the_next_webhooks(sam, receiver, django_capture_on_commit_callbacks):
    from notifications import services

    subscribe(sam, events=("host_repair_failed",), email=False, webhook=receiver.url)
    old = Subscription.objects.get(user=sam).secret
    new = services.secret_regenerate(user=sam).secret
    assert new != old and len(new) == 64
    announce(sam, django_capture_on_commit_callbacks)
    request = receiver.received[0]
    assert verify(new, request["body"], request["headers"]["X-Schedsite-Signature"])
    assert not verify(old, request["body"], request["headers"]["X-Schedsite-Signature"])


class BrokenBackend:
    """A mail backend whose server is down."""

    def __init__(self, **_kwargs: object) -> None:
        pass

    def send_messages(self, _messages: object) -> int:
        import smtplib

        raise smtplib.SMTPException("the mail server is down")
