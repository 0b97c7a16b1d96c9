"""The repair_failed notification says when the automatic repair comes (docs/health.md)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.core import mail
from django.utils import timezone

from hosts.models import Host
from notifications import events
from notifications.models import Delivery
from tests import factories as f
from tests.notifications.conftest import subscribe

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("sync_tasks")]


def announce(host: Host, capture) -> Delivery:  # noqa: ANN001
    with capture(execute=True):
        events.hosts_repair_failed(
            [host.pk], status="repair_failed", at=timezone.now(), why="repair failed 3 times"
        )
    return Delivery.objects.get()


def test_the_mail_and_the_payload_name_the_next_automatic_try(
    sam, django_capture_on_commit_callbacks
):
    subscribe(sam, events=("host_repair_failed",))
    when = timezone.now() + timedelta(hours=4)
    host = f.host("h9.lab", ["board:x"])
    Host.objects.filter(pk=host.pk).update(status="repair_failed", next_repair_at=when)

    sent = announce(host, django_capture_on_commit_callbacks)

    assert sent.event.payload["host"]["next_repair_at"] == when.isoformat()
    (message,) = mail.outbox
    assert f"Next automatic try at {when.isoformat()}; until then it needs a person." in (
        message.body
    )


def test_with_no_automatic_try_the_mail_says_it_needs_a_person(
    sam, django_capture_on_commit_callbacks
):
    subscribe(sam, events=("host_repair_failed",))
    host = f.host("h9.lab", ["board:x"], status="repair_failed")

    sent = announce(host, django_capture_on_commit_callbacks)

    assert sent.event.payload["host"]["next_repair_at"] is None
    (message,) = mail.outbox
    assert "It needs a person." in message.body and "automatic" not in message.body
