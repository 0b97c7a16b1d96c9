"""The demo lab that `make run` seeds moves: jobs get leased, run and finish."""

from __future__ import annotations

import random
from collections import Counter
from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.utils import timezone
from django_q.models import Schedule

from hosts.choices import EventKind, HostStatus, ProvisionResult
from hosts.models import Host, HostEvent, Provision
from jobs import demo, selectors, services, suite_templates
from jobs.choices import JobKind, JobStatus
from jobs.management.commands.rundemo import banner, lab_status
from jobs.models import Job, Lease, Suite, SuiteTemplate

pytestmark = pytest.mark.django_db


def test_the_demo_lab_leases_runs_and_finishes_jobs(monkeypatch):
    demo.seed()
    services.scheduler_tick()
    assert Lease.objects.filter(released_at__isnull=True).count() >= 10
    rng = random.Random(1)
    monkeypatch.setattr(rng, "uniform", lambda a, b: -1)  # every running job is "done"
    demo.simulate_step(rng=rng)  # start
    demo.simulate_step(rng=rng)  # finish
    finished = Job.objects.filter(status__in=[JobStatus.PASSED, JobStatus.FAILED]).count()
    assert finished >= 10
    services.scheduler_tick()
    assert Lease.objects.filter(released_at__isnull=True, job__status="leased").exists()


def test_enter_in_the_demo_terminal_tells_what_the_lab_is_doing(monkeypatch):
    demo.seed()
    services.scheduler_tick()
    rng = random.Random(1)
    monkeypatch.setattr(rng, "uniform", lambda a, b: -1)  # every running job is "done"
    demo.simulate_step(rng=rng)
    demo.simulate_step(rng=rng)
    passed = Job.objects.filter(status=JobStatus.PASSED).count()
    line = lab_status()
    assert f"{Host.objects.count()} hosts" in line and f"{passed} passed" in line


def test_the_demo_lab_has_scheduled_templates_that_submit_suites():
    demo.seed()
    templates = {t.name: t for t in SuiteTemplate.objects.all()}
    assert {name: t.cron for name, t in templates.items()} == {
        "graphics nightly": "0 2 * * *",
        "pfq smoke every 30 min": "*/30 * * * *",
    }
    # Each has its django-q2 schedule, and a run submits a suite like the one it came from.
    assert Schedule.objects.filter(func=suite_templates.RUN_FUNC).count() == 2
    admin = get_user_model().objects.get(username="admin")
    jobs_of_pfq = Suite.objects.get(name="pfq smoke").jobs.count()
    suite = suite_templates.template_dispatch(
        template=templates["pfq smoke every 30 min"], by=admin
    )
    assert suite.template_id == templates["pfq smoke every 30 min"].pk
    assert suite.jobs.count() == jobs_of_pfq


# Wait reasons that say no host could ever take the job as it stands.
IMPOSSIBLE = {"no_matching_host", "pinned_host_missing", "pinned_host_lacks_labels"}


def impossible_queued() -> int:
    """Queued jobs the last tick found no host could ever run, as the UI shows them."""
    queued = list(Job.objects.filter(status=JobStatus.QUEUED))
    reasons = selectors.wait_reasons_for(queued)
    return sum(1 for reason in reasons.values() if reason["code"] in IMPOSSIBLE)


def test_the_demo_lab_keeps_leasing_for_hours():
    # Half the demo's hosts keep the test quick; every board and label combination stays.
    demo.seed(hosts_per_worker=4)
    rng = random.Random(11)
    start = timezone.now()
    # Every two simulated minutes the runners start and finish jobs, the feeder tops up, and
    # a tick leases; in `make run` each of those happens on its own event, in real time.
    windows = 24  # of ten minutes: four hours of demo
    leased = [0] * windows
    impossible = []
    for minute in range(0, windows * 10, 2):
        now = start + timedelta(minutes=minute)
        demo.simulate_step(rng=rng, now=now)
        leased[minute // 10] += len(services.scheduler_tick(now=now).leases)
        if minute % 10 == 8:
            impossible.append(impossible_queued())
    idle = [f"{w * 10}-{w * 10 + 10} min" for w, count in enumerate(leased) if not count]
    assert not idle, f"the lab leased nothing in {idle}; leases per 10 minutes: {leased}"
    # The one showcase of a job no host can run ("needs a board nobody has"), never more.
    assert impossible == [1] * windows
    # Suites of builds the hosts do not carry get their hosts provisioned first, now and then
    # failing (docs/api.md#provisioning): the hosts' builds follow the work.
    provisions = Counter(Provision.objects.values_list("result", flat=True))
    assert provisions[ProvisionResult.OK] >= 20, provisions
    assert HostEvent.objects.filter(kind=EventKind.PROVISIONED).count() == provisions.total()
    # The two-host jobs (a DUT and a peer in one chamber) run too, each on both its hosts.
    two_host = Job.objects.exclude(roles=[]).filter(status__in=[JobStatus.PASSED, JobStatus.FAILED])
    assert two_host.count() >= 3
    for job in two_host[:3]:
        chambers = {
            label
            for lease in job.leases.filter(attempt=job.attempts).select_related("host")
            for label in lease.host.label_names
            if label.startswith("chamber:")
        }
        assert job.leases.filter(attempt=job.attempts).count() == 2 and len(chambers) == 1


def test_the_seeded_broken_host_comes_back_by_the_health_loop_alone(monkeypatch):
    demo.seed(hosts_per_worker=4)
    broken = Host.objects.get(status=HostStatus.NEEDS_REPAIR)
    rng = random.Random(3)
    monkeypatch.setattr(rng, "uniform", lambda a, b: -1)  # every run ends at the next step
    monkeypatch.setattr(rng, "random", lambda: 0.5)  # and passes, on a healthy DUT
    start = timezone.now()
    for step in range(4):
        now = start + timedelta(seconds=20 * step)
        services.scheduler_tick(now=now)
        demo.simulate_step(rng=rng, now=now)
    broken.refresh_from_db()
    assert broken.status == HostStatus.READY
    moves = list(
        broken.events.filter(kind=EventKind.STATUS)
        .order_by("created_at", "id")
        .values_list("new_status", "actor", "message")
    )
    # Staff flagged it; then the scheduler leased a repair job and the runner's repair passed.
    assert [status for status, _actor, _message in moves] == [
        HostStatus.NEEDS_REPAIR,
        HostStatus.REPAIRING,
        HostStatus.READY,
    ]
    assert moves[-1][1:] == ("runner-sim", "repair passed")
    assert Job.objects.filter(kind=JobKind.REPAIR, host=broken, status=JobStatus.PASSED).exists()


def test_the_demo_health_policy_verifies_the_busy_pool_and_hopeless_repairs_give_up(monkeypatch):
    demo.seed(hosts_per_worker=4)
    rng = random.Random(5)
    monkeypatch.setattr(rng, "uniform", lambda a, b: -1)
    monkeypatch.setattr(rng, "random", lambda: 0.99)  # every run fails (and no DUT breaks)
    start = timezone.now()
    for step in range(8):  # repairs are retried at once: the tests run with no backoff
        now = start + timedelta(seconds=20 * step)
        services.scheduler_tick(now=now)
        demo.simulate_step(rng=rng, now=now)
    # The policy verified the never-verified pool:cq hosts, and only those.
    verified = Host.objects.filter(pinned_jobs__kind=JobKind.VERIFY).distinct()
    assert verified.exists()
    assert all("pool:cq" in host.label_names for host in verified)
    broken = Host.objects.get(events__message="battery swollen")
    assert broken.status == HostStatus.REPAIR_FAILED
    assert broken.repair_attempts == 3
    # The feeder no longer counts on it: it will not come back by itself.
    assert broken not in demo.working_hosts()


def test_the_demo_banner_names_the_url_the_logins_and_where_the_logs_are(tmp_path):
    text = banner("0.0.0.0:8000", tmp_path / "demo-logs")
    assert "schedsite is running at http://127.0.0.1:8000/" in text  # a URL a browser can open
    assert "admin / admin (lab staff)" in text
    assert "alice / alice (tester)" in text
    assert f"{tmp_path / 'demo-logs'}/" in text
    assert "Enter shows this again" in text
