"""The pool balancer's rule (docs/health.md#pool-targets): which spare moves in, which member
moves out, when it waits, and that every swap is audited."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from hosts import services as host_services
from hosts.choices import HostStatus
from hosts.models import Host, HostEvent, PoolTarget
from jobs import services, tasks
from jobs.choices import JobKind
from jobs.models import Lease
from jobs.services import balancer
from tests import factories as f

pytestmark = pytest.mark.django_db


def labels(host: Host) -> list[str]:
    return sorted(Host.objects.get(pk=host.pk).labels.values_list("name", flat=True))


def set_status(host: Host, status: str) -> Host:
    Host.objects.filter(pk=host.pk).update(status=status)
    host.refresh_from_db()
    return host


@pytest.fixture
def pool(db):  # noqa: ANN001, ANN201
    """pool:cq wants 2 in service; one member is fine, "bad" (board:eve) is repair_failed."""
    target = balancer.pool_target_create(
        by="sam", pool="pool:cq", spare="pool:spare", min_ready=2, same=["board"]
    )
    f.host("good", ["board:eve", "pool:cq"])
    bad = set_status(f.host("bad", ["board:eve", "pool:cq"]), HostStatus.REPAIR_FAILED)
    return target, bad


def spare_in(state: str) -> Host:
    """A spare host named "spare" in the given state."""
    board = "board:other" if state == "wrong board" else "board:eve"
    spare = f.host("spare", [board, "pool:spare"])
    if state == "leased":
        services.lease_reserve(host=spare, holder="sam", duration=timedelta(hours=1), reason="dbg")
    elif state == "locked":
        host_services.host_lock(host=spare, by="sam", reason="flaky")
    elif state == "retired":
        set_status(spare, HostStatus.RETIRED)
    elif state == "broken":
        set_status(spare, HostStatus.NEEDS_REPAIR)
    return spare


@pytest.mark.parametrize(
    ("state", "moves_in"),
    [
        ("ready", True),
        ("leased", False),
        ("locked", False),
        ("retired", False),
        ("broken", False),
        ("wrong board", False),
    ],
)
def test_only_a_ready_free_spare_of_the_same_board_moves_in(pool, state, moves_in):
    target, bad = pool
    spare = spare_in(state)

    result = balancer.pools_balance()

    if moves_in:
        assert [(s.member, s.spare) for s in result.swapped] == [("bad", "spare")]
        assert labels(spare) == ["board:eve", "pool:cq"]
        assert labels(bad) == ["board:eve", "pool:spare"]
        assert result.warnings == []
    else:
        assert result.swapped == []
        assert "pool:spare" in labels(spare) and "pool:cq" not in labels(spare)
        assert "pool:cq" in labels(bad)
        assert result.warnings and "bad" in result.warnings[0], result.warnings


def test_a_member_a_test_job_holds_waits_until_it_is_released(pool):
    target, bad = pool
    held = f.host("held", ["board:eve", "pool:cq"])
    f.job("t", ["board:eve"], host=held)
    services.scheduler_tick(now=timezone.now())
    assert Lease.objects.active().filter(host=held, job__kind=JobKind.TEST).exists()
    set_status(held, HostStatus.NEEDS_REPAIR)
    set_status(bad, HostStatus.READY)  # so that the held member is the only broken one
    target = balancer.pool_target_update(target=target, by="sam", min_ready=3)
    spare_in("ready")

    plan = balancer.pool_plan(target)
    result = balancer.pools_balance()

    assert plan.swaps == [] and plan.waiting == ["held (needs_repair) waits: a job holds it"]
    assert result.swapped == [] and result.warnings == []
    assert "pool:cq" in labels(held)

    lease = Lease.objects.active().get(host=held)
    services.lease_release(lease=lease, by="sam")
    assert [s.member for s in balancer.pools_balance().swapped] == ["held"]
    assert labels(held) == ["board:eve", "pool:spare"]


def test_a_repair_job_holding_the_member_does_not_block_the_swap(pool):
    target, bad = pool
    rack = f.worker("rack")
    Host.objects.filter(pk=bad.pk).update(worker=rack)
    set_status(bad, HostStatus.NEEDS_REPAIR)
    f.tick(timezone.now(), rack)
    bad.refresh_from_db()
    assert bad.status == HostStatus.REPAIRING
    assert Lease.objects.active().filter(host=bad, job__kind=JobKind.REPAIR).exists()
    spare_in("ready")

    result = balancer.pools_balance()

    assert [(s.member, s.spare) for s in result.swapped] == [("bad", "spare")]
    assert labels(bad) == ["board:eve", "pool:spare"]
    # The repair carries on: its lease is untouched.
    assert Lease.objects.active().filter(host=bad, job__kind=JobKind.REPAIR).exists()


def test_an_unmeetable_target_is_a_warning_each_run_and_changes_nothing(pool):
    target, bad = pool
    spare_in("wrong board")
    before = HostEvent.objects.count()

    first = balancer.pools_balance()
    second = balancer.pools_balance()

    assert first.swapped == second.swapped == []
    assert first.warnings == second.warnings
    assert first.warnings == [
        "no ready spare pool:spare with board:eve to replace bad (repair_failed)",
        "pool:cq stays 1 short of 2 in service: 1 in service, no spare to swap in",
    ]
    assert HostEvent.objects.count() == before


def test_a_full_pool_swaps_nothing(pool):
    target, bad = pool
    spare_in("ready")
    PoolTarget.objects.filter(pk=target.pk).update(min_ready=1)

    assert balancer.pools_balance().swapped == []
    assert "pool:cq" in labels(bad)


def test_each_swap_writes_a_balancer_event_on_both_hosts_with_the_reason(pool):
    target, bad = pool
    spare_in("ready")

    balancer.pools_balance()

    events = HostEvent.objects.filter(actor="balancer").order_by("host__hostname")
    assert [(e.host.hostname, e.kind) for e in events] == [("bad", "updated"), ("spare", "updated")]
    out, came_in = events
    reason = "pool:cq had 1 of 2 hosts in service; bad is repair_failed"
    assert out.message == f"labels pool:cq → pool:spare: swapped out for spare ({reason})"
    assert came_in.message == f"labels pool:spare → pool:cq: swapped in for bad ({reason})"


def test_two_broken_members_take_two_spares_of_their_own_boards(db):
    balancer.pool_target_create(
        by="sam", pool="pool:cq", spare="pool:spare", min_ready=2, same=["board"]
    )
    a = set_status(f.host("a", ["board:eve", "pool:cq"]), HostStatus.NEEDS_REPAIR)
    b = set_status(f.host("b", ["board:kip", "pool:cq"]), HostStatus.REPAIRING)
    f.host("s-kip", ["board:kip", "pool:spare"])
    f.host("s-eve", ["board:eve", "pool:spare"])

    swapped = balancer.pools_balance().swapped

    assert sorted((s.member, s.spare) for s in swapped) == [("a", "s-eve"), ("b", "s-kip")]
    assert labels(a) == ["board:eve", "pool:spare"] and labels(b) == ["board:kip", "pool:spare"]


def test_the_tick_task_swaps_out_a_host_that_just_broke(pool, settings):
    target, bad = pool
    spare = spare_in("ready")

    tasks.tick("test")

    assert labels(spare) == ["board:eve", "pool:cq"]
    assert labels(bad) == ["board:eve", "pool:spare"]


def test_the_balancer_schedule_is_installed(db):
    from django_q.models import Schedule  # noqa: PLC0415

    tasks.install_schedule()
    assert Schedule.objects.get(name=tasks.BALANCE_SCHEDULE).func == "jobs.tasks.balance_pools"


def test_a_member_under_a_staff_reservation_waits(pool):
    target, bad = pool
    spare_in("ready")
    set_status(bad, HostStatus.READY)
    services.lease_reserve(host=bad, holder="sam", duration=timedelta(hours=1), reason="dbg")
    set_status(bad, HostStatus.NEEDS_REPAIR)

    assert balancer.pools_balance().swapped == []
    assert balancer.pool_plan(target).waiting == ["bad (needs_repair) waits: a job holds it"]
