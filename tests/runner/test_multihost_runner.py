"""The reference runner and multi-host jobs: it runs a job its worker holds slot 0 of once, with
every host by role in SCHEDSITE_HOSTS; it leaves hosts held for a job run elsewhere alone; it
names the hosts its command found broken in hosts_ok."""

from __future__ import annotations

import json

from runner.worker import Runner, RunnerConfig
from tests.runner.test_worker import LEASE, PRINT_ENV, RecordingApi, run_job

# bt_Pair as the worker of its slot 0 host lists it: one lease, every host of the attempt.
PAIR = {
    **LEASE,
    "id": 21,
    "role": "dut",
    "slot": 0,
    "runs_here": True,
    "host": {**LEASE["host"], "hostname": "dut1"},
    "job": {**LEASE["job"], "id": 50, "name": "bt_Pair"},
    "hosts": [
        {"role": "dut", "hostname": "dut1", "lease": 21},
        {"role": "dut", "hostname": "dut2", "lease": 22},
        {"role": "peer", "hostname": "peer1", "lease": 23},
    ],
}
# The same job's peer, as the peer host's worker lists it: held for a job run elsewhere.
HELD = {
    **PAIR,
    "id": 23,
    "role": "peer",
    "slot": 2,
    "runs_here": False,
    "host": {**LEASE["host"], "hostname": "peer1"},
}


def test_the_command_gets_every_host_by_role_and_the_first_as_its_host():
    fake = RecordingApi()

    run_job(PRINT_ENV, fake, lease=PAIR)

    (body,) = fake.completes()
    env = json.loads(body["message"].split("\n")[0])
    assert json.loads(env["SCHEDSITE_HOSTS"]) == {"dut": ["dut1", "dut2"], "peer": ["peer1"]}
    assert env["SCHEDSITE_HOST"] == "dut1"
    assert body["lease"] == 21 and body["host_ok"] is True and "hosts_ok" not in body


def test_a_one_host_job_gets_its_host_under_the_empty_role():
    fake = RecordingApi()
    run_job(PRINT_ENV, fake)
    env = json.loads(fake.completes()[0]["message"].split("\n")[0])
    assert json.loads(env["SCHEDSITE_HOSTS"]) == {"": ["h1.lab"]}


def test_a_command_naming_a_broken_host_completes_with_hosts_ok():
    fake = RecordingApi()
    script = (
        'echo peer1 > "$SCHEDSITE_BROKEN_HOSTS_FILE"; '
        'echo nosuch >> "$SCHEDSITE_BROKEN_HOSTS_FILE"; exit 1'
    )

    run_job(["sh", "-c", script], fake, lease=PAIR)

    (body,) = fake.completes()
    assert body["result"] == "failed" and body["host_ok"] is True
    assert body["hosts_ok"] == {"peer1": False}  # a name not of the job is left out


def test_the_broken_exit_status_still_reports_every_host_broken():
    fake = RecordingApi()
    run_job(["sh", "-c", "exit 3"], fake, lease=PAIR, host_broken_exit_code=3)
    (body,) = fake.completes()
    assert body["host_ok"] is False and "hosts_ok" not in body


def test_a_host_held_for_a_job_run_elsewhere_is_left_alone():
    fake = RecordingApi(leases=[HELD])
    runner = Runner(fake, RunnerConfig(worker="w2", command=["true"], heartbeat=0.01))  # type: ignore[arg-type]

    runner._take_leases()
    runner._beat()
    runner.stop()
    runner.shutdown()

    assert fake.posts("/start/") == [] and runner.runs == {} and runner.waiting == {}
    assert runner.ignored == set()  # not even warned about: it is not this runner's
    assert fake.posts("/release/") == [] and fake.posts("/abort/") == []
    (beat,) = fake.posts("workers/w2/heartbeat/")
    assert beat[1]["leases"] == []  # its lease is heartbeaten by the runner of the job


def test_the_runner_of_the_job_starts_it_once_and_heartbeats_its_lease():
    fake = RecordingApi(leases=[PAIR])
    runner = Runner(fake, RunnerConfig(worker="w1", command=["sleep", "30"], heartbeat=60))  # type: ignore[arg-type]
    runner._take_leases()
    try:
        runner._take_leases()  # listed again: already running
        runner._beat()
    finally:
        runner.kill()
        runner.runs[21].lost.set()
        runner.runs[21].join(30)

    assert fake.posts("/start/") == [("jobs/50/start/", {"lease": 21})]
    (beat,) = fake.posts("workers/w1/heartbeat/")
    assert beat[1]["leases"] == [21]  # the server extends the job's other leases with it
