"""End to end: a live server, a real django-q2 cluster and the runner running real commands."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from urllib.parse import quote

import pytest
import requests
from django.conf import settings as django_settings
from django.db import connection
from rest_framework.authtoken.models import Token

from hosts import services as host_services
from tests import factories as f

pytestmark = [pytest.mark.postgres, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

TTL = 3  # seconds: a killed runner's lease expires quickly
MANAGE = [sys.executable, str(Path(django_settings.BASE_DIR) / "manage.py")]
# The two ways to start the runner: Django's command, and the package alone.
RUN_WORKER = [*MANAGE, "run_worker"]
PYTHON_M_RUNNER = [sys.executable, "-m", "runner"]
# A real command per job, chosen by the job's name: `true`, `false`, or a `sleep`.
COMMAND = [
    "sh",
    "-c",
    'echo "$SCHEDSITE_JOB_NAME on $SCHEDSITE_HOST [$SCHEDSITE_HOST_LABELS]"; '
    'case "$SCHEDSITE_JOB_NAME" in pass*) exec true;; fail*) exec false;; *) exec sleep 60;; esac',
]


def wait_for(what: str, check: Callable[[], object], timeout: float = 30.0) -> object:
    """Poll until check() is truthy, or fail after the deadline saying what never happened."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")


def subprocess_database_url() -> str:
    """The test database (pytest-django's, one per xdist worker) as a URL for child processes."""
    db = connection.settings_dict
    auth = quote(db["USER"] or "postgres") + (f":{quote(db['PASSWORD'])}" if db["PASSWORD"] else "")
    return f"postgres://{auth}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"


class Process:
    """A child process with its output in a file, stopped by its own id at teardown."""

    def __init__(self, name: str, cmd: list[str], env: dict[str, str], log_dir: Path) -> None:
        self.name = name
        self.log = log_dir / f"{name}.log"
        self.proc = subprocess.Popen(
            cmd,
            env={**os.environ, **env},
            stdout=self.log.open("wb"),
            stderr=subprocess.STDOUT,
            cwd=django_settings.BASE_DIR,
            start_new_session=True,
        )

    def output(self) -> str:
        return self.log.read_text(errors="replace")[-3000:]

    def descendants(self) -> list[int]:
        """Process ids of everything this process started (read from /proc)."""
        found, todo = [], [self.proc.pid]
        while todo:
            pid = todo.pop()
            for task in Path(f"/proc/{pid}/task").glob("*"):
                children = (task / "children").read_text().split()
                found += [int(c) for c in children]
                todo += [int(c) for c in children]
        return found

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)


class Api:
    """A script's view of the live server: token auth, JSON."""

    def __init__(self, base: str, token: str) -> None:
        self.base = base
        self.session = requests.Session()
        self.session.headers["Authorization"] = f"Token {token}"

    def get(self, path: str) -> dict:
        response = self.session.get(self.base + path, timeout=10)
        assert response.status_code == 200, response.text
        return response.json()

    def post(self, path: str, body: dict | None = None, expect: int = 200) -> dict:
        response = self.session.post(self.base + path, json=body, timeout=30)
        assert response.status_code == expect, response.text
        return response.json()


@pytest.fixture
def lab(settings, live_server, tmp_path, alice, sam) -> Iterator[dict]:  # noqa: ANN001
    settings.LEASE_TTL = TTL
    worker, runner = host_services.worker_runner_ensure(worker_name="w1", by=sam)
    for name in ("a.lab", "b.lab", "c.lab"):
        f.host(name, ["board:x"], worker=worker)
    processes: list[Process] = []

    def start(name: str, cmd: list[str], env: dict[str, str]) -> Process:
        # The same SECRET_KEY: django-q2 signs the tasks the live server enqueues for the cluster.
        env = {"SECRET_KEY": django_settings.SECRET_KEY, "LEASE_TTL": str(TTL), **env}
        process = Process(name, cmd, env, tmp_path)
        processes.append(process)
        return process

    def start_runner(*options: str, launcher: list[str] = RUN_WORKER) -> Process:
        cmd = [*launcher, "--worker", "w1", "--api", f"{live_server.url}/api/"]
        cmd += ["--poll", "0.2", *options, "--", *COMMAND]
        # No database for the runner: a database URL that cannot work proves it needs none.
        env = {
            "SCHEDSITE_TOKEN": Token.objects.get_or_create(user=runner)[0].key,
            "DATABASE_URL": "postgres://nobody@127.0.0.1:1/no_database",
        }
        return start("runner", cmd, env)

    def start_cluster() -> Process:
        env = {"DATABASE_URL": subprocess_database_url(), "Q_WORKERS": "1"}
        env.pop("REDIS_URL", None)
        return start("qcluster", [*MANAGE, "qcluster"], env)

    yield {
        "alice": Api(f"{live_server.url}/api", Token.objects.get_or_create(user=alice)[0].key),
        "staff": Api(f"{live_server.url}/api", Token.objects.get_or_create(user=sam)[0].key),
        "start_runner": start_runner,
        "start_cluster": start_cluster,
        "logs": lambda: "\n".join(f"--- {p.name}\n{p.output()}" for p in processes),
    }
    for process in processes:
        process.stop()


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

    try:
        body = wait_for("the suite to complete", completed, timeout=45)
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n{lab['logs']()}") from exc
    counts = body["job_counts"]
    assert (counts["passed"], counts["failed"], body["jobs_total"]) == (2, 1, 3)
    jobs = {j["name"]: j for j in alice.get(f"/jobs/?suite={suite['id']}")["results"]}
    failed = jobs["fail-1"]["message"]
    assert "fail-1 on " in failed and "[board:x]" in failed and "[exit status 1]" in failed
    assert jobs["pass-1"]["message"].endswith("[exit status 0]")
    hosts = alice.get("/hosts/?leased=false&status=ready")
    assert hosts["count"] == 3  # every host back in the pool


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

    jobs = wait_for("the leases to expire", expired, timeout=TTL + 20)
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
    runner = lab["start_runner"]("--concurrency", "1", "--grace", "1")
    alice, staff = lab["alice"], lab["staff"]
    alice.post(
        "/suites/",
        {"name": "stop", "jobs": [{"name": "sleep-1"}, {"name": "sleep-2"}]},
        expect=201,
    )

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
