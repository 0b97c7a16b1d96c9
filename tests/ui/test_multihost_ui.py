"""Multi-host jobs in the web UI: role rows on the submit form, hosts on the job page, holds on
the queue, hosts list and host page."""

from __future__ import annotations

import re

import pytest
from django.utils import timezone

from jobs import services
from jobs.models import Job, SchedulerTick, Suite
from jobs.services import JobSpec
from tests import factories as f
from tests.multihost import lease_hosts
from tests.ui.conftest import HTMX

pytestmark = pytest.mark.django_db


@pytest.fixture
def chamber(lab):  # noqa: ANN001, ANN201
    """Chamber a: h1 and h2 (eve DUTs, Bluetooth) and ap1 (an access point); all on w1."""
    for host in (lab.h1, lab.h2):
        services.host_update(host=host, by="sam", labels=[*host.label_names, "bt", "chamber:a"])
    lab.ap1 = f.host("ap1.lab", ["ap", "chamber:a"], worker=lab.w1)
    return lab


def form(**overrides: object) -> dict:
    data: dict = {
        "name": "bt nightly",
        "build": "",
        "priority": "40",
        "min_duts": "0",
        "max_duts": "",
        "max_retries": "0",
        "timeout_minutes": "",
        "mode": "jobs",
        "job_key": ["aaaa0001", "aaaa0002"],
        "job_name": ["bt_Pair", "login_Smoke"],
        "job_labels": ["chamber:a", "board:eve"],
        "job_host": ["", ""],
        "job_together_by": ["chamber", ""],
        "role_job": ["aaaa0001", "aaaa0001"],
        "role_name": ["dut", "peer"],
        "role_labels": ["bt", "ap"],
        "role_count": ["2", "1"],
        "role_max": ["", ""],
        "fanout_labels": "",
        "fanout_name": "",
    }
    data.update(overrides)
    return data


def test_the_form_offers_more_hosts_on_every_job_row(alice_client, lab):
    html = alice_client.get("/suites/new/").content.decode()

    assert html.count("<summary>More hosts") == 2
    assert html.count('name="job_together_by"') == 2
    assert 'hx-get="/suites/new/role-row/?job=' in html


def test_a_role_row_comes_tied_to_its_job_row_with_label_suggestions(alice_client, lab):
    response = alice_client.get("/suites/new/role-row/?job=0123abcd", headers=HTMX)

    html = response.content.decode()
    assert response.status_code == 200
    assert '<input type="hidden" name="role_job" value="0123abcd">' in html
    assert 'name="role_labels"' in html and 'hx-get="/suggest/labels/"' in html
    assert alice_client.get("/suites/new/role-row/?job=<x>").status_code == 400


def test_a_tester_submits_a_two_role_job_through_the_form(alice_client, chamber):
    response = alice_client.post("/suites/new/", form(), headers=HTMX)

    assert response.status_code == 200, response.content.decode()[:2000]
    pair, smoke = Job.objects.order_by("id")
    assert pair.roles == [
        {"name": "dut", "labels": ["bt"], "count": 2, "max": 2},
        {"name": "peer", "labels": ["ap"], "count": 1, "max": 1},
    ]
    assert pair.labels == ["chamber:a"] and pair.together_by == "chamber"
    assert smoke.roles == []


def test_a_bad_role_is_shown_by_its_field_and_nothing_is_submitted(alice_client, chamber):
    response = alice_client.post(
        "/suites/new/", form(role_name=["dut", "dut"], role_count=["2", "x"]), headers=HTMX
    )

    html = response.content.decode()
    assert response.status_code == 400
    assert not Suite.objects.exists()
    count = re.search(r'<input id="role-(\w+)-count"[^>]*aria-invalid="true"', html)
    assert count, "the bad count is marked on its field"
    assert f'id="role-{count.group(1)}-count-error"' in html
    assert "A whole number of hosts." in html
    # The rows come back as typed, tied to their job row, its section open.
    assert html.count('name="role_job" value="aaaa0001"') == 2
    assert '<details class="job-hosts" open>' in html


@pytest.mark.parametrize(
    ("change", "field", "says"),
    [
        ({"role_labels": ["bt", "wifi6"]}, "labels", "No host in the lab carries label wifi6"),
        # The job's labels apply to every role: no access point is an eve board.
        ({"job_labels": ["board:eve", "board:eve"]}, "name", "Role peer needs 1 host carrying"),
        ({"role_count": ["3", "1"]}, "name", "Role dut needs 3 hosts carrying bt, chamber:a"),
    ],
    ids=["unknown label", "job labels on every role", "too few hosts"],
)
def test_a_role_no_host_set_could_serve_is_refused_next_to_it(
    alice_client, chamber, change, field, says
):
    response = alice_client.post("/suites/new/", form(**change), headers=HTMX)

    html = response.content.decode()
    assert response.status_code == 400 and not Suite.objects.exists()
    marked = re.search(rf'<input id="role-(\w+)-{field}"[^>]*aria-invalid="true"', html)
    assert marked, html[:3000]
    error = html[html.index(f'id="role-{marked.group(1)}-{field}-error"') :]
    assert says in error[: error.index("</p>")]
    allowed = alice_client.post("/suites/new/", form(**change, allow_unmatched="on"), headers=HTMX)
    assert allowed.status_code == 200 and Suite.objects.count() == 1


def test_a_role_with_no_name_is_told_so_next_to_its_name_in_the_form_s_words(alice_client, chamber):
    response = alice_client.post("/suites/new/", form(role_name=["", "peer"]), headers=HTMX)

    html = response.content.decode()
    assert response.status_code == 400 and not Suite.objects.exists()
    marked = re.search(r'<input id="role-(\w+)-name"[^>]*aria-invalid="true"', html)
    assert marked, html[:3000]
    error = html[html.index(f'id="role-{marked.group(1)}-name-error"') :]
    assert "Name is required" in error[: error.index("</p>")]
    assert "roles[0]" not in html  # the API's path to the field is not the form's words


def test_a_pinned_job_with_roles_is_refused_on_its_row(alice_client, chamber):
    response = alice_client.post("/suites/new/", form(job_host=["h1.lab", ""]), headers=HTMX)

    html = response.content.decode()
    assert response.status_code == 400
    assert 'id="job-aaaa0001-roles-error"' in html and "give roles or a host" in html


def running_pair(chamber, alice):  # noqa: ANN001, ANN201
    """bt_Pair running on h1 and h2 (dut) and ap1 (peer), one attempt."""
    suite = services.suite_submit(
        owner=alice,
        name="bt nightly",
        jobs=[
            JobSpec(
                name="bt_Pair",
                roles=[
                    {"name": "dut", "labels": ["bt"], "count": 2},
                    {"name": "peer", "labels": ["ap"]},
                ],
                together_by="chamber",
            )
        ],
    )
    job = suite.jobs.get()
    # Leased through the tick's own apply (tests.multihost), then started by its runner.
    lease_hosts(job, [("dut", chamber.h1), ("dut", chamber.h2), ("peer", chamber.ap1)])
    job.refresh_from_db()
    services.job_start(job=job, by="runner")
    return job


def test_the_job_page_lists_every_host_of_the_attempt_with_its_role(alice_client, alice, chamber):
    job = running_pair(chamber, alice)

    html = alice_client.get(f"/jobs/{job.pk}/").content.decode()

    hosts = html[html.index('id="job-hosts"') :]
    hosts = hosts[: hosts.index("</ul>")]
    assert re.findall(r'tone-slate">(\w+)</span> <a href="/hosts/([\w.]+)/"', hosts) == [
        ("dut", "h1.lab"),
        ("dut", "h2.lab"),
        ("peer", "ap1.lab"),
    ]
    assert "runs the job" in hosts
    # One attempt, on all three hosts.
    assert 'id="attempt-1"' in html and 'id="attempt-2"' not in html
    assert "Attempt 1 on h1.lab (dut), h2.lab (dut), ap1.lab (peer)" in html
    assert "kept together by chamber" in html


def hold(job: Job, *hosts) -> None:  # noqa: ANN002
    SchedulerTick.objects.create(
        started_at=timezone.now(), holds={str(h.pk): job.pk for h in hosts}
    )


def test_the_queue_shows_how_many_hosts_a_job_needs_and_what_it_holds(alice_client, alice, chamber):
    suite = services.suite_submit(
        owner=alice,
        name="bt nightly",
        jobs=[
            JobSpec(
                name="bt_Pair",
                roles=[
                    {"name": "dut", "labels": ["bt"], "count": 2},
                    {"name": "peer", "labels": ["ap"], "count": 1, "max": 2},
                ],
            )
        ],
    )
    job = suite.jobs.get()
    hold(job, chamber.h1, chamber.ap1)

    html = alice_client.get("/queue/").content.decode()

    row = html[html.index(f'id="queued-{job.pk}"') :]
    row = row[: row.index("</tr>")]
    assert "3–4 hosts: dut ×2 (bt), peer ×1–2 (ap)" in row
    assert "holding 2 hosts" in row


def test_the_hosts_list_and_host_page_show_a_held_host_linked_to_its_job(
    sam_client, alice, chamber
):
    suite = services.suite_submit(
        owner=alice,
        name="bt nightly",
        jobs=[JobSpec(name="bt_Pair", roles=[{"name": "dut", "count": 3}])],
    )
    job = suite.jobs.get()
    hold(job, chamber.h2)

    listing = sam_client.get("/hosts/").content.decode()
    page = sam_client.get("/hosts/h2.lab/").content.decode()
    other = sam_client.get("/hosts/h3.lab/").content.decode()

    row = listing[listing.index(f'id="host-{chamber.h2.pk}"') :]
    row = row[: row.index("</tr>")]
    assert f'<a href="/jobs/{job.pk}/">held for job {job.pk}</a>' in row
    assert listing.count("held for job") == 1
    assert f'<a href="/jobs/{job.pk}/">held for job {job.pk}</a>' in page
    assert "held for job" not in other


def test_a_clone_of_a_multi_host_suite_fills_the_role_rows(alice_client, alice, chamber):
    job = running_pair(chamber, alice)

    html = alice_client.get(f"/suites/new/?clone={job.suite_id}").content.decode()

    assert html.count('name="role_name"') == 2
    assert 'value="dut"' in html and 'value="peer"' in html
    assert 'name="job_together_by" value="chamber"' in html
    assert '<details class="job-hosts" open>' in html


def test_the_suite_page_says_a_multi_host_job_runs_on_several_hosts(alice_client, alice, chamber):
    job = running_pair(chamber, alice)

    html = alice_client.get(f"/suites/{job.suite_id}/").content.decode()

    assert f'<a href="/jobs/{job.pk}/#job-hosts">3 hosts</a>' in html


def test_a_queued_multi_host_jobs_page_names_the_hosts_held_for_it(alice_client, alice, chamber):
    suite = services.suite_submit(
        owner=alice,
        name="bt nightly",
        jobs=[JobSpec(name="bt_Pair", roles=[{"name": "dut", "labels": ["bt"], "count": 2}])],
    )
    job = suite.jobs.get()
    hold(job, chamber.h2, chamber.h1)

    html = alice_client.get(f"/jobs/{job.pk}/").content.decode()

    held = html[html.index('id="job-held-hosts"') :]
    assert re.findall(r'href="/hosts/([\w.]+)/"', held[: held.index("</dd>")]) == [
        "h1.lab",
        "h2.lab",
    ]
