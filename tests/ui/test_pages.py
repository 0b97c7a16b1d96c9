"""Every page of the web UI: who may see it, what it shows, and its htmx fragments."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.utils import timezone
from rest_framework.authtoken.models import Token

from hosts import services as host_services
from jobs import selectors, services, views_dashboard
from jobs.models import Job, SchedulerTick
from schedsite import counting
from schedsite.ui.charts import line_chart
from tests import factories as f
from tests.ui.conftest import HTMX

pytestmark = pytest.mark.django_db

PAGES = [
    "/",
    "/hosts/",
    "/hosts/h1.lab/",
    "/workers/",
    "/workers/w1/",
    "/queue/",
    "/suites/",
    "/suites/new/",
    "/leases/",
    "/scheduler/settings/",
    "/accounts/profile/",
]


@pytest.mark.parametrize("path", PAGES)
def test_every_page_sends_a_stranger_to_the_login_form(client, lab, path):
    response = client.get(path)
    assert response.status_code == 302
    assert response["Location"].startswith("/accounts/login/?next=")


def test_a_poll_from_an_expired_session_reloads_the_page_into_the_login_form(client, lab):
    response = client.get("/hosts/", headers={**HTMX, "HX-Current-URL": "http://testserver/hosts/"})
    assert response.status_code == 200
    assert response["HX-Redirect"] == "/accounts/login/?next=%2Fhosts%2F"


@pytest.mark.parametrize("path", PAGES)
def test_every_page_renders_for_staff_and_testers(sam_client, alice_client, lab, path):
    f.suite("nightly", 2)
    for client in (sam_client, alice_client):
        response = client.get(path)
        assert response.status_code == 200, path
        assert b"<nav" in response.content


def test_the_navigation_marks_the_current_page(sam_client, lab):
    html = sam_client.get("/queue/").content.decode()
    assert '<a href="/queue/" aria-current="page">Queue</a>' in html
    assert '<a href="/hosts/" aria-current="page">' not in html


def test_the_login_page_signs_a_user_in(client, alice, lab):
    page = client.get("/accounts/login/")
    assert b'autocomplete="username"' in page.content
    response = client.post("/accounts/login/", {"username": "alice", "password": "alice-pass"})
    assert response.status_code == 302 and response["Location"] == "/"
    assert b"alice" in client.get("/").content


def test_a_wrong_password_is_said_plainly(client, alice):
    response = client.post("/accounts/login/", {"username": "alice", "password": "nope"})
    assert b"did not match" in response.content


# --- hosts ----------------------------------------------------------------------------------


def hostnames(html: str) -> list[str]:
    return re.findall(r'<a href="/hosts/([^/"]+)/">', html)


def test_hosts_filter_with_the_api_parameters(sam_client, lab):
    html = sam_client.get("/hosts/?label=pool:cq&status=ready").content.decode()
    assert hostnames(html) == ["h1.lab", "h3.lab"]


def test_every_label_given_must_match(sam_client, lab):
    html = sam_client.get("/hosts/?label=board:eve&label=pool:cq").content.decode()
    assert hostnames(html) == ["h1.lab"]
    assert 'value="board:eve"' in html and 'value="pool:cq"' in html  # shown as removable chips


def test_an_empty_filter_field_does_not_filter(sam_client, lab):
    html = sam_client.get("/hosts/?label=&q=&status=").content.decode()
    assert hostnames(html) == ["h1.lab", "h2.lab", "h3.lab"]


def test_locked_and_search_filters(sam_client, lab):
    host_services.host_lock(host=lab.h2, by="sam", reason="servo dead")
    assert hostnames(sam_client.get("/hosts/?locked=true").content.decode()) == ["h2.lab"]
    assert hostnames(sam_client.get("/hosts/?q=servo").content.decode()) == ["h2.lab"]
    assert hostnames(sam_client.get("/hosts/?worker=w2").content.decode()) == ["h3.lab"]


def test_a_bad_filter_value_is_reported_not_a_server_error(sam_client, lab):
    response = sam_client.get("/hosts/?status=exploded")
    assert response.status_code == 200
    assert b"Some filters were ignored" in response.content


def test_htmx_gets_only_the_table_and_a_poll_keeps_the_filters(sam_client, lab):
    response = sam_client.get("/hosts/?label=pool:cq&page=1", headers=HTMX)
    html = response.content.decode()
    assert "<html" not in html and 'id="hosts-table"' in html
    assert 'hx-get="/hosts/?label=pool%3Acq"' in html
    assert 'hx-trigger="every' in html
    assert "HX-Request" in response["Vary"]


def test_a_boosted_request_gets_the_whole_page(sam_client, lab):
    response = sam_client.get("/hosts/", headers={**HTMX, "HX-Boosted": "true"})
    assert b"<html" in response.content


def test_the_filter_form_also_refreshes_the_label_chips(sam_client, lab):
    headers = {**HTMX, "HX-Trigger": "host-filters"}
    html = sam_client.get("/hosts/?label=pool:cq", headers=headers).content.decode()
    assert 'id="host-label-chips" class="chips" hx-swap-oob="true"' in html
    polled = sam_client.get("/hosts/?label=pool:cq", headers=HTMX)
    assert "host-label-chips" not in polled.content.decode()
    assert "HX-Push-Url" not in polled  # a poll never touches the location bar


def test_the_filter_form_puts_a_clean_address_in_the_location_bar(sam_client, lab):
    headers = {**HTMX, "HX-Trigger": "host-filters"}
    response = sam_client.get("/hosts/?q=&label=pool:cq&locked=&worker=", headers=headers)
    assert response["HX-Push-Url"] == "/hosts/?label=pool%3Acq"


def test_the_hosts_table_pages_on_the_server(sam_client, db):
    for i in range(55):
        f.host(f"dut{i:02d}.lab", ["pool:cq"])
    first = hostnames(sam_client.get("/hosts/").content.decode())
    second = sam_client.get("/hosts/?page=2").content.decode()
    assert len(first) == 50 and first[0] == "dut00.lab"
    assert hostnames(second) == [f"dut{i}.lab" for i in range(50, 55)]
    assert "Page 2 of 2" in second


def test_the_host_page_shows_its_lease_and_timeline(sam_client, lab):
    f.job("login_Smoke", ["board:kevin"])
    services.scheduler_tick()
    host_services.host_lock(host=lab.h3, by="sam", reason="flaky usb")
    html = sam_client.get("/hosts/h3.lab/").content.decode()
    assert "login_Smoke" in html and "flaky usb" in html
    assert "leased to job login_Smoke" in html  # from the event timeline
    assert "Release, requeue job" in html


def test_an_unknown_host_is_a_404(sam_client, lab):
    assert sam_client.get("/hosts/nope.lab/").status_code == 404


def test_the_workers_page_shows_online_paused_and_host_counts(sam_client, lab):
    host_services.worker_pause(worker=lab.w2, by="sam", reason="kernel upgrade")
    offline = f.worker("w3", online=False)
    f.host("h4.lab", worker=offline)
    html = sam_client.get("/workers/").content.decode()
    assert "kernel upgrade" in html
    w1_row = html[html.index(f'id="worker-{lab.w1.pk}"') :]
    assert ">2</a>" in w1_row[:2000]  # two hosts on w1
    assert html.count("tone-red") >= 1  # w3 offline
    assert sam_client.get("/workers/?paused=true").content.decode().count("<tr id=") == 1


def test_the_worker_page_lists_its_hosts(sam_client, lab):
    html = sam_client.get("/workers/w1/").content.decode()
    assert hostnames(html) == ["h1.lab", "h2.lab"]


# --- queue ----------------------------------------------------------------------------------


def test_the_queue_shows_the_scheduler_order_and_why_each_job_waits(alice_client, lab):
    low = services.JobSpec(name="low", labels=["board:nope"])
    services.job_submit(owner="alice", spec=low, allow_unmatched=True)
    f.job("high", ["board:nope"], priority=70)
    f.job("busy-1", ["board:kevin"], priority=50)
    f.job("busy-2", ["board:kevin"], priority=50)
    services.scheduler_tick()
    html = alice_client.get("/queue/").content.decode()
    assert html.index(">high</a>") < html.index(">busy-2</a>") < html.index(">low</a>")
    assert "No host has label board:nope" in html
    assert "cq 70" in html
    assert "Outranked" in html or "busy" in html


def test_a_job_submitted_after_the_last_tick_says_it_waits_for_the_next(alice_client, lab):
    services.scheduler_tick()
    f.job("fresh", ["board:eve"])
    assert "Waiting for the next scheduler tick." in alice_client.get("/queue/").content.decode()


def test_the_queue_marks_jobs_the_min_dut_quota_puts_first(alice_client, lab):
    f.suite("big", 3, priority=70, labels=["board:nope"])
    f.suite("quota", 2, priority=10, min_duts=1, labels=["board:nope"])
    html = alice_client.get("/queue/").content.decode()
    first_row = html[html.index("<tbody>") :].split("</tr>")[0]
    assert "quota-t0" in first_row and "min-DUT quota" in first_row


def test_the_queue_filters_by_owner_and_label(alice_client, bob_client, lab):
    f.job("alices", ["board:eve"], owner="alice")
    services.job_submit(
        owner=get_user_model().objects.get(username="bob"),
        spec=services.JobSpec(name="bobs", labels=["board:kevin"]),
    )
    mine = alice_client.get("/queue/?owner=bob").content.decode()
    assert "bobs" in mine and "alices" not in mine
    by_label = alice_client.get("/queue/?label=board:eve").content.decode()
    assert "alices" in by_label and "bobs" not in by_label
    assert "1 of 2 queued jobs" in by_label


# --- suites ---------------------------------------------------------------------------------


def test_the_suites_page_shows_status_progress_and_quota(alice_client, lab):
    suite = f.suite("bvt", 3, min_duts=2, labels=["board:eve"], owner="alice")
    services.scheduler_tick()
    job = Job.objects.filter(suite=suite, status="leased").first()
    services.job_start(job=job, by="runner-1")
    services.job_complete(job=job, result="passed", by="runner-1")
    html = alice_client.get("/suites/").content.decode()
    assert "bvt" in html and "Running" not in html  # status badge text is lower-case words
    assert "running" in html
    assert "1 / 2" in html  # hosts held against min DUTs
    assert "1 / 3" in html  # jobs done


def test_the_suite_page_lists_its_jobs_hosts_and_wait_reasons(alice_client, alice, lab):
    suite = f.suite("eve-suite", [["board:eve"], ["board:eve"], ["board:eve"]], owner=alice)
    services.scheduler_tick()
    html = alice_client.get(f"/suites/{suite.pk}/").content.decode()
    assert "h1.lab" in html and "h2.lab" in html
    assert "2 free hosts went to 2 jobs ahead of it in the queue" in html  # the third waits
    assert "Abort suite" in html


def test_the_suite_page_offers_abort_only_to_who_may_abort(bob_client, sam_client, alice, lab):
    suite = f.suite("alices", 1, owner=alice)
    assert "Abort suite" not in bob_client.get(f"/suites/{suite.pk}/").content.decode()
    assert "Abort suite" in sam_client.get(f"/suites/{suite.pk}/").content.decode()


# --- dashboard and profile ------------------------------------------------------------------


def test_the_dashboard_counts_the_lab_and_draws_the_recent_ticks(alice_client, lab):
    f.suite("bvt", 4, labels=["board:eve"], min_duts=2)
    host_services.host_lock(host=lab.h3, by="sam", reason="debugging")
    services.scheduler_tick()
    f.job("later", ["board:eve"])
    services.scheduler_tick()
    html = alice_client.get("/").content.decode()
    assert "67%" in html  # two of three hosts leased
    assert re.search(r'<div class="label">Locked hosts</div>\s*<div class="value">1<', html)
    assert html.count('<svg class="chart-svg"') == 4  # capacity, queue, leased, wait
    assert '<path class="line tone-indigo"' in html
    assert not re.search(r'<(line|text|path)[^>]* \w+=""', html)  # no empty SVG attribute
    assert "bvt" in html and "2 / 2" in html  # min-DUT bar: held against minimum


@pytest.mark.postgres
def test_the_dashboard_counts_a_big_queue_as_the_queue_page_does(alice_client, lab, monkeypatch):
    for i in range(12):
        f.job(f"solo-{i}", ["board:none"])
    queued = r'<div class="label">Queued jobs</div>\s*<div class="value">{}</div>'
    assert re.search(queued.format("12"), alice_client.get("/").content.decode())
    monkeypatch.setattr(counting, "EXACT_COUNT_LIMIT", 5)  # above it, an estimate
    html = alice_client.get("/").content.decode()
    assert re.search(queued.format(r'<span class="approx">about </span>\d+'), html)
    assert not re.search(queued.format("12"), html)


@pytest.mark.postgres
def test_a_job_deep_in_a_big_queue_is_placed_about_where_it_stands(alice_client, lab, monkeypatch):
    for i in range(12):
        f.job(f"solo-{i}", ["board:none"])
    order = selectors.queue_order_ids().ids
    first, last = order[0], order[-1]
    place = r"{}#{} of {}{}</a> in the scheduler's order"
    html = alice_client.get(f"/jobs/{last}/").content.decode()
    assert place.format("", len(order), "", len(order)) in html  # exact below the limit
    # Above the limit the queue's length is an estimate, and so is the place of a job with
    # more jobs ahead of it than the limit; a job near the front keeps its exact place.
    monkeypatch.setattr(counting, "EXACT_COUNT_LIMIT", 5)
    html = alice_client.get(f"/jobs/{last}/").content.decode()
    assert re.search(place.format("about ", r"\d+", "about ", r"\d+"), html)
    html = alice_client.get(f"/jobs/{first}/").content.decode()
    assert re.search(place.format("", 1, "about ", r"\d+"), html)


@pytest.mark.postgres
def test_a_job_behind_many_more_urgent_jobs_is_placed_about_where_it_stands(
    alice_client, lab, monkeypatch
):
    for i in range(12):
        f.job(f"urgent-{i}", ["board:none"], priority=70)
    low = f.job("low", ["board:none"], priority=20)
    with connection.cursor() as cursor:
        cursor.execute(f"ANALYZE {Job._meta.db_table}")  # the estimates see the 12 ahead of it
    monkeypatch.setattr(counting, "EXACT_COUNT_LIMIT", 5)  # 12 ahead: over twice the limit
    html = alice_client.get(f"/jobs/{low.pk}/").content.decode()
    found = re.search(r"about #(\d+) of about (\d+)</a> in the scheduler's order", html)
    assert found
    place, length = int(found[1]), int(found[2])
    # Never above the queue's end, never as near the front as the limit: 12 are ahead of it.
    assert 6 <= place <= length


def test_the_dashboard_charts_read_the_time_in_the_labs_timezone(alice_client, lab, settings):
    settings.TIME_ZONE = "Europe/Berlin"
    start = timezone.now().replace(month=1, day=5, hour=12, minute=0, second=0, microsecond=0)
    for minutes in (0, 90):
        SchedulerTick.objects.create(started_at=start + timedelta(minutes=minutes), hosts_total=3)
    html = alice_client.get("/").content.decode()
    assert ">13:00</text>" in html and ">14:30:00</text>" in html


def test_the_dashboard_draws_its_charts_once_for_the_same_tick_figures(
    alice_client, lab, monkeypatch
):
    views_dashboard.charts_html.cache_clear()
    drawn = []
    monkeypatch.setattr(
        views_dashboard, "line_chart", lambda **kw: drawn.append(kw) or line_chart(**kw)
    )
    services.scheduler_tick()
    services.scheduler_tick()
    first = alice_client.get("/").content.decode()
    assert len(drawn) == 4  # capacity, queue, leased, wait
    again = alice_client.get("/").content.decode()
    assert len(drawn) == 4  # the same ticks: drawn from the last request's figures
    charts = re.compile(r'<section class="charts".*?</section>', re.S)
    assert charts.search(again)[0] == charts.search(first)[0]

    # Drawn again when a figure differs: a new tick, or (a database edited by hand) a row's.
    SchedulerTick.objects.filter(pk=SchedulerTick.objects.latest("id").pk).update(queued_after=77)
    assert "77 queued now" in alice_client.get("/").content.decode()
    assert len(drawn) == 8
    services.scheduler_tick()
    assert "3 ticks from" in alice_client.get("/").content.decode()
    assert len(drawn) == 12


def test_the_dashboard_before_any_tick_says_charts_will_come(alice_client, lab):
    assert SchedulerTick.objects.count() == 0
    html = alice_client.get("/").content.decode()
    assert "Not enough scheduler ticks yet" in html
    assert "has not ticked yet" in html


def test_the_dashboard_refreshes_itself(alice_client, lab):
    response = alice_client.get("/", headers=HTMX)
    html = response.content.decode()
    assert html.lstrip().startswith('<div id="dashboard"') and 'hx-trigger="every' in html


def test_the_profile_creates_and_regenerates_an_api_token(alice_client, alice):
    assert b"Create my token" in alice_client.get("/accounts/profile/").content
    created = alice_client.post("/accounts/profile/", headers=HTMX)
    first = Token.objects.get(user=alice).key
    assert first in created.content.decode()
    again = alice_client.post("/accounts/profile/", headers=HTMX)
    second = Token.objects.get(user=alice).key
    assert second != first and second in again.content.decode()
    assert "old one no longer works" in again.content.decode()


# --- suggestions ----------------------------------------------------------------------------


def test_label_suggestions_name_existing_labels_and_count_matching_hosts(alice_client, lab):
    html = alice_client.get("/suggest/labels/?job_labels=board:eve po").content.decode()
    assert 'data-pick="pool:cq"' in html and 'data-pick="pool:bvt"' in html
    assert "board:eve" not in html.split("</p>", 1)[1]  # not suggested twice
    assert "2 hosts carry board:eve" in html


def test_label_suggestions_warn_when_no_host_has_the_labels(alice_client, lab):
    html = alice_client.get("/suggest/labels/?job_labels=board:kevin pool:bvt ").content.decode()
    assert "No host carries board:kevin + pool:bvt" in html


def test_host_suggestions(alice_client, lab):
    html = alice_client.get("/suggest/hosts/?job_host=h2").content.decode()
    assert 'data-pick="h2.lab"' in html and "h1.lab" not in html


def test_times_are_shown_as_ages_with_the_exact_time_at_hand(alice_client, lab):
    f.job("old", ["board:nope"])
    Job.objects.update(created_at=timezone.now() - timezone.timedelta(minutes=3, seconds=5))
    html = alice_client.get("/queue/").content.decode()
    assert re.search(r'<time datetime="[^"]+" title="[^"]+">3m 0\ds ago</time>', html)
