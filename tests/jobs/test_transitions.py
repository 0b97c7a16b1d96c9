"""The state machines: every allowed move moves, every other one is refused and changes nothing.

Each test walks one (from, to) pair of a machine with every mover, on a real row: the
compare-and-set in the database is what refuses a move whose row is in another state.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

import pytest
from django.db import transaction
from django.forms.models import model_to_dict
from django.utils import timezone

from hosts.choices import EventKind, HostStatus
from hosts.models import Host, HostEvent
from jobs import services, transitions
from jobs.choices import JobStatus, ReleaseReason
from jobs.models import Job, Lease
from jobs.transitions import ACTIVE, HOST, JOB, LEASE, MACHINES, RELEASE_EVENTS, Mover
from schedsite.errors import Conflict
from tests import factories as f
from tests.jobs.test_triggers import ticks_enqueued

pytestmark = pytest.mark.django_db

AT = timezone.now().replace(microsecond=0) + timedelta(hours=1)
ROOT = Path(__file__).resolve().parents[2]


def pairs(states: tuple[str, ...]) -> list[tuple[str, str]]:
    return list(itertools.product(states, repeat=2))


def pair_id(pair: tuple[str, str]) -> str:
    return f"{pair[0]}->{pair[1]}"


def row(model: type, pk: int) -> dict:
    return model_to_dict(model.objects.get(pk=pk))


def try_every_mover(
    machine: transitions.Machine,
    pair: tuple[str, str],
    *,
    reset: Callable[[], object],
    state: Callable[[], dict],
    move: Callable[[Mover], object],
    moved: Callable[[Mover], None],
) -> None:
    """Make the move as each mover from a fresh start: the table says which may, which not."""
    for mover in Mover:
        reset()
        before = (state(), HostEvent.objects.count())
        if machine.allows(*pair, mover):
            move(mover)
            moved(mover)
        else:
            with pytest.raises(Conflict):
                move(mover)
            assert (state(), HostEvent.objects.count()) == before, mover


# --- the tables themselves ------------------------------------------------------------------


def test_the_tables_name_only_real_states_and_movers():
    assert JOB.states == tuple(JobStatus.values)
    assert LEASE.states == (ACTIVE, *ReleaseReason.values)
    assert HOST.states == tuple(HostStatus.values)
    for machine in MACHINES:
        for (old, new), movers in machine.moves.items():
            assert {old, new} <= set(machine.states), (machine.name, old, new)
            assert old != new and movers and movers <= set(Mover), (machine.name, old, new)


def test_final_states_are_final():
    for old in (*JobStatus.values[3:], *ReleaseReason.values):
        machine = JOB if old in JobStatus.values else LEASE
        assert not [key for key in machine.moves if key[0] == old], old
    assert not [key for key in LEASE.moves if key[1] == ACTIVE]


MOVES_HEADER = "| from | to | movers |"


def documented_moves() -> list[list[str]]:
    """The rows of each Moves table in docs/states.md, in the order the page has them."""
    lines = (ROOT / "docs" / "states.md").read_text().splitlines()
    tables = []
    for i, line in enumerate(lines):
        if line == MOVES_HEADER:
            rows = itertools.takewhile(lambda text: text.startswith("|"), lines[i + 2 :])
            tables.append(list(rows))
    return tables


def rendered_moves(machine: transitions.Machine) -> list[str]:
    """The machine's table as docs/states.md writes it: one row per move, movers in order."""
    return [
        f"| `{old}` | `{new}` | {', '.join(m for m in Mover if m in movers)} |"
        for old, new in pairs(machine.states)
        if (movers := machine.moves.get((old, new)))
    ]


def test_docs_states_shows_each_table_as_it_is():
    assert documented_moves() == [rendered_moves(HOST), rendered_moves(JOB), rendered_moves(LEASE)]


# --- jobs -----------------------------------------------------------------------------------


@pytest.mark.parametrize("pair", pairs(JOB.states), ids=pair_id)
def test_job_move(pair):
    old, new = pair
    job = f.job("J1")

    def moved(mover: Mover) -> None:
        after = Job.objects.get(pk=job.pk)
        assert (after.status, after.message) == (new, "moved"), mover

    try_every_mover(
        JOB,
        pair,
        reset=lambda: Job.objects.filter(pk=job.pk).update(status=old),
        state=lambda: row(Job, job.pk),
        move=lambda mover: transitions.move_job(job, to=new, mover=mover, at=AT, message="moved"),
        moved=moved,
    )


def test_a_refused_job_move_says_which_status_the_job_is_in():
    job = f.job("J1")
    with pytest.raises(Conflict, match=f"job {job.pk} is queued, not leased"):
        transitions.move_job(job, to=JobStatus.RUNNING, mover=Mover.RUNNER, at=AT)
    Job.objects.filter(pk=job.pk).update(status=JobStatus.PASSED)
    with pytest.raises(Conflict, match="has already finished"):
        transitions.move_job(job, to=JobStatus.ABORTED, mover=Mover.OWNER, at=AT)


def test_move_jobs_moves_only_the_jobs_in_a_starting_state_in_one_update(
    django_assert_num_queries,
):
    jobs = [f.job(f"J{i}") for i in range(4)]
    Job.objects.filter(pk=jobs[1].pk).update(status=JobStatus.RUNNING)
    Job.objects.filter(pk=jobs[2].pk).update(status=JobStatus.PASSED)
    # One UPDATE however many jobs; and as the jobs end, one read of their suites for the
    # outbox (none here: no entry to write, docs/notifications.md#the-outbox).
    with django_assert_num_queries(2) as captured:
        moved = transitions.move_jobs(
            [j.pk for j in jobs], to=JobStatus.ABORTED, mover=Mover.OWNER, at=AT
        )
    assert [q["sql"].split()[0] for q in captured.captured_queries] == ["UPDATE", "SELECT"]
    assert moved == 3
    statuses = [Job.objects.get(pk=j.pk).status for j in jobs]
    assert statuses == [JobStatus.ABORTED, JobStatus.ABORTED, JobStatus.PASSED, JobStatus.ABORTED]
    assert Job.objects.get(pk=jobs[2].pk).finished_at is None


def test_a_move_sets_the_times_of_its_new_status():
    job = f.job("J1")
    Job.objects.filter(pk=job.pk).update(status=JobStatus.LEASED)
    transitions.move_job(job, to=JobStatus.RUNNING, mover=Mover.RUNNER, at=AT)
    assert Job.objects.get(pk=job.pk).started_at == AT
    transitions.move_job(job, to=JobStatus.QUEUED, mover=Mover.STAFF, at=AT)
    assert Job.objects.get(pk=job.pk).started_at is None
    transitions.move_job(job, to=JobStatus.ABORTED, mover=Mover.OWNER, at=AT)
    assert Job.objects.get(pk=job.pk).finished_at == AT


# --- leases ---------------------------------------------------------------------------------


def reservation() -> Lease:
    return services.lease_reserve(
        host=f.host("h1"), holder="sam", duration=timedelta(hours=1), reason="manual"
    )


def put_lease_in(lease: Lease, state: str) -> None:
    if state == ACTIVE:
        Lease.objects.filter(pk=lease.pk).update(released_at=None, release_reason="")
    else:
        Lease.objects.filter(pk=lease.pk).update(released_at=AT, release_reason=state)


def release(lease: Lease, new: str, mover: Mover) -> None:
    transitions.release_leases(
        [lease],
        reason=new,
        mover=mover,
        by="sam",
        at=AT,
        message="let go",
        trigger="test",
    )


@pytest.mark.parametrize("pair", pairs(LEASE.states), ids=pair_id)
def test_lease_move(pair):
    old, new = pair
    if new == ACTIVE:
        # Nothing makes a lease active again; a new lease is a new row.
        assert not any(LEASE.allows(old, new, mover) for mover in Mover)
        return
    lease = reservation()

    def moved(mover: Mover) -> None:
        after = Lease.objects.get(pk=lease.pk)
        assert (after.released_at, after.release_reason) == (AT, new), mover
        event = HostEvent.objects.latest("id")
        assert (event.kind, event.lease_id, event.message) == (
            RELEASE_EVENTS[new],
            lease.pk,
            "let go",
        )

    try_every_mover(
        LEASE,
        pair,
        reset=lambda: put_lease_in(lease, old),
        state=lambda: row(Lease, lease.pk),
        move=lambda mover: release(lease, new, mover),
        moved=moved,
    )


def test_a_lease_released_by_hand_asks_for_a_tick_and_one_the_tick_expires_does_not(
    django_capture_on_commit_callbacks,
):
    lease = reservation()

    def expire() -> None:
        transitions.release_leases(
            [lease],
            reason=ReleaseReason.EXPIRED,
            mover=Mover.SCHEDULER,
            by="scheduler",
            at=AT,
            message=lambda _: "ended",
        )

    assert ticks_enqueued(expire, django_capture_on_commit_callbacks) == 0
    put_lease_in(lease, ACTIVE)
    assert (
        ticks_enqueued(
            lambda: release(lease, ReleaseReason.RELEASED, Mover.STAFF),
            django_capture_on_commit_callbacks,
        )
        == 1
    )


def create_lease(kind: str, mover: Mover) -> None:
    """Create a lease of the kind on h1, as the mover: a job's lease, or a reservation."""
    host = Host.objects.get(hostname="h1")
    if kind == transitions.JOB_LEASE:
        job = Job.objects.get(name="J1")
        transitions.lease_job(host, job, mover=mover, by="sam", at=AT, reason="r", message="m")
    else:
        until = AT + timedelta(hours=1)
        transitions.reserve_host(host, holder="sam", mover=mover, at=AT, until=until, reason="r")


def test_only_the_movers_of_the_table_may_create_a_lease():
    host, job = f.host("h1"), f.job("J1")
    for kind, creators in transitions.NEW_LEASE.items():
        for mover in Mover:
            Lease.objects.all().delete()
            Job.objects.filter(pk=job.pk).update(status=JobStatus.QUEUED, attempts=0)
            before = HostEvent.objects.count()
            if mover in creators:
                create_lease(kind, mover)
                lease = Lease.objects.get(host=host)
                event = HostEvent.objects.latest("id")
                assert (event.lease_id, event.actor) == (lease.pk, "sam"), (kind, mover)
                assert lease.job_id == (job.pk if kind == transitions.JOB_LEASE else None)
            else:
                with pytest.raises(Conflict, match=f"the {mover} may not create a {kind}"):
                    create_lease(kind, mover)
                assert not Lease.objects.exists(), (kind, mover)
                assert HostEvent.objects.count() == before, (kind, mover)


def test_a_second_lease_on_a_leased_host_is_a_conflict_and_writes_nothing():
    f.host("h1"), f.job("J1")
    create_lease(transitions.RESERVATION, Mover.STAFF)
    before = (Lease.objects.count(), HostEvent.objects.count())
    with pytest.raises(Conflict, match="host h1 is already leased"):
        create_lease(transitions.JOB_LEASE, Mover.IMPORT)
    assert (Lease.objects.count(), HostEvent.objects.count()) == before
    assert Job.objects.get(name="J1").status == JobStatus.QUEUED


def test_leasing_a_job_that_is_not_queued_is_a_conflict_and_leaves_no_lease():
    f.host("h1"), f.job("J1")
    Job.objects.filter(name="J1").update(status=JobStatus.RUNNING)
    with pytest.raises(Conflict, match="is running, not queued"):
        create_lease(transitions.JOB_LEASE, Mover.IMPORT)
    assert not Lease.objects.exists()
    assert not HostEvent.objects.filter(kind=EventKind.LEASED).exists()


def test_lease_jobs_leases_many_in_one_statement_each(django_assert_num_queries, is_postgres):
    hosts = [f.host(f"h{i}") for i in range(3)]
    jobs = [f.job(f"J{i}") for i in range(3)]
    pairs = [(h.pk, j.pk) for h, j in zip(hosts, jobs, strict=True)]
    # One read of the hosts released after `at`, one INSERT of the leases, one UPDATE of the
    # jobs, one INSERT of the events (the tick's cold start leases 10,000 jobs:
    # docs/performance.md). SQLite also reads the jobs' attempts (each lease's `attempt`),
    # which PostgreSQL's INSERT looks up itself.
    with django_assert_num_queries(4 if is_postgres else 5):
        lease_of_host = transitions.lease_jobs(
            pairs,
            mover=Mover.SCHEDULER,
            by="scheduler",
            at=AT,
            subjects=[h.hostname for h in hosts],
            messages=[f"leased to job {j.name}" for j in jobs],
            attempts=1,
        )
    leases = Lease.objects.active().order_by("host__hostname")
    assert [(x.host_id, x.job_id, x.acquired_at) for x in leases] == [(*p, AT) for p in pairs]
    assert lease_of_host == {x.host_id: x.pk for x in leases}
    assert {(j.status, j.attempts) for j in Job.objects.all()} == {(JobStatus.LEASED, 1)}
    events = HostEvent.objects.filter(kind=EventKind.LEASED).order_by("subject")
    assert [(e.subject, e.lease_id, e.job_id, e.message) for e in events] == [
        (h.hostname, lease_of_host[h.pk], j.pk, f"leased to job {j.name}")
        for h, j in zip(hosts, jobs, strict=True)
    ]


def test_lease_jobs_refuses_a_job_that_is_not_queued():
    host, job = f.host("h1"), f.job("J1")
    Job.objects.filter(pk=job.pk).update(status=JobStatus.ABORTED)
    with pytest.raises(Conflict, match="1 of 1 jobs are no longer queued"), transaction.atomic():
        transitions.lease_jobs(
            [(host.pk, job.pk)],
            mover=Mover.SCHEDULER,
            by="scheduler",
            at=AT,
            subjects=["h1"],
            messages=["leased"],
        )
    assert not Lease.objects.exists()


# --- hosts ----------------------------------------------------------------------------------


@pytest.mark.parametrize("pair", pairs(HOST.states), ids=pair_id)
def test_host_move(pair):
    old, new = pair
    host = f.host("h1")

    def moved(mover: Mover) -> None:
        assert Host.objects.get(pk=host.pk).status == new, mover
        event = HostEvent.objects.latest("id")
        assert (event.kind, event.old_status, event.new_status, event.message) == (
            EventKind.STATUS,
            old,
            new,
            "checked",
        )

    try_every_mover(
        HOST,
        pair,
        reset=lambda: Host.objects.filter(pk=host.pk).update(status=old),
        state=lambda: row(Host, host.pk),
        move=lambda mover: transitions.move_host(
            host, old=old, to=new, mover=mover, by="sam", why="checked"
        ),
        moved=moved,
    )


def test_a_host_move_from_a_status_it_has_left_is_refused():
    host = f.host("h1", status=HostStatus.REPAIRING)
    with pytest.raises(Conflict, match="changed status concurrently"):
        transitions.move_host(
            host, old=HostStatus.READY, to=HostStatus.REPAIR_FAILED, mover=Mover.STAFF, by="sam"
        )
    assert Host.objects.get(pk=host.pk).status == HostStatus.REPAIRING


@pytest.mark.parametrize(
    ("new", "ticks"), [(HostStatus.READY, 1), (HostStatus.REPAIR_FAILED, 0)], ids=["ready", "other"]
)
def test_only_a_host_made_ready_asks_for_a_tick(new, ticks, django_capture_on_commit_callbacks):
    host = f.host("h1", status=HostStatus.NEEDS_REPAIR)

    def move() -> None:
        transitions.move_host(host, old=HostStatus.NEEDS_REPAIR, to=new, mover=Mover.STAFF, by="s")

    assert ticks_enqueued(move, django_capture_on_commit_callbacks) == ticks


def test_mark_needs_repair_moves_those_the_mover_may_and_records_where_each_came_from():
    hosts = [f.host(f"h{i}", status=s) for i, s in enumerate(HostStatus.values)]
    movable = [h for h in hosts if HOST.allows(h.status, HostStatus.NEEDS_REPAIR, Mover.RUNNER)]
    moved = transitions.mark_needs_repair(
        [h.pk for h in hosts], mover=Mover.RUNNER, by="runner-1", why="host_ok false", at=AT
    )
    assert moved == len(movable) == 4  # ready, needs_verify, verifying, repairing
    # The others keep their status: a runner never demotes a repair_failed or retired host.
    assert {h.hostname: h.status for h in Host.objects.all()} == {
        h.hostname: HostStatus.NEEDS_REPAIR if h in movable else h.status for h in hosts
    }
    events = HostEvent.objects.filter(kind=EventKind.STATUS).order_by("subject")
    assert [(e.subject, e.old_status, e.new_status, e.message) for e in events] == [
        (h.hostname, h.status, HostStatus.NEEDS_REPAIR, "host_ok false") for h in movable
    ]
