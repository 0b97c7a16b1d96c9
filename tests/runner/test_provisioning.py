"""The reference runner provisions before a test when its lease says so (--provision-cmd): a
real script puts the build on the "host" (a file), then `start` carries the build and the
time it took; a failing or overrunning script fails the job as the host's failure."""

from __future__ import annotations

import json
from pathlib import Path

from runner.cli import config_from_options
from runner.worker import Runner, RunnerConfig
from tests.runner.test_cli import parse
from tests.runner.test_multihost_runner import PAIR
from tests.runner.test_worker import LEASE, PRINT_ENV, RecordingApi

# LEASE, whose host carries R1, leased to a job of build R2: the runner must reimage first.
PROVISION = {**LEASE, "provision_to": "R2", "hosts": [{"hostname": "h1.lab", "provision_to": "R2"}]}


def flash_script(tmp_path: Path, *, exit_status: int = 0, sleep: float = 0) -> list[str]:
    """A provisioning command that writes `<host> <build>` into tmp_path/image, as a flasher
    writes the image, then exits with `exit_status`."""
    image = tmp_path / "image"
    script = (
        f'echo "flashing $SCHEDSITE_BUILD onto $SCHEDSITE_HOST"; sleep {sleep}; '
        f'echo "$SCHEDSITE_HOST $SCHEDSITE_BUILD" >> {image}; exit {exit_status}'
    )
    return ["sh", "-c", script]


def run_lease(fake: RecordingApi, lease: dict, command: list[str], **config: object) -> Runner:
    runner = Runner(fake, RunnerConfig(worker="w1", command=command, **config))  # type: ignore[arg-type]
    runner._start(lease)
    runner.runs[lease["id"]].join(30)
    assert not runner.runs[lease["id"]].is_alive()
    return runner


def starts(fake: RecordingApi) -> list[dict]:
    return [body for _path, body in fake.posts("/start/")]


def test_it_provisions_then_starts_with_the_build_and_how_long_it_took(tmp_path):
    fake = RecordingApi()
    run_lease(fake, PROVISION, PRINT_ENV, provision_command=flash_script(tmp_path, sleep=0.3))

    assert (tmp_path / "image").read_text() == "h1.lab R2\n"
    (start,) = starts(fake)
    assert start["lease"] == 7 and start["build"] == "R2"
    assert 0.3 <= start["provision_seconds"] < 10
    (complete,) = fake.completes()
    assert complete["result"] == "passed" and "provision_failed" not in complete
    env = json.loads(complete["message"].split("\n")[0])  # the test ran after the start
    assert env["SCHEDSITE_BUILD"] == "R2"


def test_the_provision_command_runs_before_the_test_and_the_start(tmp_path):
    fake = RecordingApi()
    log = tmp_path / "order"
    provision = ["sh", "-c", f"echo provision >> {log}"]
    test = ["sh", "-c", f"echo test >> {log}"]
    run_lease(fake, PROVISION, test, provision_command=provision)
    assert log.read_text() == "provision\ntest\n"
    methods = [path for method, path, _body in fake.calls if method == "POST"]
    assert methods == ["jobs/42/start/", "jobs/42/complete/"]


def test_a_failing_provision_fails_the_job_as_the_hosts_failure_with_its_output(tmp_path):
    fake = RecordingApi()
    run_lease(
        fake,
        PROVISION,
        ["sh", "-c", "touch never"],
        provision_command=flash_script(tmp_path, exit_status=4),
    )

    assert starts(fake) == []  # never started: the test did not run
    (complete,) = fake.completes()
    assert complete["result"] == "failed" and complete["host_ok"] is False
    assert complete["provision_failed"] is True and complete["provision_seconds"] >= 0
    assert complete["message"].startswith("provisioning h1.lab to R2 failed\n")
    assert "flashing R2 onto h1.lab" in complete["message"]
    assert complete["message"].endswith("[exit status 4]")


def test_a_provision_past_its_timeout_is_killed_and_fails_the_host(tmp_path):
    fake = RecordingApi()
    run_lease(
        fake,
        PROVISION,
        ["true"],
        provision_command=flash_script(tmp_path, sleep=30),
        provision_timeout=0.5,
        kill_timeout=1,
    )
    (complete,) = fake.completes()
    assert complete["host_ok"] is False and complete["provision_failed"] is True
    assert "[timed out after" in complete["message"]
    assert not (tmp_path / "image").exists()  # killed before it wrote the image


def test_a_lease_lost_while_provisioning_stops_it_and_reports_nothing(tmp_path):
    fake = RecordingApi()
    runner = Runner(
        fake,
        RunnerConfig(
            worker="w1", command=["true"], provision_command=flash_script(tmp_path, sleep=30)
        ),
    )
    runner._start(PROVISION)
    run = runner.runs[7]
    run.lost.set()  # what a heartbeat saying "gone" does
    run.join(30)
    assert not run.is_alive()
    assert starts(fake) == [] and fake.completes() == []
    assert not (tmp_path / "image").exists()


def test_a_lease_that_needs_no_build_starts_as_before(tmp_path):
    fake = RecordingApi()
    run_lease(fake, LEASE, ["true"], provision_command=flash_script(tmp_path))
    assert not (tmp_path / "image").exists()
    assert starts(fake) == [{"lease": 7}]


def test_without_a_provision_command_the_runner_starts_the_test_as_before(tmp_path):
    fake = RecordingApi()
    run_lease(fake, PROVISION, ["true"])
    assert starts(fake) == [{"lease": 7}]
    assert fake.completes()[0]["result"] == "passed"


def test_a_multi_host_job_provisions_each_host_that_needs_it_and_names_the_one_that_failed(
    tmp_path,
):
    hosts = [
        {**PAIR["hosts"][0], "provision_to": None},
        {**PAIR["hosts"][1], "provision_to": "R2"},
        {**PAIR["hosts"][2], "provision_to": "R2"},
    ]
    fake = RecordingApi()
    # peer1 fails to flash: dut2 was provisioned, dut1 needed nothing.
    script = (
        f'echo "$SCHEDSITE_HOST $SCHEDSITE_BUILD" >> {tmp_path / "image"}; '
        '[ "$SCHEDSITE_HOST" != peer1 ]'
    )
    run_lease(fake, {**PAIR, "hosts": hosts}, ["true"], provision_command=["sh", "-c", script])
    assert (tmp_path / "image").read_text() == "dut2 R2\npeer1 R2\n"
    (complete,) = fake.completes()
    assert complete["hosts_ok"] == {"peer1": False} and complete["host_ok"] is True
    assert complete["provision_failed"] is True


def test_the_provision_command_comes_from_the_option_or_the_environment(monkeypatch):
    config = config_from_options(
        parse("--provision-cmd", "flash --image '$SCHEDSITE_BUILD'", "--", "t")
    )
    assert list(config.provision_command) == ["flash", "--image", "$SCHEDSITE_BUILD"]
    monkeypatch.setenv("SCHEDSITE_PROVISION_CMD", "reimage-dut")
    assert list(config_from_options(parse("--", "t")).provision_command) == ["reimage-dut"]
    monkeypatch.delenv("SCHEDSITE_PROVISION_CMD")
    assert list(config_from_options(parse("--", "t")).provision_command) == []
