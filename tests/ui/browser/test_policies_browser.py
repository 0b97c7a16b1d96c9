"""What the scheduling policies show in a browser: aging on the queue, capacity on a worker."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from hosts import services as host_services
from jobs import services
from jobs.models import Job
from tests import factories as f
from tests.ui.browser.conftest import screenshot, sign_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_the_queue_shows_what_aging_added_and_a_worker_its_capacity(page, sam, debug):  # noqa: ANN001
    w2 = f.worker("w2")
    for i in range(3):
        f.host(f"dut{i}", ["board:x"], worker=w2)
    host_services.worker_update(worker=w2, by="sam", max_jobs=2)
    services.update_scheduler_settings("sam", aging_minutes=2, aging_cap=50)
    f.suite("cq", 3, priority=70)
    weekly = f.job("weekly", priority=10)
    Job.objects.filter(pk=weekly.pk).update(submitted_at=timezone.now() - timedelta(hours=3))
    f.tick(timezone.now(), w2)
    sign_in(page, "sam", "sam-pass")

    page.goto("/queue/")
    row = page.locator(f"#queued-{weekly.pk}")
    expect(row).to_contain_text("+50 after 180 min waiting: 60")
    expect(page.locator("#queue-table")).to_contain_text("worker w2 at capacity (2 of 2)")
    screenshot(page, f"queue-aging-{'debug' if debug else 'prod'}", full_page=True)

    page.goto("/workers/w2/")
    expect(page.locator("main")).to_contain_text("2 of 2 jobs")
    screenshot(page, f"worker-capacity-{'debug' if debug else 'prod'}", full_page=True)
