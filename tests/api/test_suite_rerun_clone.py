"""/api/suites/{id}/rerun/ and /clone/: a new suite from an old one, linked to it."""

from __future__ import annotations

import pytest

from hosts.models import Host
from jobs import services
from jobs.choices import JobStatus
from jobs.models import Job, Suite
from jobs.resubmit import rerun_name
from tests import factories as f

pytestmark = pytest.mark.django_db


def finish(suite: Suite, **statuses: str) -> None:
    """End the suite's jobs: each named one with its status, the rest passed."""
    for job in suite.jobs.all():
        status = statuses.get(job.name, JobStatus.PASSED)
        Job.objects.filter(pk=job.pk).update(status=status)


@pytest.fixture
def nightly(alice) -> Suite:
    """Alice's suite of four jobs: one pinned, with retries, timeouts and own priorities."""
    f.host("dut1", ["board:x", "pool:cq"], worker=f.worker())
    f.host("dut2", ["board:x"])
    return f.varied_suite(
        alice,
        pinned=Host.objects.get(hostname="dut2"),
        extra=[services.JobSpec(name="audio", labels=["board:x"])],
        min_duts=3,
        max_duts=4,
    )


def test_a_rerun_submits_the_failed_error_and_expired_jobs_exactly_as_they_were(
    alice_client, nightly
):
    finish(nightly, wifi="failed", pinned="error", audio="expired")

    response = alice_client.post(f"/api/suites/{nightly.pk}/rerun/")

    assert response.status_code == 201, response.json()
    body = response.json()
    assert body["rerun_of"] == nightly.pk and body["cloned_from"] is None
    assert (body["name"], body["build"], body["priority"], body["owner"]) == (
        "nightly (re-run)",
        "R120-1",
        60,
        "alice",
    )
    assert body["status"] == "queued" and body["jobs_total"] == 3
    # min_duts 3 still fits the three jobs; the passed job "boot" stays behind.
    assert (body["min_duts"], body["max_duts"], body["expires_after"]) == (3, 4, 600)
    original = {row[0]: row for row in f.job_rows(nightly.pk)}
    assert f.job_rows(body["id"]) == [original["wifi"], original["pinned"], original["audio"]]
    fetched = alice_client.get(f"/api/suites/{body['id']}/").json()
    assert fetched["rerun_of"] == nightly.pk


def test_a_rerun_can_take_some_of_the_failed_jobs(alice_client, nightly):
    finish(nightly, wifi="failed", audio="failed")
    audio = nightly.jobs.get(name="audio")

    response = alice_client.post(
        f"/api/suites/{nightly.pk}/rerun/", {"jobs": [audio.pk]}, format="json"
    )

    assert response.status_code == 201, response.json()
    assert [row[0] for row in f.job_rows(response.json()["id"])] == ["audio"]
    assert response.json()["min_duts"] == 1  # the quota shrinks to the jobs it has


def test_a_rerun_of_jobs_that_did_not_fail_is_a_400_that_changes_nothing(alice_client, nightly):
    finish(nightly, wifi="failed")
    boot = nightly.jobs.get(name="boot")

    response = alice_client.post(
        f"/api/suites/{nightly.pk}/rerun/", {"jobs": [boot.pk, 999999]}, format="json"
    )

    assert response.status_code == 400
    assert response.json() == {"jobs": [f"not failed jobs of suite nightly: {boot.pk}, 999999"]}
    assert Suite.objects.count() == 1


@pytest.mark.parametrize("jobs", [[], "all", [0], ["1"]])
def test_a_malformed_job_list_is_a_400(alice_client, nightly, jobs):
    finish(nightly, wifi="failed")
    response = alice_client.post(f"/api/suites/{nightly.pk}/rerun/", {"jobs": jobs}, format="json")
    assert response.status_code == 400 and "jobs" in response.json()
    assert Suite.objects.count() == 1


def test_an_unfinished_suite_cannot_be_rerun(alice_client, nightly):
    finish(nightly, wifi="failed")
    Job.objects.filter(suite=nightly, name="boot").update(status=JobStatus.RUNNING)

    response = alice_client.post(f"/api/suites/{nightly.pk}/rerun/")

    assert response.status_code == 409
    assert "has not finished" in response.json()["detail"]
    assert Suite.objects.count() == 1


def test_a_suite_where_nothing_failed_has_nothing_to_rerun(alice_client, nightly):
    finish(nightly, wifi="aborted")  # aborted is someone's choice, not a failure

    response = alice_client.post(f"/api/suites/{nightly.pk}/rerun/")

    assert response.status_code == 409
    assert response.json()["detail"] == (
        "nothing failed in suite nightly: there is nothing to re-run"
    )
    assert Suite.objects.count() == 1


def test_staff_rerun_anyones_suite_and_own_the_rerun(staff_client, nightly):
    finish(nightly, wifi="failed")
    response = staff_client.post(f"/api/suites/{nightly.pk}/rerun/")
    assert response.status_code == 201
    assert response.json()["owner"] == "sam"


@pytest.mark.parametrize("what", ["rerun", "clone"])
def test_another_tester_may_neither_rerun_nor_clone(bob_client, nightly, what):
    finish(nightly, wifi="failed")
    response = bob_client.post(f"/api/suites/{nightly.pk}/{what}/")
    assert response.status_code == 403
    assert (
        response.json()["detail"]
        == f"You may only {what.replace('rerun', 're-run')} your own suites."
    )
    assert Suite.objects.count() == 1


@pytest.mark.parametrize("what", ["rerun", "clone"])
def test_anonymous_callers_are_refused(anon_client, nightly, what):
    finish(nightly, wifi="failed")
    response = anon_client.post(f"/api/suites/{nightly.pk}/{what}/")
    assert response.status_code in (401, 403)
    assert Suite.objects.count() == 1


@pytest.mark.parametrize("what", ["rerun", "clone"])
def test_an_unknown_suite_is_a_404(alice_client, what):
    assert alice_client.post(f"/api/suites/424242/{what}/").status_code == 404


def test_a_clone_copies_every_job_and_setting_of_a_suite_in_any_state(alice_client, nightly):
    response = alice_client.post(f"/api/suites/{nightly.pk}/clone/")

    assert response.status_code == 201, response.json()
    body = response.json()
    assert body["cloned_from"] == nightly.pk and body["rerun_of"] is None
    assert (body["name"], body["build"], body["priority"]) == ("nightly", "R120-1", 60)
    assert (body["min_duts"], body["max_duts"], body["expires_after"]) == (3, 4, 600)
    assert f.job_rows(body["id"]) == f.job_rows(nightly.pk)


def test_a_clone_changes_what_the_body_overrides(alice_client, nightly):
    changes = {"name": "nightly R121", "build": "R121-1", "priority": "daily", "max_duts": None}

    response = alice_client.post(f"/api/suites/{nightly.pk}/clone/", changes, format="json")

    assert response.status_code == 201, response.json()
    body = response.json()
    assert (body["name"], body["build"], body["priority"], body["max_duts"]) == (
        "nightly R121",
        "R121-1",
        20,
        None,
    )
    rows = {row[0]: row for row in f.job_rows(body["id"])}
    assert rows["boot"][3] == 20  # took the suite's priority, as in the original
    assert rows["wifi"][3] == 50  # kept its own


@pytest.mark.parametrize(
    "changes, field",
    [
        ({"priority": 101}, "priority"),
        ({"name": ""}, "name"),
        ({"build": 5}, "build"),
        ({"min_duts": 9}, "min_duts"),  # more than its four jobs
        ({"min_duts": 3, "max_duts": 2}, "min_duts"),
        ({"expires_after": 0}, "expires_after"),
        ({"jobs": [{"name": "x"}]}, "jobs"),
        ({"fanout": {"labels": ["board:x"]}}, "fanout"),
    ],
)
def test_a_bad_override_is_a_400_that_changes_nothing(alice_client, nightly, changes, field):
    response = alice_client.post(f"/api/suites/{nightly.pk}/clone/", changes, format="json")
    assert response.status_code == 400
    assert field in response.json()
    assert Suite.objects.count() == 1


def test_a_fanout_clone_stays_a_fanout_over_the_hosts_that_carry_the_labels_now(
    alice_client, alice
):
    f.host("a.lab", ["board:y"])
    f.host("b.lab", ["board:y"])
    fan = services.suite_submit(
        owner=alice, name="survey", fanout_labels=["board:y"], fanout_name="probe"
    )
    f.host("c.lab", ["board:y"])

    response = alice_client.post(f"/api/suites/{fan.pk}/clone/")

    assert response.status_code == 201, response.json()
    body = response.json()
    assert body["fanout_labels"] == ["board:y"] and body["jobs_total"] == 3
    names = sorted(Job.objects.filter(suite_id=body["id"]).values_list("name", flat=True))
    assert names == ["probe@a.lab", "probe@b.lab", "probe@c.lab"]


def test_a_rerun_of_a_fanout_pins_each_failed_job_to_its_host(alice_client, alice):
    f.host("a.lab", ["board:y"])
    f.host("b.lab", ["board:y"])
    fan = services.suite_submit(owner=alice, name="survey", fanout_labels=["board:y"])
    finish(fan, **{"survey@b.lab": "failed"})

    response = alice_client.post(f"/api/suites/{fan.pk}/rerun/")

    assert response.status_code == 201
    job = Job.objects.select_related("host").get(suite_id=response.json()["id"])
    assert (job.name, job.host.hostname) == ("survey@b.lab", "b.lab")
    assert response.json()["fanout_labels"] is None


def test_the_suite_list_filters_reruns_and_clones_of_a_suite(alice_client, nightly):
    finish(nightly, wifi="failed")
    rerun = alice_client.post(f"/api/suites/{nightly.pk}/rerun/").json()
    clone = alice_client.post(f"/api/suites/{nightly.pk}/clone/").json()

    reruns = alice_client.get(f"/api/suites/?rerun_of={nightly.pk}").json()["results"]
    clones = alice_client.get(f"/api/suites/?cloned_from={nightly.pk}").json()["results"]

    assert [s["id"] for s in reruns] == [rerun["id"]]
    assert [s["id"] for s in clones] == [clone["id"]]


def test_a_rerun_with_an_idempotency_key_is_created_once(alice_client, nightly):
    finish(nightly, wifi="failed")
    url = f"/api/suites/{nightly.pk}/rerun/"

    first = alice_client.post(url, HTTP_IDEMPOTENCY_KEY="rerun-1")
    again = alice_client.post(url, HTTP_IDEMPOTENCY_KEY="rerun-1")

    assert first.status_code == again.status_code == 201
    assert again.headers["Idempotent-Replayed"] == "true"
    assert again.json()["id"] == first.json()["id"]
    assert Suite.objects.filter(rerun_of=nightly).count() == 1


def test_the_submission_limits_apply_to_a_rerun(alice_client, nightly, settings):
    finish(nightly, wifi="failed")
    settings.SUBMIT_MAX_PRIORITY = 40  # nightly runs at 60

    response = alice_client.post(f"/api/suites/{nightly.pk}/rerun/")

    assert response.status_code == 400
    assert "priority" in response.json()
    assert Suite.objects.count() == 1


def test_deleting_the_original_keeps_its_rerun(alice_client, nightly):
    finish(nightly, wifi="failed")
    rerun = alice_client.post(f"/api/suites/{nightly.pk}/rerun/").json()
    nightly.delete()
    assert alice_client.get(f"/api/suites/{rerun['id']}/").json()["rerun_of"] is None


@pytest.mark.parametrize(
    "name, rerun",
    [
        ("nightly", "nightly (re-run)"),
        ("nightly (re-run)", "nightly (re-run 2)"),
        ("nightly (re-run 9)", "nightly (re-run 10)"),
        ("x" * 200, "x" * 191 + " (re-run)"),
    ],
)
def test_a_reruns_name_tells_it_apart_from_its_original(name, rerun):
    assert rerun_name(name) == rerun
