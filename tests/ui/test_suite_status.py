"""A completed suite says how many of its jobs did not pass, in the list and on its page."""

from __future__ import annotations

import pytest

from jobs import services
from jobs.models import Suite
from tests import factories as f

pytestmark = pytest.mark.django_db


def finish(suite: Suite, *results: str) -> None:
    """Lease every job of the suite, then complete them with these results, in id order."""
    services.scheduler_tick()
    for job, result in zip(suite.jobs.order_by("id"), results, strict=True):
        services.job_complete(job=job, result=result, by="runner-1")


@pytest.fixture
def mixed(lab, alice) -> Suite:  # noqa: ANN001
    """Alice's suite: login passed, power failed twice over (one per board)."""
    suite = f.suite("nightly", [["board:eve"], ["board:eve"], ["board:kevin"]], owner=alice)
    login, power_eve, power_kevin = suite.jobs.order_by("id")
    login.name = "login_Smoke"
    power_eve.name = power_kevin.name = "power_Resume"
    for job in (login, power_eve, power_kevin):
        job.save(update_fields=["name"])
    finish(suite, "passed", "failed", "failed")
    return suite


def test_the_suite_list_shows_a_completed_suite_with_failures_as_a_warning(alice_client, mixed):
    html = alice_client.get("/suites/").content.decode()

    assert '<span class="badge tone-amber">completed · 2 failed</span>' in html
    assert '<span class="badge tone-green">completed</span>' not in html


def test_a_suite_whose_jobs_all_passed_is_green(alice_client, lab, alice):
    suite = f.suite("clean", [["board:eve"], ["board:kevin"]], owner=alice)
    finish(suite, "passed", "passed")

    html = alice_client.get(f"/suites/{suite.pk}/").content.decode()

    assert '<span class="badge tone-green">completed</span>' in html
    assert "failed</span>" not in html


def test_the_suite_page_shows_the_warning_and_results_by_job_name(alice_client, mixed):
    html = alice_client.get(f"/suites/{mixed.pk}/").content.decode()

    assert '<span class="badge tone-amber">completed · 2 failed</span>' in html
    table = html[html.index('id="suite-results-title"') :]
    table = table[: table.index("</table>")]
    rows = [row.split("</tr>")[0] for row in table.split("<tr>")[2:]]
    # Failing names first: power_Resume failed on both boards, login_Smoke passed.
    assert "power_Resume" in rows[0] and '<td class="num">0</td>' in rows[0]
    assert '<span class="badge tone-red">2</span>' in rows[0]
    assert "login_Smoke" in rows[1] and '<td class="num">1</td>' in rows[1]
    assert len(rows) == 2


def test_aborted_jobs_are_counted_apart_from_failed_ones(alice_client, lab, alice):
    suite = f.suite("partly", [["board:eve"], ["board:nope"]], owner=alice)
    done, waiting = suite.jobs.order_by("id")
    services.scheduler_tick()
    services.job_complete(job=done, result="passed", by="runner-1")
    services.job_abort(job=waiting, by=alice)

    html = alice_client.get("/suites/").content.decode()

    assert '<span class="badge tone-amber">completed · 1 aborted</span>' in html


def test_a_running_suite_keeps_its_running_badge(alice_client, lab, alice):
    suite = f.suite("busy", [["board:eve"], ["board:eve"]], owner=alice)
    services.scheduler_tick()
    services.job_complete(job=suite.jobs.order_by("id").first(), result="failed", by="runner-1")

    html = alice_client.get(f"/suites/{suite.pk}/").content.decode()

    assert '<span class="badge tone-blue">running</span>' in html


def test_a_fanout_suite_counts_its_jobs_under_the_test_name(alice_client, lab, alice):
    suite = services.suite_submit(
        owner=alice, name="fan", jobs=(), fanout_labels=["board:eve"], fanout_name="bt_Pair"
    )
    finish(suite, "passed", "failed")

    html = alice_client.get(f"/suites/{suite.pk}/").content.decode()
    table = html[html.index('id="suite-results-title"') : html.index('id="suite-jobs-title"')]

    assert table.count("bt_Pair") == 1 and "@" not in table
