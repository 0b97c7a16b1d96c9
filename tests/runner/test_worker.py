"""Running one job: exit status, lost leases, timeouts, the command's environment, job kinds,
and the leases a stopping runner hands back."""

from __future__ import annotations

import json
import logging
import sys
import time
from collections.abc import Sequence
from typing import Any

from runner.client import ApiError
from runner.worker import JobRun, Runner, RunnerConfig


class RecordingApi:
    """A stand-in API: records calls; a worker heartbeat reports the leases in `gone` gone (or,
    with `bulk` false, answers as a server without the bulk heartbeat did), lease heartbeats
    answer `heartbeat_status`, releases `release_status`; the worker's leases are `leases`."""

    base_url = "http://lab/api/"

    def __init__(
        self,
        heartbeat_status: int = 200,
        release_status: int = 200,
        leases: Sequence[dict] = (),
        gone: Sequence[int] = (),
        bulk: bool = True,
    ) -> None:
        self.calls: list[tuple[str, str, Any]] = []
        self.heartbeat_status = heartbeat_status
        self.release_status = release_status
        self.leases = list(leases)
        self.gone = list(gone)
        self.bulk = bulk

    def call(self, method: str, path: str, body: dict | None = None) -> Any:
        self.calls.append((method, path, body))
        if path.startswith("workers/") and path.endswith("/heartbeat/"):
            info = {"lease_ttl": 600, "offline_timeout": 120}
            return {**info, "gone": self.gone} if self.bulk else info
        if "heartbeat" in path and self.heartbeat_status != 200:
            raise ApiError(self.heartbeat_status, {"detail": "gone"}, method, path)
        if path.endswith("/release/") and self.release_status != 200:
            raise ApiError(self.release_status, {"detail": "refused"}, method, path)
        return {}

    def pages(self, path: str) -> list[dict]:
        self.calls.append(("GET", path, None))
        return self.leases

    def posts(self, suffix: str) -> list[tuple[str, Any]]:
        return [
            (path, body) for m, path, body in self.calls if m == "POST" and path.endswith(suffix)
        ]

    def completes(self) -> list[dict]:
        return [body for _path, body in self.posts("/complete/")]


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


# A maintenance job as the server sends it: pinned to its host, in no suite, no labels.
REPAIR_LEASE = {
    "id": 8,
    "kind": "repair",
    "host": {"hostname": "h1.lab", "labels": [], "current_build": ""},
    "job": {
        "id": 43,
        "kind": "repair",
        "name": "repair h1.lab",
        "status": "leased",
        "labels": [],
        "attempts": 1,
        "timeout": 600,
        "suite": None,
    },
}
PRINT_ENV = [sys.executable, "-c", "import os, json; print(json.dumps(dict(os.environ)))"]


def maintenance_lease(kind: str) -> dict:
    return {**REPAIR_LEASE, "kind": kind, "job": {**REPAIR_LEASE["job"], "kind": kind}}


def run_job(
    command: list[str],
    fake: RecordingApi,
    *,
    timeout: int = 600,
    lease: dict = LEASE,
    **config: Any,
) -> JobRun:
    runner = Runner(fake, RunnerConfig(worker="w1", command=command, **config))  # type: ignore[arg-type]
    lease = {**lease, "job": {**lease["job"], "timeout": timeout}}
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


def runner_for(fake: RecordingApi, command: list[str], **config: Any) -> Runner:
    return Runner(fake, RunnerConfig(worker="w1", command=command, **config))  # type: ignore[arg-type]


def test_the_runner_names_its_lease_when_it_starts_and_completes_a_job():
    fake = RecordingApi()
    runner = runner_for(fake, ["true"], heartbeat=0.01)
    runner._start(LEASE)
    runner.runs[7].join(30)

    assert fake.calls[0] == ("POST", "jobs/42/start/", {"lease": 7})
    (complete,) = fake.completes()
    assert complete["lease"] == 7 and complete["result"] == "passed"
    assert len(fake.calls) == 2  # the job's thread sends no heartbeat of its own


def test_one_heartbeat_a_period_carries_the_worker_its_concurrency_and_every_lease_it_holds():
    fake = RecordingApi()
    runner = runner_for(fake, ["sleep", "30"], heartbeat=60, concurrency=3)
    runner._start(LEASE)
    runner.waiting[9] = {**LEASE, "id": 9}
    try:
        runner._beat()
        runner._beat()  # not due again yet
    finally:
        runner.kill()
        runner.runs[7].lost.set()
        runner.runs[7].join(30)

    beats = fake.posts("/heartbeat/")
    assert beats == [("workers/w1/heartbeat/", {"leases": [7, 9], "concurrency": 3})]


def test_a_lease_reported_gone_kills_its_command_and_reports_nothing():
    fake = RecordingApi(gone=[7, 9])
    runner = runner_for(fake, ["sleep", "30"], kill_timeout=1)
    runner._start(LEASE)
    runner.waiting[9] = {**LEASE, "id": 9}
    started = time.monotonic()

    runner._beat()
    runner.runs[7].join(30)

    assert time.monotonic() - started < 10
    assert fake.completes() == [] and runner.runs[7].outcome == "lost"
    assert runner.waiting == {}


def lost_warnings(caplog) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.levelno >= logging.WARNING and "lost" in r.getMessage()
    ]


def test_a_lease_gone_while_its_job_runs_is_logged_lost(caplog):
    fake = RecordingApi(gone=[7])
    runner = runner_for(fake, ["sleep", "30"], kill_timeout=1)
    runner._start(LEASE)

    with caplog.at_level(logging.DEBUG, logger="schedsite.runner"):
        runner._beat()
        runner.runs[7].join(30)

    assert lost_warnings(caplog) == ["lease 7 lost, stopping its job"]


def test_a_lease_the_runner_completed_itself_is_not_logged_lost(caplog):
    # The heartbeat was sent with the lease still held, and reached the server after the
    # job's own result had released it: the server answers "gone", but nothing was lost.
    fake = RecordingApi(gone=[7])
    runner = runner_for(fake, ["true"])
    runner._start(LEASE)
    runner.runs[7].join(30)

    with caplog.at_level(logging.DEBUG, logger="schedsite.runner"):
        runner._beat()  # before the finished run is reaped
        runner._reap()

    assert fake.completes()[0]["result"] == "passed"
    assert runner.results["passed"] == 1 and runner.results["lost"] == 0
    assert lost_warnings(caplog) == []


def test_a_lease_the_runner_aborted_itself_is_not_logged_lost(caplog):
    fake = RecordingApi(gone=[7])
    runner = runner_for(fake, ["sleep", "30"], kill_timeout=1)
    runner._start(LEASE)
    runner.kill()  # grace over: the job is killed and aborted by the runner itself
    runner.runs[7].join(30)

    with caplog.at_level(logging.DEBUG, logger="schedsite.runner"):
        runner._beat()

    assert fake.posts("/abort/") and runner.runs[7].outcome == "aborted"
    assert lost_warnings(caplog) == []


def test_against_a_server_without_the_bulk_heartbeat_it_beats_each_lease():
    fake = RecordingApi(bulk=False, heartbeat_status=409)
    runner = runner_for(fake, ["sleep", "30"], kill_timeout=1)
    runner._start(LEASE)

    runner._beat()
    runner.runs[7].join(30)

    assert [path for path, _body in fake.posts("/heartbeat/")] == [
        "workers/w1/heartbeat/",
        "leases/7/heartbeat/",
    ]
    assert fake.completes() == [] and runner.runs[7].outcome == "lost"


def test_a_chosen_exit_status_reports_the_host_broken():
    fake = RecordingApi()
    run_job(["sh", "-c", "exit 3"], fake, host_broken_exit_code=3)
    assert fake.completes()[0]["host_ok"] is False


def test_the_command_sees_its_job_but_not_the_runners_token(monkeypatch):
    monkeypatch.setenv("SCHEDSITE_TOKEN", "secret-token")
    fake = RecordingApi()
    run_job(PRINT_ENV, fake)
    env = json.loads(fake.completes()[0]["message"].split("\n")[0])
    assert env["SCHEDSITE_HOST"] == "h1.lab" and env["SCHEDSITE_JOB_ID"] == "42"
    assert env["SCHEDSITE_JOB_KIND"] == "test"  # a server that sends no kind sends tests
    assert env["SCHEDSITE_HOST_LABELS"] == "board:eve,pool:cq"
    assert (env["SCHEDSITE_SUITE"], env["SCHEDSITE_BUILD"]) == ("bvt", "R2")
    assert "SCHEDSITE_TOKEN" not in env


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


# --- maintenance jobs -------------------------------------------------------------------------


def test_a_verify_job_runs_the_verify_command_and_tells_it_its_kind():
    fake = RecordingApi()
    run_job(["false"], fake, lease=maintenance_lease("verify"), verify_command=PRINT_ENV)
    (body,) = fake.completes()
    assert body["result"] == "passed" and body["host_ok"] is True
    env = json.loads(body["message"].split("\n")[0])
    assert env["SCHEDSITE_JOB_KIND"] == "verify" and env["SCHEDSITE_JOB_ID"] == "43"
    # No suite, no build, no labels: empty values, not a crash.
    assert env["SCHEDSITE_SUITE_ID"] == env["SCHEDSITE_SUITE"] == env["SCHEDSITE_BUILD"] == ""
    assert env["SCHEDSITE_JOB_LABELS"] == env["SCHEDSITE_HOST_LABELS"] == ""


def test_a_repair_job_runs_the_repair_command_not_the_test_or_verify_command():
    fake = RecordingApi()
    run_job(
        ["sh", "-c", "echo test; exit 1"],
        fake,
        lease=REPAIR_LEASE,
        verify_command=["sh", "-c", "echo verify; exit 1"],
        repair_command=["sh", "-c", 'echo "repairing $SCHEDSITE_HOST as $SCHEDSITE_JOB_KIND"'],
    )
    (body,) = fake.completes()
    assert body["result"] == "passed"
    assert body["message"] == "repairing h1.lab as repair\n\n[exit status 0]"


def test_a_maintenance_job_without_its_command_fails_at_once_naming_the_option(tmp_path, caplog):
    marker = tmp_path / "test-command-ran"
    fake = RecordingApi()
    runner = Runner(fake, RunnerConfig(worker="rack-7", command=["touch", str(marker)]))  # type: ignore[arg-type]
    with caplog.at_level(logging.WARNING, logger="schedsite.runner"):
        for lease_id in (8, 9):  # two repairs: each fails, the log warns once
            run = JobRun(runner, {**REPAIR_LEASE, "id": lease_id})
            run.start()
            run.join(30)
            assert run.outcome == "failed"

    message = (
        "runner on worker rack-7 has no --repair-cmd: it cannot repair hosts; "
        "start the runner with --repair-cmd"
    )
    assert fake.completes() == [
        {"lease": 8, "result": "failed", "message": message, "host_ok": True},
        {"lease": 9, "result": "failed", "message": message, "host_ok": True},
    ]
    assert not marker.exists()
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "--repair-cmd" in warnings[0]


def test_a_job_of_a_kind_the_runner_does_not_know_fails_instead_of_running_the_test(tmp_path):
    marker = tmp_path / "test-command-ran"
    fake = RecordingApi()
    run_job(["touch", str(marker)], fake, lease=maintenance_lease("flash"))
    (body,) = fake.completes()
    assert body["result"] == "failed" and "does not know jobs of kind 'flash'" in body["message"]
    assert not marker.exists()


def test_the_host_broken_exit_code_applies_to_tests_only():
    fake = RecordingApi()
    broken = ["sh", "-c", "exit 3"]
    for kind in ("verify", "repair"):
        run_job(
            broken,
            fake,
            lease=maintenance_lease(kind),
            verify_command=broken,
            repair_command=broken,
            host_broken_exit_code=3,
        )
    assert [(b["result"], b["host_ok"]) for b in fake.completes()] == [("failed", True)] * 2


# --- stopping ---------------------------------------------------------------------------------


def stop_runner(fake: RecordingApi) -> Runner:
    runner = Runner(fake, RunnerConfig(worker="w1", command=["true"], grace=0))  # type: ignore[arg-type]
    runner.stop()
    runner.shutdown()
    return runner


def test_with_more_leases_than_slots_the_most_urgent_jobs_start_first():
    def leased(lease_id: int, priority: int) -> dict:
        job = {**LEASE["job"], "id": 100 + lease_id, "priority": priority}
        return {**LEASE, "id": lease_id, "job": job}

    fake = RecordingApi(leases=[leased(1, 10), leased(2, 90), leased(3, 50), leased(4, 90)])
    runner = Runner(fake, RunnerConfig(worker="w1", command=["true"], concurrency=2))
    runner._take_leases()
    for run in runner.runs.values():
        run.join(30)

    # Two slots: the two priority-90 jobs, the older lease first; the others wait their turn.
    assert [path for path, _body in fake.posts("/start/")] == ["jobs/102/start/", "jobs/104/start/"]
    assert sorted(runner.waiting) == [1, 3]


def test_a_stopping_runner_hands_back_the_leases_it_has_not_started():
    running = {**LEASE, "id": 6, "job": {**LEASE["job"], "id": 41, "status": "running"}}
    fake = RecordingApi(leases=[LEASE, REPAIR_LEASE, running])
    runner = stop_runner(fake)

    reason = "runner stopping: handed back before start"
    assert fake.posts("/release/") == [
        ("leases/7/release/", {"requeue": True, "reason": reason}),
        ("leases/8/release/", {"requeue": True, "reason": reason}),
    ]
    assert fake.posts("/abort/") == []
    assert (runner.results["handed_back"], runner.results["aborted"]) == (2, 0)


def test_a_server_that_refuses_the_hand_back_gets_the_job_aborted_instead():
    fake = RecordingApi(release_status=403, leases=[LEASE])
    runner = stop_runner(fake)
    assert [path for path, _body in fake.posts("/release/")] == ["leases/7/release/"]
    assert fake.posts("/abort/") == [
        ("jobs/42/abort/", {"reason": "runner stopped before starting the job"})
    ]
    assert (runner.results["handed_back"], runner.results["aborted"]) == (0, 1)


def test_a_lease_gone_before_the_hand_back_is_left_alone():
    fake = RecordingApi(release_status=409, leases=[LEASE])
    runner = stop_runner(fake)
    assert [path for path, _body in fake.posts("/release/")] == ["leases/7/release/"]
    assert fake.posts("/abort/") == []
    assert (runner.results["handed_back"], runner.results["aborted"]) == (0, 0)
