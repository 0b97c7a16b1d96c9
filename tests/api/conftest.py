"""API fixtures: token clients for each role, and a small lab with leases in every state."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

import pytest
from django.contrib.auth.models import Group
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from hosts import services as host_services
from hosts.models import Host, Worker
from jobs import services
from jobs.models import Job, Lease, Suite
from tests import factories as f


def token_client(user: object | None) -> APIClient:
    """An API client that authenticates the way scripts do: with the user's token."""
    client = APIClient()
    if user is not None:
        token, _ = Token.objects.get_or_create(user=user)
        client.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")
    return client


@pytest.fixture
def runner_2(django_user_model):  # noqa: ANN001, ANN201
    """runner-2, the runner of worker w2."""
    user = django_user_model.objects.create_user("runner-2")
    group, _ = Group.objects.get_or_create(name="runners")
    user.groups.add(group)
    return user


staff_client = f.client_fixture("sam", token_client)
alice_client = f.client_fixture("alice", token_client)
bob_client = f.client_fixture("bob", token_client)
runner_client = f.client_fixture("runner_user", token_client)
anon_client = f.client_fixture(None, token_client)


@dataclass
class Lab:
    """A lab with something in every state an action can meet."""

    w1: Worker  # runner-1's worker, online
    w2: Worker  # runner-2's worker, online
    w3: Worker  # paused, no hosts
    h1: Host  # on w1, leased to `running` (started)
    h2: Host  # on w1, leased to `leased` (not started)
    h3: Host  # on w2, leased to `other` (w2's job)
    free: Host  # no worker, free, carries no job labels
    reserved: Host  # no worker, held by a manual reservation
    locked: Host  # no worker, locked
    suite: Suite  # alice's, jobs running/leased
    running: Job
    leased: Job
    other: Job  # leased on w2
    queued: Job  # alice's standalone job nobody can run
    reservation: Lease


@pytest.fixture
def lab(sam, alice, runner_user, runner_2) -> Lab:  # noqa: ANN001
    w1 = f.worker("w1")
    w2 = f.worker("w2")
    w3 = f.worker("w3", paused=True)
    host_services.worker_update(worker=w1, by=sam, runner=runner_user)
    host_services.worker_update(worker=w2, by=sam, runner=runner_2)
    f.host("h1.lab", ["board:x"], worker=w1)
    f.host("h2.lab", ["board:x"], worker=w1)
    h3 = f.host("h3.lab", ["board:y"], worker=w2)
    free = f.host("free.lab", ["board:z"])
    reserved = f.host("reserved.lab", ["board:z"])
    locked = host_services.host_lock(
        host=f.host("locked.lab", ["board:z"]), by=sam, reason="flaky USB"
    )
    reservation = services.lease_reserve(
        host=reserved, holder=sam, duration=timedelta(hours=1), reason="debug"
    )
    suite = f.suite("S", [["board:x"], ["board:x"]], owner=alice, max_retries=1)
    other = f.job("on-w2", ["board:y"], owner=alice)
    queued = f.job("nobody-can-run", ["board:none"], owner=alice)
    services.scheduler_tick()
    running, leased = suite.jobs.order_by("id")
    running.refresh_from_db()
    assert running.status == "leased", running.message
    services.job_start(job=running, by=runner_user)
    for job in (running, leased, other, queued):
        job.refresh_from_db()
    return Lab(
        w1=w1,
        w2=w2,
        w3=w3,
        h1=Host.objects.get(pk=Lease.objects.get(job=running, released_at=None).host_id),
        h2=Host.objects.get(pk=Lease.objects.get(job=leased, released_at=None).host_id),
        h3=h3,
        free=free,
        reserved=reserved,
        locked=locked,
        suite=suite,
        running=running,
        leased=leased,
        other=other,
        queued=queued,
        reservation=reservation,
    )


def active_lease(job: Job) -> Lease:
    return Lease.objects.get(job=job, released_at__isnull=True)


@pytest.fixture
def eve(db) -> Host:  # noqa: ANN001
    """A board:eve, pool:cq host, so that submissions asking for those labels are accepted."""
    return f.host("eve1.lab", ["board:eve", "pool:cq"])
