"""PATCH /api/jobs/{id}/ {"priority": N}: a queued job's owner or staff reorder the queue."""

from __future__ import annotations

import pytest

from hosts.choices import EventKind
from hosts.models import HostEvent
from jobs.models import Job
from tests.jobs.test_triggers import ticks_enqueued

pytestmark = pytest.mark.django_db


def _priority(job: Job) -> int:
    return Job.objects.values_list("priority", flat=True).get(pk=job.pk)


def test_the_owner_raises_a_queued_job_by_level_name_and_it_is_audited(alice_client, lab):
    response = alice_client.patch(f"/api/jobs/{lab.queued.pk}/", {"priority": "pfq"}, format="json")

    assert response.status_code == 200, response.json()
    assert response.json()["priority"] == 60
    assert _priority(lab.queued) == 60
    event = HostEvent.objects.get(job_id=lab.queued.pk, kind=EventKind.UPDATED)
    assert event.actor == "alice"
    assert event.subject == f"job {lab.queued.pk}"
    assert event.message == "job nobody-can-run: priority 40 (default) → 60 (pfq)"


def test_a_priority_change_asks_for_a_tick_once_it_commits(
    alice_client, lab, django_capture_on_commit_callbacks
):
    def change() -> None:
        response = alice_client.patch(
            f"/api/jobs/{lab.queued.pk}/", {"priority": 55}, format="json"
        )
        assert response.status_code == 200

    assert ticks_enqueued(change, django_capture_on_commit_callbacks) == 1


def test_staff_change_anyones_job(staff_client, lab):
    response = staff_client.patch(f"/api/jobs/{lab.queued.pk}/", {"priority": 90}, format="json")
    assert response.status_code == 200
    assert _priority(lab.queued) == 90


def test_another_tester_is_refused_and_nothing_changes(bob_client, lab):
    response = bob_client.patch(f"/api/jobs/{lab.queued.pk}/", {"priority": 10}, format="json")
    assert response.status_code == 403
    assert _priority(lab.queued) == 40
    assert not HostEvent.objects.filter(job_id=lab.queued.pk, kind=EventKind.UPDATED).exists()


@pytest.mark.parametrize("job", ["running", "leased"])
def test_a_job_that_holds_a_host_keeps_its_priority_with_a_409(alice_client, lab, job):
    target = getattr(lab, job)
    response = alice_client.patch(f"/api/jobs/{target.pk}/", {"priority": 10}, format="json")
    assert response.status_code == 409
    assert "only a queued job's priority can change" in response.json()["detail"]
    assert _priority(target) == target.priority


def test_a_finished_job_keeps_its_priority_with_a_409(alice_client, lab):
    alice_client.post(f"/api/jobs/{lab.queued.pk}/abort/")
    response = alice_client.patch(f"/api/jobs/{lab.queued.pk}/", {"priority": 10}, format="json")
    assert response.status_code == 409
    assert "is aborted" in response.json()["detail"]


@pytest.mark.parametrize(
    "body, field",
    [
        ({"priority": 101}, "priority"),
        ({"priority": -1}, "priority"),
        ({"priority": "urgent"}, "priority"),
        ({"priority": True}, "priority"),
        ({"priority": 50, "name": "renamed"}, "name"),
    ],
)
def test_a_bad_body_is_a_400_naming_the_field_and_changes_nothing(alice_client, lab, body, field):
    response = alice_client.patch(f"/api/jobs/{lab.queued.pk}/", body, format="json")
    assert response.status_code == 400
    assert field in response.json()
    assert _priority(lab.queued) == 40


def test_a_tester_may_not_raise_a_job_above_their_submission_cap(alice_client, lab):
    # A tester submits at most cq (70): raising a job later is held to the same cap.
    response = alice_client.patch(f"/api/jobs/{lab.queued.pk}/", {"priority": 80}, format="json")
    assert response.status_code == 400
    assert "at most 70 (cq)" in response.json()["priority"][0]
    assert _priority(lab.queued) == 40


def test_an_empty_patch_changes_nothing(alice_client, lab):
    response = alice_client.patch(f"/api/jobs/{lab.running.pk}/", {}, format="json")
    assert response.status_code == 200
    assert response.json()["priority"] == lab.running.priority
    assert not HostEvent.objects.filter(kind=EventKind.UPDATED, job_id=lab.running.pk).exists()


def test_an_unknown_job_is_a_404(alice_client, lab):
    response = alice_client.patch("/api/jobs/999999/", {"priority": 50}, format="json")
    assert response.status_code == 404
