"""A host's lock and a worker's pause: who set it, why and when, audited; a repeat is refused."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model

from hosts import services
from hosts.choices import EventKind
from hosts.models import HostEvent
from schedsite.errors import Conflict, InvalidInput
from tests import factories as f

pytestmark = pytest.mark.django_db

# (make the object, hold it, let it go, its flag, reason, by, at fields, the kinds audited)
HOLDS = {
    "host lock": (
        lambda: f.host("h1.lab"),
        lambda obj, by: services.host_lock(host=obj, by=by, reason="debugging the PSU"),
        lambda obj, by: services.host_unlock(host=obj, by=by),
        ("locked", "lock_reason", "locked_by", "locked_at"),
        (EventKind.LOCKED, EventKind.UNLOCKED),
    ),
    "worker pause": (
        lambda: f.worker("w1"),
        lambda obj, by: services.worker_pause(worker=obj, by=by, reason="debugging the PSU"),
        lambda obj, by: services.worker_resume(worker=obj, by=by),
        ("paused", "paused_reason", "paused_by", "paused_at"),
        (EventKind.PAUSED, EventKind.RESUMED),
    ),
}


@pytest.mark.parametrize("name", HOLDS)
def test_a_hold_records_who_why_and_when_and_letting_go_clears_it(name):
    make, hold, release, (flag, reason, by, at), (set_kind, clear_kind) = HOLDS[name]
    sam = get_user_model().objects.create_user("sam")
    obj = hold(make(), sam)
    assert getattr(obj, flag) and getattr(obj, reason) == "debugging the PSU"
    assert getattr(obj, by) == sam and getattr(obj, at) is not None
    obj = release(obj, sam)
    assert not getattr(obj, flag) and getattr(obj, reason) == ""
    assert getattr(obj, by) is None and getattr(obj, at) is None
    events = list(HostEvent.objects.order_by("id").values_list("kind", "actor", "message"))
    assert events[-2:] == [(set_kind, "sam", "debugging the PSU"), (clear_kind, "sam", "")]


@pytest.mark.parametrize("name", HOLDS)
def test_holding_twice_or_letting_go_of_nothing_is_refused_and_audits_nothing(name):
    make, hold, release, _, _ = HOLDS[name]
    obj = make()
    before = HostEvent.objects.count()
    with pytest.raises(Conflict, match="is not (locked|paused)"):
        release(obj, "sam")
    obj = hold(obj, "sam")
    with pytest.raises(Conflict, match="is already (locked|paused)"):
        hold(obj, "alex")
    assert HostEvent.objects.count() == before + 1
    assert HostEvent.objects.latest("id").actor == "sam"


def test_a_lock_or_a_pause_without_a_reason_is_refused():
    host, worker = f.host("h1.lab"), f.worker("w2")
    before = HostEvent.objects.count()
    with pytest.raises(InvalidInput, match="a reason is required to lock a host"):
        services.host_lock(host=host, by="sam", reason="  ")
    with pytest.raises(InvalidInput, match="a reason is required to pause a worker"):
        services.worker_pause(worker=worker, by="sam", reason="")
    host.refresh_from_db()
    worker.refresh_from_db()
    assert not host.locked and not worker.paused
    assert HostEvent.objects.count() == before
