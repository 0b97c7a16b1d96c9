"""Every tick writes one structured log line that a log shipper can index by field."""

from __future__ import annotations

import json
import logging

import pytest

from hosts.models import HealthPolicy
from jobs import services
from schedsite.logformat import JsonFormatter
from tests import factories as f
from tests.reliability.test_production_settings import PRODUCTION, manage

pytestmark = [pytest.mark.postgres, pytest.mark.django_db]

FIELDS = {
    "tick_id",
    "leased",
    "expired",
    "timed_out",
    "queued",
    "duration_ms",
    "plan_ms",
    "trigger",
}


def tick_line(caplog: pytest.LogCaptureFixture) -> dict:
    """The one JSON line the tick logged with its fields."""
    lines = [
        json.loads(JsonFormatter().format(r))
        for r in caplog.records
        if r.name == "schedsite.scheduler" and hasattr(r, "tick_id")
    ]
    assert len(lines) == 1, (
        f"expected one tick log line carrying extra={sorted(FIELDS)}; "
        f"got {[r.getMessage() for r in caplog.records]}"
    )
    return lines[0]


def test_a_tick_logs_its_numbers_as_fields(caplog: pytest.LogCaptureFixture) -> None:
    f.host("h1", ["board:x"])
    f.suite("S", 3)
    with caplog.at_level(logging.INFO, logger="schedsite.scheduler"):
        summary = services.scheduler_tick(trigger="suite submitted")
    line = tick_line(caplog)
    assert set(line) >= FIELDS
    assert line["tick_id"] == summary.tick_id
    assert (line["leased"], line["expired"], line["timed_out"], line["queued"]) == (1, 0, 0, 2)
    assert line["trigger"] == "suite submitted"
    assert line["duration_ms"] >= line["plan_ms"] >= 0


def test_a_tick_leasing_verify_jobs_counts_only_test_jobs_as_queued(caplog) -> None:  # noqa: ANN001
    f.host("h1", ["board:x"], worker=f.worker("w1"))
    f.host("h2", ["board:x"], worker=f.worker("w2"))
    HealthPolicy.objects.create(name="all", label_key="")  # never verified: verify both
    f.job("t", ["board:x"])
    with caplog.at_level(logging.INFO, logger="schedsite.scheduler"):
        services.scheduler_tick(trigger="schedule")
    line = tick_line(caplog)
    assert (line["leased"], line["queued"]) == (2, 1)  # two verifies; the test waits


def test_an_idle_tick_is_logged_too(caplog: pytest.LogCaptureFixture) -> None:
    # "The scheduler is alive" is what an operator greps for first.
    with caplog.at_level(logging.INFO, logger="schedsite.scheduler"):
        services.scheduler_tick(trigger="schedule")
    line = tick_line(caplog)
    assert (line["leased"], line["queued"], line["trigger"]) == (0, 0, "schedule")


def test_log_format_json_makes_every_process_log_json_lines() -> None:
    code = (
        "import logging; logging.getLogger('schedsite.scheduler')"
        ".info('tick %s', 9, extra={'tick_id': 9, 'leased': 2})"
    )
    result = manage("shell", "-c", code, env={**PRODUCTION, "LOG_FORMAT": "json"})
    assert result.returncode == 0, result.stderr
    (line,) = [json.loads(x) for x in result.stderr.splitlines() if x.startswith("{")]
    assert (line["message"], line["tick_id"], line["leased"]) == ("tick 9", 9, 2)
