"""No secret in the repository (docs/security.md#secrets); the Procfile matches the docs."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

PRIVATE_KEY = re.compile(r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----")
# A literal assigned to a secret setting, in Python or YAML (quoted) or in shell and env files
# (NAME=value). Placeholders ($VAR, <key>, ...) and reads from the environment do not count.
SECRET_NAMES = r"\b(?:SECRET_KEY|METRICS_TOKEN|SCHEDSITE_TOKEN|[A-Z_]*PASSWORD)"
QUOTED_SECRET = re.compile(SECRET_NAMES + r"\s*[:=]\s*([\"'])(?P<value>[^\"']+)\1")
ENV_SECRET = re.compile(SECRET_NAMES + r"=(?P<value>[^\s\"'$<…]+)")
# A DRF token is 40 hex characters. Test files may hold made-up ones; nothing else may.
HEX_TOKEN = re.compile(r"(?<![0-9A-Za-z])[0-9a-f]{40}(?![0-9A-Za-z])")
PLACEHOLDER = re.compile(r"^[.…]+$")

# Literal "secrets" that are not secret, and why each may stay:
DEVELOPMENT_KEY = "insecure-development-key-only-for-DEBUG"
ALLOWED = {
    # The development fallback, used only with DEBUG=1: settings.py raises ImproperlyConfigured
    # before reaching it when DEBUG is off (tests/reliability/test_production_settings.py
    # proves that a production process refuses to start without SECRET_KEY).
    ("schedsite/settings.py", DEVELOPMENT_KEY),
    # pytest-env's default for the test run (D: = only when unset); it signs nothing real.
    ("pyproject.toml", "test-only-not-secret"),
}


def repository_files() -> list[str]:
    """Tracked files, plus new ones not yet committed (but not what .gitignore ignores)."""
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    out = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    return [name for name in out.stdout.splitlines() if (ROOT / name).is_file()]


def findings(path: str, text: str) -> list[str]:
    """What in one file looks like a committed secret."""
    found = [f"{path}: a private key" for _ in PRIVATE_KEY.finditer(text)]
    if path.startswith("tests/"):
        return found  # tests set made-up tokens and keys on purpose (settings.METRICS_TOKEN = …)
    for pattern in (QUOTED_SECRET, ENV_SECRET):
        for match in pattern.finditer(text):
            value = match["value"]
            if (path, value) not in ALLOWED and not PLACEHOLDER.match(value):
                found.append(f"{path}: a literal secret {match.group(0)[:60]!r}")
    found += [f"{path}: a 40-hex token {m.group(0)[:8]}…" for m in HEX_TOKEN.finditer(text)]
    return found


def test_no_file_of_the_repository_holds_a_secret():
    problems: list[str] = []
    for path in repository_files():
        data = (ROOT / path).read_bytes()
        if b"\0" in data:
            continue  # images; no text secret hides in a PNG's pixels
        problems += findings(path, data.decode("utf-8", errors="replace"))
    assert problems == []


@pytest.mark.parametrize(
    ("path", "text"),
    [
        ("deploy/key.pem", "-----BEGIN " + "RSA PRIVATE KEY-----\nMIIE"),
        ("deploy/id", "-----BEGIN " + "OPENSSH PRIVATE KEY-----"),
        ("schedsite/settings.py", "SECRET_KEY = " + '"' + "k3y-" * 10 + '"'),
        ("Makefile", "run:\n\tSECRET_KEY=" + "k3y" * 10 + " manage.py runserver"),
        (".env", "METRICS_TOKEN=" + "abc123" * 6),
        ("docs/api.md", "curl -H 'Authorization: Token " + "0123456789" * 4 + "'"),
    ],
)
def test_the_scan_catches_each_kind_of_secret(path, text):
    # The samples are built from pieces, so this file itself holds none of them.
    assert findings(path, text)


@pytest.mark.parametrize(
    ("path", "text"),
    [
        ("schedsite/settings.py", 'SECRET_KEY = os.environ.get("SECRET_KEY", "")'),
        ("docs/deployment.md", "DEBUG=0 SECRET_KEY=… ALLOWED_HOSTS=lab.example.com"),
        ("docs/api.md", 'curl -H "Authorization: Token $SCHEDSITE_TOKEN"'),
        ("docs/api.md", "SCHEDSITE_TOKEN=... run_worker --worker w1"),
        ("tests/api/test_x.py", "key = '" + "0123456789" * 4 + "'"),
    ],
)
def test_the_scan_lets_placeholders_and_environment_reads_through(path, text):
    assert findings(path, text) == []


def test_the_development_key_is_reached_only_with_debug_on():
    source = (ROOT / "schedsite/settings.py").read_text()
    refuse = source.index("if not DEBUG:\n        raise ImproperlyConfigured(")
    fallback = source.index(f'SECRET_KEY = "{DEVELOPMENT_KEY}"')
    assert refuse < fallback


def process_lines(text: str) -> list[tuple[str, str]]:
    """The `name: command` lines of a Procfile, comments dropped and spaces squeezed."""
    lines = []
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, command = line.split(":", 1)
            lines.append((name.strip(), " ".join(command.split())))
    return lines


def test_the_procfile_runs_the_processes_docs_deployment_describes():
    docs = (ROOT / "docs/deployment.md").read_text()
    block = re.search(r"```Procfile\n(.*?)```", docs, re.S)[1]
    procfile = process_lines((ROOT / "Procfile").read_text())
    assert procfile == process_lines(block)
    assert [name for name, _ in procfile] == ["web", "cluster", "release"]
