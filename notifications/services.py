"""Change notification settings: a user's subscription, its secret, a suite's own request."""

from __future__ import annotations

import ipaddress
from collections.abc import Collection
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import URLValidator, validate_email
from django.db import transaction
from django.utils import timezone

from jobs.models import Suite
from notifications.choices import STAFF_EVENTS, Channel, EventKind
from notifications.models import Subscription, SuiteNotify, new_secret
from schedsite import roles
from schedsite.errors import InvalidInput

LOOPBACK_NAMES = {"localhost", "localhost.localdomain"}


def subscription_of(user: Any) -> Subscription:
    """The user's subscription as saved, or the defaults (unsaved) if they never set one."""
    return Subscription.objects.filter(user=user).first() or Subscription(user=user)


def _is_loopback(host: str) -> bool:
    if host.lower() in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def webhook_url_clean(url: str) -> str:
    """A webhook URL, https (plain http only to loopback, where allowed); '' for none."""
    url = (url or "").strip()
    if not url:
        return ""
    try:
        URLValidator(schemes=["http", "https"])(url)
    except ValidationError:
        raise InvalidInput(
            "Enter a full URL, such as https://ci.example.com/hook.", field="webhook_url"
        ) from None
    parts = urlsplit(url)
    if parts.username or parts.password:
        raise InvalidInput(
            "Leave credentials out of the URL; the signature authenticates us.", field="webhook_url"
        )
    if parts.scheme == "http" and not (
        settings.NOTIFY_WEBHOOK_ALLOW_LOOPBACK_HTTP and _is_loopback(parts.hostname or "")
    ):
        raise InvalidInput("Webhook URLs must use https.", field="webhook_url")
    return url


@transaction.atomic
def subscription_update(
    *,
    user: Any,
    email: bool,
    webhook_url: str,
    events: Collection[str],
    email_address: str | None = None,
) -> Subscription:
    """Save which events the user hears about, and where; refuse what cannot be delivered."""
    unknown = set(events) - set(EventKind.values)
    if unknown:
        raise InvalidInput(f"Unknown events: {', '.join(sorted(unknown))}.", field="events")
    staff_only = set(events) & set(STAFF_EVENTS)
    if staff_only and not roles.is_staff(user):
        raise InvalidInput("Only lab staff may hear about hosts and workers.", field="events")
    url = webhook_url_clean(webhook_url)
    address = (email_address or "").strip()
    if address and address != user.email:
        try:
            validate_email(address)
        except ValidationError:
            raise InvalidInput("Enter a valid e-mail address.", field="email_address") from None
        user.email = address
        user.save(update_fields=["email"])
    if email and not user.email:
        raise InvalidInput("Give an e-mail address to send to.", field="email_address")
    sub = Subscription.objects.select_for_update().filter(user=user).first() or Subscription(
        user=user
    )
    sub.email = email
    sub.webhook_url = url
    for kind in EventKind.values:
        setattr(sub, kind, kind in events)
    sub.updated_at = timezone.now()
    sub.save()
    return sub


@transaction.atomic
def secret_regenerate(*, user: Any) -> Subscription:
    """Give the user's webhooks a new signing secret; the old one stops verifying at once."""
    sub = Subscription.objects.select_for_update().filter(user=user).first() or Subscription(
        user=user
    )
    sub.secret = new_secret()
    sub.updated_at = timezone.now()
    sub.save()
    return sub


def notify_channels_check(user: Any, channels: Collection[str], *, field: str = "notify") -> None:
    """Refuse a suite's notify request the submitter's profile has no destination for."""
    unknown = set(channels) - set(Channel.values)
    if unknown:
        raise InvalidInput(
            f"Unknown notify channels: {', '.join(sorted(unknown))}; use email or webhook.",
            field=field,
        )
    if Channel.EMAIL in channels and not user.email:
        raise InvalidInput(
            "You have no e-mail address: set one on your profile page first.", field=field
        )
    if Channel.WEBHOOK in channels and not subscription_of(user).webhook_url:
        raise InvalidInput(
            "You have no webhook URL: set one on your profile page first.", field=field
        )


@transaction.atomic
def suite_notify_set(*, suite: Suite, channels: Collection[str]) -> SuiteNotify | None:
    """Remember that the suite's submitter wants to hear when it finishes, by these channels."""
    if not channels:
        return None
    assert suite.owner is not None
    notify_channels_check(suite.owner, channels)
    Subscription.objects.get_or_create(user=suite.owner)
    notify, _ = SuiteNotify.objects.update_or_create(
        suite=suite,
        defaults={"email": Channel.EMAIL in channels, "webhook": Channel.WEBHOOK in channels},
    )
    return notify


def on_suite_notify_checked(*, user: Any, channels: Collection[str], **_kwargs: object) -> None:
    """Receiver of jobs.signals.suite_notify_checked: refuse a notify before submitting."""
    notify_channels_check(user, channels)


def on_suite_notify_chosen(*, suite: Suite, channels: Collection[str], **_kwargs: object) -> None:
    """Receiver of jobs.signals.suite_notify_chosen: record it in the submission's transaction."""
    suite_notify_set(suite=suite, channels=channels)
