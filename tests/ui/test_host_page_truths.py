"""The host page says what happened and what can happen: a failed job is not a green
"completed", and a host out of service runs none of the jobs that fit it."""

from __future__ import annotations

import pytest

from hosts.choices import HostStatus
from hosts.models import Host
from jobs import services
from tests import factories as f

pytestmark = pytest.mark.django_db


def _run(job, result: str) -> None:  # noqa: ANN001
    services.scheduler_tick()
    job.refresh_from_db()
    services.job_start(job=job, by="runner-1")
    services.job_complete(job=job, by="runner-1", result=result, message="")


def _timeline(client, hostname: str) -> str:  # noqa: ANN001
    html = client.get(f"/hosts/{hostname}/").content.decode()
    return html.split('id="timeline"')[1] if 'id="timeline"' in html else html


def test_the_timeline_shows_a_failed_job_in_red_and_a_passed_one_in_green(alice_client):
    f.host("dut1", ["board:eve"])
    _run(f.job("boots", ["board:eve"]), "passed")
    _run(f.job("flashes", ["board:eve"]), "failed")

    html = _timeline(alice_client, "dut1")

    assert '<span class="badge tone-red">Job failed</span>' in html
    assert '<span class="badge tone-green">Job passed</span>' in html
    assert 'tone-green">Job completed' not in html


def test_a_repair_failed_host_says_none_of_the_fitting_jobs_runs_there(alice_client):
    f.host("dut1", ["board:eve"])
    Host.objects.filter(hostname="dut1").update(status=HostStatus.REPAIR_FAILED)
    for name in ("a", "b"):
        f.job(name, ["board:eve"])

    html = alice_client.get("/hosts/dut1/").content.decode()

    assert "could run here" not in html
    assert "(2 queued jobs fit its labels; none runs here while it is" in html


def test_a_ready_host_still_says_what_could_run_there(alice_client):
    f.host("dut1", ["board:eve"])
    f.job("a", ["board:eve"])
    html = alice_client.get("/hosts/dut1/").content.decode()
    assert "(1 queued job could run here)" in html
