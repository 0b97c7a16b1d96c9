"""A runner's lease reads as DRF's walk over RunnerLeaseSerializer's fields would read it."""

from __future__ import annotations

import pytest
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.test import APIRequestFactory

from jobs import selectors
from jobs.api.serializers import RunnerLeaseSerializer
from jobs.models import Lease
from tests import factories as f
from tests.multihost import lease_hosts, multihost_job, role

pytestmark = pytest.mark.django_db


def test_each_field_is_what_drf_would_give(lab, alice) -> None:  # noqa: ANN001
    # Beside the lab's started and leased jobs on w1: a multi-host job whose slot 0 is on w1
    # and whose other host (on w1 too) needs a build, and a heartbeat on one lease.
    dut = f.host("dut.lab", ["board:m"], worker=lab.w1)
    peer = f.host("peer.lab", ["bt-peer"], worker=lab.w1)
    job = multihost_job(
        "bt_<Pair>", [role("dut", ["board:m"]), role("peer", ["bt-peer"])], owner=alice
    )
    lease_hosts(job, [("dut", dut), ("peer", peer)])
    Lease.objects.filter(host=peer).update(provision_to="R120-1")
    Lease.objects.filter(host=dut).update(heartbeat_at=lab.running.started_at)
    request = Request(APIRequestFactory().get("/api/workers/w1/leases/"))
    leases = selectors.with_attempts(list(selectors.runner_leases(worker=lab.w1)))
    serializer = RunnerLeaseSerializer(context={"request": request})
    for lease in leases:
        walked = serializers.ModelSerializer.to_representation(serializer, lease)
        made = serializer.to_representation(lease)
        assert made == walked, lease.job.name
        assert list(made) == list(walked)
        assert list(made["job"]) == list(walked["job"])
        assert list(made["host"]) == list(walked["host"])
    shown = {(lease.job.status, len(lease.job.attempt_leases)) for lease in leases}
    assert {("running", 1), ("leased", 1), ("leased", 2)} <= shown
