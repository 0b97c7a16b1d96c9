"""Production settings: check --deploy is clean, secrets come from the environment, JSON logs."""

from __future__ import annotations

import json
import logging
import os
import secrets
import subprocess
import sys
from pathlib import Path

import pytest

from schedsite.logformat import JsonFormatter
from tests.reliability.support import ROOT

PRODUCTION = {
    "DEBUG": "0",
    "SECRET_KEY": secrets.token_urlsafe(50),
    "ALLOWED_HOSTS": "lab.example.com",
    "SECURE_COOKIES": "1",
}


# Only what a process needs to run Python: nothing of the tests' own settings leaks in (pytest
# sets SECRET_KEY; a browser test sets DJANGO_ALLOW_ASYNC_UNSAFE, which check --deploy refuses).
PASS_THROUGH = {"PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "PYTHONPATH", "VIRTUAL_ENV"}


def manage(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    """Run manage.py in an environment made of exactly the variables given."""
    base = {k: v for k, v in os.environ.items() if k in PASS_THROUGH}
    return subprocess.run(
        [sys.executable, str(ROOT / "manage.py"), *args],
        cwd=ROOT,
        env={**base, "DJANGO_SETTINGS_MODULE": "schedsite.settings", **env},
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_check_deploy_reports_no_issue_with_the_documented_production_environment() -> None:
    result = manage("check", "--deploy", "--fail-level", "WARNING", env=PRODUCTION)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "System check identified no issues (0 silenced)." in result.stdout
    assert "WARNING" not in result.stdout + result.stderr


def test_without_secure_cookies_check_deploy_names_what_is_missing() -> None:
    # The check is real: the same environment without HTTPS settings is reported.
    result = manage("check", "--deploy", env={**PRODUCTION, "SECURE_COOKIES": "0"})
    assert "security.W012" in result.stderr  # SESSION_COOKIE_SECURE
    assert "security.W016" in result.stderr  # CSRF_COOKIE_SECURE


def test_debug_off_without_a_secret_key_refuses_to_start_and_says_why() -> None:
    result = manage("check", env={"ALLOWED_HOSTS": "lab.example.com"})
    assert result.returncode != 0
    assert "SECRET_KEY must be set in the environment when DEBUG is off" in result.stderr


def test_debug_is_off_unless_asked_for() -> None:
    result = manage(
        "shell", "-c", "from django.conf import settings; print(settings.DEBUG)",
        env={"SECRET_KEY": PRODUCTION["SECRET_KEY"]},
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines()[-1] == "False"


def test_an_unknown_log_format_is_refused() -> None:
    result = manage("check", env={**PRODUCTION, "LOG_FORMAT": "xml"})
    assert result.returncode != 0
    assert "LOG_FORMAT must be 'plain' or 'json'" in result.stderr


def test_the_json_log_format_keeps_every_extra_field() -> None:
    record = logging.LogRecord(
        "schedsite.scheduler", logging.INFO, __file__, 1, "tick %s: %d leased", (7, 3), None
    )
    fields = {"tick_id": 7, "leased": 3, "expired": 0, "duration_ms": 12.5, "trigger": "x"}
    for key, val in fields.items():
        setattr(record, key, val)
    line = json.loads(JsonFormatter().format(record))
    assert line["message"] == "tick 7: 3 leased"
    assert line["level"] == "INFO" and line["logger"] == "schedsite.scheduler"
    assert {k: line[k] for k in fields} == fields


def test_gunicorn_config_reads_its_bind_and_workers_from_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import runpy

    monkeypatch.setenv("GUNICORN_BIND", "0.0.0.0:9000")
    monkeypatch.setenv("WEB_CONCURRENCY", "3")
    config = runpy.run_path(str(Path(ROOT) / "gunicorn.conf.py"))
    assert config["bind"] == "0.0.0.0:9000"
    assert config["workers"] == 3
    assert config["accesslog"] == "-"
    assert config["wsgi_app"] == "schedsite.wsgi:application"


@pytest.mark.parametrize("variable", ["DEBUG", "SECURE_COOKIES", "STATIC_MANIFEST"])
def test_a_true_false_setting_with_a_typo_refuses_to_start_and_names_the_variable(
    variable: str,
) -> None:
    result = manage("check", env={**PRODUCTION, variable: "ture"})
    assert result.returncode != 0
    assert f"{variable} must be one of" in result.stderr
    assert "'ture'" in result.stderr


def test_a_true_false_setting_reads_the_usual_words_either_way() -> None:
    assert manage("check", env={**PRODUCTION, "DEBUG": "off"}).returncode == 0
    assert manage("check", env={**PRODUCTION, "SECURE_COOKIES": "Yes"}).returncode == 0


def test_migrate_alone_readies_a_new_database_with_its_cache_table(tmp_path: Path) -> None:
    env = {**PRODUCTION, "DATABASE_URL": f"sqlite:///{tmp_path / 'fresh.sqlite3'}"}
    assert manage("migrate", "--noinput", env=env).returncode == 0
    # The throttles count in the database cache; a request would fail without its table.
    result = manage(
        "shell",
        "-c",
        "from django.core.cache import cache; cache.set('k', 1); print(cache.get('k'))",
        env=env,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines()[-1] == "1"
