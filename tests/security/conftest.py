"""Security fixtures: a lab with something for every UI action, signed-in clients, DB snapshots."""

from __future__ import annotations

from datetime import timedelta
from types import SimpleNamespace

import pytest
from django.db.models import Model
from rest_framework.authtoken.models import Token

from hosts import services as host_services
from hosts.models import HealthPolicy, Host, HostEvent, Label, PoolTarget, Worker
from jobs import services, suite_templates
from jobs.choices import JobStatus
from jobs.models import (
    Job,
    Lease,
    Reservation,
    SchedulerSettings,
    SchedulerSettingsChange,
    Suite,
    SuiteTemplate,
    TemplateRun,
)
from jobs.services import balancer
from notifications.models import Subscription
from tests import factories as f

HTMX = {"HX-Request": "true"}

# Everything a UI or API action can change. A refused request must leave all of it as it was.
WATCHED: tuple[type[Model], ...] = (
    Host, HostEvent, Label, Worker, HealthPolicy, Suite, Job, Lease, Token, SuiteTemplate,
    TemplateRun, Subscription, SchedulerSettings, SchedulerSettingsChange, PoolTarget,
    Reservation,
)  # fmt: skip


def snapshot() -> dict[str, list[tuple]]:
    """Every row of every watched table, so 'nothing changed' compares the whole state."""
    return {
        model.__name__: [tuple(row.values()) for row in model.objects.order_by("pk").values()]
        for model in WATCHED
    }


@pytest.fixture
def users(alice, bob, runner_user, sam) -> dict[str, object | None]:  # noqa: ANN001
    """The roles of the UI matrix, each with an API token (so a token action has one to hit)."""
    for user in (alice, bob, runner_user, sam):
        Token.objects.create(user=user)
    return {
        "anonymous": None,
        "tester": alice,
        "other_tester": bob,
        "runner": runner_user,
        "staff": sam,
    }


@pytest.fixture
def lab(db, alice, sam):  # noqa: ANN001, ANN201
    """w1 online, w2 paused; a free, a locked and a reserved host; alice's queued suite."""
    w1 = f.worker("w1")
    w2 = f.worker("w2", paused=True)
    free = f.host("free.lab", ["board:x"], worker=w1)
    locked = host_services.host_lock(host=f.host("locked.lab", ["board:x"]), by=sam, reason="usb")
    reserved = f.host("reserved.lab", ["board:z"])
    reservation = services.lease_reserve(
        host=reserved, holder=sam, duration=timedelta(hours=1), reason="debug"
    )
    # Alice waits in line for the reserved host (Sam holds it): she or staff may leave the line.
    waiting = services.reservation_request(
        owner=alice, host=reserved, duration=timedelta(hours=1), reason="debug", wait=True
    )
    # No host carries board:none, so the suite stays queued and abortable.
    suite = f.suite("nightly", [["board:none"], ["board:none"]], owner=alice)
    # Finished, with a failed job: its owner or staff may re-run it.
    failed = f.suite("failed", [["board:none"]], owner=alice)
    Job.objects.filter(suite=failed).update(status=JobStatus.FAILED)
    # Enabled, but no host carries its label: no tick here verifies anything because of it.
    policy = host_services.health_policy_create(by=sam, name="x daily", labels=["board:none"])
    off = host_services.health_policy_create(by=sam, name="z off", labels=[], enabled=False)
    body = {"name": "bvt", "jobs": [{"name": "t", "labels": ["board:x"]}]}
    template = suite_templates.template_create(by=alice, name="bvt", body=body)
    SchedulerSettings.load()  # the defaults, as any first reader leaves them
    # No host carries it: the balancer has nothing to swap.
    pool = balancer.pool_target_create(
        by=sam, pool="pool:none", spare="pool:none-spare", min_ready=1
    )
    return SimpleNamespace(
        w1=w1,
        w2=w2,
        free=free,
        locked=locked,
        reserved=reserved,
        reservation=reservation,
        waiting_reservation=waiting,
        suite=suite,
        job=suite.jobs.order_by("id").first(),  # queued: its priority may change
        failed_suite=failed,
        policy=policy,
        disabled_policy=off,
        template=template,
        pool_target=pool,
    )
