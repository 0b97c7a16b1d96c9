"""Lab health on the dashboard: the capacity each tick records, its chart, the call-out."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from hosts import services as host_services
from hosts.choices import HostStatus
from hosts.models import Host
from jobs import services
from jobs import services as job_services
from jobs.models import SchedulerTick
from jobs.scheduling import tick as tick_module
from tests import factories as f
from tests.ui.conftest import HTMX

pytestmark = pytest.mark.django_db

CAPACITY = ("hosts_schedulable", "hosts_in_maintenance", "hosts_repair_failed")


def capacity(tick: SchedulerTick) -> tuple[int | None, ...]:
    return tuple(getattr(tick, name) for name in CAPACITY)


def latest() -> SchedulerTick:
    return SchedulerTick.objects.latest("id")


def lab_in_every_status(n: int, *, sam) -> None:  # noqa: ANN001
    """n hosts in each status (and n ready ones that are not free): 2n schedulable in all."""
    online, paused = f.worker(f"up-{n}"), f.worker(f"paused-{n}", paused=True)
    for i in range(n):
        for status in HostStatus.values:
            f.host(f"{status}-{n}-{i}", worker=online, status=status)
        f.host(f"free-{n}-{i}", worker=online)  # ready, free: schedulable like ready-*
        f.host(f"paused-{n}-{i}", worker=paused)  # its worker takes no work
        f.host(f"orphan-{n}-{i}", worker=f.worker(f"down-{n}-{i}", online=False))
        host_services.host_lock(host=f.host(f"locked-{n}-{i}"), by=sam, reason="debugging")
        services.lease_reserve(
            host=f.host(f"reserved-{n}-{i}"), holder=sam, duration=timedelta(hours=1), reason="fw"
        )


# --- what the tick records ------------------------------------------------------------------


def test_the_tick_counts_hosts_schedulable_in_maintenance_and_failed_in_every_status(sam):
    lab_in_every_status(1, sam=sam)

    services.scheduler_tick()

    # ready and free (2); needs_verify, verifying, needs_repair, repairing (4, whether or not
    # a maintenance job holds them yet); repair_failed (1). Retired, locked, reserved and the
    # hosts of paused or offline workers count in none.
    assert capacity(latest()) == (2, 4, 1)


def test_a_job_leased_at_the_tick_takes_its_host_out_of_the_schedulable_count():
    f.host("h1", ["board:x"])
    f.host("h2", ["board:x"])
    f.job("J1")

    services.scheduler_tick()

    assert capacity(latest()) == (1, 0, 0)  # as the tick leaves the lab


@pytest.mark.postgres
def test_an_unchanged_tick_keeps_the_counts_and_a_status_change_recounts(sam):
    lab_in_every_status(1, sam=sam)
    counted = services.scheduler_tick()
    kept = services.scheduler_tick()  # maintenance jobs were leased: plans again
    if not kept.unchanged:
        kept = services.scheduler_tick()
    assert not counted.unchanged and kept.unchanged
    assert capacity(latest()) == (2, 4, 1)

    host = Host.objects.get(hostname="free-1-0")
    job_services.host_set_status(host=host, status=HostStatus.REPAIR_FAILED, by=sam)

    assert not services.scheduler_tick().unchanged
    assert capacity(latest()) == (1, 4, 2)


@pytest.mark.postgres
def test_a_tick_after_one_recorded_before_the_counts_existed_counts_instead_of_copying(sam):
    lab_in_every_status(1, sam=sam)
    for _ in range(3):
        if services.scheduler_tick().unchanged:
            break
    SchedulerTick.objects.update(**dict.fromkeys(CAPACITY))  # as the migration leaves them

    assert not services.scheduler_tick().unchanged
    assert capacity(latest()) == (2, 4, 1)
    assert services.scheduler_tick().unchanged  # and from then on the fast path holds again
    assert capacity(latest()) == (2, 4, 1)


def tick_queries(django_assert_max_num_queries, bound: int) -> int:  # noqa: ANN001
    """Queries of a tick that plans (a host row was written since the last one)."""
    Host.objects.filter(hostname__startswith="free-").update(current_build="R1")
    with django_assert_max_num_queries(bound) as ctx:
        summary = services.scheduler_tick()
    assert not summary.unchanged
    return len(ctx.captured_queries)


def test_the_tick_costs_the_same_queries_at_any_lab_size(
    sam, django_assert_max_num_queries, monkeypatch
):
    # Every 50th tick also prunes the history (two statements more): by the tick's id, which
    # the database hands out, not by the lab's size.
    monkeypatch.setattr(tick_module, "_prune_ticks", lambda latest_id: None)
    lab_in_every_status(1, sam=sam)
    services.scheduler_tick()  # leases the maintenance jobs
    small = tick_queries(django_assert_max_num_queries, 30)

    lab_in_every_status(12, sam=sam)
    services.scheduler_tick()
    big = tick_queries(django_assert_max_num_queries, small)

    assert big == small
    assert capacity(latest()) == (26, 52, 13)


# --- what the dashboard shows ---------------------------------------------------------------

CALLOUT = re.compile(r'<p class="banner err" id="repair-failed-callout">(.*?)</p>', re.S)


def callout(client) -> str | None:  # noqa: ANN001
    found = CALLOUT.search(client.get("/").content.decode())
    return re.sub(r"\s+", " ", found.group(1)) if found else None


def test_the_callout_names_the_hosts_that_failed_repair_and_links_to_them(alice_client):
    for name in ("dut12", "dut4", "dut9"):
        f.host(name, status=HostStatus.REPAIR_FAILED)
    f.host("dut1")
    f.host("dut2", status=HostStatus.NEEDS_REPAIR)

    text = callout(alice_client)

    assert text is not None
    assert '<a href="/hosts/?status=repair_failed">3 hosts failed repair</a>' in text
    names = re.findall(r'<a href="/hosts/([^/"]+)/">', text)
    assert names == ["dut4", "dut9", "dut12"]
    assert (
        re.sub(r"<[^>]+>", "", text)
        .strip()
        .endswith("3 hosts failed repair: dut4, dut9, dut12 — they need a person.")
    )


def test_one_failed_host_is_named_in_the_singular(alice_client):
    f.host("dut7", status=HostStatus.REPAIR_FAILED)

    text = re.sub(r"<[^>]+>", "", callout(alice_client) or "").strip()

    assert text == "1 host failed repair: dut7 — it needs a person."


def test_a_long_list_of_failed_hosts_says_how_many_more(alice_client):
    for i in range(15):
        f.host(f"dut{i}", status=HostStatus.REPAIR_FAILED)

    text = callout(alice_client) or ""

    assert "15 hosts failed repair" in text and "and 3 more" in text


@pytest.mark.parametrize("status", [s for s in HostStatus.values if s != "repair_failed"])
def test_there_is_no_callout_when_no_host_failed_repair(alice_client, status):
    f.host("dut1", status=status)

    html = alice_client.get("/").content.decode()

    assert callout(alice_client) is None
    assert "failed repair" not in html and "banner err" not in html


def test_the_callout_costs_the_same_queries_for_two_failed_hosts_as_for_forty(alice_client):
    def queries() -> int:
        with CaptureQueriesContext(connection) as ctx:
            assert alice_client.get("/").status_code == 200
        return len(ctx.captured_queries)

    for i in range(2):
        f.host(f"dut{i}", status=HostStatus.REPAIR_FAILED)
    few = queries()
    for i in range(2, 40):
        f.host(f"dut{i}", status=HostStatus.REPAIR_FAILED)

    assert queries() == few


def test_the_live_refresh_brings_the_callout_and_takes_it_away(alice_client, sam):
    host = f.host("dut3")
    assert "failed repair" not in alice_client.get("/", headers=HTMX).content.decode()

    job_services.host_set_status(host=host, status=HostStatus.REPAIR_FAILED, by=sam)
    assert "1 host failed repair" in alice_client.get("/", headers=HTMX).content.decode()

    job_services.host_set_status(host=host, status=HostStatus.NEEDS_REPAIR, by=sam)
    assert "failed repair" not in alice_client.get("/", headers=HTMX).content.decode()


def test_the_counts_panel_shows_hosts_in_maintenance(alice_client):
    for status in ("needs_verify", "verifying", "needs_repair", "repairing", "repair_failed"):
        f.host(f"dut-{status}", status=status)

    html = alice_client.get("/").content.decode()

    stat = re.search(r'<div class="label">In maintenance</div>(.*?)</a>', html, re.S)
    assert stat is not None
    assert re.search(r'<div class="value">4<', stat.group(1))
    assert "2 verify · 2 repair" in stat.group(1)


def figure(html: str, chart_id: str) -> str:
    start = html.index(f'id="{chart_id}-title"')
    return html[start : html.index("</figure>", start)]


def test_the_capacity_chart_draws_three_series_from_the_ticks(alice_client, sam):
    ready = f.host("dut1")
    f.host("dut2")
    f.host("dut3", status=HostStatus.NEEDS_REPAIR)
    start = timezone.now() - timedelta(minutes=10)
    services.scheduler_tick(now=start)
    job_services.host_set_status(host=ready, status=HostStatus.REPAIR_FAILED, by=sam)
    services.scheduler_tick(now=start + timedelta(minutes=5))

    chart = figure(alice_client.get("/").content.decode(), "chart-capacity")

    assert "Lab capacity" in chart
    lines = re.findall(r'<path class="line tone-(\w+)"', chart)
    assert lines == ["blue", "amber", "slate"]
    legend = re.findall(r'<span class="swatch tone-(\w+)"></span>([^<]+)</li>', chart)
    assert legend == [("blue", "Free"), ("amber", "In maintenance"), ("slate", "Failed")]
    assert '<span class="chart-now">1 free now</span>' in chart
    # What a screen reader gets: every series now and over the ticks.
    assert "Free: now 1, peak 2, low 1; In maintenance: now 1, peak 1, low 1" in chart
    assert "Failed: now 1, peak 1, low 0" in chart


def test_the_capacity_chart_leaves_out_ticks_that_did_not_count(alice_client):
    start = timezone.now() - timedelta(minutes=10)
    for minutes in (0, 5):
        SchedulerTick.objects.create(started_at=start + timedelta(minutes=minutes), hosts_total=3)

    html = alice_client.get("/").content.decode()

    assert "Not enough scheduler ticks yet" in figure(html, "chart-capacity")
    assert '<svg class="chart-svg"' in figure(html, "chart-queue")  # the others still draw
