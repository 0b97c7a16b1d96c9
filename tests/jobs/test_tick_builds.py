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


def test_same_build_first_leases_the_later_suite_whose_build_the_free_host_carries(sam) -> None:
    """With the setting on, the queue page lists, and the tick leases, suite b (on the free
    host's build) before the earlier suite a of the same priority; off, a goes first."""
    from jobs import services
    from jobs.selectors import queue_order_ids

    f.host("dut1", ["board:x"], build="R1")
    a = f.suite("a", 1, labels=["board:x"], build="R2")
    b = f.suite("b", 1, labels=["board:x"], build="R1")
    first_a, first_b = a.jobs.get().pk, b.jobs.get().pk
    assert queue_order_ids().ids == [first_a, first_b]

    services.update_scheduler_settings(sam, same_build_first_minutes=30)
    assert queue_order_ids().ids == [first_b, first_a]
    f.tick(timezone.now())
    assert leased() == {"b-t0": "dut1"}
    assert Lease.objects.get(job_id=first_b).provision_to == ""  # nothing to reimage
