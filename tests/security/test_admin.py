"""Django admin keeps the lab's rules: audit rows are view-only, state changes go through the
services, and no delete ends a live lease."""

from __future__ import annotations

from datetime import timedelta
from types import SimpleNamespace

import pytest
from django.test import Client

from hosts import services as host_services
from hosts.models import Host, HostEvent, Label, Worker
from jobs import services
from jobs import services as job_services
from jobs.choices import OutboxKind
from jobs.models import Job, Lease, OutboxEntry, SchedulerTick, Suite
from tests import factories as f
from tests.factories import signed_in
from tests.security.conftest import snapshot

pytestmark = pytest.mark.django_db


@pytest.fixture
def root(django_user_model) -> Client:  # noqa: ANN001
    """A superuser signed in to the admin: every permission Django knows of."""
    return signed_in(django_user_model.objects.create_superuser("root", password="root-pass"))


@pytest.fixture
def leased(db):  # noqa: ANN001, ANN201
    """Suite S: one job leased on h1 (on w1), one still queued; a free host h2 with no history."""
    w1 = f.worker("w1")
    h1 = f.host("h1.lab", ["board:x"], worker=w1)
    suite = f.suite("S", [["board:x"], ["board:none"]])
    services.scheduler_tick()
    lease = Lease.objects.get(released_at=None)
    return SimpleNamespace(
        w1=w1,
        h1=h1,
        h2=f.host("h2.lab", ["board:y"]),
        suite=suite,
        lease=lease,
        job=lease.job,
        queued=suite.jobs.exclude(pk=lease.job_id).get(),
    )


def bulk_delete(client: Client, url: str, *pks: int):  # noqa: ANN201
    """Tick rows on the changelist, choose "Delete selected", and confirm."""
    data = {"action": "delete_selected", "_selected_action": [str(pk) for pk in pks]}
    client.post(url, data)  # the confirmation page
    return client.post(url, {**data, "post": "yes"})


# --- deletes that would end a live lease --------------------------------------------------


@pytest.mark.parametrize(
    ("model", "target"),
    [("suite", lambda lab: lab.suite), ("job", lambda lab: lab.job), ("host", lambda lab: lab.h1)],
)
def test_deleting_what_holds_a_live_lease_is_refused_and_changes_nothing(
    root, leased, model, target
):
    obj = target(leased)
    url = f"/admin/{obj._meta.app_label}/{model}/{obj.pk}/delete/"
    before = snapshot()

    page = root.get(url)
    confirmed = root.post(url, {"post": "yes"})
    bulk = bulk_delete(root, f"/admin/{obj._meta.app_label}/{model}/", obj.pk)

    assert page.status_code == 200
    assert f"active lease {leased.lease.pk}" in page.content.decode()
    assert "Yes, I’m sure" not in page.content.decode()
    assert confirmed.status_code == 200 and bulk.status_code == 200
    assert f"active lease {leased.lease.pk}" in bulk.content.decode()
    assert snapshot() == before


def test_deleting_a_worker_whose_host_holds_a_lease_is_refused(root, leased):
    before = snapshot()
    root.post(f"/admin/hosts/worker/{leased.w1.pk}/delete/", {"post": "yes"})
    bulk_delete(root, "/admin/hosts/worker/", leased.w1.pk)
    assert snapshot() == before


def test_a_bulk_delete_mixing_free_and_leased_suites_deletes_nothing(root, leased):
    idle = f.suite("idle", [["board:none"]])
    before = snapshot()

    response = bulk_delete(root, "/admin/jobs/suite/", idle.pk, leased.suite.pk)

    assert f"active lease {leased.lease.pk}" in response.content.decode()
    assert snapshot() == before


def test_a_suite_or_job_without_a_live_lease_can_still_be_deleted(root, leased):
    idle = f.suite("idle", [["board:none"]])
    response = root.post(f"/admin/jobs/suite/{idle.pk}/delete/", {"post": "yes"})
    assert response.status_code == 302 and not Suite.objects.filter(pk=idle.pk).exists()

    response = bulk_delete(root, "/admin/jobs/job/", leased.queued.pk)
    assert response.status_code == 302 and not Job.objects.filter(pk=leased.queued.pk).exists()
    assert Lease.objects.get(pk=leased.lease.pk).released_at is None


def test_a_suite_whose_delete_would_drop_lease_history_is_not_deleted(root, leased):
    services.job_abort(job=leased.job, by="sam")  # the lease ends: only its history is left
    before = snapshot()

    page = root.get(f"/admin/jobs/suite/{leased.suite.pk}/delete/")
    confirmed = root.post(f"/admin/jobs/suite/{leased.suite.pk}/delete/", {"post": "yes"})

    assert "lease" in page.content.decode() and "Yes, I’m sure" not in page.content.decode()
    assert confirmed.status_code == 403  # the delete would cascade to its leases
    assert snapshot() == before


def test_deleting_a_host_with_lease_history_retires_it_and_keeps_its_leases(root, leased):
    services.job_abort(job=leased.job, by="sam")
    url = f"/admin/hosts/host/{leased.h1.pk}/delete/"

    page = root.get(url).content.decode()
    confirmed = root.post(url, {"post": "yes"})

    assert "h1.lab has history: it will be retired" in page and "Yes, I’m sure" in page
    assert confirmed.status_code == 302
    assert Host.objects.get(pk=leased.h1.pk).status == "retired"
    assert Lease.objects.filter(pk=leased.lease.pk, host=leased.h1).exists()
    assert HostEvent.objects.filter(host=leased.h1, kind="retired", actor="root").exists()


def test_a_worker_whose_hosts_are_all_retired_is_retired_from_the_admin(root, leased):
    services.job_abort(job=leased.job, by="sam")
    job_services.host_delete(host=leased.h1, by="sam")
    url = f"/admin/hosts/worker/{leased.w1.pk}/delete/"

    assert "w1 has history: it will be retired" in root.get(url).content.decode()
    assert root.post(url, {"post": "yes"}).status_code == 302
    assert Worker.objects.get(pk=leased.w1.pk).retired_at is not None


@pytest.mark.parametrize("model", ["host", "worker"])
def test_a_deleted_host_or_worker_keeps_its_audit_trail(root, leased, model):
    target = leased.h2 if model == "host" else host_services.worker_create(name="rack-9", by="sam")
    name = str(target)
    history = list(HostEvent.objects.filter(**{model: target}).values_list("pk", flat=True))

    response = root.post(f"/admin/hosts/{model}/{target.pk}/delete/", {"post": "yes"})

    assert response.status_code == 302 and not type(target).objects.filter(pk=target.pk).exists()
    trail = HostEvent.objects.filter(subject=name).order_by("pk")
    assert [e.pk for e in trail][: len(history)] == history
    assert [(e.kind, e.actor) for e in trail][-1] == ("deleted", "root")
    assert all(e.host_id is None and e.worker_id is None for e in trail)


def test_a_worker_with_no_hosts_and_no_history_is_deleted_through_the_service(root):
    spare = f.worker("spare")
    response = root.post(f"/admin/hosts/worker/{spare.pk}/delete/", {"post": "yes"})
    assert response.status_code == 302 and not Worker.objects.filter(pk=spare.pk).exists()


# --- audit rows and leases are view-only ---------------------------------------------------


@pytest.mark.parametrize("model", ["hostevent", "lease"])
def test_audit_events_and_leases_are_view_only_even_for_a_superuser(root, leased, model):
    obj = HostEvent.objects.filter(host=leased.h1).first() if model == "hostevent" else leased.lease
    app = obj._meta.app_label
    before = snapshot()

    assert root.get(f"/admin/{app}/{model}/{obj.pk}/change/").status_code == 200
    assert root.get(f"/admin/{app}/{model}/").status_code == 200
    assert "delete_selected" not in root.get(f"/admin/{app}/{model}/").content.decode()
    refused = [
        root.get(f"/admin/{app}/{model}/add/"),
        root.post(f"/admin/{app}/{model}/add/", {"message": "forged"}),
        root.post(f"/admin/{app}/{model}/{obj.pk}/change/", {"message": "edited"}),
        root.post(f"/admin/{app}/{model}/{obj.pk}/delete/", {"post": "yes"}),
    ]
    bulk = bulk_delete(root, f"/admin/{app}/{model}/", obj.pk)

    assert [r.status_code for r in refused] == [403, 403, 403, 403]
    assert bulk.status_code in (200, 302)
    assert snapshot() == before


def test_outbox_entries_are_shown_to_a_superuser_and_cannot_be_written(root):
    entry = OutboxEntry.objects.create(kind=OutboxKind.JOBS_ENDED, payload={"suite_ids": [7]})
    base = "/admin/jobs/outboxentry/"

    listing = root.get(base)
    assert listing.status_code == 200
    assert "Jobs of suites ended" in listing.content.decode()
    assert root.get(f"{base}{entry.pk}/change/").status_code == 200
    refused = [
        root.get(f"{base}add/"),
        root.post(f"{base}{entry.pk}/change/", {"handled_at": "2026-01-01 00:00"}),
        root.post(f"{base}{entry.pk}/delete/", {"post": "yes"}),
    ]
    assert [r.status_code for r in refused] == [403, 403, 403]
    entry.refresh_from_db()
    assert entry.handled_at is None


# --- hosts and workers change only through the services ------------------------------------


def host_form(host: Host, **changes: object) -> dict:
    data = {
        "hostname": host.hostname,
        "worker": str(host.worker_id or ""),
        "labels": [str(pk) for pk in host.labels.values_list("pk", flat=True)],
        "current_build": host.current_build,
        "status": host.status,
        "locked": "",
        "lock_reason": "",
    }
    data.update(changes)
    return {k: v for k, v in data.items() if v not in (None, False)}


def test_a_hosts_state_cannot_be_edited_in_the_admin(root, leased):
    host = leased.h2
    before = snapshot()

    response = root.post(
        f"/admin/hosts/host/{host.pk}/change/",
        host_form(host, status="needs_repair", locked="on", lock_reason="sneaky"),
    )

    assert response.status_code == 302
    host.refresh_from_db()
    assert (host.status, host.locked, host.lock_reason) == ("ready", False, "")
    assert snapshot() == before


def test_editing_a_hosts_build_labels_and_worker_in_the_admin_is_audited(root, leased):
    host = leased.h2
    eve = Label.objects.create(name="board:eve")

    response = root.post(
        f"/admin/hosts/host/{host.pk}/change/",
        host_form(host, current_build="R2", labels=[str(eve.pk)], worker=str(leased.w1.pk)),
    )

    assert response.status_code == 302
    host.refresh_from_db()
    assert (host.current_build, host.label_names, host.worker) == ("R2", ["board:eve"], leased.w1)
    event = HostEvent.objects.filter(host=host, kind="updated").get()
    assert event.actor == "root"
    assert "build (none) → R2" in event.message and "labels board:y → board:eve" in event.message
    assert "worker (none) → w1" in event.message


def test_adding_a_host_or_worker_in_the_admin_is_audited(root):
    response = root.post("/admin/hosts/worker/add/", {"name": "rack-9"})
    assert response.status_code == 302
    worker = Worker.objects.get(name="rack-9")
    assert HostEvent.objects.filter(worker=worker, kind="created", actor="root").exists()

    response = root.post(
        "/admin/hosts/host/add/", {"hostname": "DUT-9.lab", "worker": str(worker.pk)}
    )
    assert response.status_code == 302
    host = Host.objects.get(hostname="DUT-9.lab")
    assert host.worker == worker
    assert HostEvent.objects.filter(host=host, kind="created", actor="root").exists()


def test_a_workers_pause_cannot_be_edited_but_a_rename_is_audited(root, leased):
    worker = leased.w1
    response = root.post(
        f"/admin/hosts/worker/{worker.pk}/change/",
        {"name": "w1-renamed", "paused": "on", "paused_reason": "sneaky"},
    )

    assert response.status_code == 302
    worker.refresh_from_db()
    assert (worker.name, worker.paused, worker.paused_reason) == ("w1-renamed", False, "")
    event = HostEvent.objects.get(worker=worker, kind="updated")
    assert event.actor == "root" and event.message == "renamed w1 → w1-renamed"


def test_a_workers_max_jobs_set_in_the_admin_is_audited_and_zero_refused(root, leased):
    url = f"/admin/hosts/worker/{leased.w1.pk}/change/"
    refused = root.post(url, {"name": "w1", "max_jobs": "0", "runner_concurrency": "9"})
    assert refused.status_code == 200  # the form again, with its error
    assert Worker.objects.get(pk=leased.w1.pk).max_jobs is None

    response = root.post(url, {"name": "w1", "max_jobs": "4", "runner_concurrency": "9"})

    assert response.status_code == 302
    worker = Worker.objects.get(pk=leased.w1.pk)
    assert (worker.max_jobs, worker.runner_concurrency) == (4, None)  # the runner reports it
    event = HostEvent.objects.get(worker=worker, kind="capacity")
    assert event.actor == "root" and event.message == "max jobs unlimited → 4"


def test_a_label_hosts_carry_cannot_be_renamed_or_deleted_in_the_admin(root, leased):
    label = Label.objects.get(name="board:x")
    before = snapshot()

    renamed = root.post(f"/admin/hosts/label/{label.pk}/change/", {"name": "board:xx"})
    deleted = root.post(f"/admin/hosts/label/{label.pk}/delete/", {"post": "yes"})

    assert renamed.status_code == 403 and deleted.status_code == 200
    assert snapshot() == before
    unused = Label.objects.create(name="board:unused")
    assert root.post(f"/admin/hosts/label/{unused.pk}/delete/", {"post": "yes"}).status_code == 302


def test_every_admin_page_of_the_lab_renders_for_a_superuser(root, leased):
    services.lease_reserve(host=leased.h2, holder="sam", duration=timedelta(hours=1), reason="x")
    services.scheduler_tick()
    for model in (Host, HostEvent, Label, Worker, Suite, Job, Lease, SchedulerTick):
        opts = model._meta
        base = f"/admin/{opts.app_label}/{opts.model_name}/"
        assert root.get(base).status_code == 200, base
        for obj in model.objects.all()[:3]:
            assert root.get(f"{base}{obj.pk}/change/").status_code == 200, (base, obj.pk)
    for model in (Host, Label, Worker):
        opts = model._meta
        assert root.get(f"/admin/{opts.app_label}/{opts.model_name}/add/").status_code == 200
