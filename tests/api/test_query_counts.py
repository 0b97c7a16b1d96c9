"""List endpoints read a page in a fixed number of queries: 50 rows cost what 5 rows cost."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from hosts import services as host_services
from hosts.models import Host, HostEvent, Worker
from jobs import services
from jobs.models import Job, Lease, SchedulerTick
from notifications.models import Subscription
from tests import factories as f
from tests.api.conftest import active_lease

pytestmark = pytest.mark.django_db


def grow(prefix: str, n: int, *, owner: object, runner: object, sam: object) -> None:
    """Add n of everything: workers, hosts on `main`, suites, solo jobs, leases, ticks."""
    main, _ = Worker.objects.get_or_create(name="main", defaults={"last_seen": timezone.now()})
    host_services.worker_update(worker=main, by=sam, runner=runner)
    for i in range(n):
        f.worker(f"{prefix}w{i}")
        host = f.host(f"{prefix}h{i}.lab", ["board:x", f"pool:{prefix}{i}"], worker=main)
        if i % 3 == 0:
            host_services.host_lock(host=host, by=sam, reason="busy")
        f.suite(f"{prefix}s{i}", [["board:x"], ["board:x"]], owner=owner, build="R1")
        services.suite_submit(  # a fan-out suite: its hosts' counts come in one query too
            owner=owner, name=f"{prefix}fan{i}", fanout_labels=[f"pool:{prefix}{i}"]
        )
        f.job(f"{prefix}solo{i}", ["board:none"], owner=owner, host=host if i % 2 else None)
    services.scheduler_tick()
    for job in Job.objects.filter(status="leased")[: n // 2]:
        services.job_start(job=job, by=runner)
    first_host = Host.objects.order_by("id").first()
    HostEvent.objects.bulk_create(
        [HostEvent(host=first_host, kind="updated", actor="sam") for _ in range(n)]
    )
    now = timezone.now()
    SchedulerTick.objects.bulk_create([SchedulerTick(started_at=now) for _ in range(n)])


LISTS = [
    "/api/workers/",
    "/api/hosts/",
    "/api/hosts/?label=board:x&leased=false",
    "/api/suites/",
    "/api/jobs/",
    "/api/jobs/?status=queued",
    "/api/leases/",
    "/api/queue/",
    "/api/scheduler/",
    "/api/workers/main/leases/",
    "/api/hosts/ah0.lab/events/",
]


def page_of(url: str) -> str:
    return f"{url}{'&' if '?' in url else '?'}page_size=500"


@pytest.fixture(autouse=True)
def _throttle_counts_in_memory(settings) -> None:  # noqa: ANN001
    """Throttles count in the cache, a database table by default: its queries (and a runner's
    one-second window expiring between two calls) are not the page's."""
    settings.CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}


def count_queries(client, url: str) -> tuple[int, int]:  # noqa: ANN001
    """(queries, rows) for one full page of the list."""
    with CaptureQueriesContext(connection) as captured:
        response = client.get(page_of(url))
    assert response.status_code == 200, (url, response.content[:300])
    return len(captured.captured_queries), response.json()["count"]


def test_every_list_page_costs_the_same_queries_for_5_and_50_rows(
    staff_client, alice, runner_user, sam, settings
):
    settings.SUBMIT_RATE_PER_MINUTE = 1000  # alice submits 100 times in seconds here
    grow("a", 5, owner=alice, runner=runner_user, sam=sam)
    small = {url: count_queries(staff_client, url) for url in LISTS}
    grow("b", 45, owner=alice, runner=runner_user, sam=sam)
    big = {url: count_queries(staff_client, url) for url in LISTS}

    for url in LISTS:
        assert big[url][1] > small[url][1], f"{url}: the page did not grow"
    # An N+1 shows up as more queries for the bigger page; the dict names the endpoint.
    assert {url: q for url, (q, _rows) in big.items()} == {
        url: q for url, (q, _rows) in small.items()
    }
    # The queue: 10, maintenance jobs first, then the tick and its reasons for the page's classes.
    assert max(q for q, _rows in big.values()) <= 10, big


def waiting_verifies(prefix: str, n: int, *, sam: object) -> None:
    """n hosts held by a reservation, each with a verify job staff asked for, waiting."""
    worker, _ = Worker.objects.get_or_create(name="main", defaults={"last_seen": timezone.now()})
    for i in range(n):
        host = f.host(f"{prefix}v{i}.lab", ["board:x"], worker=worker)
        services.lease_reserve(host=host, holder=sam, duration=timedelta(hours=1), reason="x")
        services.host_verify_now(host=host, by=sam)


@pytest.mark.parametrize("url", ["/api/queue/", "/api/jobs/?kind=verify"])
def test_waiting_maintenance_jobs_cost_the_same_queries_for_3_and_15(staff_client, sam, url):
    waiting_verifies("a", 3, sam=sam)
    small = count_queries(staff_client, url)
    waiting_verifies("b", 12, sam=sam)
    big = count_queries(staff_client, url)

    assert (small[1], big[1]) == (3, 15)
    assert big[0] == small[0], "each waiting maintenance job costs queries of its own"
    reasons = staff_client.get(page_of(url)).json()["results"]
    assert all("busy" in row["wait_reason"]["message"] for row in reasons), reasons[:2]


# --- the runner protocol --------------------------------------------------------------------
# Counted as production runs them: no test transaction around the request, so BEGIN and
# COMMIT count too (Django logs them), and so do the tick request's statements after commit.


def leased_hosts(worker: Worker, n: int, *, prefix: str = "bulk") -> list[int]:
    """n hosts on the worker, each held by a leased job; the leases' ids."""
    now = timezone.now()
    hosts = Host.objects.bulk_create(
        [Host(hostname=f"{prefix}{i}.lab", worker=worker, created_at=now) for i in range(n)]
    )
    jobs = Job.objects.bulk_create(
        [Job(name=f"{prefix}-{i}", status="leased", created_at=now) for i in range(n)]
    )
    leases = Lease.objects.bulk_create(
        [
            Lease(host=host, job=job, acquired_at=now, expires_at=now + timedelta(minutes=5))
            for host, job in zip(hosts, jobs, strict=True)
        ]
    )
    return [lease.pk for lease in leases]


def post_counting(client, url: str, body: dict | None = None) -> tuple[int, dict]:  # noqa: ANN001
    """(queries, answer) of one POST that must succeed."""
    with CaptureQueriesContext(connection) as captured:
        response = client.post(url, body or {}, format="json")
    assert response.status_code == 200, (url, response.content[:300])
    return len(captured.captured_queries), response.json()


@pytest.mark.postgres  # PostgreSQL's query budget: SQLite's savepoints and locks differ
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("n", [1, 500])
def test_a_bulk_heartbeat_costs_at_most_6_queries_for_1_or_500_leases(runner_client, lab, n):
    leases = leased_hosts(lab.w1, n)
    other_workers = active_lease(lab.other).pk
    queries, body = post_counting(
        runner_client, "/api/workers/w1/heartbeat/", {"leases": [*leases, other_workers]}
    )
    assert queries <= 6
    assert body["gone"] == [other_workers]
    extended = Lease.objects.filter(pk__in=leases, heartbeat_at__isnull=False).count()
    assert extended == n


@pytest.mark.postgres  # PostgreSQL's query budget: SQLite's savepoints and locks differ
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("n", [1, 500])
def test_a_heartbeat_reporting_its_concurrency_stays_within_6_queries(runner_client, lab, n):
    body = {"leases": leased_hosts(lab.w1, n), "concurrency": 4}
    changed, _ = post_counting(runner_client, "/api/workers/w1/heartbeat/", body)
    unchanged, answer = post_counting(runner_client, "/api/workers/w1/heartbeat/", body)
    assert answer["gone"] == [] and Worker.objects.get(pk=lab.w1.pk).runner_concurrency == 4
    # The report rides on the UPDATE of last_seen: a change adds only its audit event; the
    # second call's token is remembered from the first (one query fewer).
    assert (changed, unchanged) == (5, 3)


@pytest.mark.postgres  # PostgreSQL's query budget: SQLite's savepoints and locks differ
@pytest.mark.django_db(transaction=True)
def test_each_runner_protocol_call_costs_a_fixed_handful_of_queries(runner_client, lab):
    running, leased = active_lease(lab.running), active_lease(lab.leased)
    beat, _ = post_counting(runner_client, f"/api/leases/{running.pk}/heartbeat/")
    start, _ = post_counting(
        runner_client, f"/api/jobs/{lab.leased.pk}/start/", {"lease": leased.pk}
    )
    passed, body = post_counting(
        runner_client,
        f"/api/jobs/{lab.leased.pk}/complete/",
        {"lease": leased.pk, "result": "passed"},
    )
    assert body["status"] == "passed" and body["lease"] is None
    # A failed test also reads the host's recent results (docs/health.md#bad-host-detection).
    failed, body = post_counting(
        runner_client,
        f"/api/jobs/{lab.running.pk}/complete/",
        {"lease": running.pk, "result": "failed"},
    )
    assert body["status"] == "failed"
    # Before: 13, 19, 23 (the lease read four times, the worker row updated inside the
    # transaction, savepoints of nested services, the answer read again). The lease's read also
    # says whether the owner has notification settings (alice has none: no suite-finished
    # check after commit) and, for a failed test, the host's last results (its streak).
    # The runner's token is read by the first call only: the web process remembers a runner's
    # token for RUNNER_TOKEN_CACHE_SECONDS (schedsite.api_authentication), one query fewer.
    assert {"heartbeat": beat, "start": start, "passed": passed, "failed": failed} == {
        "heartbeat": 4,
        "start": 6,
        "passed": 7,
        "failed": 7,
    }
    assert max(beat, start, passed, failed) <= 8  # the targets: ≤ 5 and ≤ 8


@pytest.mark.postgres  # PostgreSQL's query budget: SQLite's savepoints and locks differ
@pytest.mark.django_db(transaction=True)
def test_completing_a_job_of_an_owner_with_notification_settings_adds_two_queries(
    runner_client, lab
):
    # The job's end writes an outbox entry in its own transaction (whether it finished the
    # suite is asked from that entry, after commit), and after commit wakes the outbox's taker:
    # an INSERT into the task queue with the database broker these tests use (a Redis push,
    # no SQL, with REDIS_URL set).
    Subscription.objects.create(user=lab.suite.owner, webhook_url="https://hooks.example/x")
    running = active_lease(lab.running)
    with CaptureQueriesContext(connection) as captured:
        failed, body = post_counting(
            runner_client,
            f"/api/jobs/{lab.running.pk}/complete/",
            {"lease": running.pk, "result": "failed"},
        )
    assert body["status"] == "failed" and failed == 10
    inserts = [q["sql"] for q in captured.captured_queries if q["sql"].startswith("INSERT")]
    assert any('"jobs_outboxentry"' in sql for sql in inserts)
    assert any('"django_q_ormq"' in sql for sql in inserts)
