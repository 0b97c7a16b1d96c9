"""End to end: a two-host job with its hosts on two workers, run once by real runners.

The runner of its dut's worker (slot 0) runs it, with both hosts in SCHEDSITE_HOSTS, and keeps
both leases alive by heartbeating its own; the peer's runner leaves its host alone.
"""

from __future__ import annotations

import json

import pytest

from hosts import services as host_services
from hosts.choices import EventKind
from hosts.models import HostEvent
from jobs.models import Lease
from tests import factories as f
from tests.e2e.support import Process, token_for, wait_for
from tests.multihost import multihost_job, role

pytestmark = [pytest.mark.postgres, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

# A lease lives 6 s without a heartbeat; the job runs 9 s: the peer's lease outlives it only
# through the dut runner's heartbeats.
TTL = 6
COMMAND = ["sh", "-c", 'echo "hosts=$SCHEDSITE_HOSTS host=$SCHEDSITE_HOST"; sleep 9']


def test_a_two_host_job_runs_once_on_the_runner_of_its_first_host(
    settings, live_server, children, api_as, alice, sam
):
    children.share(settings, LEASE_TTL=TTL)
    runners: list[Process] = []
    for name, host, labels in (("w1", "dut.lab", ["board:x"]), ("w2", "peer.lab", ["bt-peer"])):
        worker, account = host_services.worker_runner_ensure(worker_name=name, by=sam)
        f.host(host, labels, worker=worker)
        runners.append(
            children.start_runner(
                worker=name,
                api=f"{live_server.url}/api/",
                token=token_for(account),
                command=COMMAND,
            )
        )
    job = multihost_job(
        "bt_Pair", [role("dut", ["board:x"]), role("peer", ["bt-peer"])], owner=alice
    )
    staff, tester = api_as(sam), api_as(alice)

    def finished() -> dict | None:
        staff.post("/scheduler/tick/")  # ticks expire leases too: a lapsed one would show
        body = tester.get(f"/jobs/{job.pk}/")
        return body if body["status"] not in ("queued", "leased", "running") else None

    body = wait_for("the two-host job to finish", finished, timeout=60, details=children.logs)

    assert body["status"] == "passed", (body["message"], children.logs())
    assert body["attempts"] == 1  # never expired, never retried
    first_line = body["message"].splitlines()[0]
    hosts, host = first_line.removeprefix("hosts=").rsplit(" host=", 1)
    assert json.loads(hosts) == {"dut": ["dut.lab"], "peer": ["peer.lab"]}
    assert host == "dut.lab"
    reasons = dict(Lease.objects.filter(job=job).values_list("host__hostname", "release_reason"))
    assert reasons == {"dut.lab": "completed", "peer.lab": "completed"}
    # Run once, by w1's runner: one start, written on both hosts' trails, by runner-w1.
    started = HostEvent.objects.filter(kind=EventKind.STARTED, job_id=job.pk)
    assert sorted(started.values_list("host__hostname", "actor")) == [
        ("dut.lab", "runner-w1"),
        ("peer.lab", "runner-w1"),
    ]
    assert len(runners) == 2
    free = tester.get("/hosts/?leased=false&status=ready")
    assert free["count"] == 2
