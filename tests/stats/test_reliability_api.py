"""GET /api/stats/hosts/ and /api/stats/tests/: the figures a lab engineer reads, from a lab
that really broke, repaired and ran tests (docs/api.md#statistics)."""

from __future__ import annotations

import csv
import io
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from hosts.choices import HostStatus
from hosts.models import Host, HostEvent
from jobs.choices import JobStatus
from jobs.models import Job
from tests import factories as f
from tests.api.conftest import token_client
from tests.factories import run, tick

pytestmark = pytest.mark.django_db


def by_name(rows: list[dict], key: str = "hostname") -> dict[str, dict]:
    return {row[key]: row for row in rows}


def test_a_host_that_broke_twice_shows_its_breaks_repairs_outage_and_mtbf(broken_twice, alice):
    response = token_client(alice).get("/api/stats/hosts/?range=30d")

    assert response.status_code == 200
    body = response.json()
    assert body["range"] == "30d" and body["count"] == 2
    h1, h2 = by_name(body["results"])["h1"], by_name(body["results"])["h2"]
    assert (h1["breaks"], h1["repairs"], h1["failed_repairs"]) == (2, 3, 1)
    assert h1["hours_out_of_service"] == pytest.approx(2 + 59 / 60, abs=0.01)
    # Eleven hours since the lab was installed, less the outage, per break.
    assert h1["mtbf_hours"] == pytest.approx((11 - 2 - 59 / 60) / 2, abs=0.01)
    assert (h1["jobs"], h1["passed"], h1["pass_rate"]) == (2, 0, 0.0)
    assert h1["status"] == HostStatus.READY
    assert (h2["breaks"], h2["repairs"], h2["hours_out_of_service"]) == (0, 0, 0.0)
    assert h2["mtbf_hours"] is None  # no break: nothing to divide by
    assert (h2["jobs"], h2["pass_rate"]) == (1, 1.0)
    # The host that broke most comes first.
    assert [row["hostname"] for row in body["results"]] == ["h1", "h2"]


def test_a_range_that_ends_before_the_breaks_counts_none_of_them(broken_twice, alice):
    # The last hour holds no break and no outage: h1 has been in service all of it.
    h1 = by_name(token_client(alice).get("/api/stats/hosts/?range=1h").json()["results"])["h1"]

    assert (h1["breaks"], h1["repairs"], h1["hours_out_of_service"], h1["jobs"]) == (0, 0, 0, 0)


def test_a_host_broken_since_before_the_range_is_out_of_service_all_of_it(broken_twice, alice):
    t0 = broken_twice
    h2 = Host.objects.get(hostname="h2")
    # Broken 2 hours ago by staff and never repaired: the whole last hour is an outage, and
    # the break itself falls outside it.
    Host.objects.filter(pk=h2.pk).update(status=HostStatus.NEEDS_REPAIR)
    HostEvent.objects.create(
        host=h2,
        subject="h2",
        kind="status",
        actor="sam",
        old_status=HostStatus.READY,
        new_status=HostStatus.NEEDS_REPAIR,
        created_at=t0 + timedelta(hours=8),
    )
    client = token_client(alice)

    last_hour = by_name(client.get("/api/stats/hosts/?range=1h").json()["results"])["h2"]
    last_day = by_name(client.get("/api/stats/hosts/?range=24h").json()["results"])["h2"]

    assert (last_hour["breaks"], last_hour["hours_out_of_service"]) == (0, pytest.approx(1.0))
    assert last_day["breaks"] == 1
    assert last_day["hours_out_of_service"] == pytest.approx(2.0, abs=0.01)


def test_hosts_sort_by_any_column_and_put_hosts_without_a_value_last(broken_twice, alice):
    client = token_client(alice)

    by_rate = client.get("/api/stats/hosts/?range=30d&ordering=-pass_rate").json()["results"]
    by_mtbf = client.get("/api/stats/hosts/?range=30d&ordering=-mtbf_hours").json()["results"]

    assert [row["hostname"] for row in by_rate] == ["h2", "h1"]
    assert [row["hostname"] for row in by_mtbf] == ["h1", "h2"]  # h2 has no MTBF: last


@pytest.mark.parametrize(
    ("url", "field"),
    [
        ("/api/stats/hosts/?range=2d", "range"),
        ("/api/stats/tests/?range=", "range"),
        ("/api/stats/hosts/?range=30d&format=csv&ordering=uptime", "ordering"),
        ("/api/stats/tests/?ordering=-hostname", "ordering"),
    ],
)
def test_a_bad_range_or_column_is_a_400_that_says_what_is_allowed(alice, url, field):
    response = token_client(alice).get(url)

    assert response.status_code == 400
    assert response["Content-Type"] == "application/json"
    message = response.json()[field][0]
    assert message.startswith(f"{field} must be one of ")
    assert ("1h, 24h, 7d, 30d" in message) if field == "range" else ("pass_rate" in message)


def test_the_statistics_need_a_signed_in_user():
    assert token_client(None).get("/api/stats/hosts/").status_code == 401
    assert token_client(None).get("/api/stats/tests/").status_code == 401


def test_the_host_csv_has_every_host_and_the_columns_of_the_json(broken_twice, alice):
    response = token_client(alice).get("/api/stats/hosts/?range=30d&format=csv&page_size=1")

    assert response.status_code == 200
    assert response["Content-Type"] == "text/csv; charset=utf-8"
    assert 'filename="host-reliability-30d.csv"' in response["Content-Disposition"]
    rows = list(csv.DictReader(io.StringIO(response.content.decode())))
    assert [row["hostname"] for row in rows] == ["h1", "h2"]  # unpaginated
    assert rows[0]["breaks"] == "2" and rows[0]["failed_repairs"] == "1"
    assert rows[1]["mtbf_hours"] == ""


# --- tests ------------------------------------------------------------------------------------


def test_a_test_that_passed_and_failed_on_one_build_is_flaky_and_names_the_host(test_runs, alice):
    response = token_client(alice).get("/api/stats/tests/?range=7d")

    assert response.status_code == 200
    rows = by_name(response.json()["results"], key="name")
    smoke, stable, lone = rows["smoke-t0"], rows["stable-t0"], rows["lone"]
    assert (smoke["runs"], smoke["passed"], smoke["failed"], smoke["pass_rate"]) == (2, 1, 1, 0.5)
    assert smoke["flaky"] is True and smoke["flaky_builds"] == ["R1"]
    assert smoke["failed_on"] == [{"host": "h2", "failures": 1}]
    # Failed on another build than it passed on: a regression, not flakiness.
    assert stable["flaky"] is False and stable["flaky_builds"] == []
    assert stable["failed_on"] == [{"host": "h2", "failures": 1}]
    # No build named: nothing says the two runs tested the same thing.
    assert lone["flaky"] is False and lone["runs"] == 2
    assert lone["failed_on"] == [{"host": "h1", "failures": 1}]


def test_a_test_run_before_the_range_is_not_listed(test_runs, alice):
    Job.objects.filter(name="lone").update(finished_at=timezone.now() - timedelta(days=8))

    rows = token_client(alice).get("/api/stats/tests/?range=7d").json()["results"]

    assert {row["name"] for row in rows} == {"smoke-t0", "stable-t0"}


def test_the_test_csv_flattens_builds_and_hosts(test_runs, alice):
    response = token_client(alice).get("/api/stats/tests/?range=24h&format=csv&ordering=name")

    rows = list(csv.DictReader(io.StringIO(response.content.decode())))
    assert [row["name"] for row in rows] == ["lone", "smoke-t0", "stable-t0"]
    assert rows[1]["flaky"] == "True" and rows[1]["flaky_builds"] == "R1"
    assert rows[1]["failed_on"] == "h2:1"


def test_a_test_name_that_starts_like_a_formula_is_quoted_in_the_csv(alice):
    rack = f.rack()
    job = f.job("=HYPERLINK(1)")
    tick(timezone.now(), rack)
    run(job, JobStatus.PASSED)

    text = token_client(alice).get("/api/stats/tests/?format=csv").content.decode()

    assert "\n'=HYPERLINK(1)," in text


def test_the_query_count_does_not_grow_with_the_lab(broken_twice, test_runs, alice):
    client = token_client(alice)

    def queries(url: str) -> int:
        with CaptureQueriesContext(connection) as captured:
            assert client.get(url).status_code == 200
        return len(captured)

    small = queries("/api/stats/hosts/?range=30d"), queries("/api/stats/tests/?range=7d")
    worker = f.worker("rack-9")
    for i in range(30):
        host = f.host(f"big-{i:02}", ["board:x"], worker=worker)
        job = f.job(f"suite-{i % 5}", host=host)
        tick(timezone.now(), worker)
        run(job, JobStatus.FAILED, host_ok=i % 2 == 0)

    assert (queries("/api/stats/hosts/?range=30d"), queries("/api/stats/tests/?range=7d")) == small


def test_a_retired_host_is_listed_only_for_a_range_it_was_in_use_in(broken_twice, alice):
    Host.objects.filter(hostname="h2").update(
        status=HostStatus.RETIRED, updated_at=timezone.now() - timedelta(days=2)
    )
    client = token_client(alice)

    week = client.get("/api/stats/hosts/?range=7d").json()["results"]
    day = client.get("/api/stats/hosts/?range=24h").json()["results"]

    assert [row["hostname"] for row in week] == ["h1", "h2"]
    assert [row["hostname"] for row in day] == ["h1"]


def test_an_unknown_format_is_a_400_naming_the_two(alice):
    response = token_client(alice).get("/api/stats/tests/?format=xlsx")

    assert response.status_code == 400
    assert response.json() == {"format": ["format must be json or csv"]}


def test_a_malformed_page_size_is_a_400_in_csv_too(alice):
    response = token_client(alice).get("/api/stats/hosts/?format=csv&page_size=-2")

    assert response.status_code == 400
    assert response.json() == {"page_size": ["A page size is a whole number ≥ 1."]}
