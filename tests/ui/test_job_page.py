"""The job page: every attempt with its host, result, retry reason and events; why it waits."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from jobs import services
from jobs.models import Job, Lease
from tests import factories as f
from tests.ui.conftest import HTMX

pytestmark = pytest.mark.django_db

OUTPUT = "PASS login_Smoke\n<all 12 checks passed>\n"


def run(job: Job, result: str, *, host_ok: bool = True, message: str = "") -> Job:
    """Start the job on the host the tick leased it, and complete it as its runner would."""
    services.scheduler_tick()
    job.refresh_from_db()
    assert job.status == "leased", job.message
    services.job_start(job=job, by="runner-1")
    return services.job_complete(
        job=job, result=result, by="runner-1", host_ok=host_ok, message=message
    )


@pytest.fixture
def retried(lab, alice, settings) -> Job:  # noqa: ANN001
    """Alice's job that failed on a host that broke under it, then passed on another."""
    settings.RETRY_BACKOFF = 0
    suite = f.suite("nightly", [["board:eve"]], owner=alice, max_retries=1)
    job = suite.jobs.get()
    run(job, "failed", host_ok=False, message="servo: no response from DUT")
    return run(job, "passed", message=OUTPUT)


def hosts_of(job: Job) -> list[str]:
    return list(job.leases.order_by("id").values_list("host__hostname", flat=True))


def test_each_attempt_shows_its_host_result_and_why_it_was_retried(alice_client, retried):
    first, second = hosts_of(retried)
    assert first != second

    response = alice_client.get(f"/jobs/{retried.pk}/")

    assert response.status_code == 200
    html = response.content.decode()
    attempts = html[html.index('id="job-attempts-title"') :]
    one, two = attempts.index('id="attempt-1"'), attempts.index('id="attempt-2"')
    row1, row2 = attempts[one:two], attempts[two : attempts.index("</tbody>")]
    assert f'href="/hosts/{first}/"' in row1 and ">failed</span>" in row1
    assert f"retry 1 of 1 after host {first} broke" in row1
    assert "servo: no response from DUT" in row1
    assert f'href="/hosts/{second}/"' in row2 and ">passed</span>" in row2
    assert "worker w1" in row1
    # The job's output, escaped, and the first attempt's host going to repair.
    assert "&lt;all 12 checks passed&gt;\n</textarea>" in html
    split = attempts.index('id="attempt-2-title"')
    card1, card2 = attempts[attempts.index('id="attempt-1-title"') : split], attempts[split:]
    assert "needs repair" in card1.lower() and "servo: no response from DUT" in card1
    assert "This attempt ended the job" in card2 and "needs repair" not in card2.lower()


def test_the_output_downloads_as_a_text_file(alice_client, retried):
    response = alice_client.get(f"/jobs/{retried.pk}/output.txt")

    assert response.status_code == 200
    assert response["Content-Type"] == "text/plain; charset=utf-8"
    assert response["Content-Disposition"] == f'attachment; filename="job-{retried.pk}-output.txt"'
    assert response.content.decode() == OUTPUT
    assert (
        f'href="/jobs/{retried.pk}/output.txt"'
        in alice_client.get(f"/jobs/{retried.pk}/").content.decode()
    )


def test_a_finished_job_is_not_live_and_a_running_one_is(alice_client, retried, lab):
    assert "hx-trigger" not in alice_client.get(f"/jobs/{retried.pk}/").content.decode()
    job = f.job("long", ["board:kevin"])
    services.scheduler_tick()

    html = alice_client.get(f"/jobs/{job.pk}/").content.decode()

    assert f'hx-get="/jobs/{job.pk}/"' in html and "holds the host" in html
    assert "No output yet" in html


def test_a_queued_job_shows_its_wait_reason_and_place_in_the_queue(alice_client, lab):
    ahead = f.job("ahead", ["board:nope"], priority=60)
    job = f.job("nobody-can-run", ["board:nope"])
    services.scheduler_tick()

    html = alice_client.get(f"/jobs/{job.pk}/").content.decode()

    assert "#2 of 2" in html
    assert "No such host" in html and "board:nope" in html
    assert "No attempt yet" in html
    assert "#1 of 2" in alice_client.get(f"/jobs/{ahead.pk}/").content.decode()


def test_a_job_waiting_out_its_retry_backoff_says_until_when(alice_client, lab, alice, settings):
    settings.RETRY_BACKOFF = 300
    job = f.suite("nightly", [["board:eve"]], owner=alice, max_retries=2).jobs.get()
    run(job, "failed", host_ok=False, message="DUT went away")

    html = alice_client.get(f"/jobs/{job.pk}/").content.decode()

    assert "Retry backoff" in html or "retry backoff" in html
    assert "retry 1 of 2 after host" in html


@pytest.mark.parametrize("client", ["alice_client", "bob_client", "sam_client"])
def test_staff_and_every_tester_can_read_it(request, client, retried):
    response = request.getfixturevalue(client).get(f"/jobs/{retried.pk}/")

    assert response.status_code == 200
    assert "nightly" in response.content.decode()


def test_signed_out_visitors_are_sent_to_sign_in(client, retried):
    response = client.get(f"/jobs/{retried.pk}/")

    assert response.status_code == 302
    assert response["Location"].startswith("/accounts/login/")
    assert client.get(f"/jobs/{retried.pk}/output.txt").status_code == 302


@pytest.mark.parametrize(
    "path", ["/jobs/999999/", "/jobs/999999/output.txt", f"/jobs/{10**30}/", "/jobs/abc/"]
)
def test_a_job_that_does_not_exist_is_the_usual_not_found_page(alice_client, settings, path):
    settings.DEBUG = False

    response = alice_client.get(path)

    assert response.status_code == 404
    assert "There is nothing at" in response.content.decode()


def test_the_htmx_poll_gets_only_the_body(alice_client, lab):
    job = f.job("long", ["board:kevin"])

    html = alice_client.get(f"/jobs/{job.pk}/", headers=HTMX).content.decode()

    assert html.lstrip().startswith('<div id="job-detail"') or 'id="job-detail"' in html[:200]
    assert "<html" not in html


def test_the_suite_queue_and_leases_pages_link_each_job(sam_client, lab, alice):
    suite = f.suite("nightly", [["board:eve"], ["board:nope"]], owner=alice)
    running, waiting = suite.jobs.order_by("id")
    services.scheduler_tick()

    link = f'href="/jobs/{running.pk}/"'
    assert link in sam_client.get(f"/suites/{suite.pk}/").content.decode()
    assert link in sam_client.get("/leases/").content.decode()
    assert f'href="/jobs/{waiting.pk}/"' in sam_client.get("/queue/").content.decode()


def test_a_finished_job_on_the_suite_page_shows_the_host_it_ran_on(alice_client, retried):
    last = Lease.objects.filter(job=retried).latest("id").host.hostname

    html = alice_client.get(f"/suites/{retried.suite_id}/").content.decode()
    row = html[html.index(f'id="job-{retried.pk}"') :]
    row = row[: row.index("</tr>")]

    assert f'href="/hosts/{last}/"' in row and "ran here" in row


def page_queries(client, path: str) -> int:  # noqa: ANN001
    with CaptureQueriesContext(connection) as ctx:
        assert client.get(path).status_code == 200
    return len(ctx.captured_queries)


def test_the_page_costs_the_same_queries_for_one_attempt_as_for_five(alice_client, lab, sam):
    job = f.job("flaky", ["board:kevin"])
    services.scheduler_tick()
    path = f"/jobs/{job.pk}/"
    one = page_queries(alice_client, path)
    for _ in range(4):
        lease = Lease.objects.get(job=job, released_at=None)
        services.lease_release(lease=lease, by=sam, requeue=True, reason="again")
        services.scheduler_tick()

    assert job.leases.count() == 5
    assert page_queries(alice_client, path) == one
