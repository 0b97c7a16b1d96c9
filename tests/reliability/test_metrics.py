"""/metrics: who may scrape it, and that every series reports what the lab really holds."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.contrib.auth.models import Group
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families
from rest_framework.authtoken.models import Token

from hosts import services as host_services
from hosts.models import Provision
from jobs import services
from jobs.choices import JobKind
from jobs.models import Job, Lease, SchedulerTick
from schedsite.roles import STAFF_GROUP
from tests import factories as f

pytestmark = [pytest.mark.postgres, pytest.mark.django_db]

SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$")
LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')
Series = dict[tuple[str, frozenset[tuple[str, str]]], float]


def parse(text: str) -> Series:
    """Parse the text exposition format strictly enough to catch a malformed scrape."""
    series: Series = {}
    declared: dict[str, str] = {}
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split(" ", 3)
            assert name not in declared, f"{name} declared twice"
            declared[name] = kind
            continue
        if line.startswith("#"):
            continue
        match = SAMPLE.match(line)
        assert match, f"malformed sample line: {line!r}"
        name, labels, value = match.groups()
        family = re.sub(r"_(bucket|sum|count)$", "", name)
        assert name in declared or declared.get(family) == "histogram", f"{name} has no TYPE"
        key = (name, frozenset(LABEL.findall(labels or "")))
        assert key not in series, f"duplicate sample {line!r}"
        series[key] = float(value)
    return series


def value(series: Series, name: str, **labels: str) -> float:
    return series[(name, frozenset(labels.items()))]


@pytest.fixture
def lab(sam):  # noqa: ANN001, ANN201
    """A small lab with one of everything the metrics count, built through the services."""
    now = timezone.now()
    w1, w2 = f.worker("w1"), f.worker("w2", paused=True)
    w3 = f.worker("w3")
    f.worker("w4", online=False)  # never heard from
    type(w3).objects.filter(pk=w3.pk).update(last_seen=now - timedelta(hours=1))  # offline
    hosts = {name: f.host(name, ["board:x"], worker=w1) for name in "abcdh"}
    f.host("e", ["board:x"], worker=w2)  # paused worker: not schedulable
    f.host("f", ["board:x"], worker=w3)  # offline worker: not schedulable
    hosts["g"] = f.host("g", ["board:x"])  # no worker

    # History: a runner died (its lease expired), a reservation ended, a job timed out.
    t0, t1 = now - timedelta(hours=2), now - timedelta(minutes=10)
    f.job("old", host=hosts["a"])
    services.lease_reserve(
        host=hosts["d"], holder=sam, duration=timedelta(hours=1), reason="probe", at=t0
    )
    services.scheduler_tick(now=t0)  # old → a
    slow = services.job_submit(
        owner="alice",
        spec=services.JobSpec(name="slow", labels=["board:x"], timeout=timedelta(seconds=30)),
        now=t1,
    )
    # Locked while its job runs: once the job's runner vanishes, a waits for its verify.
    host_services.host_lock(host=hosts["a"], by=sam, reason="flaky network")
    services.scheduler_tick(now=t1)  # expires both; slow → b (a is now needs_verify)
    services.job_start(job=slow, by="runner-1", at=t1)
    services.scheduler_tick(now=now - timedelta(minutes=5))  # slow times out, b is free again

    # Now: suite A holds two hosts, one job heartbeated 20 s ago, the other never (60 s ago).
    suite = f.suite("A", 2, priority=70)
    services.scheduler_tick(now=now - timedelta(seconds=60))  # A-t0 → b, A-t1 → c
    first = Lease.objects.get(job__name="A-t0", released_at__isnull=True)
    services.lease_heartbeat(lease=first, at=now - timedelta(seconds=20))
    services.job_start(job=first.job, by="runner-1", at=now - timedelta(seconds=20))
    # Waiting: three p40 jobs (the oldest submitted 300 s ago) and one p70 job nobody can run.
    services.suite_submit(
        owner="alice",
        name="B",
        jobs=[services.JobSpec(name=f"B-{i}", labels=["board:x"]) for i in range(2)],
        now=now - timedelta(seconds=300),
    )
    f.job("rare", ["board:none"], priority=40)
    f.job("urgent", ["board:none"], priority=70)
    host_services.host_lock(host=hosts["d"], by=sam, reason="debugging")
    services.lease_reserve(host=hosts["g"], holder=sam, duration=timedelta(hours=1), reason="x")

    # The tick history, with known timings (the ticks above are replaced).
    SchedulerTick.objects.all().delete()
    for i, (ms, made) in enumerate([(3, 0), (20, 1), (700, 3), (12_000, 0)]):
        SchedulerTick.objects.create(
            started_at=now - timedelta(seconds=42 + 10 * (3 - i)), duration_ms=ms, leases_made=made
        )
    return suite


def scrape(client, **headers: str) -> Series:  # noqa: ANN001
    response = client.get("/metrics", headers=headers)
    assert response.status_code == 200, response.content
    assert response["Content-Type"] == "text/plain; version=0.0.4; charset=utf-8"
    return parse(response.content.decode())


def test_every_series_reports_the_lab_as_it_is(client, sam, lab) -> None:  # noqa: ANN001
    client.force_login(sam)
    s = scrape(client)

    # The queue.
    assert value(s, "schedsite_jobs_queued", priority="40") == 3
    assert value(s, "schedsite_jobs_queued", priority="70") == 1
    assert ("schedsite_jobs_queued", frozenset({("priority", "20")})) not in s
    assert 300 <= value(s, "schedsite_queue_oldest_wait_seconds") < 330
    jobs = {
        status: value(s, "schedsite_jobs", status=status)
        for status in ["queued", "leased", "running", "passed", "failed", "aborted", "error"]
    }
    assert jobs == {"queued": 4, "leased": 1, "running": 1, "passed": 0, "failed": 0,
                    "aborted": 1, "error": 1}  # fmt: skip

    # Hosts: a needs a verify (its runner vanished) and is locked; b, c leased; d locked; g
    # reserved; e, f belong to a paused and an offline worker; h alone could take a lease now.
    assert value(s, "schedsite_hosts", status="ready") == 7
    assert value(s, "schedsite_hosts", status="needs_verify") == 1
    assert value(s, "schedsite_hosts", status="needs_repair") == 0
    assert value(s, "schedsite_hosts", status="repairing") == 0
    assert value(s, "schedsite_hosts", status="repair_failed") == 0
    assert value(s, "schedsite_hosts", status="verifying") == 0
    assert value(s, "schedsite_hosts", status="retired") == 0
    assert value(s, "schedsite_hosts_locked") == 2
    assert value(s, "schedsite_hosts_leased") == 3
    assert value(s, "schedsite_hosts_schedulable") == 1

    # Workers and their runners' heartbeats.
    assert value(s, "schedsite_workers") == 4
    assert value(s, "schedsite_workers_online") == 2  # w1 and the paused w2
    assert value(s, "schedsite_workers_paused") == 1
    assert value(s, "schedsite_worker_paused", worker="w2") == 1
    assert value(s, "schedsite_worker_paused", worker="w1") == 0
    assert value(s, "schedsite_worker_last_seen_age_seconds", worker="w1") < 60
    assert 3600 <= value(s, "schedsite_worker_last_seen_age_seconds", worker="w3") < 3700
    assert value(s, "schedsite_worker_last_seen_age_seconds", worker="w4") == float("inf")

    # Leases now, and what happened to leases over time.
    assert value(s, "schedsite_leases_active", kind="job") == 2
    assert value(s, "schedsite_leases_active", kind="reservation") == 1
    assert 60 <= value(s, "schedsite_lease_oldest_heartbeat_age_seconds") < 90  # A-t1
    assert value(s, "schedsite_leases_made_total") == 4  # old, slow, A-t0, A-t1
    assert value(s, "schedsite_leases_expired_total", kind="job") == 1
    assert value(s, "schedsite_leases_expired_total", kind="reservation") == 1
    assert value(s, "schedsite_jobs_timed_out_total") == 1
    # "old" lost its runner and had no tries left: one host failure, and no job expired.
    assert value(s, "schedsite_job_host_failures_total", cause="runner_vanished") == 1
    assert value(s, "schedsite_job_host_failures_total", cause="host_broken") == 0
    assert value(s, "schedsite_job_retries_total", cause="runner_vanished") == 0
    assert value(s, "schedsite_jobs_expired_total") == 0

    # Ticks: 3 ms, 20 ms, 700 ms and 12 s, making 0, 1, 3 and 0 leases; the last 42 s ago.
    buckets = {le: value(s, "schedsite_tick_duration_seconds_bucket", le=le)
               for le in ["0.005", "0.025", "0.5", "1", "10", "+Inf"]}  # fmt: skip
    assert buckets == {"0.005": 1, "0.025": 2, "0.5": 2, "1": 3, "10": 3, "+Inf": 4}
    assert value(s, "schedsite_tick_duration_seconds_count") == 4
    assert value(s, "schedsite_tick_duration_seconds_sum") == pytest.approx(12.723)
    assert value(s, "schedsite_tick_leases_bucket", le="0") == 2
    assert value(s, "schedsite_tick_leases_bucket", le="1") == 3
    assert value(s, "schedsite_tick_leases_bucket", le="5") == 4
    assert value(s, "schedsite_tick_leases_sum") == 4
    assert 42 <= value(s, "schedsite_last_tick_age_seconds") < 60
    assert value(s, "schedsite_last_tick_duration_seconds") == 12
    assert value(s, "schedsite_metrics_scrape_duration_seconds") > 0


# What scrapers and dashboards select on: each family's type and label names. A counter's
# family is named without `_total`; its samples keep it.
FAMILIES = {
    "schedsite_jobs": ("gauge", {"status"}),
    "schedsite_jobs_queued": ("gauge", {"priority"}),
    "schedsite_queue_oldest_wait_seconds": ("gauge", set()),
    "schedsite_hosts": ("gauge", {"status"}),
    "schedsite_hosts_locked": ("gauge", set()),
    "schedsite_hosts_leased": ("gauge", set()),
    "schedsite_hosts_schedulable": ("gauge", set()),
    "schedsite_workers": ("gauge", set()),
    "schedsite_workers_online": ("gauge", set()),
    "schedsite_workers_paused": ("gauge", set()),
    "schedsite_worker_last_seen_age_seconds": ("gauge", {"worker"}),
    "schedsite_worker_paused": ("gauge", {"worker"}),
    "schedsite_leases_active": ("gauge", {"kind"}),
    "schedsite_lease_oldest_heartbeat_age_seconds": ("gauge", set()),
    "schedsite_leases_made": ("counter", set()),
    "schedsite_leases_expired": ("counter", {"kind"}),
    "schedsite_jobs_timed_out": ("counter", set()),
    "schedsite_jobs_expired": ("counter", set()),
    "schedsite_maintenance_jobs": ("counter", {"kind", "result"}),
    "schedsite_job_host_failures": ("counter", {"cause"}),
    "schedsite_job_retries": ("counter", {"cause"}),
    "schedsite_tick_duration_seconds": ("histogram", {"le"}),
    "schedsite_tick_leases": ("histogram", {"le"}),
    "schedsite_last_tick_age_seconds": ("gauge", set()),
    "schedsite_last_tick_duration_seconds": ("gauge", set()),
    "schedsite_metrics_scrape_duration_seconds": ("gauge", set()),
    "schedsite_provisions": ("counter", {"result"}),
    "schedsite_provision_seconds": ("histogram", {"le"}),
}


def test_prometheus_reads_every_family_with_its_type_and_labels(client, sam, lab) -> None:  # noqa: ANN001
    client.force_login(sam)
    response = client.get("/metrics")
    families = {f.name: f for f in text_string_to_metric_families(response.content.decode())}

    assert {name: f.type for name, f in families.items()} == {
        name: kind for name, (kind, _) in FAMILIES.items()
    }
    for name, (_, labels) in FAMILIES.items():
        samples = families[name].samples
        assert samples, f"{name} has no samples in a lab that has one of everything"
        assert {key for s in samples for key in s.labels} == labels, name
    assert {s.name for s in families["schedsite_leases_made"].samples} == {
        "schedsite_leases_made_total"
    }
    # The histograms keep their buckets: dashboards select on these `le` values.
    bounds = {
        name: [s.labels["le"] for s in families[name].samples if s.name.endswith("_bucket")]
        for name in ["schedsite_tick_duration_seconds", "schedsite_tick_leases"]
    }
    assert bounds == {
        "schedsite_tick_duration_seconds": [
            "0.005", "0.01", "0.025", "0.05", "0.1", "0.25", "0.5", "1", "2.5", "5", "10", "+Inf"
        ],
        "schedsite_tick_leases": [
            "0", "1", "2", "5", "10", "20", "50", "100", "200", "500", "1000", "5000", "+Inf"
        ],
    }  # fmt: skip


def test_it_counts_maintenance_results_host_failures_and_expired_jobs(client, sam) -> None:  # noqa: ANN001
    h = f.host("h", ["board:x"], worker=f.worker("w1"))
    # A test whose runner reports the host broken: retried later, and the host is repaired.
    broken = f.job("t", max_retries=1)
    services.scheduler_tick()
    services.job_start(job=broken, by="runner-1")
    services.job_complete(job=broken, result="failed", by="runner-1", host_ok=False)
    services.scheduler_tick()
    repair = Job.objects.get(kind=JobKind.REPAIR)
    services.job_start(job=repair, by="runner-1")
    services.job_complete(job=repair, result="passed", by="runner-1")
    # Staff ask for a verify, and it fails.
    services.host_verify_now(host=h, by=sam)
    services.scheduler_tick()
    verify = Job.objects.get(kind=JobKind.VERIFY)
    services.job_start(job=verify, by="runner-1")
    services.job_complete(job=verify, result="failed", by="runner-1", message="no ping")
    # A job nobody can run waits past its expiry.
    services.job_submit(
        owner="alice",
        spec=services.JobSpec(name="late", labels=["board:none"], expires_after=60),
        allow_unmatched=True,
        now=timezone.now() - timedelta(minutes=5),
    )
    services.scheduler_tick()

    client.force_login(sam)
    s = scrape(client)
    ended = {
        (kind, result): value(s, "schedsite_maintenance_jobs_total", kind=kind, result=result)
        for kind in ["verify", "repair"]
        for result in ["passed", "failed", "error", "aborted"]
    }
    assert ended == {
        **dict.fromkeys(ended, 0),
        ("repair", "passed"): 1,
        ("verify", "failed"): 1,
    }
    assert value(s, "schedsite_job_host_failures_total", cause="host_broken") == 1
    assert value(s, "schedsite_job_host_failures_total", cause="runner_vanished") == 0
    assert value(s, "schedsite_job_retries_total", cause="host_broken") == 1
    assert value(s, "schedsite_job_retries_total", cause="runner_vanished") == 0
    assert value(s, "schedsite_jobs_expired_total") == 1
    assert value(s, "schedsite_jobs", status="expired") == 1


def test_it_counts_provisionings_by_result_and_how_long_they_took(client, sam) -> None:  # noqa: ANN001
    h = f.host("h", ["board:x"])
    for seconds, result in [(45, "ok"), (280, "ok"), (310, "ok"), (None, "ok"), (700, "failed")]:
        Provision.objects.create(
            host=h, hostname="h", board="board:x", build="R121", result=result, seconds=seconds
        )
    client.force_login(sam)
    s = scrape(client)

    assert value(s, "schedsite_provisions_total", result="ok") == 4
    assert value(s, "schedsite_provisions_total", result="failed") == 1
    # The histogram holds those whose runner said how long: 45, 280, 310 and 700 s.
    assert value(s, "schedsite_provision_seconds_bucket", le="60") == 1
    assert value(s, "schedsite_provision_seconds_bucket", le="300") == 2
    assert value(s, "schedsite_provision_seconds_bucket", le="600") == 3
    assert value(s, "schedsite_provision_seconds_bucket", le="+Inf") == 4
    assert value(s, "schedsite_provision_seconds_count") == 4
    assert value(s, "schedsite_provision_seconds_sum") == 45 + 280 + 310 + 700


def test_an_empty_lab_scrapes_cleanly(client, sam) -> None:  # noqa: ANN001
    client.force_login(sam)
    s = scrape(client)
    assert value(s, "schedsite_queue_oldest_wait_seconds") == 0
    assert value(s, "schedsite_last_tick_age_seconds") == float("inf")  # the scheduler never ran
    assert value(s, "schedsite_tick_duration_seconds_count") == 0
    assert value(s, "schedsite_lease_oldest_heartbeat_age_seconds") == 0


def test_a_scrape_costs_the_same_few_queries_whatever_the_size_of_the_lab(client, sam, lab) -> None:  # noqa: ANN001
    token = Token.objects.create(user=sam)
    headers = {"Authorization": f"Token {token.key}"}
    client.get("/metrics", headers=headers)  # warm caches (content types and the like)
    with CaptureQueriesContext(connection) as small:
        scrape(client, **headers)
    w = f.worker("w9")
    for i in range(30):
        f.host(f"big{i}", ["board:x", f"pool:{i % 3}"], worker=f.worker(f"wb{i}") if i % 3 else w)
    for i in range(10):
        f.suite(f"S{i}", 3, priority=10 * (i % 9))
    services.scheduler_tick()
    with CaptureQueriesContext(connection) as big:
        scrape(client, **headers)
    # Eight reads (the provisioning families' one aggregate the last) and the transaction's.
    assert len(big) == len(small) <= 11, [q["sql"][:80] for q in big.captured_queries]


def test_staff_and_the_metrics_token_may_scrape_nobody_else(
    client, sam, alice, django_user_model, settings
) -> None:  # noqa: ANN001
    anonymous = client.get("/metrics")
    assert anonymous.status_code == 401
    assert anonymous["WWW-Authenticate"].startswith("Bearer")

    client.force_login(alice)
    assert client.get("/metrics").status_code == 403  # a tester's session
    client.logout()
    alice_token = Token.objects.create(user=alice)
    assert (
        client.get("/metrics", headers={"Authorization": f"Token {alice_token.key}"}).status_code
        == 403
    )

    client.force_login(sam)
    assert client.get("/metrics").status_code == 200
    assert client.post("/metrics").status_code == 405
    client.logout()

    sam_token = Token.objects.create(user=sam)
    auth = {"Authorization": f"Token {sam_token.key}"}
    assert client.get("/metrics", headers=auth).status_code == 200
    sam_token.delete()  # revoked in the admin or on the profile page
    assert client.get("/metrics", headers=auth).status_code == 401

    # Lab staff by group, not by the is_staff flag, count as staff too.
    lee = django_user_model.objects.create_user("lee", password="lee-pass")
    lee.groups.add(Group.objects.get_or_create(name=STAFF_GROUP)[0])
    lee_token = Token.objects.create(user=lee)
    assert (
        client.get("/metrics", headers={"Authorization": f"Token {lee_token.key}"}).status_code
        == 200
    )
    # A deactivated account's token stops working at once.
    type(lee).objects.filter(pk=lee.pk).update(is_active=False)
    assert (
        client.get("/metrics", headers={"Authorization": f"Token {lee_token.key}"}).status_code
        == 401
    )
    assert client.get("/metrics", headers={"Authorization": "Token nope"}).status_code == 401
    assert (
        client.get("/metrics", headers={"Authorization": "Basic c2FtOnNhbS1wYXNz"}).status_code
        == 401
    )

    # The scraper's bearer token works only when one is configured, and only that one.
    settings.METRICS_TOKEN = ""
    assert client.get("/metrics", headers={"Authorization": "Bearer "}).status_code == 401
    settings.METRICS_TOKEN = "s3cret-scraper-token"
    bearer = {"Authorization": "Bearer s3cret-scraper-token"}
    assert client.get("/metrics", headers=bearer).status_code == 200
    assert client.get("/metrics", headers={"Authorization": "Bearer s3cret"}).status_code == 401


@pytest.mark.django_db(transaction=True)
def test_outside_a_transaction_a_scrape_reads_one_snapshot(client, sam) -> None:  # noqa: ANN001
    # The production path (no test transaction around the request): every series from one
    # REPEATABLE READ snapshot, so that they agree with each other under concurrent writes.
    f.host("h1", ["board:x"])
    token = Token.objects.create(user=sam)
    with CaptureQueriesContext(connection) as queries:
        s = scrape(client, Authorization=f"Token {token.key}")
    statements = [q["sql"] for q in queries.captured_queries]
    first_read = next(i for i, sql in enumerate(statements) if "jobs_job" in sql)
    assert "REPEATABLE READ READ ONLY" in statements[first_read - 1]
    assert value(s, "schedsite_hosts", status="ready") == 1
