"""Send one delivery: an e-mail, or a signed JSON POST; log the attempt, retry with backoff."""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import time
from datetime import datetime, timedelta
from typing import Any

import requests
from django.conf import settings
from django.core.mail import send_mail
from django.db.models import F

from notifications.choices import Channel, DeliveryStatus, EventKind
from notifications.models import Attempt, Delivery, Subscription

log = logging.getLogger("schedsite.notifications")

SIGNATURE_HEADER = "X-Schedsite-Signature"
Result = tuple[bool, int | None, str]  # sent?, the HTTP status, the error


def retry_backoff(attempts: int) -> timedelta:
    """How long a failed delivery waits after `attempts` tries: doubling from the base."""
    base = max(0, settings.NOTIFY_RETRY_BACKOFF)
    return timedelta(seconds=base * 2 ** max(0, attempts - 1))


def sign(secret: str, body: bytes) -> str:
    """The X-Schedsite-Signature value of a body: sha256=<hex HMAC-SHA256 keyed by the secret>."""
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def body_of(delivery: Delivery) -> bytes:
    """The webhook's JSON body: the event's payload and the delivery's id."""
    data = {**delivery.event.payload, "delivery": delivery.pk}
    return json.dumps(data, sort_keys=True, separators=(",", ":")).encode()


def describe(payload: dict[str, Any]) -> tuple[str, str]:
    """An e-mail's subject and text for an event's payload."""
    kind = payload.get("event")
    if kind == EventKind.SUITE_FINISHED:
        suite = payload["suite"]
        outcome = suite["outcome"]
        summary = f"{outcome['passed']} passed, {outcome['failed']} failed"
        if outcome["aborted"]:
            summary += f", {outcome['aborted']} aborted"
        if outcome.get("skipped"):  # payloads queued before the field existed have none
            summary += f", {outcome['skipped']} skipped"
        subject = f"Suite {suite['name']} {suite['status']}: {summary}"
        text = f"{subject}.\n\n{suite['url']}\n"
    elif kind == EventKind.HOST_REPAIR_FAILED:
        host = payload["host"]
        subject = f"Host {host['hostname']} reached repair_failed"
        # Payloads queued before the field existed have none.
        when = host.get("next_repair_at")
        then = f"Next automatic try at {when}; until then it" if when else "It"
        text = f"{subject}: {host['reason']}\n\n{then} needs a person.\n\n{host['url']}\n"
    elif kind == EventKind.RESERVATION_READY:
        reservation = payload["reservation"]
        subject = f"Host {reservation['host']} is reserved for you"
        text = (
            f"Your reservation {reservation['id']} waited in line and now holds "
            f"{reservation['host']} until {reservation['expires_at']}: {reservation['reason']}"
            f"\n\n{reservation['url']}\n"
        )
    else:
        worker = payload["worker"]
        subject = f"Worker {worker['name']} went offline"
        text = (
            f"{subject}: its runner last heartbeated at {worker['last_seen']}; "
            f"{worker['hosts']} host(s) take no work until it is back.\n\n{worker['url']}\n"
        )
    return f"[schedsite] {subject}", text


def send_email(delivery: Delivery) -> Result:
    subject, text = describe(delivery.event.payload)
    send_mail(subject, text, None, [delivery.destination])
    return True, None, ""


def send_webhook(delivery: Delivery) -> Result:
    sub = Subscription.objects.filter(user_id=delivery.user_id).first()
    if sub is None:
        return False, None, "the subscription is gone: no secret to sign with"
    body = body_of(delivery)
    headers = {
        "Content-Type": "application/json",
        "User-Agent": "schedsite-webhook/1",
        SIGNATURE_HEADER: sign(sub.secret, body),
        "X-Schedsite-Event": delivery.event.kind,
        "X-Schedsite-Delivery": str(delivery.pk),
    }
    response = requests.post(
        delivery.destination,
        data=body,
        headers=headers,
        timeout=settings.NOTIFY_WEBHOOK_TIMEOUT,
        allow_redirects=False,  # a redirect could carry the signed body somewhere else
    )
    if 200 <= response.status_code < 300:
        return True, response.status_code, ""
    return False, response.status_code, f"HTTP {response.status_code} {response.reason}"


SENDERS = {Channel.EMAIL: send_email, Channel.WEBHOOK: send_webhook}


def deliver(*, delivery_id: int, now: datetime) -> str:
    """Make one attempt at a due delivery; return what became of it."""
    # Compare-and-set: of two tasks for one delivery (the first send and the sweep's), one
    # attempts it; the claim holds it past the attempt's own timeout.
    hold = now + timedelta(seconds=settings.NOTIFY_WEBHOOK_TIMEOUT * 4 + 30)
    claimed = Delivery.objects.filter(
        pk=delivery_id, status=DeliveryStatus.PENDING, next_attempt_at__lte=now
    ).update(next_attempt_at=hold, attempts=F("attempts") + 1)
    if not claimed:
        return "not due"
    delivery = Delivery.objects.select_related("event").get(pk=delivery_id)
    started = time.monotonic()
    try:
        ok, code, error = SENDERS[delivery.channel](delivery)
    except Exception as exc:  # a refused connection, a timeout, a mail server's answer
        ok, code, error = False, None, f"{type(exc).__name__}: {exc}"
    took = int((time.monotonic() - started) * 1000)
    Attempt.objects.create(
        delivery=delivery, at=now, ok=ok, status_code=code, error=error[:500], duration_ms=took
    )
    if ok:
        Delivery.objects.filter(pk=delivery.pk).update(
            status=DeliveryStatus.SENT, sent_at=now, last_error=""
        )
        return "sent"
    if delivery.attempts >= settings.NOTIFY_MAX_ATTEMPTS:
        Delivery.objects.filter(pk=delivery.pk).update(
            status=DeliveryStatus.FAILED, last_error=error[:500]
        )
        log.warning("delivery %s failed for good: %s", delivery.pk, error)
        return "failed"
    Delivery.objects.filter(pk=delivery.pk).update(
        next_attempt_at=now + retry_backoff(delivery.attempts), last_error=error[:500]
    )
    return "retry"
