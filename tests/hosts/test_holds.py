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

# A host's lock and a worker's pause, side by side: what makes one, the services, the fields the
# hold sets (flag, reason, by, at) and the event kinds it writes.
MAKE = {"host": lambda: f.host("h1.lab"), "worker": lambda: f.worker("w1")}
HOLD = {"host": services.host_lock, "worker": services.worker_pause}
RELEASE = {"host": services.host_unlock, "worker": services.worker_resume}
FIELDS = {
    "host": ("locked", "lock_reason", "locked_by", "locked_at"),
    "worker": ("paused", "paused_reason", "paused_by", "paused_at"),
}
KINDS = {
    "host": (EventKind.LOCKED, EventKind.UNLOCKED),
    "worker": (EventKind.PAUSED, EventKind.RESUMED),
}


def hold(noun: str, obj: object, by: object) -> object:
    return HOLD[noun](**{noun: obj}, by=by, reason="debugging the PSU")


def release(noun: str, obj: object, by: object) -> object:
    return RELEASE[noun](**{noun: obj}, by=by)


@pytest.mark.parametrize("noun", ["host", "worker"])
def test_a_hold_records_who_why_and_when_and_letting_go_clears_it(noun):
    flag, reason, by, at = FIELDS[noun]
    set_kind, clear_kind = KINDS[noun]
    sam = get_user_model().objects.create_user("sam")
    obj = hold(noun, MAKE[noun](), sam)
    assert getattr(obj, flag) and getattr(obj, reason) == "debugging the PSU"
    assert getattr(obj, by) == sam and getattr(obj, at) is not None
    obj = release(noun, obj, sam)
    assert not getattr(obj, flag) and getattr(obj, reason) == ""
    assert getattr(obj, by) is None and getattr(obj, at) is None
    events = list(HostEvent.objects.order_by("id").values_list("kind", "actor", "message"))
    assert events[-2:] == [(set_kind, "sam", "debugging the PSU"), (clear_kind, "sam", "")]


@pytest.mark.parametrize("noun", ["host", "worker"])
def test_holding_twice_or_letting_go_of_nothing_is_refused_and_audits_nothing(noun):
    obj = MAKE[noun]()
    before = HostEvent.objects.count()
    with pytest.raises(Conflict, match="is not (locked|paused)"):
        release(noun, obj, "sam")
    obj = hold(noun, obj, "sam")
    with pytest.raises(Conflict, match="is already (locked|paused)"):
        hold(noun, obj, "alex")
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
