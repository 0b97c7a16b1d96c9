"""End to end: the health loop (verify, a host broken under a test, its retry, the repair).

A live server, a real django-q2 cluster running the ticks it is asked for, and the reference
runner running real commands; every step is observed the way a script would, through the API.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from hosts import services as host_services
from tests.e2e.support import token_for, wait_for

pytestmark = [pytest.mark.postgres, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

LABELS = ["board:eve"]
DUTS = ("dut1", "dut2")
BROKEN = 3  # the test command's exit status for "the DUT is broken" (--host-broken-exit-code)
# The test: dut1 has lost its network, dut2 is fine.
TEST_COMMAND = [
    "sh",
    "-c",
    'echo "$SCHEDSITE_JOB_NAME try $SCHEDSITE_JOB_ATTEMPT on $SCHEDSITE_HOST"; '
    f'if [ "$SCHEDSITE_HOST" = dut1 ]; then echo "dut1 does not answer"; exit {BROKEN}; fi',
]
# Each maintenance command passes only when the runner says it runs the kind it is for.
VERIFY_COMMAND = """sh -c 'echo "verified $SCHEDSITE_HOST"; test "$SCHEDSITE_JOB_KIND" = verify'"""


def repair_command(gate: Path) -> str:
    """A repair that takes until the test opens `gate`: meanwhile dut1 stays `repairing`."""
    return (
        f"""sh -c 'echo "repairing $SCHEDSITE_HOST"; until [ -e {gate} ]; do sleep 0.1; done; """
        """echo "repaired $SCHEDSITE_HOST"; test "$SCHEDSITE_JOB_KIND" = repair'"""
    )


@pytest.fixture
def health_lab(settings, live_server, children, api_as, tmp_path, sam, alice) -> dict:  # noqa: ANN001
    # 0: the next tick. The live server requeues a job (RETRY_BACKOFF) and the cluster's tick
    # schedules repairs (REPAIR_BACKOFF): both must see it.
    children.share(settings, RETRY_BACKOFF=0, REPAIR_BACKOFF=0, LEASE_TTL=30)
    _worker, runner = host_services.worker_runner_ensure(worker_name="w1", by=sam)
    staff = api_as(sam)
    staff.post(
        "/health-policies/",
        {"name": "eve", "labels": LABELS, "every_hours": 24, "every_jobs": None},
        expect=201,
    )
    for name in DUTS:
        staff.post("/hosts/", {"hostname": name, "worker": "w1", "labels": LABELS}, expect=201)
    gate = tmp_path / "dut1-repaired"
    children.start_cluster()
    children.start_runner(
        worker="w1",
        api=f"{live_server.url}/api/",
        token=token_for(runner),
        command=TEST_COMMAND,
        options=[
            "--concurrency",
            "2",
            "--grace",
            "1",  # a failed test's teardown does not wait out a repair held by the gate
            "--host-broken-exit-code",
            str(BROKEN),
            "--verify-cmd",
            VERIFY_COMMAND,
            "--repair-cmd",
            repair_command(gate),
        ],
    )
    return {"staff": staff, "alice": api_as(alice), "gate": gate, "logs": children.logs}


def status_moves(events: list[dict]) -> list[tuple[str, str]]:
    """The status changes among a host's events (listed newest first), oldest first."""
    return [(e["old_status"], e["new_status"]) for e in reversed(events) if e["kind"] == "status"]


def host_in(lab: dict, hostname: str, status: str, step: str) -> dict:
    """Wait until the host is in this status; the failure names the step."""

    def check() -> dict | None:
        host = lab["staff"].get(f"/hosts/{hostname}/")
        return host if host["status"] == status else None

    return wait_for(f"{step}: {hostname} {status}", check, details=lab["logs"])


def children_started(lab: dict) -> None:
    """Step 0: the runner heartbeats its worker, and the cluster runs the ticks asked for."""
    staff = lab["staff"]
    # Generous: two Django processes start here, on a machine other tests may load too.
    started = 60
    wait_for(
        "step 0: the runner to start (worker w1 online)",
        lambda: staff.get("/workers/w1/")["online"],
        started,
        lab["logs"],
    )
    wait_for(
        "step 0: the cluster to run a tick",
        lambda: staff.get("/scheduler/")["count"],
        started,
        lab["logs"],
    )


def verify_new_hosts(lab: dict) -> str:
    """Step 1: hosts a health policy covers are verified before any test; returns when."""
    staff = lab["staff"]

    def verified() -> list[dict] | None:
        hosts = [staff.get(f"/hosts/{name}/") for name in DUTS]
        done = all(h["status"] == "ready" and h["last_verified_at"] for h in hosts)
        return hosts if done else None

    hosts = wait_for("step 1: dut1 and dut2 verified and ready", verified, details=lab["logs"])
    verifies = staff.get("/jobs/?kind=verify")["results"]
    assert sorted((j["host"], j["status"]) for j in verifies) == [
        ("dut1", "passed"),
        ("dut2", "passed"),
    ], f"step 1: one passed verify job per host expected, got {verifies}"
    for job in verifies:
        assert f"verified {job['host']}" in job["message"], f"step 1: {job}"
    return hosts[0]["last_verified_at"]


def break_dut1_under_a_test(lab: dict) -> dict:
    """Step 2: the first try lands on dut1 (dut2 locked), which breaks; the retry passes on dut2."""
    staff, alice = lab["staff"], lab["alice"]
    staff.post("/hosts/dut2/lock/", {"reason": "e2e: the first try goes to dut1"})
    suite = alice.post(
        "/suites/",
        {"name": "health", "jobs": [{"name": "boot", "labels": LABELS, "max_retries": 1}]},
        expect=201,
    )
    [job] = alice.get(f"/jobs/?suite={suite['id']}")["results"]

    def job_is(status: str, attempts: int) -> dict | None:
        body = alice.get(f"/jobs/{job['id']}/")
        return body if (body["status"], body["attempts"]) == (status, attempts) else None

    job = wait_for(
        "step 2: the job requeued (attempts 1) after dut1 broke under it",
        lambda: job_is("queued", 1),
        details=lab["logs"],
    )
    assert job["message"].startswith("retry 1 of 1 after host dut1 broke"), f"step 2: {job}"
    [lease] = staff.get(f"/leases/?job={job['id']}")["results"]
    assert (lease["host"], lease["release_reason"]) == ("dut1", "completed"), f"step 2: {lease}"

    # dut1 went to repair, and its repair job holds it (the command waits for the gate).
    dut1 = host_in(lab, "dut1", "repairing", "step 2")
    moves = status_moves(dut1["recent_events"])
    assert ("ready", "needs_repair") in moves, f"step 2: dut1's status moves: {moves}"
    retried = [e["job_id"] for e in dut1["recent_events"] if e["kind"] == "retried"]
    assert retried == [job["id"]], f"step 2: dut1's events: {dut1['recent_events']}"

    # The retry takes dut2 once it is unlocked, while dut1 is still being repaired.
    staff.post("/hosts/dut2/unlock/")
    job = wait_for(
        "step 2: the retry (attempts 2) to pass on dut2",
        lambda: job_is("passed", 2),
        details=lab["logs"],
    )
    assert "boot try 2 on dut2" in job["message"], f"step 2: {job}"
    leases = staff.get(f"/leases/?job={job['id']}")["results"]
    assert sorted(lease["host"] for lease in leases) == ["dut1", "dut2"], f"step 2: {leases}"
    assert alice.get(f"/suites/{suite['id']}/")["status"] == "completed", "step 2: the suite"
    return job


def repair_dut1(lab: dict, verified_at: str) -> None:
    """Step 3: dut1's repair job passes: dut1 ready and verified, its repair count back to 0."""
    staff = lab["staff"]
    [repair] = staff.get("/jobs/?kind=repair")["results"]
    assert (repair["host"], repair["status"]) == ("dut1", "running"), f"step 3: {repair}"
    lab["gate"].touch()

    dut1 = host_in(lab, "dut1", "ready", "step 3")
    assert dut1["repair_attempts"] == 0, f"step 3: {dut1}"
    assert dut1["repair_not_before"] is None, f"step 3: {dut1}"
    assert dut1["last_verified_at"] > verified_at, "step 3: a passed repair counts as a verify"
    [repair] = staff.get("/jobs/?kind=repair")["results"]
    assert repair["status"] == "passed", f"step 3: {repair}"
    assert "repaired dut1" in repair["message"], f"step 3: {repair}"
    # Its whole history: the host page's 20 recent events may have dropped the first verify.
    history = staff.get("/hosts/dut1/events/")["results"]
    assert status_moves(history) == [
        ("ready", "verifying"),
        ("verifying", "ready"),
        ("ready", "needs_repair"),
        ("needs_repair", "repairing"),
        ("repairing", "ready"),
    ], f"step 3: dut1's history: {history}"
    recent = {e["kind"] for e in dut1["recent_events"]}
    assert {"retried", "status"} <= recent, f"step 3: dut1's recent events: {recent}"
    assert staff.get("/hosts/dut2/")["status"] == "ready", "step 3: dut2 back in the pool"


def test_a_host_broken_under_a_test_is_repaired_while_the_test_passes_on_another(health_lab):
    children_started(health_lab)
    verified_at = verify_new_hosts(health_lab)
    break_dut1_under_a_test(health_lab)
    repair_dut1(health_lab, verified_at)
