"""`schedsite login` and its config file; what the client says when something goes wrong."""

from __future__ import annotations

import json
import socket
import stat

import pytest

from jobs.models import Suite
from tests.e2e.support import token_for

# A live server answers from threads of its own while the test reads the database: SQLite's
# shared in-memory database refuses that ("database table is locked"), as in tests/e2e/.
pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


def test_login_writes_the_url_and_token_to_a_file_only_its_owner_reads(cli, lab, alice):
    done = cli("login", "--username", "alice", "--password-stdin", stdin="alice-pass\n")
    assert done.returncode == 0, done.stderr
    api = f"{cli.url}/api/"
    assert done.stdout == f"logged in to {api} as alice; token saved in {cli.config}\n"
    assert json.loads(cli.config.read_text()) == {
        "api": api,
        "token": token_for(alice),
        "username": "alice",
    }
    assert stat.S_IMODE(cli.config.stat().st_mode) == 0o600
    # From now on the file is enough: no SCHEDSITE_TOKEN in the environment.
    hosts = cli("hosts", "--json")
    assert hosts.returncode == 0, hosts.stderr
    assert [h["hostname"] for h in json.loads(hosts.stdout)] == ["a.lab", "b.lab", "c.lab"]


def test_login_asks_for_what_it_is_not_given(cli, lab):
    # No terminal: getpass reads the password from standard input, after the others.
    done = cli("login", stdin=f"{cli.url}\nsam\nsam-pass\n", SCHEDSITE_API="")
    assert "API URL: username: " in done.stdout
    assert done.returncode == 0, done.stderr
    assert f"as sam (lab staff); token saved in {cli.config}" in done.stdout
    assert json.loads(cli.config.read_text())["api"] == f"{cli.url}/api/"  # /api/ added


def test_login_json_says_who_and_where(cli, lab):
    done = cli("login", "--json", "--username", "sam", "--password-stdin", stdin="sam-pass\n")
    assert json.loads(done.stdout) == {
        "api": f"{cli.url}/api/",
        "username": "sam",
        "staff": True,
        "config": str(cli.config),
    }


def test_a_wrong_password_is_refused_and_writes_nothing(cli, lab):
    done = cli("login", "--username", "alice", "--password-stdin", stdin="nope\n")
    assert done.returncode == 2
    assert done.stderr == (
        "schedsite: login refused: Unable to log in with provided credentials.\n"
    )
    assert not cli.config.exists()


def test_the_saved_token_goes_only_to_the_server_it_came_from(cli, lab):
    cli("login", "--username", "alice", "--password-stdin", stdin="alice-pass\n")
    elsewhere = cli("hosts", SCHEDSITE_API="http://127.0.0.1:9/api/")
    assert elsewhere.returncode == 2
    assert "not logged in to http://127.0.0.1:9/api/: run `schedsite login`" in elsewhere.stderr


def test_a_wrong_token_says_not_logged_in(cli, lab):
    done = cli("queue", token="0" * 40)
    assert done.returncode == 2
    assert done.stderr.startswith(f"schedsite: not logged in: {cli.url}/api/ refused the token")
    assert "Invalid token" in done.stderr


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_server_that_does_not_answer_is_named(cli, lab):
    url = f"http://127.0.0.1:{free_port()}/api/"
    done = cli("status", "1", "--retries", "1", token=lab["alice"], SCHEDSITE_API=url)
    assert done.returncode == 2
    assert done.stderr.splitlines()[-1] == (
        f"schedsite: cannot reach the schedsite API at {url}: Connection refused"
    )


def test_a_refused_suite_shows_each_field_error_and_submits_nothing(cli, lab, tmp_path):
    path = tmp_path / "suite.yaml"
    path.write_text("name: s\njobs:\n  - {name: t, labels: ['board:x'], max_retry: 2}\n")
    done = cli("submit", str(path), token=lab["alice"])
    assert done.returncode == 2
    lines = done.stderr.splitlines()
    assert lines[0] == "schedsite: the server refused the request (HTTP 400):"
    assert lines[1].startswith("  jobs[0].max_retry: Unknown field: expected name, labels")
    path.write_text("name: s\njobs:\n  - {name: t, labels: ['board:nope']}\n")
    unmatched = cli("submit", str(path), token=lab["alice"])
    assert unmatched.returncode == 2
    # The lab's own message names its place once, not twice.
    assert "  jobs[0].labels: no host in the lab carries label board:nope" in unmatched.stderr
    assert "jobs[0].labels: jobs[0].labels" not in unmatched.stderr
    assert not Suite.objects.exists()


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "cannot read {path}: No such file or directory"),
        ("name: [unclosed\n", "{path} is not valid YAML"),
        ("- just\n- a list\n", "{path}: a suite is a mapping (name, jobs, …), not list"),
        ("workers: []\nhosts: []\n", "{path} looks like a lab file"),
    ],
)
def test_a_bad_file_is_exit_2_and_sends_nothing(cli, lab, tmp_path, content, message):
    path = tmp_path / "suite.yaml"
    if content is not None:
        path.write_text(content)
    done = cli("submit", str(path), token=lab["alice"])
    assert done.returncode == 2
    assert done.stderr.startswith("schedsite: " + message.format(path=path))
    assert not Suite.objects.exists()


def test_a_missing_suite_is_not_found(cli, lab):
    done = cli("status", "999999", token=lab["alice"])
    assert done.returncode == 2
    assert done.stderr.startswith("schedsite: not found: GET /api/suites/999999/")


def test_without_a_url_it_says_how_to_log_in(cli):
    done = cli("queue", SCHEDSITE_API="")
    assert done.returncode == 2
    assert "no API URL: run `schedsite login`, or set SCHEDSITE_API" in done.stderr
