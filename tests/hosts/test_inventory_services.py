"""Adding, changing and removing hosts and workers through the services, without HTTP.

What each writes to the audit trail, when it asks for a tick (docs/scheduling.md#triggers), and
that a refused change raises its error and leaves every row as it was.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.utils import timezone

from hosts import services
from hosts.choices import EventKind, HostStatus
from hosts.models import Host, HostEvent, Label, Worker
from jobs import services as job_services
from jobs.models import Lease
from schedsite.errors import Conflict, InvalidInput
from tests import factories as f
from tests.jobs.test_triggers import ticks_enqueued

pytestmark = pytest.mark.django_db


def rows() -> tuple:
    """The inventory as a user would see it: hosts, their labels, workers, events."""
    return (
        sorted(
            (h.hostname, h.status, h.locked, h.worker_id, h.current_build, tuple(h.label_names))
            for h in Host.objects.prefetch_related("labels")
        ),
        sorted(Worker.objects.values_list("name", "paused", "paused_reason", "runner_id")),
        HostEvent.objects.count(),
    )


def refused(error: type[Exception], match: str, action, **fields: str) -> None:  # noqa: ANN001
    """The action raises `error` (naming `field`, if given) and changes nothing."""
    before = rows()
    with pytest.raises(error, match=match) as err:
        action()
    for name, value in fields.items():
        assert getattr(err.value, name) == value
    assert rows() == before


# --- labels ---------------------------------------------------------------------------------


def test_labels_are_stripped_deduplicated_and_sorted():
    assert services.labels_validate([" bt", "board:x", "bt", "", "  "]) == ["board:x", "bt"]


@pytest.mark.parametrize(
    ("labels", "match"),
    [
        ("board:x", "a list of names"),
        (["board x"], "board x"),
        (["a,b"], "a,b"),
        (["-x"], "-x"),
        (["x" * 101], "at most 100 characters"),
    ],
    ids=["a string", "a space", "a comma", "leading dash", "too long"],
)
def test_a_bad_label_list_is_refused_and_nothing_is_created(labels, match):
    refused(
        InvalidInput,
        match,
        lambda: services.host_create(hostname="h1", labels=labels, by="sam"),
        field="labels",
    )
    assert not Label.objects.exists()


def test_a_label_of_100_characters_is_accepted():
    host = services.host_create(hostname="h1", labels=["x" * 100], by="sam")
    assert host.label_names == ["x" * 100]


# --- host_create ----------------------------------------------------------------------------


def test_creating_a_host_records_its_labels_and_who_added_it(django_capture_on_commit_callbacks):
    w = f.worker("w1")
    made = {}

    def create() -> None:
        made["host"] = services.host_create(
            hostname="dut-1.lab", labels=["bt", "board:x"], worker=w, by="sam", current_build="R1"
        )

    assert ticks_enqueued(create, django_capture_on_commit_callbacks) == 1
    host = Host.objects.get(hostname="dut-1.lab")
    assert (host.status, host.worker, host.current_build) == (HostStatus.READY, w, "R1")
    assert host.label_names == ["board:x", "bt"]
    event = HostEvent.objects.get(host=host)
    assert (event.kind, event.actor, event.message) == (
        EventKind.CREATED,
        "sam",
        "labels: board:x, bt",
    )


def test_a_host_created_out_of_service_asks_for_no_tick(django_capture_on_commit_callbacks):
    def create() -> None:
        services.host_create(hostname="h1", status=HostStatus.NEEDS_REPAIR, by="sam")

    assert ticks_enqueued(create, django_capture_on_commit_callbacks) == 0
    assert Host.objects.get().status == HostStatus.NEEDS_REPAIR
    assert HostEvent.objects.get().message == "labels: (none)"


def test_a_host_with_a_bad_status_is_refused():
    refused(
        InvalidInput,
        "not one of",
        lambda: services.host_create(hostname="h1", status="melted", by="sam"),
        field="status",
    )


def test_a_duplicate_hostname_names_the_field_and_changes_nothing():
    f.host("h1")
    refused(
        Conflict,
        "already exists",
        lambda: services.host_create(hostname="h1", labels=["new"], by="sam"),
        field="hostname",
    )
    assert not Label.objects.filter(name="new").exists()


# --- host_update ----------------------------------------------------------------------------


def test_an_update_that_changes_nothing_writes_nothing(django_capture_on_commit_callbacks):
    w = f.worker("w1")
    host = f.host("h1", ["board:x"], worker=w, build="R1")
    before = rows()

    def update() -> None:
        job_services.host_update(
            host=host, by="sam", labels=["board:x"], worker=w, current_build="R1", status="ready"
        )

    assert ticks_enqueued(update, django_capture_on_commit_callbacks) == 0
    assert rows() == before


def test_an_update_asks_for_a_tick(django_capture_on_commit_callbacks):
    host = f.host("h1", ["board:x"])

    def update() -> None:
        services.host_update(host=host, by="sam", labels=["board:y"])

    assert ticks_enqueued(update, django_capture_on_commit_callbacks) == 1


def test_taking_a_host_off_its_worker_is_audited():
    host = f.host("h1", worker=f.worker("w1"))
    services.host_update(host=host, by="sam", worker=None)
    assert Host.objects.get().worker is None
    assert HostEvent.objects.get(kind=EventKind.UPDATED).message == "worker w1 → (none)"


def test_an_update_with_a_status_writes_a_status_event_after_the_other_changes():
    host = f.host("h1", build="R1")
    job_services.host_update(
        host=host, by="sam", current_build="R2", status=HostStatus.NEEDS_REPAIR
    )
    host.refresh_from_db()
    assert (host.current_build, host.status) == ("R2", HostStatus.NEEDS_REPAIR)
    events = HostEvent.objects.filter(host=host).order_by("pk")
    kinds = list(events.values_list("kind", "message", "old_status", "new_status"))
    assert kinds[1:] == [
        (EventKind.UPDATED, "build R1 → R2", "", ""),
        (EventKind.STATUS, "", HostStatus.READY, HostStatus.NEEDS_REPAIR),
    ]


def test_an_update_with_a_bad_status_changes_nothing_else():
    host = f.host("h1", ["board:x"], build="R1")
    refused(
        InvalidInput,
        "not one of",
        lambda: job_services.host_update(
            host=host, by="sam", labels=["board:y"], current_build="R2", status="melted"
        ),
        field="status",
    )


def test_an_update_with_a_bad_label_changes_nothing_else():
    host = f.host("h1", ["board:x"], build="R1")
    refused(
        InvalidInput,
        "board y",
        lambda: services.host_update(host=host, by="sam", labels=["board y"], current_build="R2"),
        field="labels",
    )


# --- host_set_status ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("old", "new", "ticks"),
    [
        (HostStatus.READY, HostStatus.NEEDS_REPAIR, 0),
        (HostStatus.NEEDS_REPAIR, HostStatus.RETIRED, 0),
        (HostStatus.REPAIRING, HostStatus.REPAIR_FAILED, 0),
        (HostStatus.REPAIR_FAILED, HostStatus.READY, 1),
        (HostStatus.REPAIRING, HostStatus.READY, 1),
    ],
)
def test_each_status_move_is_audited_and_only_ready_asks_for_a_tick(
    old, new, ticks, django_capture_on_commit_callbacks
):
    host = f.host("h1", status=old)

    def move() -> None:
        job_services.host_set_status(host=host, status=new, by="sam")

    assert ticks_enqueued(move, django_capture_on_commit_callbacks) == ticks
    assert Host.objects.get().status == new
    event = HostEvent.objects.get(kind=EventKind.STATUS)
    assert (event.actor, event.old_status, event.new_status) == ("sam", old, new)


def test_setting_the_status_a_host_has_is_not_an_error_and_writes_nothing():
    host = f.host("h1", status=HostStatus.REPAIRING)
    before = rows()
    job_services.host_set_status(host=host, status=HostStatus.REPAIRING, by="sam")
    assert rows() == before


def test_setting_the_status_of_a_deleted_host_is_a_conflict():
    host = f.host("h1")
    job_services.host_delete(host=host, by="sam")
    refused(
        Conflict,
        "no longer exists",
        lambda: job_services.host_set_status(host=host, status=HostStatus.REPAIRING, by="sam"),
    )


# --- host_delete ----------------------------------------------------------------------------


def test_a_host_with_nothing_but_its_creation_is_deleted():
    host = f.host("h1", ["board:x"])
    assert job_services.host_delete(host=host, by="sam") is None
    assert not Host.objects.exists()
    deleted = HostEvent.objects.get(kind=EventKind.DELETED)
    assert (deleted.subject, deleted.actor) == ("h1", "sam")


def test_a_host_that_ran_a_job_is_retired_with_its_history_kept():
    host = f.host("h1", ["board:x"])
    f.job("J1")
    job_services.scheduler_tick()
    lease = Lease.objects.get()
    job_services.lease_job_complete(lease=lease, result="passed", by="runner")
    events_before = HostEvent.objects.filter(host=host).count()

    retired = job_services.host_delete(host=host, by="sam")

    assert retired is not None and retired.status == HostStatus.RETIRED
    assert Lease.objects.filter(pk=lease.pk, host=host).exists()
    assert not Host.objects.schedulable(timezone.now()).exists()
    kinds = list(HostEvent.objects.filter(host=host).values_list("kind", flat=True)[:2])
    assert kinds == [EventKind.RETIRED, EventKind.STATUS]
    assert HostEvent.objects.filter(host=host).count() == events_before + 2
    refused(Conflict, "retired already", lambda: job_services.host_delete(host=host, by="sam"))


def test_a_locked_host_is_retired_rather_than_deleted():
    host = services.host_lock(host=f.host("h1"), by="sam", reason="flaky USB")
    job_services.host_delete(host=host, by="sam")
    assert Host.objects.get().status == HostStatus.RETIRED


def test_a_host_with_a_running_job_cannot_be_deleted():
    host = f.host("h1", ["board:x"])
    f.job("J1")
    job_services.scheduler_tick()
    refused(Conflict, "active lease", lambda: job_services.host_delete(host=host, by="sam"))


def test_a_host_an_unfinished_test_is_pinned_to_cannot_be_deleted():
    host = f.host("h1", ["board:x"], status=HostStatus.NEEDS_REPAIR)
    f.job("J1", host=host)
    refused(Conflict, "pinned", lambda: job_services.host_delete(host=host, by="sam"))


# --- workers --------------------------------------------------------------------------------


def test_creating_a_worker_is_audited():
    w = services.worker_create(name="w1", by="sam")
    assert not w.paused
    event = HostEvent.objects.get(worker=w)
    assert (event.kind, event.actor, event.message) == (EventKind.CREATED, "sam", "worker w1 added")


def test_a_worker_created_paused_says_why(admin_user):
    w = services.worker_create(name="w1", by=admin_user, paused=True)
    assert (w.paused, w.paused_reason, w.paused_by) == (True, "paused when created", admin_user)
    w = services.worker_create(name="w2", by=admin_user, paused=True, reason=" rack move ")
    assert w.paused_reason == "rack move"


@pytest.mark.parametrize("name", ["", "has space", "-w", "a/b"])
def test_a_bad_worker_name_is_refused(name):
    refused(
        InvalidInput,
        "name",
        lambda: services.worker_create(name=name, by="sam"),
        field="name",
    )


def test_a_duplicate_worker_is_a_conflict():
    f.worker("w1")
    refused(
        Conflict,
        "already exists",
        lambda: services.worker_create(name="w1", by="sam"),
        field="name",
    )


def test_a_worker_name_over_100_characters_is_refused():
    refused(
        InvalidInput,
        "at most 100",
        lambda: services.worker_create(name="w" * 101, by="sam"),
        field="name",
    )


def test_a_pause_reason_over_500_characters_is_refused_when_creating_a_worker():
    refused(
        InvalidInput,
        "at most 500",
        lambda: services.worker_create(name="w1", by="sam", paused=True, reason="x" * 501),
        field="reason",
    )


def test_renaming_a_worker_and_changing_its_runner_are_audited():
    w = f.worker("w1")
    runner = get_user_model().objects.create(username="runner-x")
    services.worker_update(worker=w, by="sam", name="w2", runner=runner)
    w.refresh_from_db()
    assert (w.name, w.runner) == ("w2", runner)
    event = HostEvent.objects.get(worker=w, kind=EventKind.UPDATED)
    assert (event.actor, event.message) == ("sam", "renamed w1 → w2; runner (none) → runner-x")


def test_a_worker_update_that_changes_nothing_writes_nothing():
    w = f.worker("w1")
    before = rows()
    services.worker_update(worker=w, by="sam", name="w1", runner=None)
    assert rows() == before


@pytest.mark.parametrize(
    ("name", "error", "match"),
    [
        ("has space", InvalidInput, "name"),
        ("w" * 101, InvalidInput, "at most 100"),
        ("w2", Conflict, "already exists"),
    ],
    ids=["bad", "too long", "taken"],
)
def test_a_bad_rename_is_refused(name, error, match):
    w = f.worker("w1")
    f.worker("w2")
    refused(
        error, match, lambda: services.worker_update(worker=w, by="sam", name=name), field="name"
    )


def test_a_worker_without_hosts_or_history_is_deleted():
    w = f.worker("w1")
    assert services.worker_delete(worker=w, by="sam") is None
    assert not Worker.objects.exists()


def test_a_worker_with_hosts_is_kept_with_its_hosts():
    w = f.worker("w1")
    f.host("h1", worker=w)
    refused(Conflict, "retire or move", lambda: services.worker_delete(worker=w, by="sam"))


def test_a_worker_whose_hosts_are_retired_is_retired_itself():
    w = f.worker("w1")
    host = f.host("h1", worker=w)
    services.host_lock(host=host, by="sam", reason="gone")
    job_services.host_delete(host=host, by="sam")

    retired = services.worker_delete(worker=w, by="sam")

    assert retired is not None and retired.retired_at is not None
    assert Worker.objects.get().events.first().kind == EventKind.RETIRED
    refused(Conflict, "retired already", lambda: services.worker_delete(worker=w, by="sam"))


def test_a_worker_with_history_is_retired_not_deleted():
    w = services.worker_pause(worker=f.worker("w1"), by="sam", reason="moving racks")
    services.worker_delete(worker=w, by="sam")
    assert Worker.objects.get().retired_at is not None


def test_a_heartbeat_from_an_online_worker_is_not_audited(django_capture_on_commit_callbacks):
    w = f.worker("w1")
    events = HostEvent.objects.count()
    at = timezone.now() + timedelta(seconds=30)

    def beat() -> None:
        services.worker_heartbeat(worker=w, at=at)

    assert ticks_enqueued(beat, django_capture_on_commit_callbacks) == 0
    assert Worker.objects.get().last_seen == at
    assert HostEvent.objects.count() == events


# --- a worker's runner account --------------------------------------------------------------


def test_a_runner_account_is_made_once_and_linked_to_its_worker():
    worker, user = services.worker_runner_ensure(worker_name="w1", by="sam")
    assert (worker.runner, user.get_username()) == (user, "runner-w1")
    assert not user.has_usable_password() and user.groups.filter(name="runners").exists()
    again, same = services.worker_runner_ensure(worker_name="w1", by="sam")
    assert (again.pk, same.pk) == (worker.pk, user.pk)
    messages = list(
        HostEvent.objects.filter(worker=worker).order_by("pk").values_list("kind", "message")
    )
    assert messages == [
        (EventKind.CREATED, "worker w1 added"),
        (EventKind.UPDATED, "runner (none) → runner-w1"),
    ]


@pytest.mark.parametrize(
    ("worker_name", "username", "field"),
    [
        ("w" * 101, None, "name"),
        ("w1", "r" * 151, "username"),
        ("w1", "has space", "username"),
        ("w1", " ", "username"),
    ],
    ids=["long worker name", "long username", "bad username", "blank username"],
)
def test_a_bad_runner_account_is_refused_and_creates_nothing(worker_name, username, field):
    users = get_user_model().objects.count()
    refused(
        InvalidInput,
        field,
        lambda: services.worker_runner_ensure(worker_name=worker_name, username=username, by="sam"),
        field=field,
    )
    assert get_user_model().objects.count() == users


# --- several hosts at once ------------------------------------------------------------------


def test_a_bulk_lock_locks_the_free_hosts_and_reports_the_others():
    h1, h2 = f.host("h1"), f.host("h2")
    services.host_lock(host=h2, by="sam", reason="already")
    results = services.hosts_bulk_lock(hosts=[h1, h2], by="sam", reason="rack move")
    assert results == {"h1": None, "h2": "host h2 is already locked"}
    assert dict(Host.objects.values_list("hostname", "lock_reason")) == {
        "h1": "rack move",
        "h2": "already",
    }
    assert HostEvent.objects.filter(kind=EventKind.LOCKED).count() == 2
    results = services.hosts_bulk_lock(hosts=[h1, h2], by="sam", reason="", unlock=True)
    assert results == {"h1": None, "h2": None}
    assert not Host.objects.filter(locked=True).exists()


def test_a_bulk_lock_without_a_reason_locks_nothing():
    h1 = f.host("h1")
    refused(
        InvalidInput,
        "reason is required",
        lambda: services.hosts_bulk_lock(hosts=[h1], by="sam", reason=" "),
        field="reason",
    )
    assert not Host.objects.filter(locked=True).exists()
