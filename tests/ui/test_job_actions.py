"""A job's own actions on its page and in the queue: Abort, and Priority while it is queued."""

from __future__ import annotations

import pytest

from jobs import services
from jobs.choices import JobStatus
from jobs.models import Job
from tests import factories as f
from tests.ui.conftest import HTMX

pytestmark = pytest.mark.django_db


@pytest.fixture
def waiting(alice):  # noqa: ANN001, ANN201
    """Alice's queued job that no host can run, at the default priority (40)."""
    return f.job("waits", ["board:none"], owner=alice)


def _job(job: Job) -> Job:
    return Job.objects.get(pk=job.pk)


def test_the_owner_sees_priority_and_abort_on_the_job_page(alice_client, waiting):
    html = alice_client.get(f"/jobs/{waiting.pk}/").content.decode()
    assert f'action="/jobs/{waiting.pk}/priority/"' in html
    assert f'action="/jobs/{waiting.pk}/abort/"' in html
    assert 'hx-confirm="Abort job waits? It leaves the queue and will not run."' in html
    assert '<option value="40" selected>default (40)</option>' in html


def test_another_tester_sees_neither_control(bob_client, waiting):
    html = bob_client.get(f"/jobs/{waiting.pk}/").content.decode()
    assert "/priority/" not in html and "/abort/" not in html
    html = bob_client.get("/queue/").content.decode()
    assert "/priority/" not in html and ">Actions<" not in html


def test_the_owner_raises_the_priority_and_the_page_says_so(alice_client, waiting):
    response = alice_client.post(f"/jobs/{waiting.pk}/priority/", {"priority": "60"}, headers=HTMX)
    html = response.content.decode()
    assert response.status_code == 200
    assert _job(waiting).priority == 60
    assert html.lstrip().startswith('<div id="job-detail"')
    assert "priority default 40 → pfq 60; the next scheduler tick orders the queue by it" in html
    assert '<option value="60" selected>' in html


def test_a_priority_change_of_a_leased_job_is_a_409_shown_inline(sam_client, waiting):
    f.host("fits", ["board:none"])
    services.scheduler_tick()
    assert _job(waiting).status == JobStatus.LEASED
    response = sam_client.post(f"/jobs/{waiting.pk}/priority/", {"priority": "70"}, headers=HTMX)
    html = response.content.decode()
    assert response.status_code == 409
    assert 'id="job-action-result" class="banner err"' in html
    assert "only a queued job&#x27;s priority can change" in html
    assert _job(waiting).priority == 40


def test_a_priority_above_a_testers_cap_is_refused_in_words(alice_client, waiting):
    response = alice_client.post(f"/jobs/{waiting.pk}/priority/", {"priority": "80"}, headers=HTMX)
    assert response.status_code == 400
    assert "you may submit at most 70 (cq)" in response.content.decode()
    assert _job(waiting).priority == 40


def test_a_priority_that_is_not_one_is_a_400(alice_client, waiting):
    response = alice_client.post(
        f"/jobs/{waiting.pk}/priority/", {"priority": "soon"}, headers=HTMX
    )
    assert response.status_code == 400
    assert "unknown level" in response.content.decode()
    assert _job(waiting).priority == 40


def test_the_owner_aborts_the_job_from_its_page(alice_client, waiting):
    response = alice_client.post(f"/jobs/{waiting.pk}/abort/", headers=HTMX)
    html = response.content.decode()
    assert response.status_code == 200
    assert _job(waiting).status == JobStatus.ABORTED
    assert f"Aborted job {waiting.pk} waits." in html
    assert "/abort/" not in html.split("</h1>")[1].split("job-attempts")[0]  # no button left


def test_aborting_an_aborted_job_is_a_409(alice_client, waiting):
    alice_client.post(f"/jobs/{waiting.pk}/abort/", headers=HTMX)
    response = alice_client.post(f"/jobs/{waiting.pk}/abort/", headers=HTMX)
    assert response.status_code == 409
    assert "has already finished" in response.content.decode()


def test_another_tester_is_refused_and_nothing_changes(bob_client, waiting):
    for url, data in [("priority", {"priority": "10"}), ("abort", {})]:
        response = bob_client.post(f"/jobs/{waiting.pk}/{url}/", data, headers=HTMX)
        assert response.status_code == 403
    job = _job(waiting)
    assert (job.status, job.priority) == (JobStatus.QUEUED, 40)


def test_the_queue_offers_the_owners_rows_their_controls_and_answers_with_the_table(
    alice_client, waiting, bob
):
    theirs = f.job("bobs", ["board:none"], owner=bob)
    html = alice_client.get("/queue/").content.decode()
    assert f'action="/jobs/{waiting.pk}/priority/"' in html
    assert f'action="/jobs/{theirs.pk}/priority/"' not in html

    response = alice_client.post(
        f"/jobs/{waiting.pk}/priority/",
        {"priority": "70", "from": "queue"},
        headers={**HTMX, "HX-Current-URL": "http://testserver/queue/?q=waits"},
    )
    html = response.content.decode()
    assert response.status_code == 200
    assert html.lstrip().startswith('<div id="queue-table"')
    # The queue's filter is kept: bob's job is not in the answer.
    assert "waits" in html and "bobs" not in html
    assert "priority default 40 → cq 70" in html


def test_aborting_from_the_queue_removes_the_row(sam_client, waiting):
    response = sam_client.post(f"/jobs/{waiting.pk}/abort/", {"from": "queue"}, headers=HTMX)
    html = response.content.decode()
    assert response.status_code == 200
    assert f'id="queued-{waiting.pk}"' not in html
    assert f"Aborted job {waiting.pk} waits." in html


def test_a_plain_form_post_redirects_back_with_a_message(alice_client, waiting):
    response = alice_client.post(f"/jobs/{waiting.pk}/priority/", {"priority": "cq"})
    assert response.status_code == 302
    page = alice_client.get(response["Location"]).content.decode()
    assert "priority default 40 → cq 70" in page
