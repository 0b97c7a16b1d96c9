"""In-place actions: each swaps in what changed, shows its error, and refuses non-staff."""

from __future__ import annotations

from datetime import timedelta

import pytest

from hosts import services as host_services
from hosts.models import Host, HostEvent, Worker
from jobs import services
from jobs.choices import JobStatus
from jobs.models import Job, Lease, Suite
from tests import factories as f
from tests.ui.conftest import HTMX

pytestmark = pytest.mark.django_db


def refreshed(obj):  # noqa: ANN001, ANN201
    obj.refresh_from_db()
    return obj


# --- hosts ----------------------------------------------------------------------------------


def test_staff_locks_a_host_and_gets_its_new_row_back(sam_client, lab):
    response = sam_client.post("/hosts/h1.lab/lock/", {"reason": "flaky usb hub"}, headers=HTMX)
    html = response.content.decode()
    assert response.status_code == 200
    assert html.lstrip().startswith(f'<tr id="host-{lab.h1.pk}"')
    assert "Locked" in html and "flaky usb hub" in html and "Unlock" in html
    assert 'hx-swap-oob="innerHTML"' in html  # the toast announcing it
    host = refreshed(lab.h1)
    assert host.locked and host.lock_reason == "flaky usb hub" and host.locked_by.username == "sam"
    assert HostEvent.objects.filter(host=host, kind="locked", actor="sam").exists()


def test_locking_without_a_reason_shows_the_error_next_to_the_field(sam_client, lab):
    response = sam_client.post("/hosts/h1.lab/lock/", {"reason": "  "}, headers=HTMX)
    html = response.content.decode()
    assert response.status_code == 400
    assert "A reason is required to lock a host" in html
    assert 'aria-invalid="true"' in html and "<details open>" in html
    assert not refreshed(lab.h1).locked


def test_locking_a_locked_host_is_a_conflict_shown_in_the_row(sam_client, lab):
    host_services.host_lock(host=lab.h1, by="bob", reason="mine")
    response = sam_client.post("/hosts/h1.lab/lock/", {"reason": "also mine"}, headers=HTMX)
    assert response.status_code == 409
    assert "Host h1.lab is already locked" in response.content.decode()
    assert refreshed(lab.h1).lock_reason == "mine"


def test_staff_unlocks_a_host(sam_client, lab):
    host_services.host_lock(host=lab.h1, by="sam", reason="debugging")
    response = sam_client.post("/hosts/h1.lab/unlock/", headers=HTMX)
    assert response.status_code == 200 and "Unlocked h1.lab" in response.content.decode()
    assert not refreshed(lab.h1).locked


def test_the_host_page_gets_its_whole_body_back(sam_client, lab):
    response = sam_client.post(
        "/hosts/h1.lab/lock/", {"reason": "bench", "fragment": "detail"}, headers=HTMX
    )
    assert response.content.decode().lstrip().startswith('<div id="host-detail"')


def test_a_tester_sees_no_staff_controls(alice_client, lab):
    f.job("j", ["board:eve"])
    services.scheduler_tick()
    pages = {
        "/hosts/": ["Lock…", "bulk-form", 'name="hosts"'],
        "/hosts/h1.lab/": ["Lock it", "Release, requeue job", "Reserve it"],
        "/workers/": ["Pause…", "Resume"],
        "/leases/": ["Release…", 'id="reserve-form"'],  # the staff form: a tester has its own
    }
    for path, controls in pages.items():
        html = alice_client.get(path).content.decode()
        for control in controls:
            assert control not in html, (path, control)


@pytest.mark.parametrize(
    ("path", "data"),
    [
        ("/hosts/h1.lab/lock/", {"reason": "forged"}),
        ("/hosts/h2.lab/unlock/", {}),
        ("/hosts/", {"action": "lock", "hosts": ["h1.lab"], "reason": "forged"}),
        ("/workers/w1/pause/", {"reason": "forged"}),
        ("/workers/w2/resume/", {}),
        ("/leases/", {"host": "h3.lab", "minutes": "60", "reason": "forged"}),
        ("/leases/{lease}/release/", {"requeue": "0"}),
    ],
)
def test_a_forged_staff_post_from_a_tester_is_refused_and_changes_nothing(
    alice_client, lab, path, data
):
    host_services.host_lock(host=lab.h2, by="sam", reason="kept")
    host_services.worker_pause(worker=lab.w2, by="sam", reason="kept")
    job = f.job("j", ["board:eve"])
    services.scheduler_tick()
    lease = Lease.objects.get(job=job)
    before = (
        list(Host.objects.values_list("locked", flat=True).order_by("id")),
        list(Worker.objects.values_list("paused", flat=True).order_by("id")),
        Lease.objects.filter(released_at__isnull=True).count(),
    )
    response = alice_client.post(path.format(lease=lease.pk), data, headers=HTMX)
    assert response.status_code == 403
    assert "Only lab staff" in response.content.decode()
    assert response["HX-Reswap"] == "none"  # the page stays as it was; a toast says why
    after = (
        list(Host.objects.values_list("locked", flat=True).order_by("id")),
        list(Worker.objects.values_list("paused", flat=True).order_by("id")),
        Lease.objects.filter(released_at__isnull=True).count(),
    )
    assert after == before


def test_a_plain_form_post_without_javascript_redirects_back_with_a_message(sam_client, lab):
    response = sam_client.post(
        "/hosts/h1.lab/lock/", {"reason": "no js"}, headers={"Referer": "/hosts/?label=pool:cq"}
    )
    assert response.status_code == 302 and response["Location"] == "/hosts/?label=pool:cq"
    assert "Locked h1.lab: no js" in sam_client.get(response["Location"]).content.decode()


# --- bulk -----------------------------------------------------------------------------------


def test_a_bulk_lock_that_changed_nothing_is_red(sam_client, lab):
    host_services.host_lock(host=lab.h2, by="bob", reason="bob's")
    response = sam_client.post(
        "/hosts/", {"action": "lock", "hosts": ["h2.lab"], "reason": "rack move"}, headers=HTMX
    )
    html = response.content.decode()
    assert response.status_code == 409
    assert '<p class="banner err" role="status">Locked 0 hosts, 1 already locked.</p>' in html
    assert "toast-err" in html


def test_a_bulk_unlock_of_unlocked_and_locked_hosts_is_green_when_all_done(sam_client, lab):
    host_services.host_lock(host=lab.h1, by="bob", reason="bob's")
    response = sam_client.post("/hosts/", {"action": "unlock", "hosts": ["h1.lab"]}, headers=HTMX)
    assert '<p class="banner ok" role="status">Unlocked 1 host.</p>' in response.content.decode()


def test_bulk_lock_reports_each_host_and_skips_the_locked_one(sam_client, lab):
    host_services.host_lock(host=lab.h2, by="bob", reason="bob's")
    response = sam_client.post(
        "/hosts/",
        {"action": "lock", "hosts": ["h1.lab", "h2.lab", "h3.lab"], "reason": "rack move"},
        headers={**HTMX, "HX-Current-URL": "http://testserver/hosts/?label=board:eve"},
    )
    html = response.content.decode()
    assert response.status_code == 200
    # Partly done, the rest already as asked: neutral news, not an error.
    assert '<p class="banner info" role="status">Locked 2 hosts, 1 already locked.</p>' in html
    assert "toast-info" in html
    assert 'hx-get="/hosts/?label=board%3Aeve"' in html  # the table keeps its filters
    assert "h3.lab" not in html  # ...so only board:eve hosts are shown again
    assert refreshed(lab.h1).lock_reason == "rack move"
    assert refreshed(lab.h2).lock_reason == "bob's"
    assert refreshed(lab.h3).lock_reason == "rack move"


def test_bulk_lock_without_a_reason_keeps_the_selection_and_says_why(sam_client, lab):
    response = sam_client.post(
        "/hosts/", {"action": "lock", "hosts": ["h1.lab", "h3.lab"], "reason": ""}, headers=HTMX
    )
    html = response.content.decode()
    assert response.status_code == 400
    assert "A reason is required to lock hosts" in html
    assert 'value="h1.lab" aria-label="Select h1.lab" checked' in html
    assert 'value="h2.lab" aria-label="Select h2.lab">' in html
    assert not Host.objects.filter(locked=True).exists()


def test_bulk_action_with_nothing_selected_says_so(sam_client, lab):
    response = sam_client.post("/hosts/", {"action": "unlock"}, headers=HTMX)
    assert response.status_code == 400
    assert "Select at least one host first" in response.content.decode()


def test_bulk_unlock(sam_client, lab):
    for host in (lab.h1, lab.h2):
        host_services.host_lock(host=host, by="sam", reason="x")
    response = sam_client.post(
        "/hosts/", {"action": "unlock", "hosts": ["h1.lab", "h2.lab"]}, headers=HTMX
    )
    assert "Unlocked 2 hosts." in response.content.decode()
    assert not Host.objects.filter(locked=True).exists()


def test_bulk_lock_where_every_host_is_already_locked_is_a_conflict(sam_client, lab):
    host_services.host_lock(host=lab.h1, by="sam", reason="x")
    response = sam_client.post(
        "/hosts/", {"action": "lock", "hosts": ["h1.lab"], "reason": "y"}, headers=HTMX
    )
    assert response.status_code == 409


# --- workers --------------------------------------------------------------------------------


def test_staff_pauses_and_resumes_a_worker(sam_client, lab):
    paused = sam_client.post("/workers/w1/pause/", {"reason": "kernel upgrade"}, headers=HTMX)
    assert paused.status_code == 200
    assert "Paused w1: kernel upgrade" in paused.content.decode()
    assert refreshed(lab.w1).paused_reason == "kernel upgrade"
    resumed = sam_client.post("/workers/w1/resume/", headers=HTMX)
    assert resumed.status_code == 200 and "Pause…" in resumed.content.decode()
    assert not refreshed(lab.w1).paused


def test_pausing_without_a_reason_is_refused_inline(sam_client, lab):
    response = sam_client.post("/workers/w1/pause/", {"reason": ""}, headers=HTMX)
    assert response.status_code == 400
    assert "A reason is required to pause a worker" in response.content.decode()
    assert not refreshed(lab.w1).paused


def test_resuming_a_running_worker_is_a_conflict(sam_client, lab):
    response = sam_client.post("/workers/w1/resume/", {"fragment": "detail"}, headers=HTMX)
    assert response.status_code == 409
    assert response.content.decode().lstrip().startswith('<div id="worker-detail"')
    assert "Worker w1 is not paused" in response.content.decode()


# --- leases ---------------------------------------------------------------------------------


@pytest.fixture
def leased(lab):  # noqa: ANN001, ANN201
    job = f.job("login_Smoke", ["board:kevin"], max_retries=1)
    services.scheduler_tick()
    return Lease.objects.get(job=job)


def test_staff_releases_a_lease_and_the_job_is_requeued(sam_client, leased):
    response = sam_client.post(
        f"/leases/{leased.pk}/release/", {"requeue": "1", "reason": "runner stuck"}, headers=HTMX
    )
    html = response.content.decode()
    assert response.status_code == 200
    assert "Released h3.lab; job login_Smoke requeued." in html
    assert "Released" in html and "Release…" not in html  # the row now shows it released
    assert refreshed(leased).released_at is not None
    assert Job.objects.get(name="login_Smoke").status == JobStatus.QUEUED


def test_staff_can_release_and_abort_the_job(sam_client, leased):
    sam_client.post(f"/leases/{leased.pk}/release/", {"requeue": "0"}, headers=HTMX)
    assert Job.objects.get(name="login_Smoke").status == JobStatus.ABORTED


def test_releasing_a_released_lease_is_a_conflict(sam_client, leased):
    services.lease_release(lease=leased, by="sam")
    response = sam_client.post(f"/leases/{leased.pk}/release/", headers=HTMX)
    assert response.status_code == 409
    assert f"Lease {leased.pk} is no longer active" in response.content.decode()


def test_releasing_from_the_host_page_returns_the_host_page(sam_client, leased):
    response = sam_client.post(f"/leases/{leased.pk}/release/", {"fragment": "host"}, headers=HTMX)
    html = response.content.decode()
    assert html.lstrip().startswith('<div id="host-detail"') and "No lease" in html


def test_staff_reserves_a_free_host_and_the_lease_table_updates(sam_client, lab):
    response = sam_client.post(
        "/leases/",
        {"host": "h2.lab", "minutes": "120", "reason": "flashing firmware"},
        headers={**HTMX, "HX-Current-URL": "http://testserver/leases/?active=true"},
    )
    html = response.content.decode()
    assert response.status_code == 200
    assert html.lstrip().startswith('<form id="reserve-form"')
    assert 'id="leases-table" class="live-region"' in html and 'hx-swap-oob="true"' in html
    assert "flashing firmware" in html  # the new reservation, in the refreshed table
    lease = Lease.objects.get(host=lab.h2, released_at__isnull=True)
    assert lease.job is None and lease.holder.username == "sam"
    assert timedelta(minutes=119) < lease.expires_at - lease.acquired_at <= timedelta(minutes=120)


@pytest.mark.parametrize(
    ("data", "status", "message"),
    [
        ({"host": "h2.lab", "minutes": "60", "reason": ""}, 400, "A reason is required"),
        ({"host": "nope.lab", "minutes": "60", "reason": "x"}, 400, "No host is named nope.lab"),
        ({"host": "", "minutes": "60", "reason": "x"}, 400, "Choose a host to reserve"),
        ({"host": "h2.lab", "minutes": "7", "reason": "x"}, 400, "Choose how long"),
    ],
)
def test_a_bad_reservation_is_explained_next_to_the_form(sam_client, lab, data, status, message):
    response = sam_client.post("/leases/", data, headers=HTMX)
    html = response.content.decode()
    assert response.status_code == status
    assert message in html and 'aria-invalid="true"' in html
    assert f'value="{data["reason"]}"' in html  # what was typed is kept
    assert not Lease.objects.exists()


def test_reserving_a_leased_host_is_a_conflict(sam_client, leased):
    response = sam_client.post(
        "/leases/", {"host": "h3.lab", "minutes": "60", "reason": "x"}, headers=HTMX
    )
    assert response.status_code == 409
    assert "Host h3.lab is already leased" in response.content.decode()


def test_reserving_from_the_host_page(sam_client, lab):
    response = sam_client.post(
        "/leases/",
        {"host": "h1.lab", "minutes": "60", "reason": "manual debug", "fragment": "host"},
        headers=HTMX,
    )
    html = response.content.decode()
    assert html.lstrip().startswith('<div id="host-detail"') and "manual debug" in html
    assert "End reservation" in html


# --- suites ---------------------------------------------------------------------------------


def test_a_tester_aborts_her_own_suite(alice_client, alice, lab):
    suite = f.suite("mine", 3, labels=["board:eve"], owner=alice)
    services.scheduler_tick()
    response = alice_client.post(f"/suites/{suite.pk}/abort/", headers=HTMX)
    html = response.content.decode()
    assert response.status_code == 200
    assert "Aborted suite mine: 3 unfinished jobs stopped." in html
    assert html.lstrip().startswith('<div id="suite-detail"') and "Abort suite" not in html
    assert not Job.objects.filter(suite=suite).exclude(status=JobStatus.ABORTED).exists()
    assert not Lease.objects.filter(released_at__isnull=True).exists()


def test_a_tester_cannot_abort_someone_elses_suite(bob_client, alice, lab):
    suite = f.suite("alices", 2, owner=alice)
    response = bob_client.post(f"/suites/{suite.pk}/abort/", headers=HTMX)
    assert response.status_code == 403
    assert refreshed(suite).aborted_at is None


def test_staff_abort_any_suite_and_a_second_abort_is_a_conflict(sam_client, alice, lab):
    suite = f.suite("alices", 1, owner=alice)
    assert sam_client.post(f"/suites/{suite.pk}/abort/", headers=HTMX).status_code == 200
    again = sam_client.post(f"/suites/{suite.pk}/abort/", headers=HTMX)
    assert again.status_code == 409
    assert "is already aborted" in again.content.decode()
    assert Suite.objects.get(pk=suite.pk).aborted_by == "sam"
