"""Running one job: exit status, lost leases, timeouts, the command's environment."""

from __future__ import annotations

import json
import sys
import time
from typing import Any

from runner.client import ApiError
from runner.worker import JobRun, Runner, RunnerConfig


class RecordingApi:
    """A stand-in API: records calls; heartbeats answer `heartbeat_status`."""

    base_url = "http://lab/api/"

    def __init__(self, heartbeat_status: int = 200) -> None:
        self.calls: list[tuple[str, str, Any]] = []
        self.heartbeat_status = heartbeat_status

    def call(self, method: str, path: str, body: dict | None = None) -> Any:
        self.calls.append((method, path, body))
        if "heartbeat" in path and self.heartbeat_status != 200:
            raise ApiError(self.heartbeat_status, {"detail": "gone"}, method, path)
        return {}

    def completes(self) -> list[dict]:
        return [body for _m, path, body in self.calls if path.endswith("/complete/")]


LEASE = {
    "id": 7,
    "host": {"hostname": "h1.lab", "labels": ["board:eve", "pool:cq"], "current_build": "R1"},
    "job": {
        "id": 42,
        "name": "login_Smoke",
        "status": "leased",
        "labels": ["board:eve"],
        "attempts": 1,
        "timeout": 600,
        "suite": 3,
        "suite_name": "bvt",
        "build": "R2",
    },
}


def run_job(command: list[str], fake: RecordingApi, *, timeout: int = 600, **config: Any) -> JobRun:
    runner = Runner(fake, RunnerConfig(worker="w1", command=command, **config))  # type: ignore[arg-type]
    lease = {**LEASE, "job": {**LEASE["job"], "timeout": timeout}}
    run = JobRun(runner, lease)
    run.start()
    run.join(30)
    assert not run.is_alive()
    return run


def test_the_exit_status_decides_passed_or_failed_and_the_output_tail_is_the_message():
    fake = RecordingApi()
    script = 'echo "on $SCHEDSITE_HOST: $SCHEDSITE_JOB_NAME"; exit 1'
    run = run_job(["sh", "-c", script], fake)
    (body,) = fake.completes()
    assert body["result"] == "failed" and body["lease"] == 7 and body["host_ok"] is True
    assert body["message"] == "on h1.lab: login_Smoke\n\n[exit status 1]"
    assert run.outcome == "failed"


def test_the_runner_names_its_lease_when_it_starts_heartbeats_and_completes_a_job():
    fake = RecordingApi()
    runner = Runner(fake, RunnerConfig(worker="w1", command=["true"], heartbeat=0.01))  # type: ignore[arg-type]
    runner._start(LEASE)
    runner.runs[7].join(30)

    start, complete = fake.calls[0], fake.completes()[0]
    assert start == ("POST", "jobs/42/start/", {"lease": 7})
    assert complete["lease"] == 7 and complete["result"] == "passed"
    assert all(path == "leases/7/heartbeat/" for _m, path, _b in fake.calls[1:-1])


def test_a_chosen_exit_status_reports_the_host_broken():
    fake = RecordingApi()
    run_job(["sh", "-c", "exit 3"], fake, host_broken_exit_code=3)
    assert fake.completes()[0]["host_ok"] is False


def test_the_command_sees_its_job_but_not_the_runners_token(monkeypatch):
    monkeypatch.setenv("SCHEDSITE_TOKEN", "secret-token")
    fake = RecordingApi()
    run_job([sys.executable, "-c", "import os, json; print(json.dumps(dict(os.environ)))"], fake)
    env = json.loads(fake.completes()[0]["message"].split("\n")[0])
    assert env["SCHEDSITE_HOST"] == "h1.lab" and env["SCHEDSITE_JOB_ID"] == "42"
    assert env["SCHEDSITE_HOST_LABELS"] == "board:eve,pool:cq"
    assert (env["SCHEDSITE_SUITE"], env["SCHEDSITE_BUILD"]) == ("bvt", "R2")
    assert "SCHEDSITE_TOKEN" not in env


def test_a_lost_lease_kills_the_command_and_reports_nothing():
    fake = RecordingApi(heartbeat_status=409)
    started = time.monotonic()
    run = run_job(["sleep", "30"], fake, heartbeat=0.2)
    assert time.monotonic() - started < 10
    assert fake.completes() == [] and run.outcome == "lost"


def test_a_job_past_its_timeout_is_killed_and_failed():
    fake = RecordingApi()
    run_job(["sleep", "30"], fake, timeout=1, kill_timeout=1)
    (body,) = fake.completes()
    assert body["result"] == "failed" and "[timed out after 1 s]" in body["message"]


def test_a_command_that_cannot_start_fails_the_job():
    fake = RecordingApi()
    run_job(["/nonexistent/test-binary"], fake)
    (body,) = fake.completes()
    assert body["result"] == "failed" and "could not run" in body["message"]
