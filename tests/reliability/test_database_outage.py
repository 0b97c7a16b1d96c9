"""A running scheduler survives its database going away, with no operator action."""

from __future__ import annotations

import time

import pytest

from jobs.choices import JobStatus
from jobs.models import Job, SchedulerState
from tests import factories as f
from tests.reliability.support import (
    Proc,
    activity,
    backends,
    cluster_env,
    cluster_lab,
    database_down,
    terminate_backends,
    wait_until,
)

pytestmark = [pytest.mark.postgres, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

APP = "reltest-outage"
# The periodic schedule is off in these tests, and a lost tick request is sent again only by a
# later event: a job leased within this deadline with nothing submitted meanwhile was leased by
# the ticks its own submission asked for. The ORM broker's pusher sleeps 10 s after a failed
# poll, hence not less.
DEADLINE = 20
OUTAGE_SECONDS = 3  # how long the database refuses connections, like a restart


def diagnosis(cluster: Proc) -> str:
    """What an operator would look at: the cluster's log, the sessions, the tick request flag."""
    state = SchedulerState.objects.filter(pk=1).values("tick_pending", "requested_at").first()
    return f"{cluster.output()}\n--- sessions:\n{activity()}\n--- tick request: {state}"


def queued_in(*suites: str) -> int:
    return Job.objects.filter(suite__name__in=suites, status=JobStatus.QUEUED).count()


def wait_leased(cluster: Proc, *suites: str, what: str) -> None:
    wait_until(
        lambda: queued_in(*suites) == 0,
        timeout=DEADLINE,
        what=lambda: f"{what} to be leased\n{diagnosis(cluster)}",
    )


@pytest.fixture
def cluster(request: pytest.FixtureRequest) -> Proc:
    """One qcluster on the test database, with Redis (production) or the ORM broker (embedded)."""
    queue, processes = cluster_lab(request, request.param, [f"h{i:02}" for i in range(24)])
    proc = processes("qcluster", "qcluster", env=cluster_env(app=APP, queue=queue))
    f.suite("before", 2)
    wait_leased(proc, "before", what="the first suite")
    return proc


@pytest.mark.parametrize("cluster", ["redis"], indirect=True)
def test_ticks_cut_off_mid_flight_are_followed_up_without_a_restart(cluster: Proc) -> None:
    # Each round asks for a tick, waits for the cluster to connect to run it, and cuts every
    # session of the test database: ticks die mid-flight, connections die while idle.
    rounds = [f"cut-{n}" for n in range(4)]
    for name in rounds:
        f.suite(name, 2)
        # A session may close on its own between seeing it and cutting it (a short tick ends):
        # the round goes on only once at least one of the cluster's sessions was really cut.
        wait_until(
            lambda: backends(application_name=APP) and terminate_backends() >= 1,
            timeout=DEADLINE,
            what=lambda: f"the cluster to connect again and be cut\n{diagnosis(cluster)}",
            interval=0.02,
        )
    # Nothing is submitted now: the requests made during the cuts must still be served.
    wait_leased(cluster, *rounds, what="the jobs submitted while connections were cut")

    f.suite("after", 3)
    wait_leased(cluster, "after", what="a suite submitted afterwards")
    assert cluster.popen.poll() is None, "the cluster died instead of reconnecting"
    assert Job.objects.filter(status=JobStatus.LEASED).count() == 2 + 2 * 4 + 3


# The ORM broker (the embedded mode) too: its pusher polls the database that went away.
@pytest.mark.parametrize("cluster", ["redis", "orm"], indirect=True)
def test_a_database_restart_is_ridden_out_and_requests_made_meanwhile_are_served(
    cluster: Proc,
) -> None:
    with database_down() as cut:
        assert cut >= 1  # the cluster had live sessions, and lost them
        # A write that reached the database just before it went down asks for a tick that
        # cannot run until the database is back.
        f.suite("during", 2)
        time.sleep(OUTAGE_SECONDS)  # the outage itself, not a wait for anything
        assert queued_in("during") == 2
    # Nothing is submitted now: the tick asked for during the outage must still happen.
    wait_leased(cluster, "during", what="the jobs submitted during the outage")

    f.suite("after", 3)
    wait_leased(cluster, "after", what="a suite submitted after the outage")
    assert cluster.popen.poll() is None, "the cluster died instead of reconnecting"
    assert Job.objects.filter(status=JobStatus.LEASED).count() == 2 + 2 + 3
