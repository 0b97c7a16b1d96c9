"""`schedsite submit`, `status`, `watch`, `queue` and `job` against a live server."""

from __future__ import annotations

import json

import pytest

from jobs.models import Job, Suite
from tests.cli.conftest import run_leased_jobs
from tests.e2e.support import wait_for

# A live server answers from threads of its own while the test reads the database: SQLite's
# shared in-memory database refuses that ("database table is locked"), as in tests/e2e/.
pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

SUITE_YAML = """\
name: bvt R121
build: R121-1
priority: cq
jobs:
  - name: login_Smoke
    labels: [board:x]
  - name: power_Resume
    labels: [board:x]
    max_retries: 0
"""


@pytest.fixture
def suite_file(tmp_path):  # noqa: ANN001, ANN201
    path = tmp_path / "suite.yaml"
    path.write_text(SUITE_YAML)
    return path


def test_submit_posts_the_yaml_file_as_a_suite_of_the_caller(cli, lab, suite_file):
    done = cli("submit", str(suite_file), token=lab["alice"])
    assert done.returncode == 0, done.stderr
    suite = Suite.objects.get()
    assert (suite.name, suite.build, suite.priority, suite.owner.username) == (
        "bvt R121",
        "R121-1",
        70,
        "alice",
    )
    assert sorted(suite.jobs.values_list("name", flat=True)) == ["login_Smoke", "power_Resume"]
    assert f"submitted suite {suite.pk} 'bvt R121': 2 jobs, priority 70" in done.stdout
    assert f"{cli.url}/suites/{suite.pk}/" in done.stdout


def test_submit_json_prints_the_suite_as_the_api_answers_it(cli, lab):
    body = json.dumps({"name": "smoke", "jobs": [{"name": "t", "labels": ["board:y"]}]})
    done = cli("submit", "-", "--json", token=lab["alice"], stdin=body)  # - : standard input
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)
    assert answer["id"] == Suite.objects.get().pk
    assert (answer["name"], answer["jobs_total"], answer["status"]) == ("smoke", 1, "queued")


def test_submit_wait_follows_the_suite_and_exits_1_when_a_job_failed(cli, lab, suite_file):
    waiting = cli.start(
        "submit", str(suite_file), "--wait", "--interval", "0.2", token=lab["alice"]
    )
    wait_for("the suite submitted", lambda: Job.objects.count() == 2)
    run_leased_jobs(lab["staff"], {"login_Smoke": "passed", "power_Resume": "failed"})
    out, err = waiting.communicate(timeout=30)
    assert waiting.returncode == 1, err
    suite = Suite.objects.get()
    lines = out.splitlines()
    assert lines[0].startswith(f"submitted suite {suite.pk}")
    # Each job's end is a line of its own, the failure with its output's last line.
    assert any(
        f"job {j.pk} login_Smoke: passed" in line for line in lines for j in suite.jobs.all()
    )
    failed = suite.jobs.get(name="power_Resume")
    assert any(
        f"job {failed.pk} power_Resume: failed" in line and "(last line of power_Resume)" in line
        for line in lines
    ), out
    assert f"suite {suite.pk} completed: 2/2 done" in lines[-1]


def test_watch_exits_0_once_every_job_passed(cli, lab, suite_file):
    suite_id = json.loads(cli("submit", str(suite_file), "--json", token=lab["alice"]).stdout)["id"]
    watching = cli.start("watch", str(suite_id), "--interval", "0.2", token=lab["alice"])
    first = watching.stdout.readline()
    assert first.endswith(f" suite {suite_id} queued: 0/2 done (2 queued)\n")
    run_leased_jobs(lab["staff"], {"login_Smoke": "passed", "power_Resume": "passed"})
    out, err = watching.communicate(timeout=30)
    assert watching.returncode == 0, err
    assert out.splitlines()[-1] == f"suite {suite_id} completed: all 2 passed"


def test_watch_json_prints_one_object_per_change(cli, lab, suite_file):
    suite_id = json.loads(cli("submit", str(suite_file), "--json", token=lab["alice"]).stdout)["id"]
    run_leased_jobs(lab["staff"], {"login_Smoke": "passed", "power_Resume": "failed"})
    done = cli("watch", str(suite_id), "--json", token=lab["alice"])
    assert done.returncode == 1
    [suite] = [json.loads(line) for line in done.stdout.splitlines()]
    assert suite["outcome"]["failed"] == 1 and suite["status"] == "completed"


def test_status_shows_each_job_and_exits_1_when_one_failed(cli, lab, suite_file):
    suite_id = json.loads(cli("submit", str(suite_file), "--json", token=lab["alice"]).stdout)["id"]
    before = cli("status", str(suite_id), token=lab["alice"])
    assert before.returncode == 0, before.stderr  # nothing failed yet
    assert f"suite {suite_id} queued: 0/2 done (2 queued)" in before.stdout
    run_leased_jobs(lab["staff"], {"login_Smoke": "passed", "power_Resume": "failed"})
    after = cli("status", str(suite_id), token=lab["alice"])
    assert after.returncode == 1
    rows = {line.split()[1]: line.split() for line in after.stdout.splitlines()[4:]}
    assert rows["login_Smoke"][2] == "passed"
    assert rows["power_Resume"][2] == "failed" and "last line of power_Resume" in after.stdout
    as_json = json.loads(cli("status", str(suite_id), "--json", token=lab["alice"]).stdout)
    assert as_json["suite"]["outcome"] == {
        "passed": 1,
        "failed": 1,
        "aborted": 0,
        "skipped": 0,
        "unfinished": 0,
    }
    assert {j["name"]: j["status"] for j in as_json["jobs"]} == {
        "login_Smoke": "passed",
        "power_Resume": "failed",
    }


def test_queue_lists_the_queued_jobs_in_order_with_why_they_wait(cli, lab, tmp_path):
    path = tmp_path / "suite.yaml"
    path.write_text("name: q\njobs: [{name: needs_y, labels: ['board:y']}, {name: needs_x}]\n")
    assert cli("submit", str(path), token=lab["alice"]).returncode == 0
    done = cli("queue", token=lab["alice"])
    assert done.returncode == 0, done.stderr
    header, *rows = done.stdout.splitlines()
    assert header.split()[:4] == ["POS", "JOB", "NAME", "PRIO"]
    assert [row.split()[2] for row in rows] == ["needs_y", "needs_x"]
    entries = json.loads(cli("queue", "--json", "--limit", "1", token=lab["alice"]).stdout)
    assert [(e["position"], e["name"]) for e in entries] == [(1, "needs_y")]
    assert entries[0]["wait_reason"]["message"]  # says why (no tick has run yet)
    short = cli("queue", "--limit", "1", token=lab["alice"])
    assert "1 of 2 queued jobs" in short.stdout


def test_job_output_prints_the_whole_output(cli, lab, suite_file):
    cli("submit", str(suite_file), token=lab["alice"])
    run_leased_jobs(lab["staff"], {"login_Smoke": "passed", "power_Resume": "failed"})
    job = Job.objects.get(name="power_Resume")
    output = cli("job", str(job.pk), "--output", token=lab["alice"])
    assert output.returncode == 0
    assert output.stdout == "output of power_Resume\nlast line of power_Resume\n"
    summary = cli("job", str(job.pk), token=lab["alice"])
    assert f"job:       {job.pk} power_Resume (test)" in summary.stdout
    assert "status:    failed" in summary.stdout
    assert json.loads(cli("job", str(job.pk), "--json", token=lab["alice"]).stdout)["id"] == job.pk
    queued = cli("job", str(Job.objects.create(name="solo").pk), "--output", token=lab["alice"])
    assert queued.returncode == 0 and queued.stdout == ""
    assert "has no output (queued)" in queued.stderr


def test_submit_a_fanout_whose_until_yaml_reads_as_a_time(cli, lab, tmp_path):
    path = tmp_path / "fanout.yaml"
    path.write_text(
        "name: y everywhere\nfanout: {labels: ['board:y'], until: 2031-01-02T03:04:05Z}\n"
    )
    done = cli("submit", str(path), "--json", token=lab["alice"])
    assert done.returncode == 0, done.stderr
    fanout = json.loads(done.stdout)["fanout"]
    assert (fanout["labels"], fanout["until"], fanout["pending"]) == (
        ["board:y"],
        "2031-01-02T03:04:05Z",
        1,
    )
