"""End to end: the real runner with --provision-cmd puts a suite's build on a host that carries
another before the test, and the host says so; a provisioning that fails sends it to repair."""

from __future__ import annotations

from pathlib import Path

import pytest

from hosts import services as host_services
from tests import factories as f
from tests.e2e.support import PYTHON_M_RUNNER, token_for, wait_for

pytestmark = [pytest.mark.postgres, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

TEST = ["sh", "-c", 'echo "testing $SCHEDSITE_BUILD on $SCHEDSITE_HOST"']


def flasher(image: Path, exit_status: int) -> str:
    """A provisioning command writing `<host> <build>` into `image`, then exiting so."""
    return (
        f"sh -c 'echo flashing $SCHEDSITE_BUILD; "
        f"echo $SCHEDSITE_HOST $SCHEDSITE_BUILD >> {image}; exit {exit_status}'"
    )


@pytest.fixture
def lab(settings, live_server, children, api_as, alice, sam, tmp_path) -> dict:  # noqa: ANN001
    children.share(settings, LEASE_TTL=30)
    worker, runner = host_services.worker_runner_ensure(worker_name="w1", by=sam)
    f.host("eve1.lab", ["board:eve"], worker=worker, build="R119")

    def start_runner(exit_status: int) -> None:
        provision = flasher(tmp_path / "image", exit_status)
        children.start_runner(
            worker="w1",
            api=f"{live_server.url}/api/",
            token=token_for(runner),
            command=TEST,
            options=["--provision-cmd", provision],
            launcher=PYTHON_M_RUNNER,
        )

    return {
        "alice": api_as(alice),
        "staff": api_as(sam),
        "start_runner": start_runner,
        "cluster": children.start_cluster,
        "logs": children.logs,
        "image": tmp_path / "image",
    }


def submit(alice, **job: object) -> dict:  # noqa: ANN001
    """alice's suite of build R121: one job for board:eve."""
    body = {
        "name": "nightly",
        "build": "R121",
        "jobs": [{"name": "boot", "labels": ["board:eve"], **job}],
    }
    return alice.post("/suites/", body, expect=201)


def test_the_runner_provisions_the_host_before_the_test_and_the_host_carries_the_build(lab):
    lab["cluster"]()
    lab["start_runner"](0)
    alice, staff = lab["alice"], lab["staff"]
    suite = submit(alice)

    def passed() -> dict | None:
        jobs = alice.get(f"/jobs/?suite={suite['id']}")["results"]
        return jobs[0] if jobs and jobs[0]["status"] == "passed" else None

    job = wait_for("the job to pass", passed, timeout=45, details=lab["logs"])
    assert job["message"].startswith("testing R121 on eve1.lab")
    assert lab["image"].read_text() == "eve1.lab R121\n"
    host = staff.get("/hosts/eve1.lab/")
    assert host["current_build"] == "R121"
    (attempt,) = alice.get(f"/jobs/{job['id']}/attempts/")
    assert attempt["provision_to"] == "R121"
    (event,) = [e for e in attempt["events"] if e["kind"] == "provisioned"]
    assert event["message"].startswith("Provisioned R121 (was R119) in ")


def test_a_failed_provisioning_sends_the_host_to_repair_and_requeues_the_job(lab):
    lab["start_runner"](5)
    alice, staff = lab["alice"], lab["staff"]
    suite = submit(alice, max_retries=1)

    def broken() -> bool:
        staff.post("/scheduler/tick/")
        return staff.get("/hosts/eve1.lab/")["status"] in (
            "needs_repair",
            "repairing",
            "repair_failed",
        )

    wait_for("the host to go to repair", broken, timeout=45, details=lab["logs"])
    (job,) = alice.get(f"/jobs/?suite={suite['id']}")["results"]
    assert job["status"] == "queued" and job["attempts"] == 1  # to be retried
    assert staff.get("/hosts/eve1.lab/")["current_build"] == "R119"
    (attempt,) = alice.get(f"/jobs/{job['id']}/attempts/")
    (event,) = [e for e in attempt["events"] if e["kind"] == "provisioned"]
    assert event["message"].startswith("Provisioning R121 failed")
    assert "flashing R121" in event["message"] and "[exit status 5]" in event["message"]
