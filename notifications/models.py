"""Who wants which notification where, the events that happened, and each delivery's log."""

from __future__ import annotations

import secrets

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone

from notifications.choices import Channel, DeliveryStatus, EventKind
from schedsite.model_fields import account_link


def new_secret() -> str:
    """A fresh webhook signing secret."""
    return secrets.token_hex(32)


class Subscription(models.Model):
    """One user's destinations (e-mail, webhook) and the events they want to hear about."""

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="notification_settings"
    )
    email = models.BooleanField(default=False, help_text="Send e-mail to the user's address.")
    webhook_url = models.URLField(max_length=500, blank=True)
    # The key of the HMAC in X-Schedsite-Signature (docs/notifications.md#signatures).
    secret = models.CharField(max_length=64, default=new_secret)
    suite_finished = models.BooleanField(default=True, help_text="My suites finish.")
    reservation_ready = models.BooleanField(
        default=True, help_text="A reservation I wait in line for gets its host."
    )
    host_repair_failed = models.BooleanField(default=False, help_text="Staff only.")
    worker_offline = models.BooleanField(default=False, help_text="Staff only.")
    updated_at = models.DateTimeField(default=timezone.now)

    def __str__(self) -> str:
        return f"notifications of {self.user}"

    def channels(self) -> list[str]:
        """The channels this subscription has a destination for and turned on."""
        found = []
        if self.email and self.user.email:
            found.append(Channel.EMAIL)
        if self.webhook_url:
            found.append(Channel.WEBHOOK)
        return found


class SuiteNotify(models.Model):
    """Channels a suite's submitter asked for when it was submitted, besides their profile's."""

    suite = models.OneToOneField("jobs.Suite", on_delete=models.CASCADE, related_name="+")
    email = models.BooleanField(default=False)
    webhook = models.BooleanField(default=False)

    def __str__(self) -> str:
        return f"notify on suite {self.suite_id}"


class Event(models.Model):
    """Something that happened once: its key makes a second report of it a no-op."""

    kind = models.CharField(max_length=30, choices=EventKind.choices)
    # suite_finished:<suite id>, host_repair_failed:<host id>:<time>, worker_offline:<id>:<seen>
    key = models.CharField(max_length=200, unique=True)
    payload = models.JSONField()
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return self.key

    @property
    def subject(self) -> str:
        """What the event is about, for lists: the suite, host or worker by name."""
        for part, name in (
            ("suite", "name"),
            ("host", "hostname"),
            ("worker", "name"),
            ("reservation", "host"),
        ):
            about = self.payload.get(part)
            if isinstance(about, dict) and about.get(name):
                return f"{part} {about[name]}"
        return self.key


class Delivery(models.Model):
    """One event sent to one destination; attempted until sent or out of attempts."""

    event = models.ForeignKey(Event, on_delete=models.CASCADE, related_name="deliveries")
    user = account_link("notification_deliveries")
    channel = models.CharField(max_length=10, choices=Channel.choices)
    destination = models.CharField(max_length=500)  # the address or the URL, as it was then
    status = models.CharField(
        max_length=10, choices=DeliveryStatus.choices, default=DeliveryStatus.PENDING
    )
    attempts = models.PositiveSmallIntegerField(default=0)
    # When the next attempt is due; an attempt in flight pushes it past its own timeout.
    next_attempt_at = models.DateTimeField(default=timezone.now)
    last_error = models.CharField(max_length=500, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    sent_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [
            models.Index(
                fields=["next_attempt_at"],
                condition=Q(status="pending"),
                name="delivery_due",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.event.kind} → {self.destination}"


class Attempt(models.Model):
    """One try at a delivery: what the other side answered, or the error, and how long it took."""

    delivery = models.ForeignKey(Delivery, on_delete=models.CASCADE, related_name="attempt_log")
    at = models.DateTimeField(default=timezone.now)
    ok = models.BooleanField(default=False)
    status_code = models.PositiveSmallIntegerField(null=True, blank=True)
    error = models.CharField(max_length=500, blank=True)
    duration_ms = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ["-at", "-id"]

    def __str__(self) -> str:
        return f"attempt on delivery {self.delivery_id}"
