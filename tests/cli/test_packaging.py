"""The client installs as `schedsite`, needs only `requests`, and reads its input strictly."""

from __future__ import annotations

import argparse
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from django.conf import settings

from runner import schedsite_cli
from runner.schedsite_cli import api_url, field_errors, parse_duration, suite_body
from tests.cli.conftest import SCHEDSITE

# That it imports nothing beyond the standard library and requests (PyYAML only when a YAML
# suite is read) is tests/runner/test_imports.py's check, for the whole runner package.


def test_the_console_script_is_the_clients_main():
    project = tomllib.loads((Path(settings.BASE_DIR) / "pyproject.toml").read_text())
    assert project["project"]["scripts"]["schedsite"] == "runner.schedsite_cli:main"
    assert callable(schedsite_cli.main)


def without_yaml(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    """The client on a machine without PyYAML (importing it fails), no server needed."""
    code = (
        "import sys; sys.modules['yaml'] = None\n"
        "from runner.schedsite_cli import main\n"
        f"sys.exit(main({list(args)!r}))\n"
    )
    env = {"SCHEDSITE_API": "http://127.0.0.1:9/api/", "SCHEDSITE_TOKEN": "t", "PATH": "/usr/bin"}
    env["PYTHONPATH"] = str(settings.BASE_DIR)
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=cwd, check=False
    )


def test_without_pyyaml_a_yaml_suite_is_refused_saying_why(tmp_path):
    (tmp_path / "suite.yaml").write_text("name: s\njobs: [{name: t}]\n")
    done = without_yaml("submit", "suite.yaml", cwd=tmp_path)
    assert done.returncode == 2
    assert "reading YAML needs PyYAML (pip install PyYAML)" in done.stderr
    assert "give the suite as JSON instead" in done.stderr


def test_without_pyyaml_a_json_suite_is_read_and_sent(tmp_path):
    (tmp_path / "suite.yaml").write_text('{"name": "s", "jobs": [{"name": "t"}]}')
    done = without_yaml("submit", "suite.yaml", "--retries", "0", cwd=tmp_path)
    # Read, then sent: nothing answers at that address.
    assert "cannot reach the schedsite API at http://127.0.0.1:9/api/" in done.stderr


def test_help_names_every_command():
    done = subprocess.run([*SCHEDSITE, "--help"], capture_output=True, text=True, check=True)
    for command in ["login", "submit", "status", "watch", "queue", "hosts", "lock", "unlock"]:
        assert f"    {command} " in done.stdout
    named = {line.split()[0] for line in done.stdout.splitlines() if line.startswith("    ")}
    assert {"reserve", "reservations", "release", "job"} <= named


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("2h", 7200), ("90m", 5400), ("1h30m", 5400), ("1d", 86400), ("45s", 45), ("600", 600)],
)
def test_durations_read_as_people_write_them(text, seconds):
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "2 hours", "h", "0", "0h", "-1h", "1.5h"])
def test_a_duration_it_cannot_read_is_refused(text):
    with pytest.raises(argparse.ArgumentTypeError):
        parse_duration(text)


@pytest.mark.parametrize(
    ("given", "url"),
    [
        ("http://lab:8000", "http://lab:8000/api/"),
        ("http://lab:8000/", "http://lab:8000/api/"),
        ("https://lab.example/api", "https://lab.example/api/"),
        ("https://lab.example/sched/api/", "https://lab.example/sched/api/"),
    ],
)
def test_the_api_url_ends_in_a_slash_and_a_site_url_gets_api(given, url):
    assert api_url(given) == url


def test_field_errors_name_each_place_as_the_docs_write_it():
    body = {
        "name": ["This field is required."],
        "jobs": {"0": {"max_retry": ["Unknown field: expected name, …"]}},
        "fanout": [{}, {"host": ["No host named x."]}],
        "non_field_errors": ["Give jobs or fanout."],
        "jobs[1].labels": ["jobs[1].labels: no host in the lab carries label board:nope"],
    }
    assert field_errors(body) == [
        "name: This field is required.",
        "jobs[0].max_retry: Unknown field: expected name, …",
        "fanout[1].host: No host named x.",
        "Give jobs or fanout.",
        "jobs[1].labels: no host in the lab carries label board:nope",
    ]
    assert field_errors({"detail": "Not found."}) == ["Not found."]


def test_yaml_times_are_sent_as_iso_8601(tmp_path):
    path = tmp_path / "fanout.yaml"
    path.write_text(
        "name: bt\nfanout: {labels: [bluetooth], name: bt_Pair, until: 2026-11-24T12:00:00Z}\n"
    )
    assert suite_body(str(path)) == {
        "name": "bt",
        "fanout": {
            "labels": ["bluetooth"],
            "name": "bt_Pair",
            "until": "2026-11-24T12:00:00+00:00",
        },
    }
