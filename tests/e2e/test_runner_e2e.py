"""End to end: a live server, a real django-q2 cluster and the runner running real commands."""

from __future__ import annotations

import contextlib
import os
import signal

import pytest

from hosts import services as host_services
from tests import factories as f
from tests.e2e.support import PYTHON_M_RUNNER, RUN_WORKER, Process, token_for, wait_for

pytestmark = [pytest.mark.postgres, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

# Seconds a lease lives without a heartbeat. Long enough for a runner on a loaded machine to
# start every lease it was given; the killed runner's test makes it short (KILLED_TTL).
TTL = 30
KILLED_TTL = 5  # seconds: a killed runner's lease expires quickly
# A real command per job, chosen by the job's name: `true`, `false`, or a `sleep`.
COMMAND = [
    "sh",
    "-c",
    'echo "$SCHEDSITE_JOB_NAME on $SCHEDSITE_HOST [$SCHEDSITE_HOST_LABELS]"; '
    'case "$SCHEDSITE_JOB_NAME" in pass*) exec true;; fail*) exec false;; *) exec sleep 60;; esac',
]


@pytest.fixture
def lease_ttl() -> int:
    return TTL


@pytest.fixture
def lab(settings, live_server, children, api_as, alice, sam, lease_ttl) -> dict:  # noqa: ANN001
    children.share(settings, LEASE_TTL=lease_ttl)
    worker, runner = host_services.worker_runner_ensure(worker_name="w1", by=sam)
    for name in ("a.lab", "b.lab", "c.lab"):
        f.host(name, ["board:x"], worker=worker)

    def start_runner(*options: str, launcher: list[str] = RUN_WORKER) -> Process:
        return children.start_runner(
            worker="w1",
            api=f"{live_server.url}/api/",
            token=token_for(runner),
            command=COMMAND,
            options=options,
            launcher=launcher,
        )

    return {
        "alice": api_as(alice),
        "staff": api_as(sam),
        "start_runner": start_runner,
        "start_cluster": children.start_cluster,
        "logs": children.logs,
    }


@pytest.mark.parametrize("launcher", [RUN_WORKER, PYTHON_M_RUNNER], ids=["run_worker", "python-m"])
def test_a_suite_runs_through_the_cluster_and_the_runner_to_the_right_counts(lab, launcher):
    lab["start_cluster"]()
    lab["start_runner"]("--concurrency", "3", launcher=launcher)
    alice = lab["alice"]

    suite = alice.post(
        "/suites/",
        {
            "name": "e2e",
            "jobs": [
                {"name": "pass-1", "labels": ["board:x"]},
                {"name": "pass-2", "labels": ["board:x"]},
                {"name": "fail-1", "labels": ["board:x"]},
            ],
        },
        expect=201,
    )

    def completed() -> dict | None:
        body = alice.get(f"/suites/{suite['id']}/")
        return body if body["status"] == "completed" else None

    body = wait_for("the suite to complete", completed, timeout=45, details=lab["logs"])
    counts = body["job_counts"]
    assert (counts["passed"], counts["failed"], body["jobs_total"]) == (2, 1, 3)
    jobs = {j["name"]: j for j in alice.get(f"/jobs/?suite={suite['id']}")["results"]}
    failed = jobs["fail-1"]["message"]
    assert "fail-1 on " in failed and "[board:x]" in failed and "[exit status 1]" in failed
    assert jobs["pass-1"]["message"].endswith("[exit status 0]")
    hosts = alice.get("/hosts/?leased=false&status=ready")
    assert hosts["count"] == 3  # every host back in the pool


@pytest.mark.parametrize("lease_ttl", [KILLED_TTL])
def test_a_killed_runners_leases_expire_and_jobs_are_requeued_per_max_retries(lab):
    runner = lab["start_runner"]("--concurrency", "2")
    alice, staff = lab["alice"], lab["staff"]
    # Two hosts for two jobs: with a spare, the requeued job would be leased (and expire) again.
    staff.post("/hosts/c.lab/lock/", {"reason": "keep the requeued job waiting"})
    alice.post(
        "/suites/",
        {
            "name": "dies",
            "jobs": [
                {"name": "sleep-retry", "labels": ["board:x"], "max_retries": 1},
                {"name": "sleep-final", "labels": ["board:x"], "max_retries": 0},
            ],
        },
        expect=201,
    )

    def both_running() -> bool:
        staff.post("/scheduler/tick/")  # the tick driven through the API
        return alice.get("/jobs/?status=running")["count"] == 2

    wait_for("both jobs to run", both_running, timeout=30)
    orphans = runner.descendants()
    runner.proc.send_signal(signal.SIGKILL)
    runner.proc.wait(10)
    for pid in orphans:  # the sleeps the dead runner left behind
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)

    def expired() -> dict | None:
        staff.post("/scheduler/tick/")
        # (Their hosts' verify jobs are listed too: the tick checks hosts a dead runner left.)
        tests = ("sleep-retry", "sleep-final")
        jobs = {j["name"]: j for j in alice.get("/jobs/")["results"] if j["name"] in tests}
        return jobs if {j["status"] for j in jobs.values()} == {"queued", "error"} else None

    jobs = wait_for("the leases to expire", expired, timeout=KILLED_TTL + 20)
    assert jobs["sleep-retry"]["status"] == "queued"  # attempts 1 <= max_retries 1
    assert jobs["sleep-final"]["status"] == "error"  # no retries left
    assert "stopped heartbeating" in jobs["sleep-retry"]["message"]
    ids = {job["id"] for job in jobs.values()}
    leases = staff.get("/leases/?manual=false")["results"]
    assert {lease["release_reason"] for lease in leases if lease["job"] in ids} == {"expired"}
    # Nobody knows what a dead runner left the hosts in: they are verified before more tests.
    statuses = {h["status"] for h in staff.get("/hosts/")["results"]}
    assert statuses & {"needs_verify", "verifying"}


def test_sigterm_hands_back_the_job_not_started_and_aborts_the_one_running(lab):
    alice, staff = lab["alice"], lab["staff"]
    # The worker is leased two jobs before its runner says it runs one at a time (a runner
    # restarted with a lower --concurrency): capacity stops new leases, not those it holds.
    staff.post("/workers/w1/heartbeat/", {})
    alice.post(
        "/suites/",
        {"name": "stop", "jobs": [{"name": "sleep-1"}, {"name": "sleep-2"}]},
        expect=201,
    )
    staff.post("/scheduler/tick/")
    assert alice.get("/suites/")["results"][0]["job_counts"]["leased"] == 2
    runner = lab["start_runner"]("--concurrency", "1", "--grace", "1")

    def one_running() -> bool:
        staff.post("/scheduler/tick/")
        counts = alice.get("/suites/")["results"][0]["job_counts"]
        return counts["running"] == 1 and counts["leased"] == 1  # one slot: one waits

    wait_for("one job running and one waiting", one_running, timeout=30)
    runner.proc.send_signal(signal.SIGTERM)

    assert runner.proc.wait(20) == 0, lab["logs"]()
    staff.post("/scheduler/tick/")  # the stopping worker is offline: nothing goes back to it
    jobs = {j["status"]: j for j in alice.get("/jobs/")["results"]}
    assert set(jobs) == {"aborted", "queued"}
    assert "runner stopped" in jobs["aborted"]["message"]
    assert jobs["queued"]["attempts"] == 0  # handing back used no try
    assert "handed back" in jobs["queued"]["message"]
    assert alice.get("/leases/?active=true")["count"] == 0
    # A graceful stop returns the hosts healthy, unlike a crash.
    assert {h["status"] for h in alice.get("/hosts/")["results"]} == {"ready"}
