"""The tick reads the builds the planner matches hosts by (docs/scheduling.md#provisioning)."""

from __future__ import annotations

import pytest
from django.utils import timezone

from jobs.models import Job, Lease
from tests import factories as f

pytestmark = pytest.mark.django_db


def leased() -> dict[str, str]:
    return dict(
        Lease.objects.filter(released_at__isnull=True, job__isnull=False).values_list(
            "job__name", "host__hostname"
        )
    )


def test_a_standalone_job_is_leased_the_host_already_on_its_own_build() -> None:
    f.host("dut1", ["board:x"], build="R119")
    f.host("dut2", ["board:x", "bt"], build="R121")  # more labels: second by host choice
    job = f.job("solo")
    Job.objects.filter(pk=job.pk).update(build="R121")
    f.tick(timezone.now())
    assert leased() == {"solo": "dut2"}


def test_two_suites_exchange_no_hosts_they_need_not_reimage() -> None:
    # The worked example: a (R3, ranked first) would take dut1, the host with fewer labels,
    # and b (R1) then reimage dut2; the tick reimages one host, not two.
    f.host("dut1", ["board:x", "pool:p"], build="R1")
    f.host("dut2", ["board:x", "pool:p", "bt"], build="R2")
    f.suite("a", 1, labels=["board:x"], build="R3", priority=70)
    f.suite("b", 1, labels=["board:x", "pool:p"], build="R1", priority=40)
    f.tick(timezone.now())
    assert leased() == {"a-t0": "dut2", "b-t0": "dut1"}
