"""Notice each event once and make one delivery per destination that asked for it.

An event is claimed by its key (a unique row), so a second report of the same suite finishing
or the same host reaching repair_failed changes nothing (docs/notifications.md#events).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta
from functools import partial
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Max, OuterRef, Subquery
from django.urls import reverse
from django.utils import timezone

from hosts.choices import HostStatus
from hosts.models import Host, Worker
from hosts.querysets import online_cutoff
from jobs import job_history, selectors
from jobs.models import Job, Reservation, Suite
from notifications.choices import Channel, EventKind
from notifications.models import Delivery, Event, Subscription, SuiteNotify
from notifications.queue import enqueue
from schedsite import roles

log = logging.getLogger("schedsite.notifications")

Recipient = tuple[Subscription, list[str]]


def site_url(path: str) -> str:
    """An absolute link into the site, for e-mails and webhook payloads."""
    return settings.SITE_URL.rstrip("/") + path


def staff_subscribers(kind: str) -> list[Recipient]:
    """Active lab staff who asked for `kind`, with the channels they have a destination for."""
    subs = (
        Subscription.objects.filter(**{kind: True}, user__is_active=True)
        .filter(roles.staff_q("user__"))
        .select_related("user")
        .distinct()
    )
    return [(sub, channels) for sub in subs if (channels := sub.channels())]


def claim(kind: str, key: str, payload: dict[str, Any], at: datetime) -> Event | None:
    """Record the event, or return None when it was recorded already."""
    try:
        with transaction.atomic():
            return Event.objects.create(kind=kind, key=key, payload=payload, created_at=at)
    except IntegrityError:
        return None


def deliver_to(event: Event, recipients: Iterable[Recipient]) -> list[Delivery]:
    """One pending delivery per recipient's channel, sent once the transaction commits."""
    now = timezone.now()
    rows = [
        Delivery(
            event=event,
            user=sub.user,
            channel=channel,
            destination=sub.user.email if channel == Channel.EMAIL else sub.webhook_url,
            next_attempt_at=now,
            created_at=now,
        )
        for sub, channels in recipients
        for channel in channels
    ]
    Delivery.objects.bulk_create(rows)
    transaction.on_commit(partial(enqueue, [row.pk for row in rows]), robust=True)
    return rows


def _announce(kind: str, key: str, payload: dict, at: datetime, to: list[Recipient]) -> bool:
    with transaction.atomic():
        event = claim(kind, key, {"event": kind, "time": at.isoformat(), **payload}, at)
        if event is None:
            return False
        deliver_to(event, to)
    return True


# --- suites ---------------------------------------------------------------------------------


def suite_recipient(suite: Suite) -> Recipient | None:
    """The suite's owner with the channels their profile and the suite itself ask for."""
    subs = Subscription.objects.filter(user_id=suite.owner_id, user__is_active=True)
    sub = subs.select_related("user").first()
    if sub is None:
        return None
    wanted = set(sub.channels()) if sub.suite_finished else set()
    asked = SuiteNotify.objects.filter(suite=suite).first()
    if asked is not None:
        # Asked for on the suite itself: the profile's destinations, whatever its switches say.
        if asked.email and sub.user.email:
            wanted.add(Channel.EMAIL)
        if asked.webhook and sub.webhook_url:
            wanted.add(Channel.WEBHOOK)
    channels = [c for c in Channel.values if c in wanted]
    return (sub, channels) if channels else None


def suite_payload(suite: Suite) -> dict[str, Any]:
    """What a suite-finished notification says about the suite."""
    counts = selectors.suite_job_counts([suite.pk])[suite.pk]
    return {
        "suite": {
            "id": suite.pk,
            "name": suite.name,
            "build": suite.build,
            "owner": suite.owner.get_username() if suite.owner else None,
            "status": suite.status_from_counts(counts),
            "outcome": job_history.suite_outcome(counts),
            "counts": counts,
            "url": site_url(reverse("jobs:suite_detail", args=[suite.pk])),
        }
    }


def announce_suite(suite: Suite, *, at: datetime) -> bool:
    """Announce that a suite's last job ended, once; True if this call announced it."""
    recipient = suite_recipient(suite)
    if recipient is None:
        return False
    key = f"{EventKind.SUITE_FINISHED}:{suite.pk}"
    return _announce(EventKind.SUITE_FINISHED, key, suite_payload(suite), at, [recipient])


def may_announce(job: Job) -> bool:
    """False when the job as its mover read it rules out a suite-finished notification.

    It does when the job has no suite, its suite no owner, or the owner no notification
    settings, as far as the relations read with the job tell (nothing here queries): the runner
    protocol reads the job with its owner's settings, so its `complete` writes no outbox entry
    for the many owners who have none (docs/performance.md#the-runner-protocol).
    """
    if job.suite_id is None:
        return False
    if not Job.suite.is_cached(job):
        return True
    owner_id = job.suite.owner_id
    if owner_id is None:
        return False
    # The suite's owner is nearly always the job's, which the protocol reads already.
    if Suite.owner.is_cached(job.suite):
        owner = job.suite.owner
    elif job.owner_id == owner_id and Job.owner.is_cached(job):
        owner = job.owner
    else:
        return True
    settings_read = type(owner).notification_settings.is_cached(owner)
    return not settings_read or hasattr(owner, "notification_settings")


def wants_ended(jobs: Sequence[Job]) -> bool:
    """The outbox's filter (jobs.outbox.Reader): may any of these ended jobs be announced?"""
    return any(may_announce(job) for job in jobs)


def suites_ended(suite_ids: Sequence[int]) -> int:
    """Announce each of these suites that has no job left to run, once; how many this did.

    Run from an outbox entry after the move that wrote it committed: when the last two jobs
    of a suite end at once in two transactions, neither sees the other's job finished before
    it commits, but the entry of the later commit is read after both, and sees the suite
    finished; the unique event lets only one announcement through.
    """
    last_end = (
        Job.objects.filter(suite_id=OuterRef("pk"))
        .values("suite_id")
        .annotate(last=Max("finished_at"))
        .values("last")
    )
    finished = (
        Suite.objects.finished()
        .filter(pk__in=list(suite_ids))
        .filter(owner__isnull=False, owner__notification_settings__isnull=False)
        .annotate(last_end=Subquery(last_end))
        .select_related("owner")
    )
    return sum(announce_suite(suite, at=suite.last_end or suite.created_at) for suite in finished)


# --- hosts and workers ----------------------------------------------------------------------


def host_payload(host: Host, why: str, *, status: str) -> dict[str, Any]:
    """What a host notification says: the host as it is, with the status it moved to then."""
    return {
        "host": {
            "hostname": host.hostname,
            "status": status,
            "worker": host.worker.name if host.worker else None,
            "reason": why,
            "url": site_url(reverse("hosts:host_detail", args=[host.hostname])),
        }
    }


def hosts_repair_failed(host_ids: Sequence[int], *, status: str, at: datetime, why: str) -> int:
    """Announce that these hosts moved to repair_failed at `at`, once per move; how many."""
    staff = staff_subscribers("host_repair_failed")
    if not staff:
        return 0
    count = 0
    for host in Host.objects.filter(pk__in=list(host_ids)).select_related("worker"):
        key = f"{EventKind.HOST_REPAIR_FAILED}:{host.pk}:{at.isoformat()}"
        payload = host_payload(host, why, status=status)
        # When the health loop tries again by itself (null: not automatically), as the host says.
        when = host.next_repair_at
        payload["host"]["next_repair_at"] = when.isoformat() if when else None
        count += _announce(EventKind.HOST_REPAIR_FAILED, key, payload, at, staff)
    return count


def workers_offline(*, now: datetime) -> int:
    """Announce workers that went offline since the last look, once per outage; how many."""
    staff = staff_subscribers("worker_offline")
    if not staff:
        return 0
    cutoff = online_cutoff(now)
    # Only outages that began within the look-back: turning the event on must not report
    # every worker that died last year.
    since = cutoff - timedelta(seconds=settings.NOTIFY_OFFLINE_LOOKBACK)
    gone = {
        f"{EventKind.WORKER_OFFLINE}:{w.pk}:{w.last_seen.isoformat()}": w
        for w in Worker.objects.filter(retired_at=None, last_seen__lt=cutoff, last_seen__gte=since)
        if w.last_seen is not None
    }
    told = set(Event.objects.filter(key__in=list(gone)).values_list("key", flat=True))
    count = 0
    for key, worker in gone.items():
        if key in told:
            continue
        payload = {
            "worker": {
                "name": worker.name,
                "last_seen": worker.last_seen.isoformat() if worker.last_seen else None,
                "hosts": worker.hosts.exclude(status=HostStatus.RETIRED).count(),
                "url": site_url(reverse("hosts:worker_detail", args=[worker.name])),
            }
        }
        count += _announce(EventKind.WORKER_OFFLINE, key, payload, now, staff)
    return count


# --- reservations ---------------------------------------------------------------------------


def reservation_ready(reservation_id: int, *, at: datetime) -> int:
    """Tell a tester that the reservation they waited in line for holds its host now, once.

    They hear by the destinations their profile turns on (e-mail, webhook) when its
    `reservation_ready` switch is on (the default).
    """
    reservation = (
        Reservation.objects.filter(pk=reservation_id, lease__isnull=False)
        .select_related("lease__host", "owner")
        .first()
    )
    if reservation is None or reservation.owner_id is None:
        return 0
    subs = Subscription.objects.filter(user_id=reservation.owner_id, user__is_active=True)
    sub = subs.select_related("user").first()
    if sub is None or not sub.reservation_ready or not (channels := sub.channels()):
        return 0
    lease = reservation.lease
    assert lease is not None
    payload = {
        "reservation": {
            "id": reservation.pk,
            "owner": reservation.owner.get_username() if reservation.owner else None,
            "host": lease.host.hostname,
            "lease": lease.pk,
            "expires_at": lease.expires_at.isoformat(),
            "reason": reservation.reason,
            "url": site_url(reverse("hosts:host_detail", args=[lease.host.hostname])),
        }
    }
    key = f"{EventKind.RESERVATION_READY}:{reservation.pk}"
    return int(_announce(EventKind.RESERVATION_READY, key, payload, at, [(sub, channels)]))
