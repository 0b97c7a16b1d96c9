"""The submit-suite form: job rows, named priorities, quotas, pinning, fan-out and its errors."""

from __future__ import annotations

import pytest

from hosts import services as host_services
from jobs.models import Job, Suite
from tests.ui.conftest import HTMX

pytestmark = pytest.mark.django_db


def form(**overrides: object) -> dict:
    data: dict = {
        "name": "bvt-inline R120",
        "build": "R120-1.0",
        "priority": "70",
        "min_duts": "1",
        "max_duts": "",
        "max_retries": "1",
        "timeout_minutes": "",
        "mode": "jobs",
        "job_name": ["login_Smoke", "power_Resume", ""],
        "job_labels": ["board:eve pool:cq", "board:eve", ""],
        "job_host": ["", "h2.lab", ""],
        "fanout_labels": "",
        "fanout_name": "",
    }
    data.update(overrides)
    return data


def test_the_form_offers_the_named_priority_levels_and_two_job_rows(alice_client, lab):
    html = alice_client.get("/suites/new/").content.decode()
    for level in ("cq (70)", "default (40)", "weekly (10)"):
        assert level in html
    # A tester is offered only the priorities they may use (docs/security.md#submission-limits).
    assert "super (80)" not in html
    assert '<option value="40" selected>' in html
    assert html.count('class="job-row"') == 2
    assert 'hx-get="/suggest/labels/"' in html


def test_a_tester_submits_a_suite_and_lands_on_its_page(alice_client, alice, lab):
    response = alice_client.post("/suites/new/", form(), headers=HTMX)
    suite = Suite.objects.get()
    assert response.status_code == 200
    assert response["HX-Redirect"] == f"/suites/{suite.pk}/"
    assert (suite.name, suite.priority, suite.min_duts, suite.max_duts, suite.owner) == (
        "bvt-inline R120",
        70,
        1,
        None,
        alice,
    )
    jobs = list(Job.objects.order_by("id"))
    assert [(j.name, j.labels, j.host_id, j.max_retries) for j in jobs] == [
        ("login_Smoke", ["board:eve", "pool:cq"], None, 1),
        ("power_Resume", ["board:eve"], lab.h2.pk, 1),
    ]
    page = alice_client.get(response["HX-Redirect"]).content.decode()
    assert "Suite bvt-inline R120 submitted with 2 jobs." in page


def test_preview_says_what_the_next_tick_would_do_and_saves_nothing(alice_client, lab):
    host_services.host_lock(host=lab.h1, by="sam", reason="flaky servo")  # login_Smoke's host

    response = alice_client.post("/suites/new/", form(preview="1"), headers=HTMX)

    assert response.status_code == 200
    html = response.content.decode()
    assert 'id="suite-preview"' in html
    # The lab's hosts carry no build yet: the one that starts is reimaged to the suite's first.
    assert "1 of your 2 jobs would start now, after a reimage to R120-1.0; 1 wait:" in html
    assert "locked" in html  # why login_Smoke waits
    assert 'value="bvt-inline R120"' in html  # the form is kept, to submit as it is
    assert not Suite.objects.exists() and not Job.objects.exists()


def test_a_preview_of_a_bad_suite_shows_the_same_errors_as_submitting(alice_client, lab):
    response = alice_client.post(
        "/suites/new/", form(preview="1", min_duts="3", max_duts="2"), headers=HTMX
    )

    assert response.status_code == 400
    assert 'id="suite-preview"' not in response.content.decode()
    assert not Suite.objects.exists()


def test_min_duts_above_max_duts_is_shown_next_to_min_duts(alice_client, lab):
    response = alice_client.post("/suites/new/", form(min_duts="3", max_duts="2"), headers=HTMX)
    html = response.content.decode()
    assert response.status_code == 400
    assert html.lstrip().startswith('<form id="suite-form"')
    assert 'id="id_min_duts-error"' in html and "Min DUTs: Must not exceed max DUTs (2)." in html
    assert 'id="id_min_duts" name="min_duts" type="number" min="0" value="3"' in html
    assert 'value="login_Smoke"' in html and 'value="h2.lab"' in html  # rows kept as typed
    assert not Suite.objects.exists()


def test_an_unknown_pinned_host_is_marked_on_its_row(alice_client, lab):
    response = alice_client.post("/suites/new/", form(job_host=["", "h9.lab", ""]), headers=HTMX)
    html = response.content.decode()
    assert response.status_code == 400
    assert "No host is named h9.lab." in html
    assert html.count('aria-invalid="true"') == 1
    assert not Suite.objects.exists()


def test_a_bad_label_is_marked_on_its_row(alice_client, lab):
    response = alice_client.post(
        "/suites/new/", form(job_labels=["board:eve", "pool:c!q", ""]), headers=HTMX
    )
    html = response.content.decode()
    assert response.status_code == 400
    assert "Use letters, digits" in html
    assert "Job 2, labels:" in html  # the summary at the top links to the row


def test_a_job_no_host_could_run_is_refused_on_its_row_unless_told_to_wait(alice_client, lab):
    rows = {"job_labels": ["board:eve", "board:nope", ""], "job_host": ["", "", ""]}

    refused = alice_client.post("/suites/new/", form(**rows), headers=HTMX)
    waits = alice_client.post("/suites/new/", form(**rows, allow_unmatched="on"), headers=HTMX)

    html = refused.content.decode()
    assert refused.status_code == 400
    assert "no host in the lab carries label board:nope" in html.lower()
    assert "Job 2, labels:" in html and html.count('aria-invalid="true"') == 1
    assert waits.status_code == 200 and waits["HX-Redirect"]
    assert Suite.objects.count() == 1 and Job.objects.count() == 2


def test_min_duts_above_the_number_of_jobs_is_shown_next_to_min_duts(alice_client, lab):
    response = alice_client.post("/suites/new/", form(min_duts="3"), headers=HTMX)
    html = response.content.decode()
    assert response.status_code == 400
    assert "min_duts (3) is more than the suite" in html.lower()
    assert 'id="id_min_duts-error"' in html
    assert not Suite.objects.exists()


def test_a_row_without_a_name_is_marked(alice_client, lab):
    response = alice_client.post(
        "/suites/new/", form(job_name=["login_Smoke", "", ""]), headers=HTMX
    )
    assert response.status_code == 400
    assert "Give the job a name." in response.content.decode()


def test_a_suite_needs_a_name_and_a_job(alice_client, lab):
    response = alice_client.post(
        "/suites/new/", form(name="", job_name=[""], job_labels=[""], job_host=[""]), headers=HTMX
    )
    html = response.content.decode()
    assert response.status_code == 400
    assert "This field is required." in html
    assert "Add at least one job" in html


def test_a_fanout_suite_runs_once_on_every_host_with_the_labels(alice_client, lab):
    response = alice_client.post(
        "/suites/new/",
        form(mode="fanout", fanout_labels="pool:cq", fanout_name="firmware_Check"),
        headers=HTMX,
    )
    assert response.status_code == 200
    jobs = list(Job.objects.order_by("name").values_list("name", "host__hostname"))
    assert jobs == [("firmware_Check@h1.lab", "h1.lab"), ("firmware_Check@h3.lab", "h3.lab")]


def test_a_fanout_over_labels_no_host_carries_is_refused_next_to_the_labels(alice_client, lab):
    response = alice_client.post(
        "/suites/new/", form(mode="fanout", fanout_labels="board:nope"), headers=HTMX
    )
    html = response.content.decode()
    assert response.status_code == 400
    assert "No host carries board:nope" in html
    assert 'id="fanout-labels-error"' in html
    assert 'id="mode-fanout" name="mode" value="fanout" checked' in html
    assert not Suite.objects.exists()


def test_adding_a_job_row_returns_one_empty_row(alice_client):
    html = alice_client.get("/suites/new/job-row/", headers=HTMX).content.decode()
    assert html.count('class="job-row"') == 1 and 'name="job_labels" value=""' in html


def test_without_javascript_the_form_still_submits_and_redirects(alice_client, lab):
    response = alice_client.post("/suites/new/", form())
    assert response.status_code == 302
    assert response["Location"] == f"/suites/{Suite.objects.get().pk}/"


def test_without_javascript_errors_come_back_on_the_full_page(alice_client, lab):
    response = alice_client.post("/suites/new/", form(min_duts="-1"))
    assert response.status_code == 400 and b"<html" in response.content


def test_staff_are_offered_every_priority(sam_client, lab):
    assert "super (80)" in sam_client.get("/suites/new/").content.decode()


def test_a_tester_posting_a_priority_above_their_limit_is_told_the_limit(alice_client, lab):
    response = alice_client.post("/suites/new/", form(priority="80"), headers=HTMX)
    assert response.status_code == 400
    assert "you may submit at most 70 (cq)" in response.content.decode()
    assert not Suite.objects.exists()
