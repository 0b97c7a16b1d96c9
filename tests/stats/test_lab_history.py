"""The lab's history: minute rows of a small lab, written once, hours made of minutes, old
rows pruned, and GET /api/stats/lab/ over each range (docs/api.md#statistics)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from hosts.models import Host
from jobs.models import Job
from stats.models import LabHour, LabMinute
from stats.rollup import floor_hour, floor_minute, histogram, lab_rollup
from tests import factories as f

pytestmark = pytest.mark.django_db

alice_client = f.client_fixture("alice", f.signed_in)
SECOND = timedelta(seconds=1)


@pytest.fixture
def small_lab():  # noqa: ANN201
    """Four hosts, two of board:eve; in the minute B two eve jobs got hosts (waits 130 s and
    50 s) and one failed; then two jobs queued (priority 60 for a board no host has, 20 for
    pool:cq), and h4 broke. Returns B."""
    rack = f.worker("rack-1")
    f.host("h1", ["board:eve", "pool:cq"], worker=rack)
    f.host("h2", ["board:eve", "pool:cq"], worker=rack)
    f.host("h3", ["board:fizz", "pool:cq"], worker=rack)
    f.host("h4", ["board:fizz", "other"], worker=rack)
    first = f.job("first", ["board:eve"])
    second = f.job("second", ["board:eve"])
    bucket = floor_minute(timezone.now())
    Job.objects.filter(pk=first.pk).update(created_at=bucket - 100 * SECOND)
    Job.objects.filter(pk=second.pk).update(created_at=bucket - 20 * SECOND)
    f.tick(bucket + 30 * SECOND, rack)
    second.refresh_from_db()
    f.run(second, "failed", at=bucket + 40 * SECOND)
    f.job("nowhere", ["board:nope"], priority=60)
    f.job("anywhere-in-cq", ["pool:cq"], priority=20)
    Host.objects.filter(hostname="h4").update(status="needs_repair")
    return bucket


def rows(model: type = LabMinute) -> dict[str, object]:
    return {row.label: row for row in model.objects.all()}


def test_a_minute_counts_the_lab_and_each_pool_and_board(small_lab):
    result = lab_rollup(now=small_lab + 65 * SECOND)

    assert result.minute == small_lab.isoformat()
    by_label = rows()
    # "other" is neither a pool nor a board: no rows of its own; board:nope only asked for.
    assert set(by_label) == {"", "board:eve", "board:fizz", "board:nope", "pool:cq"}
    lab, eve, fizz, cq = (
        by_label[""],
        by_label["board:eve"],
        by_label["board:fizz"],
        by_label["pool:cq"],
    )
    assert lab.hosts == {"needs_repair": 1, "ready": 3} and lab.hosts_total == 4
    assert (lab.leased, eve.leased, fizz.leased, cq.leased) == (1, 1, 0, 1)
    assert fizz.hosts == {"needs_repair": 1, "ready": 1}
    assert lab.queued == {"60": 1, "20": 1} and lab.queued_total == 2
    assert by_label["board:nope"].queued == {"60": 1} and by_label["board:nope"].hosts == {}
    assert cq.queued == {"20": 1} and eve.queued == {}
    # Waits of the jobs that got hosts in the minute: 130 s and 50 s.
    assert (eve.wait_p50_s, eve.wait_p95_s) == (50, 130)
    assert sum(eve.waits) == 2 and fizz.wait_p50_s is None
    assert lab.finished == {"failed": 1} == eve.finished and cq.finished == {}


def test_a_second_run_for_the_same_minute_writes_nothing_more(small_lab):
    lab_rollup(now=small_lab + 61 * SECOND)
    before = list(LabMinute.objects.values_list("pk", "bucket", "label", "leased"))
    Host.objects.filter(hostname="h3").update(status="needs_repair")

    again = lab_rollup(now=small_lab + 119 * SECOND)

    assert again.minute is None and again.minute_rows == 0
    assert list(LabMinute.objects.values_list("pk", "bucket", "label", "leased")) == before
    assert rows()[""].hosts == {"needs_repair": 1, "ready": 3}  # as it was written


def test_two_clusters_writing_the_same_minute_cannot_double_it(small_lab):
    from stats.rollup import minute_rows  # noqa: PLC0415

    first = minute_rows(bucket=small_lab)
    LabMinute.objects.bulk_create(minute_rows(bucket=small_lab))
    LabMinute.objects.bulk_create(first, ignore_conflicts=True)

    assert LabMinute.objects.count() == 5


def test_an_hour_is_made_of_its_minutes_once_it_is_complete(db):
    hour = floor_hour(timezone.now()) - timedelta(hours=3)
    for minute, (leased, waits, passed) in enumerate([(2, [10, 20], 1), (4, [100], 2)]):
        LabMinute.objects.create(
            bucket=hour + timedelta(minutes=minute),
            label="",
            hosts={"ready": 4 + minute},
            hosts_total=4 + minute,
            leased=leased,
            queued={"40": 2 * minute},
            queued_total=2 * minute,
            waits=histogram(waits),
            finished={"passed": passed},
            repairs=minute,
        )
    # The next hour is not complete until its last minute is written.
    LabMinute.objects.create(bucket=hour + timedelta(minutes=61), label="")

    result = lab_rollup(now=hour + timedelta(hours=1, minutes=1, seconds=5))

    assert result.hours == [hour.isoformat()]
    row = LabHour.objects.get()
    assert (row.bucket, row.samples) == (hour, 2)
    assert row.hosts == {"ready": 4.5} and row.hosts_total == 4.5
    assert row.leased == 3 and row.queued == {"40": 1} and row.queued_total == 1
    assert row.finished == {"passed": 3} and row.repairs == 1
    assert sum(row.waits) == 3
    assert 15 < row.wait_p50_s <= 30  # the middle wait, 20 s, in its (15, 30] bucket
    assert 60 < row.wait_p95_s <= 120  # the longest, 100 s
    # Written once: the next run leaves it.
    assert lab_rollup(now=hour + timedelta(hours=1, minutes=2)).hours == []
    assert LabHour.objects.count() == 1


def test_rows_past_keeping_are_pruned(db, settings):
    now = timezone.now()
    LabMinute.objects.create(bucket=floor_minute(now) - timedelta(hours=49), label="")
    LabMinute.objects.create(bucket=floor_minute(now) - timedelta(hours=47), label="")
    LabHour.objects.create(bucket=floor_hour(now) - timedelta(days=401), label="")
    LabHour.objects.create(bucket=floor_hour(now) - timedelta(days=399), label="")

    result = lab_rollup(now=now)

    assert (result.pruned_minutes, result.pruned_hours) == (1, 1)
    kept = floor_minute(now) - timedelta(hours=47)
    assert kept in set(LabMinute.objects.values_list("bucket", flat=True))
    assert list(LabHour.objects.values_list("bucket", flat=True)) != []
    assert not LabHour.objects.filter(bucket__lt=now - timedelta(days=400)).exists()


def test_the_api_gives_minutes_for_a_day_and_hours_for_a_week(small_lab, alice_client):
    lab_rollup(now=timezone.now() + timedelta(minutes=1))
    # In an hour's last minute the rollup above also completes that hour: one row more.
    rolled_hours = LabHour.objects.filter(label="pool:cq").count()
    two_days_ago = floor_hour(timezone.now()) - timedelta(days=2)
    LabHour.objects.create(bucket=two_days_ago, label="pool:cq")

    day = alice_client.get("/api/stats/lab/?range=24h&label=pool:cq").json()
    week = alice_client.get("/api/stats/lab/?range=7d&label=pool:cq").json()
    lab = alice_client.get("/api/stats/lab/?range=1h").json()

    assert (day["resolution"], week["resolution"]) == ("minute", "hour")
    assert [point["queued"] for point in day["series"]] == [{"20": 1}]
    assert day["series"][0]["hosts"] == {"ready": 3}
    assert len(week["series"]) == 1 + rolled_hours
    assert (
        week["series"][0]["t"] == two_days_ago.isoformat().replace("+00:00", "Z")
        and week["series"][0]["samples"] == 1
    )
    assert lab["label"] == "" and lab["series"][0]["queued_total"] == 2
    # A month reads hours too, and has none of the other labels'.
    assert alice_client.get("/api/stats/lab/?range=30d&label=board:eve").json()["series"] == []


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ("range=2h", "range"),
        ("range=7d&label=team:x", "label"),
        ("label=bad label", "label"),
        ("label=board:eve,pool:cq", "label"),
    ],
)
def test_a_bad_range_or_label_is_a_400_naming_it(alice_client, query, field):
    response = alice_client.get(f"/api/stats/lab/?{query}")
    assert response.status_code == 400
    assert field in str(response.json())


def test_the_api_needs_a_login(client):
    assert client.get("/api/stats/lab/").status_code in (401, 403)


def test_the_rollup_runs_every_minute_from_its_own_schedule_not_the_tick(small_lab):
    from django_q.models import Schedule  # noqa: PLC0415

    from stats import tasks  # noqa: PLC0415

    schedule = Schedule.objects.get(name=tasks.SCHEDULE_NAME)
    assert (schedule.func, schedule.minutes, schedule.repeats) == ("stats.tasks.rollup", 1, -1)
    assert tasks.rollup()["minute_rows"] == 5  # the minute that just ended, every label


def test_a_minute_costs_the_same_queries_however_big_or_old_the_lab(
    small_lab, django_assert_num_queries
):
    from stats.rollup import minute_rows  # noqa: PLC0415

    with django_assert_num_queries(10):
        minute_rows(bucket=small_lab)
    # Ten times the hosts, more queued and finished jobs, and a day of history.
    rack = f.worker("rack-2")
    for n in range(20):
        f.host(f"more{n}", [f"board:b{n % 3}", "pool:cq"], worker=rack)
        f.job(f"more{n}", [f"board:b{n % 4}"], priority=20 + n)
    for minute in range(1, 24 * 60, 7):
        lab_rollup(now=small_lab - timedelta(minutes=minute))
    with django_assert_num_queries(10):
        minute_rows(bucket=small_lab)
