"""Host and worker services: validation, audit trail, and the conflicts staff would hit."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from hosts import services
from hosts.choices import HostStatus
from hosts.models import Host, HostEvent, Label, Worker
from jobs import services as job_services
from jobs.models import Lease
from schedsite.errors import Conflict, InvalidInput
from tests import factories as f

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    "hostname", ["", "has space", "-leading", "a/b", "x" * 256, "new", "import"]
)
def test_a_bad_hostname_is_refused_and_nothing_is_created(hostname):
    with pytest.raises(InvalidInput) as err:
        services.host_create(hostname=hostname, by="sam")
    assert err.value.field == "hostname"
    assert not Host.objects.exists()


@pytest.mark.parametrize("name", ["new", "import"])
def test_a_worker_cannot_take_the_name_of_a_page(name):
    # /workers/new/ is the add-a-worker page: a worker so named could not be reached.
    with pytest.raises(InvalidInput, match="pages of their own"):
        services.worker_create(name=name, by="sam")
    worker = f.worker("w1")
    with pytest.raises(InvalidInput, match="pages of their own"):
        services.worker_update(worker=worker, name=name, by="sam")
    assert list(Worker.objects.values_list("name", flat=True)) == ["w1"]


def test_a_bad_label_is_refused_naming_it():
    with pytest.raises(InvalidInput, match="board x"):
        services.host_create(hostname="h1", labels=["board x"], by="sam")
    assert not Host.objects.exists() and not Label.objects.exists()


def test_a_duplicate_hostname_is_a_conflict():
    f.host("h1.lab")
    with pytest.raises(Conflict):
        services.host_create(hostname="h1.lab", by="sam")


def test_updating_a_host_records_what_changed_and_who_changed_it():
    host = f.host("h1", ["board:x"], build="R1")
    w = f.worker("w1")
    services.host_update(
        host=host, by="sam", labels=["board:x", "bt"], worker=w, current_build="R2"
    )
    host.refresh_from_db()
    assert host.label_names == ["board:x", "bt"] and host.worker == w
    event = HostEvent.objects.filter(host=host, kind="updated").get()
    assert event.actor == "sam"
    assert "labels board:x → board:x, bt" in event.message and "R1 → R2" in event.message


def test_a_status_change_is_audited_and_a_bad_status_is_refused():
    host = f.host("h1")
    job_services.host_set_status(
        host=host, status=HostStatus.NEEDS_REPAIR, by="sam", message="reflash"
    )
    event = HostEvent.objects.filter(host=host, kind="status").get()
    assert (event.old_status, event.new_status, event.message) == (
        "ready",
        "needs_repair",
        "reflash",
    )
    with pytest.raises(InvalidInput):
        job_services.host_set_status(host=host, status="melted", by="sam")
    # Only a leased maintenance job makes a host verifying or repairing: set by hand, nothing
    # would ever move it on.
    with pytest.raises(Conflict):
        job_services.host_set_status(host=host, status=HostStatus.REPAIRING, by="sam")
    host.refresh_from_db()
    assert host.status == HostStatus.NEEDS_REPAIR


def test_a_host_with_an_active_lease_cannot_be_deleted():
    host = f.host("h1")
    job_services.lease_reserve(
        host=host, holder="sam", duration=timedelta(hours=1), reason="debugging"
    )
    with pytest.raises(Conflict):
        job_services.host_delete(host=host, by="sam")
    assert Host.objects.filter(hostname="h1").exists()


def test_a_worker_with_hosts_cannot_be_deleted():
    w = f.worker("w1")
    f.host("h1", worker=w)
    with pytest.raises(Conflict):
        services.worker_delete(worker=w, by="sam")


def test_a_worker_is_online_only_within_the_offline_timeout(settings):
    settings.WORKER_OFFLINE_TIMEOUT = 120
    w = f.worker("w1", online=False)
    now = timezone.now()
    assert not w.is_online(now)
    services.worker_heartbeat(worker=w, at=now)
    assert w.is_online(now + timedelta(seconds=119))
    assert not w.is_online(now + timedelta(seconds=121))
    assert HostEvent.objects.filter(worker=w, message="worker online").exists()


def test_a_worker_coming_back_online_lets_its_hosts_be_leased():
    w = f.worker("w1", online=False)
    f.host("h1", ["board:x"], worker=w)
    f.job("J1")
    job_services.scheduler_tick()
    assert not Lease.objects.exists()
    services.worker_heartbeat(worker=w)
    job_services.scheduler_tick()
    assert Lease.objects.filter(released_at__isnull=True).count() == 1


def test_a_reason_too_long_is_refused_not_cut_short():
    host = f.host("h1")
    with pytest.raises(InvalidInput, match="at most 500"):
        services.host_lock(host=host, by="sam", reason="x" * 501)
    host.refresh_from_db()
    assert not host.locked and not HostEvent.objects.filter(kind="locked").exists()
    services.host_lock(host=host, by="sam", reason="x" * 500)
    host.refresh_from_db()
    assert host.lock_reason == "x" * 500
