"""Provisioning in a job's size estimate, and in what the what-if preview says.

A job whose build no ready host of its board carries is expected to wait for a reimage first:
its size grows by its board's median provisioning time
(docs/scheduling.md#provisioning-in-the-size-estimate), so a size-ordered queue puts it behind
a job that starts at once.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from hosts.choices import ProvisionResult
from hosts.models import Host, Provision
from jobs import selectors, services
from jobs.models import Job, Lease, Suite
from jobs.scheduling import planner, provision_cost
from tests import factories as f

pytestmark = pytest.mark.django_db


def provisioned(board: str, *seconds: float, result: str = ProvisionResult.OK, days: float = 0):
    """Provisioning history: one row per time, as the runners reported it."""
    at = timezone.now() - timedelta(days=days)
    for s in seconds:
        Provision.objects.create(
            hostname="old", board=board, build="R1", result=result, seconds=s, created_at=at
        )


def sized_suite(name: str, build: str, minutes: float, *, later: int = 0) -> Suite:
    """A one-job suite on board:x with this build and estimate, submitted `later` minutes
    after the first."""
    suite = f.suite(name, 1, build=build)
    Suite.objects.filter(pk=suite.pk).update(
        created_at=timezone.now() - timedelta(hours=1) + timedelta(minutes=later)
    )
    Job.objects.filter(suite=suite).update(estimated_duration=timedelta(minutes=minutes))
    return suite


def leased() -> dict[str, str]:
    return dict(
        Lease.objects.filter(released_at__isnull=True).values_list(
            "job__suite__name", "host__hostname"
        )
    )


def by_size() -> None:
    services.update_scheduler_settings("sam", reason="test", ordering="size")


@pytest.fixture
def lab() -> Host:
    """One board:x host on R120: a job for R121 must reimage it first."""
    return f.host("h1", ["board:x"], build="R120")


def test_a_job_that_needs_a_reimage_sorts_after_one_that_does_not(lab) -> None:
    provisioned("board:x", 200, 300, 900)  # median 300 s
    sized_suite("reimage", "R121", 4)  # 4 min + 5 min of provisioning
    sized_suite("same", "R120", 6, later=1)  # 6 min, its host already carries R120
    by_size()

    services.scheduler_tick()

    assert leased() == {"same": "h1"}


def test_without_provisioning_history_the_shorter_test_goes_first(lab) -> None:
    sized_suite("reimage", "R121", 4)
    sized_suite("same", "R120", 6, later=1)
    by_size()

    services.scheduler_tick()

    assert leased() == {"reimage": "h1"}


def test_the_median_is_of_recent_successful_provisionings_of_the_jobs_board(lab) -> None:
    provisioned("board:x", 200, 300, 900)
    provisioned("board:x", 5000, 5000, 5000, 5000, result=ProvisionResult.FAILED)
    provisioned("board:x", 5000, 5000, 5000, 5000, days=8)  # older than the window
    provisioned("board:y", 4000, 4000)  # another board's
    now = timezone.now()

    medians = provision_cost.read_provision_medians(now=now)

    assert medians["board:x"] == 300
    assert medians["board:y"] == 4000
    assert medians[None] == 900  # every board's together: 200, 300, 900, 4000, 4000


def test_only_the_last_hundred_provisionings_of_a_board_count(lab) -> None:
    provisioned("board:x", *[10.0] * 60, days=2)
    provisioned("board:x", *[20.0] * provision_cost.PROVISION_HISTORY)

    medians = provision_cost.read_provision_medians(now=timezone.now())

    assert medians["board:x"] == 20.0


def test_a_ready_host_of_its_board_on_its_build_means_no_reimage(lab) -> None:
    provisioned("board:x", 300)
    f.host("h2", ["board:x"], build="R121")
    f.host("y1", ["board:y"], build="R122")  # another board's build does not count
    sized_suite("r121", "R121", 4)
    sized_suite("r122", "R122", 4, later=1)
    sized_suite("same", "R120", 6, later=2)
    by_size()

    services.scheduler_tick()

    # r121 (4 min, h2 carries it) and same (6 min) get the two board:x hosts; r122 (4 + 5 min)
    # waits.
    assert set(leased()) == {"r121", "same"}


def test_a_standalone_jobs_own_build_counts(lab) -> None:
    provisioned("board:x", 300)
    alone = f.job("alone")
    Job.objects.filter(pk=alone.pk).update(
        build="R121",
        estimated_duration=timedelta(minutes=4),
        submitted_at=timezone.now() - timedelta(hours=1),
    )
    sized_suite("same", "R120", 6, later=1)
    by_size()

    services.scheduler_tick()

    assert leased() == {"same": "h1"}


def test_the_queue_page_orders_as_the_tick_does(lab) -> None:
    provisioned("board:x", 300)
    reimage = sized_suite("reimage", "R121", 4).jobs.get()
    same = sized_suite("same", "R120", 6, later=1).jobs.get()

    order = selectors.queue_order_ids(policy=planner.Policy(ordering="size")).ids

    assert order == [same.pk, reimage.pk]


def test_the_medians_are_read_again_only_after_a_while(lab) -> None:
    provisioned("board:x", 300)
    now = timezone.now()
    assert provision_cost.provision_medians(now=now) == {"board:x": 300, None: 300}
    provisioned("board:x", 900, 900)

    soon = now + timedelta(seconds=provision_cost.PROVISION_CACHE_S - 1)
    later = now + timedelta(seconds=provision_cost.PROVISION_CACHE_S)
    assert provision_cost.provision_medians(now=soon)["board:x"] == 300
    assert provision_cost.provision_medians(now=later)["board:x"] == 900


def test_a_tick_reads_the_provisioning_history_once_not_every_tick(lab) -> None:
    provisioned("board:x", 300)
    sized_suite("reimage", "R121", 4)
    by_size()
    ticks = []
    for _ in range(2):
        with CaptureQueriesContext(connection) as queries:
            services.scheduler_tick()
        ticks.append([q for q in queries.captured_queries if "hosts_provision" in q["sql"]])
        sized_suite("more", "R120", 6, later=1)  # so that the next tick plans again
    assert [len(read) for read in ticks] == [1, 0]
