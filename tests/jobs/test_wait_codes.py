"""Wait-reason codes: one enum, and every page, doc and module reads it, none restates it."""

from __future__ import annotations

import re
from pathlib import Path

from jobs.api.serializers import WaitReasonSerializer
from jobs.badges import WAIT_KINDS, wait_title, wait_tone
from jobs.scheduling.planner import WaitCode

ROOT = Path(__file__).resolve().parents[2]
CODES = {code.value for code in WaitCode}


def documented_codes() -> set[str]:
    """The codes in the first column of docs/scheduling.md's table of wait reasons."""
    text = (ROOT / "docs" / "scheduling.md").read_text()
    section = text.split("\n## Wait reasons\n", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| `")]
    return {code for row in rows for code in re.findall(r"`([a-z_]+)`", row.split(" | ")[0])}


def test_every_code_has_its_badge_and_no_badge_is_for_a_code_that_does_not_exist():
    assert set(WAIT_KINDS) == CODES
    for code in WaitCode:
        reason = {"code": code.value, "message": "", "details": {}}
        assert wait_tone(reason) in {"slate", "red", "amber", "blue", "purple"}, code
        assert wait_title(reason) == WAIT_KINDS[code].title, code


def test_every_code_has_its_row_in_the_docs_and_the_docs_name_no_other():
    assert documented_codes() == CODES


def test_the_api_lists_every_code():
    assert set(WaitReasonSerializer().fields["code"].choices) == CODES


def test_no_module_or_template_writes_a_code_as_a_string_of_its_own():
    # Only the enum spells the codes; everyone else names its members.
    enum_home = ROOT / "jobs" / "scheduling" / "planner" / "types.py"
    found = []
    for package in ("hosts", "jobs", "notifications", "schedsite", "templates", "static"):
        for path in (ROOT / package).rglob("*"):
            if path.suffix not in {".py", ".html", ".js"} or path == enum_home:
                continue
            text = path.read_text()
            found += [f"{path.relative_to(ROOT)}: {c}" for c in CODES if f'"{c}"' in text]
            found += [f"{path.relative_to(ROOT)}: {c}" for c in CODES if f"'{c}'" in text]
    assert not found
