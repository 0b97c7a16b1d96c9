"""A tour of every page of the demo lab, screenshotted (see `screenshot` in conftest.py)."""

from __future__ import annotations

import random
from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.utils import timezone
from playwright.sync_api import expect
from rest_framework.authtoken.models import Token

from hosts.models import Host, Worker
from jobs import demo, services
from jobs.choices import JobStatus
from jobs.models import Job, Lease, Suite
from tests.ui.browser.conftest import screenshot, sign_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

HISTORY_MINUTES = 40


def demo_lab_with_history(minutes: int = HISTORY_MINUTES) -> None:
    """The `make run` demo lab, as if it had been running for a while: real ticks in the past."""
    demo.seed()
    now = timezone.now()
    start = now - timedelta(minutes=minutes)
    # Submitted before the history starts, as the seeded suites would have been.
    Suite.objects.update(created_at=start - timedelta(minutes=2))
    Job.objects.update(
        created_at=start - timedelta(minutes=2), submitted_at=start - timedelta(minutes=2)
    )
    alice = get_user_model().objects.get(username="alice")
    rng = random.Random(4)
    for step in range(minutes):
        at = start + timedelta(minutes=step)
        Worker.objects.update(last_seen=at)
        services.scheduler_tick(now=at, trigger="history")
        started = set()  # a multi-host job's leases share one job: start it, finish it once
        for lease in Lease.objects.filter(released_at=None, job__isnull=False).select_related(
            "job"
        ):
            job = lease.job
            if job.pk in started:
                continue
            started.add(job.pk)
            if job.status == JobStatus.LEASED:
                services.job_start(job=job, by="runner-sim", at=at + timedelta(seconds=5))
                continue
            services.lease_heartbeat(lease=lease, at=at + timedelta(seconds=20))
            if rng.random() < 0.3:
                result = JobStatus.PASSED if rng.random() < 0.85 else JobStatus.FAILED
                services.job_complete(
                    job=job, result=result, by="runner-sim", at=at + timedelta(seconds=30)
                )
        if step % 8 == 3:
            board = rng.choice(demo.BOARDS)
            services.suite_submit(
                owner=alice,
                name=f"continuous {timezone.localtime(at):%H:%M}",
                priority=rng.choice([20, 40, 50, 70]),
                min_duts=rng.choice([0, 2]),
                jobs=[
                    services.JobSpec(
                        name=f"{rng.choice(demo.TESTS)}.{i}", labels=[f"board:{board}"]
                    )
                    for i in range(rng.randint(4, 9))
                ],
                now=at + timedelta(seconds=40),
            )
    Worker.objects.update(last_seen=now)
    admin = get_user_model().objects.get(username="admin")
    # A capped, high-priority suite arrives just now: some of it runs, the rest waits.
    services.suite_submit(
        owner=admin,
        name="pfq R121",
        build="R121-demo",
        priority=60,
        min_duts=2,
        max_duts=4,
        jobs=[
            services.JobSpec(name=f"{demo.TESTS[i % len(demo.TESTS)]}.{i}", labels=["pool:cq"])
            for i in range(12)
        ],
        now=now - timedelta(seconds=50),
    )
    free = Host.objects.schedulable(now).order_by("hostname").last()
    services.lease_reserve(
        host=free, holder=admin, duration=timedelta(hours=4), reason="flashing a new EC firmware"
    )
    services.scheduler_tick(now=now, trigger="history")


def test_a_tour_of_every_page_with_screenshots(page, settings):
    settings.UI_REFRESH_SECONDS = 30  # no live swaps while the tour takes its pictures
    demo_lab_with_history()
    leased = Lease.objects.filter(released_at=None, job__isnull=False).select_related("host")
    host = leased.order_by("host__hostname").first().host
    worker = Worker.objects.order_by("name").first()
    suite = Suite.objects.filter(name="bvt-inline R120").get()

    page.goto("/accounts/login/")
    screenshot(page, "01-login")
    sign_in(page, "admin", "admin")

    tour = [
        ("/", "Lab dashboard", "02-dashboard"),
        ("/hosts/", "Hosts", "03-hosts"),
        ("/hosts/?label=pool:cq&status=ready", "Hosts", "04-hosts-filtered"),
        (f"/hosts/{host.hostname}/", host.hostname, "05-host-detail"),
        ("/workers/", "Workers", "06-workers"),
        (f"/workers/{worker.name}/", worker.name, "07-worker-detail"),
        ("/queue/", "Queue", "08-queue"),
        ("/suites/", "Suites", "09-suites"),
        (f"/suites/{suite.pk}/", suite.name, "10-suite-detail"),
        ("/suites/new/", "Submit a suite", "11-submit-suite"),
        ("/leases/", "Leases", "12-leases"),
        ("/accounts/profile/", "admin", "13-profile"),
    ]
    for path, heading, name in tour:
        page.goto(path)
        expect(page.get_by_role("heading", name=heading, exact=True)).to_be_visible()
        screenshot(page, name)
        screenshot(page, f"{name}-full", full_page=True)

    # The dashboard draws its four charts from the recorded ticks (capacity has three lines).
    page.goto("/")
    expect(page.locator("svg.chart-svg path.line")).to_have_count(7)
    # The suite form's label suggestions, as a tester sees them.
    page.goto("/suites/new/")
    page.locator(".job-row").first.get_by_label("Labels the host needs").fill("board:eve po")
    expect(page.locator(".suggestions").first).to_contain_text("hosts carry board:eve")
    expect(page.locator(".suggestions").first).to_contain_text("pool:cq")
    screenshot(page, "14-label-suggestions")
    # The profile makes an API token on request.
    page.goto("/accounts/profile/")
    page.get_by_role("button", name="Create my token").click()
    token = page.get_by_label("Your API token")
    expect(token).to_be_visible()
    expect(token).to_have_value(Token.objects.get(user__username="admin").key)
    screenshot(page, "15-profile-token")


@pytest.mark.parametrize("path", ["/", "/hosts/", "/queue/", "/suites/new/", "/leases/"])
def test_pages_fit_a_narrow_window(page, settings, sam, lab, path):
    """At phone width nothing spills sideways: wide tables scroll inside their own box."""
    settings.UI_REFRESH_SECONDS = 30
    page.set_viewport_size({"width": 390, "height": 844})
    sign_in(page, "sam", "sam-pass")
    page.goto(path)
    expect(page.get_by_role("heading", level=1)).to_be_visible()
    overflow = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
    assert overflow <= 0, f"{path} is {overflow}px wider than a 390px window"
    name = path.strip("/").replace("/", "-") or "dashboard"
    screenshot(page, f"narrow-{name}", full_page=True)
