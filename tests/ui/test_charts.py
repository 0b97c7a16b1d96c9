"""The dashboard's server-rendered charts and the UI's ways of saying times (no database)."""

from __future__ import annotations

import subprocess
import sys
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace
from zoneinfo import ZoneInfo

import pytest

from jobs.rows import suite_bars
from jobs.templatetags.schedsite_ui import completion_segments, wait_title, wait_tone
from schedsite.ui.charts import Series, line_chart, nice_ceiling
from schedsite.ui.durations import human_duration

T0 = datetime(2026, 1, 5, 12, 0, tzinfo=UTC)


def ticks(n: int, every: int = 30) -> list[datetime]:
    return [T0 + timedelta(seconds=every * i) for i in range(n)]


def test_a_chart_needs_two_ticks():
    chart = line_chart(chart_id="c", title="Queue", times=ticks(1), series=[Series("q", [3])])
    assert chart.empty and "Not enough scheduler ticks" in chart.description


def test_values_become_step_lines_inside_the_plot_area():
    chart = line_chart(
        chart_id="c", title="Queue", times=ticks(3), series=[Series("q", [0, 10, 5], area=True)]
    )
    area, line = chart.paths
    assert line["d"] == "M46.0,146.0 H208.0 V10.0 H370.0 V78.0"
    assert area["d"].endswith("V146.0 H46.0 Z") and "area" in area["cls"]
    assert [g["label"] for g in chart.grid] == ["0", "5", "10"]
    assert chart.plot == {
        "left": 46.0,
        "right": 370.0,
        "top": 10.0,
        "bottom": 146.0,
        "width": 324.0,
        "height": 136.0,
    }
    assert "now 5, peak 10, low 0" in chart.description


def test_the_time_axis_is_labelled_in_the_timezone_it_is_given():
    times = [T0, T0 + timedelta(minutes=90)]
    berlin = line_chart(
        chart_id="c",
        title="Q",
        times=times,
        series=[Series("q", [1, 2])],
        tz=ZoneInfo("Europe/Berlin"),
    )
    assert [x["label"] for x in berlin.xlabels] == ["13:00", "1h 30m span", "14:30:00"]
    assert "from 13:00 to 14:30:00" in berlin.description
    utc = line_chart(chart_id="c", title="Q", times=times, series=[Series("q", [1, 2])])
    assert utc.xlabels[0]["label"] == "12:00"


def test_the_chart_geometry_needs_no_django():
    code = (
        "import sys, schedsite.ui.charts, schedsite.ui.durations;sys.exit('django' in sys.modules)"
    )
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0


def test_the_time_axis_follows_the_tick_times_not_their_count():
    times = [T0, T0 + timedelta(seconds=10), T0 + timedelta(seconds=100)]
    chart = line_chart(chart_id="c", title="Q", times=times, series=[Series("q", [1, 1, 1])])
    assert chart.paths[0]["d"].startswith("M46.0,") and " H78.4" in chart.paths[0]["d"]


def test_wait_charts_label_their_axis_in_clock_units():
    chart = line_chart(
        chart_id="w", title="Wait", times=ticks(2), series=[Series("w", [30, 400])], seconds=True
    )
    assert [g["label"] for g in chart.grid] == ["0s", "5m", "10m"]
    assert "now 6m 40s, peak 6m 40s, low 30s" in chart.description
    hour = line_chart(
        chart_id="h", title="Wait", times=ticks(2), series=[Series("w", [0, 3000])], seconds=True
    )
    assert [g["label"] for g in hour.grid] == ["0s", "30m", "1h"]


@pytest.mark.parametrize(
    ("value", "seconds", "expected"),
    [
        (0, False, 1),
        (3, False, 3),
        (7, False, 8),
        (12, False, 15),
        (25, False, 30),
        (480, False, 500),
        (900, False, 1000),
        (45, True, 60),
        (61, True, 120),
        (5000, True, 7200),
    ],
)
def test_axis_maxima_are_round_numbers(value, seconds, expected):
    assert nice_ceiling(value, seconds=seconds) == expected


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(0, "0s"), (42, "42s"), (303, "5m 03s"), (1500, "25m"), (10920, "3h 02m"), (187200, "2d 4h")],
)
def test_durations_read_like_people_say_them(seconds, text):
    assert human_duration(seconds) == text


def test_completion_bar_segments_add_up_and_put_finished_work_first():
    segments = completion_segments({"queued": 5, "passed": 3, "failed": 1, "running": 1})
    assert [s.key for s in segments] == ["passed", "failed", "running", "queued"]
    assert sum(s.pct for s in segments) == pytest.approx(100)


def test_a_suites_bars_say_its_quota_and_its_jobs_done():
    suite = SimpleNamespace(min_duts=3, max_duts=4)
    short = suite_bars(suite, {"queued": 2, "running": 1, "passed": 1}, held=1)
    assert "<strong>1 / 3 · max 4</strong>" in short
    assert 'aria-label="1 of a minimum of 3 hosts held: below its minimum"' in short
    assert '<rect class="quota-short" width="33" height="10"/>' in short
    assert 'aria-label="1 of 4 jobs finished, 1 passed, 1 running, 2 queued"' in short
    assert '<rect class="seg-passed" x="0" width="25" height="10">' in short
    met = suite_bars(suite, {"running": 3}, held=3)
    assert ": quota met" in met and 'class="quota-met" width="100"' in met
    # A finished suite holds nothing: only its jobs done.
    done = suite_bars(suite, {"passed": 2, "failed": 1}, held=0)
    assert "Hosts" not in done and "<strong>3 / 3</strong>" in done
    plain = suite_bars(SimpleNamespace(min_duts=0, max_duts=0), {"queued": 1}, held=0)
    assert "<span>Hosts held</span><strong>0 · no minimum</strong>" in plain


def test_wait_reasons_get_a_colour_by_what_to_do_about_them():
    busy = {"code": "hosts_unavailable", "details": {"matching": 2, "busy": 2}}
    locked = {"code": "hosts_unavailable", "details": {"matching": 2, "busy": 1, "locked": 1}}
    assert (wait_tone(busy), wait_title(busy)) == ("blue", "Hosts busy")
    assert wait_tone(locked) == "amber"
    assert wait_tone({"code": "no_matching_host"}) == "red"
    assert wait_title({"code": "suite_at_max_duts"}) == "At max DUTs"
