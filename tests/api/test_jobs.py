"""/api/jobs/: standalone submission, wait reasons, abort, and the runner protocol."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from hosts import services as host_services
from hosts.models import Host, HostEvent, Worker
from jobs import services
from jobs.models import Job, Lease
from jobs.scheduling.maintenance import create_maintenance_jobs
from tests import factories as f
from tests.api.conftest import active_lease

pytestmark = pytest.mark.django_db


def test_a_tester_submits_a_standalone_job_that_waits_for_the_next_tick(alice_client, eve):
    response = alice_client.post(
        "/api/jobs/", {"name": "solo", "labels": ["board:eve"], "priority": "pfq"}
    )

    assert response.status_code == 201, response.json()
    body = response.json()
    assert (body["suite"], body["owner"], body["priority"]) == (None, "alice", 60)
    assert body["status"] == "queued" and body["lease"] is None
    assert body["wait_reason"]["code"] == "pending_tick"


def test_a_queued_job_says_why_it_waits_after_a_tick(alice_client):
    f.host("h1", ["board:eve"])
    job = f.job("J", ["board:sarien"])
    services.scheduler_tick()

    reason = alice_client.get(f"/api/jobs/{job.pk}/").json()["wait_reason"]

    assert reason["code"] and "board:sarien" in reason["message"]


def test_a_leased_job_shows_its_lease_and_no_wait_reason(alice_client, lab):
    body = alice_client.get(f"/api/jobs/{lab.leased.pk}/").json()
    assert body["wait_reason"] is None
    assert body["lease"]["host"] == lab.h2.hostname
    assert body["lease"]["id"] == active_lease(lab.leased).pk


def test_a_standalone_job_pinned_to_an_unknown_host_is_a_400(alice_client):
    response = alice_client.post("/api/jobs/", {"name": "solo", "host": "nope"})
    assert response.status_code == 400
    assert response.json() == {"host": ["No host named nope."]}


def test_jobs_filter_by_status_suite_and_every_label(staff_client, lab):
    def ids(query: str) -> set[int]:
        response = staff_client.get(f"/api/jobs/?{query}")
        assert response.status_code == 200, response.json()
        return {j["id"] for j in response.json()["results"]}

    assert ids("status=running") == {lab.running.pk}
    assert ids("status=queued&status=leased") == {lab.leased.pk, lab.queued.pk, lab.other.pk}
    assert ids(f"suite={lab.suite.pk}") == {lab.running.pk, lab.leased.pk}
    assert ids("label=board:none") == {lab.queued.pk}
    assert ids("label=board:x&label=board:none") == set()
    assert ids("standalone=true") == {lab.other.pk, lab.queued.pk}
    assert staff_client.get("/api/jobs/?suite=notanumber").status_code == 400
    assert staff_client.get("/api/jobs/?status=exploded").status_code == 400


# --- the runner protocol --------------------------------------------------------------------


def test_the_runner_starts_heartbeats_and_completes_its_job(runner_client, lab):
    lease = active_lease(lab.leased)

    started = runner_client.post(f"/api/jobs/{lab.leased.pk}/start/", {"lease": lease.pk})
    assert started.status_code == 200, started.json()
    assert started.json()["status"] == "running"

    beat = runner_client.post(f"/api/leases/{lease.pk}/heartbeat/")
    assert beat.status_code == 200
    assert beat.json()["heartbeat_at"] is not None

    done = runner_client.post(
        f"/api/jobs/{lab.leased.pk}/complete/",
        {"lease": lease.pk, "result": "failed", "message": "tail of the log"},
    )
    assert done.status_code == 200, done.json()
    assert done.json()["status"] == "failed" and done.json()["message"] == "tail of the log"
    assert done.json()["lease"] is None
    lease.refresh_from_db()
    assert lease.release_reason == "completed"
    assert Host.objects.get(pk=lab.h2.pk).status == "ready"


def test_starting_a_running_job_is_a_conflict(runner_client, lab):
    lease = active_lease(lab.running)
    response = runner_client.post(f"/api/jobs/{lab.running.pk}/start/", {"lease": lease.pk})
    assert response.status_code == 409
    assert "not leased" in response.json()["detail"]


def test_completing_a_job_twice_is_a_conflict_and_keeps_the_first_result(runner_client, lab):
    url = f"/api/jobs/{lab.running.pk}/complete/"
    lease = active_lease(lab.running)
    assert runner_client.post(url, {"lease": lease.pk, "result": "passed"}).status_code == 200

    response = runner_client.post(url, {"lease": lease.pk, "result": "failed"})

    assert response.status_code == 409
    assert Job.objects.get(pk=lab.running.pk).status == "passed"


def test_the_runner_reports_a_broken_host_which_goes_to_needs_repair(runner_client, lab):
    lease = active_lease(lab.running)
    response = runner_client.post(
        f"/api/jobs/{lab.running.pk}/complete/",
        {"lease": lease.pk, "result": "failed", "host_ok": False},
    )
    assert response.status_code == 200
    assert Host.objects.get(pk=lab.h1.pk).status == "needs_repair"


@pytest.mark.parametrize(
    ("payload", "field"),
    [
        ({}, "result"),
        ({}, "lease"),
        ({"result": "passed"}, "lease"),
        ({"result": "error"}, "result"),
        ({"result": "passed", "lease": 0}, "lease"),
        ({"result": "passed", "lease": 10**30}, "lease"),
    ],
)
def test_a_bad_complete_is_a_400_and_changes_nothing(runner_client, lab, payload, field):
    response = runner_client.post(f"/api/jobs/{lab.running.pk}/complete/", payload)
    assert response.status_code == 400
    assert field in response.json()
    assert Job.objects.get(pk=lab.running.pk).status == "running"


def test_naming_another_jobs_lease_is_a_400(runner_client, lab):
    other = active_lease(lab.leased)
    response = runner_client.post(
        f"/api/jobs/{lab.running.pk}/complete/", {"result": "passed", "lease": other.pk}
    )
    assert response.status_code == 400
    assert "not a lease of job" in response.json()["lease"][0]


def leased_again_after_expiry(
    runner_client: APIClient, sam: object, first: Worker, second: Worker
) -> tuple[Job, Lease, Lease]:
    """Job J started on host a (first worker), expired, and leased again on host b (second)."""
    a = f.host("a", ["board:x"], worker=first)
    b = host_services.host_lock(host=f.host("b", ["board:x"], worker=second), by=sam, reason="x")
    job = f.job("J", max_retries=1)
    services.scheduler_tick()
    old = Lease.objects.get(job=job, host=a)
    assert runner_client.post(f"/api/jobs/{job.pk}/start/", {"lease": old.pk}).status_code == 200
    services.scheduler_tick(now=old.expires_at + timedelta(seconds=1))  # expires: requeued
    host_services.host_unlock(host=b, by=sam)
    services.scheduler_tick()
    new = Lease.objects.get(job=job, released_at=None)
    assert new.host == b
    return job, old, new


def test_a_late_complete_after_expiry_is_a_conflict_even_once_the_job_runs_elsewhere(
    runner_client, runner_user, runner_2, sam
):
    """runner-1's lease expired, the job was leased again on w2, then runner-1 reports late."""
    w1, w2 = f.worker("w1"), f.worker("w2")
    host_services.worker_update(worker=w1, by=sam, runner=runner_user)
    host_services.worker_update(worker=w2, by=sam, runner=runner_2)
    job, old, new = leased_again_after_expiry(runner_client, sam, w1, w2)

    response = runner_client.post(
        f"/api/jobs/{job.pk}/complete/", {"result": "passed", "lease": old.pk}
    )
    assert response.status_code == 409
    assert "no longer active" in response.json()["detail"]

    job.refresh_from_db()
    new.refresh_from_db()
    assert job.status == "leased" and new.released_at is None
    # And runner-1 cannot touch the new lease on w2 directly.
    response = runner_client.post(f"/api/jobs/{job.pk}/start/", {"lease": new.pk})
    assert response.status_code == 403


def test_a_runner_must_name_its_lease_so_a_late_call_never_touches_a_newer_attempt(
    runner_client, runner_user, sam
):
    """runner-1's lease expired and the job was leased again on w1; the old run reports late."""
    w1 = f.worker("w1")
    host_services.worker_update(worker=w1, by=sam, runner=runner_user)
    job, old, new = leased_again_after_expiry(runner_client, sam, w1, w1)

    events = HostEvent.objects.count()

    for action, payload in (("complete", {"result": "passed"}), ("start", {})):
        response = runner_client.post(f"/api/jobs/{job.pk}/{action}/", payload)
        assert response.status_code == 400
        assert response.json() == {"lease": ["Runners must name the lease they hold (its id)."]}
    for action, payload in (
        ("complete", {"result": "passed", "lease": old.pk}),
        ("start", {"lease": old.pk}),
    ):
        response = runner_client.post(f"/api/jobs/{job.pk}/{action}/", payload)
        assert response.status_code == 409
        assert "no longer active" in response.json()["detail"]
    response = runner_client.post(f"/api/leases/{old.pk}/heartbeat/")
    assert response.status_code == 409

    job.refresh_from_db()
    new.refresh_from_db()
    assert job.status == "leased" and new.released_at is None and new.heartbeat_at is None
    assert HostEvent.objects.count() == events


def test_staff_may_leave_the_lease_out_and_act_on_the_jobs_active_lease(staff_client, lab):
    response = staff_client.post(f"/api/jobs/{lab.leased.pk}/start/")
    assert response.status_code == 200 and response.json()["status"] == "running"
    response = staff_client.post(f"/api/jobs/{lab.running.pk}/complete/", {"result": "passed"})
    assert response.status_code == 200 and response.json()["status"] == "passed"


def test_a_runner_cannot_work_another_workers_job(runner_client, lab):
    lease = active_lease(lab.other)
    url = f"/api/jobs/{lab.other.pk}"
    assert runner_client.post(f"{url}/start/", {"lease": lease.pk}).status_code == 403
    response = runner_client.post(f"{url}/complete/", {"lease": lease.pk, "result": "passed"})
    assert response.status_code == 403
    assert Job.objects.get(pk=lab.other.pk).status == "leased"


def test_staff_acting_on_a_job_that_was_never_leased_is_a_conflict(staff_client, lab):
    response = staff_client.post(f"/api/jobs/{lab.queued.pk}/start/")
    assert response.status_code == 409
    assert "no active lease" in response.json()["detail"]


# --- abort ----------------------------------------------------------------------------------


def test_the_owner_aborts_a_running_job_and_its_host_is_released(alice_client, lab):
    response = alice_client.post(f"/api/jobs/{lab.running.pk}/abort/", {"reason": "wrong build"})

    assert response.status_code == 200
    assert response.json()["status"] == "aborted"
    assert response.json()["message"] == "wrong build"
    assert not Lease.objects.filter(host=lab.h1, released_at=None).exists()


def test_aborting_a_finished_job_is_a_conflict(alice_client, lab):
    alice_client.post(f"/api/jobs/{lab.queued.pk}/abort/")
    assert alice_client.post(f"/api/jobs/{lab.queued.pk}/abort/").status_code == 409


def test_another_tester_cannot_abort_the_job(bob_client, lab):
    assert bob_client.post(f"/api/jobs/{lab.queued.pk}/abort/").status_code == 403
    assert Job.objects.get(pk=lab.queued.pk).status == "queued"


def test_the_runner_gives_up_a_job_its_worker_holds(runner_client, lab):
    response = runner_client.post(
        f"/api/jobs/{lab.leased.pk}/abort/", {"reason": "runner shutting down"}
    )
    assert response.status_code == 200
    assert response.json()["status"] == "aborted"
    assert runner_client.post(f"/api/jobs/{lab.other.pk}/abort/").status_code == 403


# --- kinds and queue expiry ---------------------------------------------------------------------


@pytest.fixture
def verify_waiting(lab) -> Job:  # noqa: ANN001
    """A verify job queued for h1.lab, which its running test job still holds."""
    (job,) = create_maintenance_jobs([(lab.h1, "verify")], now=timezone.now(), why="staff asked")
    return job


def test_every_job_and_lease_says_its_kind_and_filters_by_it(staff_client, lab, verify_waiting):
    def kinds(path: str) -> dict[int, str]:
        response = staff_client.get(path)
        assert response.status_code == 200, response.json()
        return {row["id"]: row["kind"] for row in response.json()["results"]}

    assert kinds("/api/jobs/?kind=verify") == {verify_waiting.pk: "verify"}
    assert set(kinds("/api/jobs/?kind=test")) == {
        lab.running.pk,
        lab.leased.pk,
        lab.other.pk,
        lab.queued.pk,
    }
    assert kinds("/api/leases/?kind=reservation") == {lab.reservation.pk: "reservation"}
    assert set(kinds("/api/leases/?kind=test").values()) == {"test"}
    assert len(kinds("/api/leases/?kind=test")) == 3
    assert staff_client.get("/api/leases/?kind=nonsense").status_code == 400

    body = staff_client.get(f"/api/jobs/{verify_waiting.pk}/").json()
    assert (body["suite"], body["suite_name"], body["owner"]) == (None, None, None)
    assert body["host"] == "h1.lab" and body["status"] == "queued"
    assert staff_client.get(f"/api/jobs/{lab.running.pk}/").json()["lease"]["kind"] == "test"


def test_the_queue_lists_a_maintenance_job_first_with_its_kind(alice_client, lab, verify_waiting):
    response = alice_client.get("/api/queue/")

    assert response.status_code == 200, response.json()
    first = response.json()["results"][0]
    assert (first["job"], first["kind"], first["owner"]) == (verify_waiting.pk, "verify", None)
    assert first["wait_reason"]["message"]


def test_a_job_may_wait_expires_after_seconds_in_the_queue(alice_client, eve):
    response = alice_client.post(
        "/api/jobs/", {"name": "solo", "labels": ["board:eve"], "expires_after": 60}, format="json"
    )

    assert response.status_code == 201, response.json()
    body = response.json()
    job = Job.objects.get(pk=body["id"])
    assert body["expires_after"] == 60 and body["kind"] == "test"
    assert job.expires_at == job.created_at + timedelta(seconds=60)
    assert body["not_before"] is None


@pytest.mark.parametrize("value", [0, -5, 30 * 24 * 3600 + 1, "60", 1.5, True])
def test_an_expires_after_outside_one_second_to_thirty_days_is_a_400(alice_client, value):
    response = alice_client.post(
        "/api/jobs/", {"name": "solo", "expires_after": value}, format="json"
    )

    assert response.status_code == 400
    assert list(response.json()) == ["expires_after"]
    assert not Job.objects.exists()


def test_a_suites_expires_after_applies_to_the_jobs_that_set_none(alice_client, eve):
    response = alice_client.post(
        "/api/suites/",
        {
            "name": "S",
            "expires_after": 600,
            "jobs": [{"name": "inherits"}, {"name": "own", "expires_after": 60}],
        },
        format="json",
    )

    assert response.status_code == 201, response.json()
    assert response.json()["expires_after"] == 600
    assert dict(Job.objects.values_list("name", "expires_after")) == {"inherits": 600, "own": 60}
    bad = alice_client.post(
        "/api/suites/",
        {"name": "S", "jobs": [{"name": "j", "expires_after": 0}]},
        format="json",
    )
    assert bad.status_code == 400 and "expires_after" in str(bad.json())


# --- a stopping runner hands back what it has not started ---------------------------------------


def hand_back(client: APIClient, job: Job, **body: object) -> object:
    payload = {"requeue": True, "reason": "runner stopping", **body}
    return client.post(f"/api/leases/{active_lease(job).pk}/release/", payload, format="json")


def test_a_stopping_runner_hands_back_a_job_it_has_not_started_using_no_try(runner_client, lab):
    lease = active_lease(lab.leased)

    response = hand_back(runner_client, lab.leased)

    assert response.status_code == 200, response.json()
    assert response.json()["release_reason"] == "released"
    job = Job.objects.get(pk=lab.leased.pk)
    assert (job.status, job.attempts) == ("queued", 0)
    assert "handed back" in job.message
    assert Host.objects.get(pk=lease.host_id).status == "ready"
    assert Worker.objects.get(pk=lab.w1.pk).last_seen is None  # stopping: offline


def test_a_handed_back_job_does_not_go_back_to_the_stopping_worker(runner_client, lab):
    hand_back(runner_client, lab.leased)
    services.lease_heartbeat(lease=active_lease(lab.running))  # it still finishes that one

    services.scheduler_tick()

    assert Job.objects.get(pk=lab.leased.pk).status == "queued"
    host_services.worker_heartbeat(worker=Worker.objects.get(pk=lab.w1.pk))  # runner is back
    services.scheduler_tick()
    assert Job.objects.get(pk=lab.leased.pk).status == "leased"


def test_a_runner_cannot_hand_back_a_started_job_or_end_one_by_release(runner_client, lab):
    started = hand_back(runner_client, lab.running)
    not_requeued = hand_back(runner_client, lab.leased, requeue=False)
    not_its_worker = hand_back(runner_client, lab.other)

    assert started.status_code == 403 and "not started" in started.json()["detail"]
    assert not_requeued.status_code == 403 and "abort" in not_requeued.json()["detail"]
    assert not_its_worker.status_code == 403
    statuses = Job.objects.filter(pk__in=[lab.running.pk, lab.leased.pk, lab.other.pk])
    assert sorted(statuses.values_list("status", flat=True)) == ["leased", "leased", "running"]
