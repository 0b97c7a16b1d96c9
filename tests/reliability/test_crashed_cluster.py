"""A cluster killed mid-tick, with a tick request in hand, does not stall scheduling: a cluster
started after it, or one that survived it idle, leases within seconds, without waiting for an
event or the safety net."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest
from django.utils import timezone
from django_q.brokers import get_broker

from jobs.choices import JobStatus
from jobs.models import Job, SchedulerState, SchedulerTick
from tests import factories as f
from tests.reliability.support import Proc, activity, backends, cluster_env, cluster_lab, wait_until

pytestmark = [pytest.mark.postgres, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

APP = "reltest-crashed-cluster"
# Far under the ORM broker's `retry` (120 s), after which the dead cluster's task would come
# back by itself, and the safety net's minute: only the new cluster's own request for a tick as
# it starts (or the next event, sending the stale request again) can lease in time.
DEADLINE = 10


def diagnosis(*clusters: Proc) -> str:
    """What an operator would look at: the clusters' logs, the sessions, the tick request."""
    state = SchedulerState.objects.filter(pk=1).values("tick_pending", "requested_at").first()
    logs = "\n".join(f"--- {c.name}:\n{c.output(3000)}" for c in clusters)
    return f"{logs}\n--- sessions:\n{activity()}\n--- tick request: {state}"


def queued(*names: str) -> int:
    return Job.objects.filter(name__in=names, status=JobStatus.QUEUED).count()


@pytest.mark.parametrize("broker", ["redis", "orm"])
def test_a_cluster_killed_mid_tick_holds_up_the_next_submission_only_seconds(
    broker: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    queue, processes = cluster_lab(request, broker, [f"h{i}" for i in range(3)])

    # One task worker, whose every tick stops before it commits: the crash comes mid-tick.
    marker = tmp_path / "reached"
    env = cluster_env(
        app=APP,
        queue=queue,
        SCHEDSITE_FAULT_POINT="tick.before_commit",
        SCHEDSITE_FAULT_FILE=str(marker),
    )
    doomed = processes("doomed", "qcluster", env={**env, "Q_WORKERS": "1"})
    f.job("first")
    wait_until(marker.exists, timeout=30, what=lambda: f"the tick to start\n{diagnosis(doomed)}")
    # The tick cleared the request flag as it started; this submission sets it again, and
    # the cluster's pusher takes its task off the broker, to hand it to the busy worker.
    f.job("lost")
    wait_until(
        lambda: get_broker().queue_size() == 0,
        timeout=10,
        what=lambda: f"the cluster to take the second request\n{diagnosis(doomed)}",
    )

    os.killpg(doomed.pid, signal.SIGKILL)  # the machine is gone: cluster, pusher and workers
    doomed.stopped = True
    assert doomed.popen.wait(10) == -signal.SIGKILL
    wait_until(lambda: not backends(application_name=APP), timeout=10, what="the backend to end")

    # The request died with the old cluster and the flag still says a tick is on its way.
    state = SchedulerState.objects.get(pk=1)
    assert state.tick_pending
    assert queued("first", "lost") == 2

    fresh = processes("fresh", "qcluster", env=cluster_env(app=APP, queue=queue))
    wait_until(
        lambda: "running." in fresh.output(),
        timeout=30,
        what=lambda: f"the new cluster to start\n{diagnosis(fresh)}",
    )
    # No event: the cluster asks for a tick itself as it starts, taking over the lost request.
    wait_until(
        lambda: queued("first", "lost") == 0,
        timeout=DEADLINE,
        what=lambda: f"the jobs to be leased\n{diagnosis(fresh)}",
    )
    assert Job.objects.filter(status=JobStatus.LEASED).count() == 2

    # And the next event is served as ever.
    f.job("after")
    wait_until(
        lambda: queued("after") == 0,
        timeout=DEADLINE,
        what=lambda: f"the next job to be leased\n{diagnosis(fresh)}",
    )
    assert Job.objects.filter(status=JobStatus.LEASED).count() == 3
    assert fresh.popen.poll() is None


@pytest.mark.parametrize("broker", ["redis", "orm"])
def test_a_surviving_idle_cluster_sends_a_request_another_cluster_lost_within_seconds(
    broker: str, request: pytest.FixtureRequest
) -> None:
    queue, processes = cluster_lab(request, broker, [f"h{i}" for i in range(3)])
    # JSON logs: each tick's line names what asked for it.
    env = cluster_env(app=APP, queue=queue, LOG_FORMAT="json")
    survivor = processes("survivor", "qcluster", env=env)
    # Idle: its start tick ran, nothing is pending. The request the lab's hosts made may still
    # be pending as the cluster starts, and its start then rides along on it: either names it.
    wait_until(
        lambda: (
            (
                '"trigger": "cluster started"' in (out := survivor.output())
                or '"trigger": "host added"' in out
            )
            and not SchedulerState.objects.get(pk=1).tick_pending
            and get_broker().queue_size() == 0
        ),
        timeout=30,
        what=lambda: f"the cluster to start and tick\n{diagnosis(survivor)}",
    )
    time.sleep(1)  # the log line comes as the tick ends; let its task be marked done
    ticks = SchedulerTick.objects.count()

    # What the cluster killed mid-tick above leaves behind, in a lab with another cluster
    # idle: the flag set by a request whose task died with the killed cluster. Jobs submitted
    # after it ride along on that flag, so nobody sends a tick for them.
    SchedulerState.objects.filter(pk=1).update(tick_pending=True, requested_at=timezone.now())
    lost_at = time.monotonic()
    f.job("first")
    f.job("lost")
    assert queued("first", "lost") == 2

    # No event, and the safety net a day away: only the survivor noticing the lost request
    # (its workers' watchers) can lease them.
    wait_until(
        lambda: queued("first", "lost") == 0,
        timeout=DEADLINE,
        what=lambda: f"the jobs to be leased\n{diagnosis(survivor)}",
    )
    took = time.monotonic() - lost_at
    assert Job.objects.filter(status=JobStatus.LEASED).count() == 2
    assert took < DEADLINE
    # Sent once: one tick for the lost request, not one per worker.
    wait_until(
        lambda: '"trigger": "lost tick request"' in survivor.output(),
        timeout=5,
        what=lambda: f"the tick's log line\n{diagnosis(survivor)}",
    )
    assert survivor.output(100_000).count('"trigger": "lost tick request"') == 1
    assert SchedulerTick.objects.count() == ticks + 1
    assert survivor.popen.poll() is None
