"""Reservations: extending one (by a duration, capped, compare-and-set) and ending one."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from hosts.choices import EventKind
from hosts.models import HostEvent
from jobs import services
from jobs.choices import ReleaseReason
from jobs.models import Lease
from schedsite.errors import Conflict, Forbidden, InvalidInput
from tests import factories as f

pytestmark = pytest.mark.django_db


@pytest.fixture
def reserved(alice):  # noqa: ANN001, ANN201
    """Host h1 reserved by Alice for an hour."""
    host = f.host("h1", ["board:x"])
    return services.lease_reserve(
        host=host, holder=alice, duration=timedelta(hours=1), reason="flashing firmware"
    )


def test_the_holder_extends_a_reservation_by_the_chosen_duration(reserved, alice):
    before = reserved.expires_at
    lease = services.lease_extend(lease=reserved, by=alice, duration=timedelta(hours=2))
    assert lease.expires_at == before + timedelta(hours=2)
    event = HostEvent.objects.get(kind=EventKind.EXTENDED)
    assert event.actor == "alice" and event.lease_id == lease.pk
    assert "(+2h 00m)" in event.message


def test_staff_extend_anyones_reservation(reserved, sam):
    lease = services.lease_extend(lease=reserved, by=sam, duration=timedelta(minutes=30))
    assert lease.expires_at > timezone.now() + timedelta(minutes=80)


def test_another_tester_may_not_extend_or_end_a_reservation(reserved, bob):
    before = reserved.expires_at
    with pytest.raises(Forbidden):
        services.lease_extend(lease=reserved, by=bob, duration=timedelta(hours=1))
    with pytest.raises(Forbidden):
        services.reservation_end(lease=reserved, by=bob)
    reserved.refresh_from_db()
    assert reserved.expires_at == before and reserved.released_at is None
    assert not HostEvent.objects.filter(kind__in=[EventKind.EXTENDED, EventKind.RELEASED]).exists()


def test_an_extension_past_the_longest_reservation_is_refused_saying_how_much_is_left(
    reserved, alice, settings
):
    settings.MAX_RESERVATION_SECONDS = 4 * 3600
    before = reserved.expires_at
    with pytest.raises(InvalidInput) as refused:
        services.lease_extend(lease=reserved, by=alice, duration=timedelta(hours=4))
    assert refused.value.field == "duration"
    assert "at most 4h 00m from now" in refused.value.message
    assert "at most 3h 00m more" in refused.value.message or "2h 59m" in refused.value.message
    reserved.refresh_from_db()
    assert reserved.expires_at == before
    # Up to the cap is fine.
    lease = services.lease_extend(lease=reserved, by=alice, duration=timedelta(hours=2))
    assert lease.expires_at == before + timedelta(hours=2)


def test_extending_an_ended_or_expired_reservation_is_a_conflict(reserved, alice):
    later = reserved.expires_at + timedelta(seconds=1)
    with pytest.raises(Conflict):
        services.lease_extend(lease=reserved, by=alice, duration=timedelta(hours=1), at=later)
    services.reservation_end(lease=reserved, by=alice)
    with pytest.raises(Conflict):
        services.lease_extend(lease=reserved, by=alice, duration=timedelta(hours=1))


def test_two_extensions_both_count(reserved, alice, sam):
    # Each is one UPDATE adding to the end it finds: neither overwrites the other.
    stale = Lease.objects.get(pk=reserved.pk)
    before = reserved.expires_at
    services.lease_extend(lease=reserved, by=alice, duration=timedelta(hours=1))
    services.lease_extend(lease=stale, by=sam, duration=timedelta(hours=1))
    assert Lease.objects.get(pk=reserved.pk).expires_at == before + timedelta(hours=2)


def test_the_holder_ends_a_reservation_and_the_host_is_free(reserved, alice):
    lease = services.reservation_end(lease=reserved, by=alice, reason="done early")
    assert lease.released_at is not None
    assert lease.release_reason == ReleaseReason.RELEASED and lease.released_by == "alice"
    assert not Lease.objects.active().filter(host=reserved.host).exists()
    event = HostEvent.objects.get(kind=EventKind.RELEASED)
    assert event.actor == "alice" and event.message == "done early"
    with pytest.raises(Conflict):
        services.reservation_end(lease=reserved, by=alice)


def test_staff_end_anyones_reservation(reserved, sam):
    assert services.reservation_end(lease=reserved, by=sam).released_by == "sam"


def test_a_jobs_lease_is_neither_extended_nor_ended_as_a_reservation(sam):
    f.host("h1", ["board:x"])
    f.job("t1")
    services.scheduler_tick()
    lease = Lease.objects.active().get()
    with pytest.raises(Conflict):
        services.lease_extend(lease=lease, by=sam, duration=timedelta(hours=1))
    with pytest.raises(Conflict):
        services.reservation_end(lease=lease, by=sam)
    assert Lease.objects.active().filter(pk=lease.pk).exists()
