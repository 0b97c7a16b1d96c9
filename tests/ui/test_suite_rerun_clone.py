"""The suite page's Re-run failed jobs and Clone buttons, and the submit form a clone opens."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest

from jobs import services
from jobs.choices import JobStatus
from jobs.models import Job, Suite
from tests import factories as f
from tests.ui.conftest import HTMX

pytestmark = pytest.mark.django_db


def finished(suite: Suite, **statuses: str) -> Suite:
    """End the suite's jobs: each named one with its status, the rest passed."""
    for job in suite.jobs.all():
        Job.objects.filter(pk=job.pk).update(status=statuses.get(job.name, JobStatus.PASSED))
    return suite


@pytest.fixture
def mine(alice, lab) -> Suite:
    """Alice's finished suite of three jobs, one failed."""
    return finished(f.suite("bvt", 3, labels=["board:eve"], owner=alice), **{"bvt-t1": "failed"})


def field_value(html: str, name: str) -> str | None:
    match = re.search(rf'<input id="[^"]*" name="{name}"[^>]* value="([^"]*)"', html)
    return match.group(1) if match else None


def test_the_owner_sees_rerun_and_clone_on_a_finished_suite_with_failures(alice_client, mine):
    html = alice_client.get(f"/suites/{mine.pk}/").content.decode()
    assert f'action="/suites/{mine.pk}/rerun/"' in html and "Re-run failed jobs" in html
    assert f'href="/suites/new/?clone={mine.pk}"' in html


def test_rerun_is_offered_only_once_finished_and_only_with_failures(alice_client, alice, lab):
    running = f.suite("running", 2, labels=["board:eve"], owner=alice)
    finished(running, **{"running-t0": "failed"})
    Job.objects.filter(name="running-t1").update(status=JobStatus.RUNNING)
    passed = finished(f.suite("green", 2, labels=["board:eve"], owner=alice))
    for suite in (running, passed):
        html = alice_client.get(f"/suites/{suite.pk}/").content.decode()
        assert "Re-run failed jobs" not in html
        assert "Clone" in html  # any state may be cloned


def test_another_tester_sees_neither_button_and_is_refused(bob_client, mine):
    html = bob_client.get(f"/suites/{mine.pk}/").content.decode()
    assert "Re-run failed jobs" not in html and "?clone=" not in html
    assert bob_client.post(f"/suites/{mine.pk}/rerun/").status_code == 403
    assert bob_client.get(f"/suites/new/?clone={mine.pk}").status_code == 403
    post = bob_client.post(
        "/suites/new/", {"name": "x", "cloned_from": mine.pk, "mode": "jobs"}, headers=HTMX
    )
    assert post.status_code == 403
    assert Suite.objects.count() == 1


def test_rerun_lands_on_the_new_suite_which_links_back(alice_client, mine):
    response = alice_client.post(f"/suites/{mine.pk}/rerun/", follow=True)

    rerun = Suite.objects.get(rerun_of=mine)
    assert response.redirect_chain[-1][0] == f"/suites/{rerun.pk}/"
    html = response.content.decode()
    assert "Re-running 1 job of bvt that did not pass." in html
    assert f'Re-run of <a href="/suites/{mine.pk}/">#{mine.pk} bvt</a>' in html
    assert list(rerun.jobs.values_list("name", flat=True)) == ["bvt-t1"]
    original = alice_client.get(f"/suites/{mine.pk}/").content.decode()
    assert f'<a href="/suites/{rerun.pk}/">#{rerun.pk}</a>' in original


def test_a_refused_rerun_says_why_on_the_suite_page(sam_client, mine):
    Job.objects.filter(name="bvt-t2").update(status=JobStatus.QUEUED)

    response = sam_client.post(f"/suites/{mine.pk}/rerun/", follow=True)

    assert response.status_code == 200
    assert response.redirect_chain[-1][0] == f"/suites/{mine.pk}/"
    assert "Suite bvt has not finished" in response.content.decode()
    assert Suite.objects.count() == 1


def test_staff_rerun_a_testers_suite_from_its_page(sam_client, mine):
    response = sam_client.post(f"/suites/{mine.pk}/rerun/")
    assert response.status_code == 302
    assert Suite.objects.get(rerun_of=mine).owner.username == "sam"


def test_clone_opens_the_form_filled_with_the_suite(alice_client, alice, lab):
    each = {"max_retries": 2, "timeout": timedelta(minutes=30)}
    jobs = [
        services.JobSpec(name="boot", labels=["board:eve", "pool:cq"], **each),
        services.JobSpec(name="pinned", labels=["board:eve"], host=lab.h2, **each),
    ]
    original = f.clonable_suite(alice, jobs, min_duts=1, expires_after=900)

    html = alice_client.get(f"/suites/new/?clone={original.pk}").content.decode()

    assert f'name="cloned_from" value="{original.pk}"' in html
    assert (field_value(html, "name"), field_value(html, "build")) == ("nightly R120", "R120-1")
    assert '<option value="70" selected>' in html
    assert (field_value(html, "min_duts"), field_value(html, "max_duts")) == ("1", "2")
    assert field_value(html, "expires_after") == "900"
    assert (field_value(html, "max_retries"), field_value(html, "timeout_minutes")) == ("2", "30")
    assert 'value="boot"' in html and 'value="board:eve pool:cq"' in html
    assert 'value="pinned"' in html and 'value="h2.lab"' in html
    assert "The form cannot keep" not in html


def test_the_form_says_what_a_clone_of_an_api_suite_cannot_keep(alice_client, alice, lab):
    original = services.suite_submit(
        owner=alice,
        name="api",
        priority=65,
        jobs=[
            services.JobSpec(name="a", labels=["board:eve"], max_retries=1, priority=10),
            services.JobSpec(name="b", labels=["board:eve"], timeout=timedelta(seconds=90)),
        ],
    )
    html = alice_client.get(f"/suites/new/?clone={original.pk}").content.decode()
    assert "The form cannot keep its priority 65, which is not a named level" in html
    assert "retries that differ from job to job" in html
    assert "timeouts that differ from job to job" in html
    assert "some jobs&#x27; own priorities" in html
    assert f"POST /api/suites/{original.pk}/clone/" in html


def test_a_fanout_clone_opens_the_form_in_fanout_mode(alice_client, alice, lab):
    fan = services.suite_submit(
        owner=alice, name="survey", fanout_labels=["pool:cq"], fanout_name="probe"
    )
    html = alice_client.get(f"/suites/new/?clone={fan.pk}").content.decode()
    assert 'id="mode-fanout" name="mode" value="fanout" checked' in html
    assert 'name="fanout_labels" value="pool:cq"' in html
    assert field_value(html, "fanout_name") == "probe"


def test_submitting_the_clone_form_makes_a_suite_linked_to_the_original(alice_client, mine):
    data = {
        "name": "bvt again",
        "priority": "40",
        "min_duts": "0",
        "max_retries": "0",
        "mode": "jobs",
        "job_name": ["login"],
        "job_labels": ["board:eve"],
        "job_host": [""],
        "cloned_from": str(mine.pk),
    }
    response = alice_client.post("/suites/new/", data)

    clone = Suite.objects.get(cloned_from=mine)
    assert response.status_code == 302 and response.url == f"/suites/{clone.pk}/"
    html = alice_client.get(response.url).content.decode()
    assert f'Clone of <a href="/suites/{mine.pk}/">#{mine.pk} bvt</a>' in html


def test_a_clone_form_with_errors_keeps_its_link_to_the_original(alice_client, mine):
    response = alice_client.post(
        "/suites/new/", {"name": "", "mode": "jobs", "cloned_from": str(mine.pk)}, headers=HTMX
    )
    assert response.status_code == 400
    assert f'name="cloned_from" value="{mine.pk}"' in response.content.decode()


def test_a_clone_of_a_suite_bigger_than_the_form_says_so(alice_client, alice, lab, settings):
    settings.MAX_JOBS_PER_SUITE = 600
    big = f.suite("big", 501, labels=["board:eve"], owner=alice)
    html = alice_client.get(f"/suites/new/?clone={big.pk}").content.decode()
    assert html.count('class="job-row"') == 500
    assert "its jobs past the first 500, more than the form takes" in html


@pytest.mark.parametrize("value", ["abc", "999999"])
def test_cloning_an_unknown_suite_is_a_404(alice_client, lab, value):
    assert alice_client.get(f"/suites/new/?clone={value}").status_code == 404


def test_the_suite_list_hints_where_a_rerun_came_from(alice_client, mine):
    alice_client.post(f"/suites/{mine.pk}/rerun/")
    html = alice_client.get("/suites/").content.decode()
    assert f"re-run of #{mine.pk}" in html
