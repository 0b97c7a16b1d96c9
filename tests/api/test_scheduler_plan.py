"""POST /api/scheduler/plan/: what the next tick would do with a proposed change, saving nothing."""

from __future__ import annotations

import hashlib
from datetime import timedelta

import pytest
from django.db import connection

from hosts import services as host_services
from hosts.models import Host, HostEvent, Worker
from jobs import services
from jobs.models import Job, Lease, SchedulerSettings, SchedulerTick, Suite
from tests import factories as f

pytestmark = pytest.mark.django_db

URL = "/api/scheduler/plan/"


def suite_body(n: int, labels: list[str], **extra: object) -> dict:
    return {
        "name": "nightly",
        "jobs": [{"name": f"t{i}", "labels": labels} for i in range(n)],
        **extra,
    }


@pytest.fixture
def eve_lab(sam):  # noqa: ANN001, ANN201
    """Six free board:eve hosts: four on w1, two on w2; one board:zork host on w2."""
    w1, w2 = f.worker("w1"), f.worker("w2")
    hosts = [f.host(f"eve{i}", ["board:eve"], worker=w1 if i < 4 else w2) for i in range(6)]
    zork = f.host("zork", ["board:zork"], worker=w2)
    return w1, w2, hosts, zork


def db_digest() -> dict[str, object]:
    """Row counts and a digest of every row of the tables a plan could touch."""
    digest = {}
    for model in (Job, Suite, Lease, Host, Worker, HostEvent, SchedulerTick):
        table = model._meta.db_table
        with connection.cursor() as cursor:
            cursor.execute(f"SELECT * FROM {table} ORDER BY id")  # noqa: S608 - our table names
            rows = cursor.fetchall()
        digest[table] = (len(rows), hashlib.sha256(repr(rows).encode()).hexdigest())
    return digest


def test_a_suite_preview_says_how_many_jobs_would_start_and_why_the_rest_wait(
    alice_client, eve_lab
):
    response = alice_client.post(URL, {"suite": suite_body(10, ["board:eve"])}, format="json")

    assert response.status_code == 200, response.content
    body = response.json()
    assert body["new_jobs"]["total"] == 10
    assert body["new_jobs"]["would_start"] == 6
    assert body["new_jobs"]["waiting"] == 4
    assert body["summary"].startswith("6 of your 10 jobs would start now; 4 wait: ")
    assert "6 free hosts went to 6 jobs ahead of it" in body["summary"]
    leases = body["leases"]
    assert len(leases) == 6
    assert {row["host"] for row in leases} == {f"eve{i}" for i in range(6)}
    assert all(row["job"] is None and row["new_job"] is not None for row in leases)
    waits = body["new_jobs"]["waits"]
    assert [w["new_job"] for w in waits] == [6, 7, 8, 9]
    assert {w["code"] for w in waits} == {"outranked"}
    assert Suite.objects.count() == 0 and Job.objects.count() == 0


def test_a_preview_writes_nothing(staff_client, sam, alice, eve_lab):
    w1, _w2, hosts, _zork = eve_lab
    queued = f.suite("weekly", 3, labels=["board:eve"], owner=alice, priority=20)
    services.scheduler_tick()  # leases three hosts: the preview meets leases and held counts
    f.suite("later", 4, labels=["board:eve"], owner=alice, priority=30)
    before = db_digest()

    response = staff_client.post(
        URL,
        {
            "suite": suite_body(5, ["board:eve"], priority=70),
            "pause_workers": ["w2"],
            "lock_hosts": ["eve0"],
            "suite_changes": [{"suite": queued.pk, "priority": 90, "max_duts": 1}],
        },
        format="json",
    )

    assert response.status_code == 200, response.content
    assert db_digest() == before


def test_pausing_a_worker_names_the_jobs_that_would_lose_their_only_host(
    staff_client, alice, eve_lab
):
    f.suite("zork-tests", 3, labels=["board:zork"], owner=alice)
    f.suite("eve-tests", 2, labels=["board:eve"], owner=alice)

    body = staff_client.post(URL, {"pause_workers": ["w2"]}, format="json").json()

    # w2 carries the only zork host: its three jobs lose it; eve jobs still have w1's hosts.
    assert body["counts"]["stranded"] == 3
    assert {row["name"] for row in body["stranded"]} == {f"zork-tests-t{i}" for i in range(3)}
    assert all(row["code"] == "hosts_unavailable" for row in body["stranded"])
    assert "on a paused worker" in body["stranded"][0]["message"]
    # The next tick would have leased zork to the first of them; now it would not.
    assert body["counts"]["would_lose"] == 1
    assert body["counts"]["leases_without_change"] == 3
    assert body["counts"]["leases"] == 2
    assert "3 queued jobs would lose their only matching host" in body["summary"]
    assert not Worker.objects.get(name="w2").paused


def test_locking_a_host_shows_what_the_next_tick_would_lease_instead(staff_client, alice, eve_lab):
    pinned = f.job("pinned", ["board:zork"], owner=alice, host=Host.objects.get(hostname="zork"))

    body = staff_client.post(URL, {"lock_hosts": ["zork"]}, format="json").json()

    assert body["would_lose"] == [
        {
            "job": pinned.pk,
            "new_job": None,
            "name": "pinned",
            "code": "pinned_host_locked",
            "message": "Pinned host zork is locked: (the lock you preview)",
        }
    ]
    assert body["stranded"][0]["job"] == pinned.pk
    assert body["leases"] == []
    assert not Host.objects.get(hostname="zork").locked


def preview_suite_change(client, suite: Suite, **change: int) -> dict:  # noqa: ANN001
    response = client.post(URL, {"suite_changes": [{"suite": suite.pk, **change}]}, format="json")
    assert response.status_code == 200, response.content
    return response.json()


def test_raising_a_suites_priority_shows_the_jobs_that_would_start_and_those_pushed_back(
    alice_client, alice, eve_lab
):
    f.suite("first", 6, labels=["board:eve"], owner=alice, priority=50)
    second = f.suite("second", 2, labels=["board:eve"], owner=alice, priority=40)

    body = preview_suite_change(alice_client, second, priority=60)

    assert {row["name"] for row in body["would_start"]} == {"second-t0", "second-t1"}
    assert len(body["would_lose"]) == 2
    assert {row["code"] for row in body["would_lose"]} == {"outranked"}
    assert body["counts"]["leases"] == body["counts"]["leases_without_change"] == 6


def test_a_min_duts_quota_in_the_preview_takes_hosts_ahead_of_higher_priorities(
    alice_client, alice, eve_lab
):
    f.suite("cq", 6, labels=["board:eve"], owner=alice, priority=70)
    weekly = f.suite("weekly", 3, labels=["board:eve"], owner=alice, priority=10)

    body = preview_suite_change(alice_client, weekly, min_duts=2)

    assert sorted(row["name"] for row in body["would_start"]) == ["weekly-t0", "weekly-t1"]
    assert body["counts"]["would_lose"] == 2


def test_an_unchanged_plan_says_so(alice_client, alice, eve_lab):
    suite = f.suite("s", 1, labels=["board:eve"], owner=alice)
    body = preview_suite_change(alice_client, suite, priority=41)
    assert body["summary"] == (
        "The next tick would lease the same hosts with or without this change."
    )


@pytest.mark.parametrize(
    ("payload", "field"),
    [
        ({}, "non_field_errors"),
        ({"settings": {"ordering": "random"}}, "ordering"),
        ({"settings": {"aging_cap": -1}}, "aging_cap"),
        ({"settings": {"version": 3}}, "version"),
        ({"pause_workers": ["nope"]}, "pause_workers"),
        ({"lock_hosts": ["eve0", "ghost"]}, "lock_hosts"),
        ({"suite": {"name": "x"}}, "suite"),
        ({"suite": suite_body(1, ["board:nothing"])}, "labels"),
        ({"suite_changes": [{"suite": 999999, "priority": 50}]}, "suite_changes"),
        ({"suite_changes": [{"suite": "one"}]}, "suite_changes"),
        ({"lock_hosts": "eve0"}, "lock_hosts"),
    ],
)
def test_bad_input_is_a_400_naming_the_field(staff_client, eve_lab, payload, field):
    before = db_digest()
    response = staff_client.post(URL, payload, format="json")
    assert response.status_code == 400, response.content
    assert field in response.content.decode()
    assert db_digest() == before


def test_new_settings_show_which_jobs_would_start_instead_and_save_nothing(
    alice_client, alice, eve_lab
):
    long_suite = f.suite("long", 6, labels=["board:eve"], owner=alice)
    short_suite = f.suite("short", 6, labels=["board:eve"], owner=alice)
    Job.objects.filter(suite=long_suite).update(estimated_duration=timedelta(minutes=60))
    Job.objects.filter(suite=short_suite).update(estimated_duration=timedelta(minutes=5))
    before = db_digest()

    response = alice_client.post(URL, {"settings": {"ordering": "size"}}, format="json")

    assert response.status_code == 200, response.content
    body = response.json()
    assert sorted(row["name"] for row in body["would_start"]) == [f"short-t{i}" for i in range(6)]
    assert body["counts"]["would_lose"] == 6
    assert {row["host"] for row in body["leases"]} == {f"eve{i}" for i in range(6)}
    assert db_digest() == before
    assert SchedulerSettings.load().ordering == "fifo"


def test_with_preemption_a_preview_names_the_running_jobs_it_would_stop(
    alice_client, alice, eve_lab
):
    soak = services.suite_submit(
        owner=alice,
        name="soak",
        priority=20,
        jobs=[
            services.JobSpec(name=f"soak-{i}", labels=["board:eve"], preemptible=True)
            for i in range(6)
        ],
    )
    services.scheduler_tick()  # soak holds every board:eve host
    before = db_digest()
    body = {"suite": suite_body(2, ["board:eve"], priority=70), "settings": {"preemption": True}}

    answer = alice_client.post(URL, body, format="json").json()

    assert answer["counts"]["would_preempt"] == 2
    assert {row["for_new_job"] for row in answer["would_preempt"]} == {0, 1}
    assert all(row["name"].startswith("soak-") for row in answer["would_preempt"])
    assert "2 running jobs would be preempted to make room" in answer["summary"]
    assert db_digest() == before
    assert Lease.objects.filter(job__suite=soak, released_at__isnull=True).count() == 6
    # Without preemption the same preview stops nobody.
    body["settings"] = {"preemption": False}
    assert alice_client.post(URL, body, format="json").json()["would_preempt"] == []


def test_previewing_the_current_settings_changes_nothing(alice_client, alice, eve_lab):
    f.suite("s", 8, labels=["board:eve"], owner=alice)
    body = alice_client.post(URL, {"settings": {"ordering": "fifo"}}, format="json").json()
    assert body["summary"] == (
        "The next tick would lease the same hosts with or without this change."
    )


def test_min_duts_above_the_suites_max_duts_is_refused(alice_client, alice, eve_lab):
    suite = f.suite("s", 3, labels=["board:eve"], owner=alice, max_duts=2)
    response = alice_client.post(
        URL, {"suite_changes": [{"suite": suite.pk, "min_duts": 3}]}, format="json"
    )
    assert response.status_code == 400
    assert "min_duts cannot exceed max_duts" in response.content.decode()


def test_only_staff_may_preview_pausing_or_locking(alice_client, eve_lab):
    for payload in ({"pause_workers": ["w1"]}, {"lock_hosts": ["eve0"]}):
        assert alice_client.post(URL, payload, format="json").status_code == 403


def test_only_the_owner_or_staff_may_preview_a_suites_new_priority(
    bob_client, staff_client, alice, eve_lab
):
    suite = f.suite("s", 2, labels=["board:eve"], owner=alice)
    payload = {"suite_changes": [{"suite": suite.pk, "priority": 90}]}
    assert bob_client.post(URL, payload, format="json").status_code == 403
    assert staff_client.post(URL, payload, format="json").status_code == 200


def test_anonymous_callers_are_refused(anon_client, eve_lab):
    response = anon_client.post(URL, {"suite": suite_body(1, ["board:eve"])}, format="json")
    assert response.status_code in (401, 403)


def test_the_preview_reads_the_lab_in_a_bounded_number_of_queries(
    staff_client, alice, eve_lab, django_assert_max_num_queries
):
    for i in range(5):
        f.suite(f"s{i}", 8, labels=["board:eve"], owner=alice, priority=20 + i)
    payload = {
        "suite": suite_body(50, ["board:eve"]),
        "pause_workers": ["w1", "w2"],
        "lock_hosts": ["eve0", "zork"],
        "suite_changes": [{"suite": Suite.objects.first().pk, "priority": 80}],
    }
    # Authentication and the throttle (7), the names of the change (5), the scheduler settings
    # (1), the snapshot (7, once, the boards' provisioning medians among them, kept 5 minutes):
    # none of them grows with the lab, the queue or the proposed suite.
    with django_assert_max_num_queries(21):
        response = staff_client.post(URL, payload, format="json")
    assert response.status_code == 200


def test_a_lock_preview_lists_a_locked_host_once(staff_client, sam, alice, eve_lab):
    host_services.host_lock(host=Host.objects.get(hostname="eve0"), by=sam, reason="flaky")
    f.suite("s", 1, labels=["board:eve"], owner=alice)
    body = staff_client.post(URL, {"lock_hosts": ["eve0"]}, format="json").json()
    assert body["summary"] == (
        "The next tick would lease the same hosts with or without this change."
    )
