"""The incremental tick plans exactly as a whole read would (PostgreSQL).

The scheduler keeps the lab it read between ticks and re-reads only the rows the change log
names (jobs/scheduling/labstate.py). These tests run random sequences of lab events — through
the services and behind their back with bare updates — with ticks in between, some of which
crash or are made by "another cluster", and at every tick that plans compare the refreshed
lab, and the plan made from it, with a whole read of the database at that moment.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
from datetime import timedelta

import pytest
from django.db import OperationalError
from django.utils import timezone

from hosts import services as host_services
from hosts.models import Host, Label, Worker
from jobs import selectors, services
from jobs.models import Job, Lease, SchedulerTick, Suite, WaitReasonClass
from jobs.scheduling import labstate, planner, snapshot
from jobs.scheduling import tick as tick_module
from tests import factories as f
from tests.multihost import multihost_job, role
from tests.reliability.support import live_database_url, subprocess_env

# Transactions must really commit: the tick keeps its lab only once its transaction commits.
pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.postgres]

BOARDS = ("board:x", "board:y", "board:z")
EXTRAS = ((), ("servo",), ("bt",), ("servo", "bt"))
CHAMBERS = ("chamber:a", "chamber:b")


def _plan(snap: labstate.Snapshot, *, kept: bool, plan=planner.plan) -> planner.Plan:  # noqa: ANN001
    """The real planner on a snapshot (bound at import: a crash test replaces the tick's).

    `kept`: with the queue's groups and the host index the kept lab passes, as the tick does.
    """
    return plan(
        hosts=snap.hosts,
        jobs=snap.jobs,
        suites=snap.suites,
        policy=snap.policy,
        now=snap.now,
        workers=snap.workers,
        usage=snap.usage,
        groups=snap.groups if kept else None,
        host_index=snap.host_index if kept else None,
    )


class Checker:
    """Wraps the tick's choice of lab: compares every refreshed lab with a whole read."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.refreshed = 0
        self.whole = 0
        self.compared = 0
        real = labstate.for_tick

        def checked(state, changed, *, now, policy):  # noqa: ANN001, ANN202
            state, refreshed = real(state, changed, now=now, policy=policy)
            if not refreshed:
                self.whole += 1
                return state, refreshed
            self.refreshed += 1
            mine = state.snapshot(now=now, policy=policy)
            reference = labstate.scheduler_snapshot(now=now, policy=policy)
            assert mine.hosts == reference.hosts
            assert mine.jobs == reference.jobs
            assert list(mine.groups.items()) == list(planner.group_jobs(reference.jobs).items())
            assert mine.hosts_by_status == selectors.hosts_by_status()
            assert mine.oldest_submitted == min(
                (j.submitted_at for j in reference.jobs), default=None
            )
            fresh = planner.HostIndex.of(reference.hosts)
            kept = mine.host_index
            assert (kept.free, kept.kept, kept.leased_on) == (
                fresh.free,
                fresh.kept,
                fresh.leased_on,
            )
            assert dict(kept.busy_by_labels()) == dict(fresh.busy_by_labels())
            assert sorted(mine.suites, key=lambda s: s.id) == sorted(
                reference.suites, key=lambda s: s.id
            )
            assert (mine.workers, mine.leased_count) == (reference.workers, reference.leased_count)
            theirs = _plan(reference, kept=False)
            # Twice: the kept index's memo of wait reasons, after the refresh's changes and then
            # with none (the tick itself plans a third time, from what these left).
            for _again in range(2):
                ours = _plan(mine, kept=True)
                assert ours.assignments == theirs.assignments
                assert ours.class_reasons == theirs.class_reasons
            self.compared += 1
            return state, refreshed

        monkeypatch.setattr(labstate, "for_tick", checked)

        # The wait-reason table is written as a difference from what this process last wrote:
        # after every tick that planned it must hold exactly that plan's reasons, every class.
        self.reasons: dict[str, dict] | None = None
        self.diffs = 0
        write = tick_module._write_reasons

        def recorded(reasons, *, tick_id, at, written):  # noqa: ANN001, ANN202
            if written is not None and tick_module._written_is_current(written, tick_id):
                self.diffs += 1
            write(reasons, tick_id=tick_id, at=at, written=written)
            self.reasons = {key: tick_module._reason_row(r) for key, r in reasons.items()}

        monkeypatch.setattr(tick_module, "_write_reasons", recorded)

    def check_reasons(self) -> None:
        """The table holds the reasons of the latest tick that planned, as JSON reads them."""
        assert self.reasons is not None
        stored = dict(WaitReasonClass.objects.values_list("key", "reason"))
        assert stored == json.loads(json.dumps(self.reasons))


class Lab:
    """A small lab and the random events that change it."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.workers = [f.worker(f"w{i}") for i in range(3)]
        for i in range(14):
            labels = [rng.choice(BOARDS), *rng.choice(EXTRAS), rng.choice(CHAMBERS)]
            f.host(f"h{i:02d}", labels, worker=self.workers[i % 3])
        self.serial = 0

    def _name(self) -> str:
        self.serial += 1
        return f"j{self.serial}"

    def _labels(self) -> list[str]:
        return [self.rng.choice(BOARDS), *self.rng.choice(EXTRAS[:3])]

    def _some(self, queryset):  # noqa: ANN001, ANN202
        ids = list(queryset.values_list("pk", flat=True))
        return queryset.model.objects.get(pk=self.rng.choice(ids)) if ids else None

    # --- events -----------------------------------------------------------------------------

    def submit(self) -> None:
        pinned = self._some(Host.objects.all()) if self.rng.random() < 0.15 else None
        labels = sorted(pinned.label_names) if pinned else self._labels()
        f.job(self._name(), labels, priority=self.rng.choice((20, 40, 60)), host=pinned)

    def submit_suite(self) -> None:
        jobs = [self._labels() for _ in range(self.rng.randint(1, 5))]
        f.suite(
            self._name(),
            jobs,
            priority=self.rng.choice((30, 50)),
            min_duts=min(self.rng.choice((0, 1, 2)), len(jobs)),
            max_duts=self.rng.choice((None, 2, 3)),
        )

    def submit_multihost(self) -> None:
        """A job needing two or three hosts, sometimes kept together, sometimes with an
        estimate (a busy host's expected end)."""
        roles = [role("dut", [self.rng.choice(BOARDS)], count=self.rng.choice((1, 2)), max=2)]
        if self.rng.random() < 0.5:
            roles.append(role("peer", list(self.rng.choice(EXTRAS[1:3]))))
        job = multihost_job(
            self._name(),
            roles,
            together_by=self.rng.choice(("", "chamber")),
            priority=self.rng.choice((20, 40, 60)),
            max_retries=self.rng.choice((0, 1)),
        )
        if self.rng.random() < 0.5:
            Job.objects.filter(pk=job.pk).update(estimated_duration=timedelta(minutes=5))

    def lease_runs_out(self) -> None:
        """A lease past its expiry (a multi-host job's ends its whole attempt)."""
        lease = self._some(Lease.objects.active().filter(job__isnull=False))
        if lease is not None:
            Lease.objects.filter(pk=lease.pk).update(
                expires_at=timezone.now() - timedelta(seconds=1)
            )

    def finish(self) -> None:
        lease = self._some(Lease.objects.active().filter(job__isnull=False))
        if lease is not None:
            host_ok = self.rng.random() < 0.8
            f.run(lease.job, self.rng.choice(("passed", "failed")), host_ok=host_ok)

    def lock_or_unlock(self) -> None:
        host = self._some(Host.objects.all())
        if host.locked:
            host_services.host_unlock(host=host, by="sam")
        else:
            host_services.host_lock(host=host, by="sam", reason="flaky")

    def pause_or_resume(self) -> None:
        worker = Worker.objects.get(pk=self.rng.choice(self.workers).pk)
        if worker.paused:
            host_services.worker_resume(worker=worker, by="sam")
        else:
            host_services.worker_pause(worker=worker, by="sam", reason="rewiring")

    def relabel(self) -> None:
        host = self._some(Host.objects.all())
        label, _ = Label.objects.get_or_create(name=self.rng.choice(("servo", "bt", "usb")))
        if host.labels.filter(pk=label.pk).exists():
            host.labels.remove(label)  # behind the services' back
        else:
            host.labels.add(label)

    def bare_updates(self) -> None:
        """Writes no service makes: the log must see them all the same."""
        choice = self.rng.randrange(6)
        job = self._some(Job.objects.filter(status="queued"))
        if choice == 0 and job:
            Job.objects.filter(pk=job.pk).update(priority=self.rng.choice((10, 45, 90)))
        elif choice == 1 and job:
            later = timezone.now() + timedelta(seconds=self.rng.choice((-5, 3600)))
            Job.objects.filter(pk=job.pk).update(not_before=later)  # a backoff, ended or not
        elif choice == 2:
            host = self._some(Host.objects.all())
            Host.objects.filter(pk=host.pk).update(
                status=self.rng.choice(("ready", "needs_repair")), current_build="R1"
            )
        elif choice == 3:
            suite = self._some(Suite.objects.all())
            if suite:
                Suite.objects.filter(pk=suite.pk).update(min_duts=self.rng.choice((0, 1, 3)))
        elif choice == 4 and job:
            Job.objects.filter(pk=job.pk).delete()
        elif choice == 5:
            running = self._some(Job.objects.filter(status__in=("leased", "running")))
            if running:  # a job holding a host: its priority is the host's
                Job.objects.filter(pk=running.pk).update(priority=self.rng.choice((5, 95)))

    def add_or_retire_host(self) -> None:
        """A host joins the lab, or one that never ran anything leaves it."""
        if self.rng.random() < 0.5:
            labels = [self.rng.choice(BOARDS), *self.rng.choice(EXTRAS)]
            f.host(f"n{self._name()}", labels, worker=self.rng.choice(self.workers))
        elif host := self._some(Host.objects.filter(leases__isnull=True, pinned_jobs__isnull=True)):
            Host.objects.filter(pk=host.pk).delete()

    def worker_goes_quiet(self) -> None:
        worker = self.rng.choice(self.workers)
        seen = timezone.now() - timedelta(hours=self.rng.choice((0, 1)))
        Worker.objects.filter(pk=worker.pk).update(last_seen=seen)

    def step(self) -> None:
        event = self.rng.choices(
            (
                self.submit,
                self.submit_suite,
                self.finish,
                self.lock_or_unlock,
                self.pause_or_resume,
                self.relabel,
                self.bare_updates,
                self.worker_goes_quiet,
                self.add_or_retire_host,
                self.submit_multihost,
                self.lease_runs_out,
            ),
            weights=(5, 2, 5, 1, 1, 1, 3, 1, 1, 3, 1),
        )[0]
        event()


def _crashing_tick(monkeypatch: pytest.MonkeyPatch) -> None:
    """A tick that dies after reading the lab: it rolls back, and keeps no lab."""
    real = planner.plan

    def crash(**kwargs: object) -> planner.Plan:
        raise RuntimeError("the scheduler process died mid-tick")

    monkeypatch.setattr(planner, "plan", crash)
    with pytest.raises(RuntimeError):
        services.scheduler_tick()
    monkeypatch.setattr(planner, "plan", real)


def _other_cluster_tick() -> None:
    """Another scheduler process (with no lab in memory) ticks: it takes log rows this one has
    not seen, and writes the wait-reason table this one last wrote."""
    mine, written = labstate.take(), tick_module._take_written()
    services.scheduler_tick()
    labstate.forget()
    tick_module._take_written()
    if mine is not None:
        labstate.keep(mine, take=mine.take)
    if written is not None:
        tick_module._keep_written(written)


# Seeds, each under a host choice: `spread` keeps each host's last release in the lab too, and
# re-reads it for the hosts the log names; `pack` orders hosts by their workers' load.
RUNS = [(seed, "affinity") for seed in range(6)] + [(6, "spread"), (7, "spread"), (8, "pack")]


@pytest.mark.parametrize(("seed", "host_choice"), RUNS)
def test_random_event_sequences_plan_as_a_whole_read(seed, host_choice, monkeypatch):
    labstate.forget()
    rng = random.Random(seed)
    if host_choice != "affinity":
        services.update_scheduler_settings("sam", reason="test", host_choice=host_choice)
    lab = Lab(rng)
    checker = Checker(monkeypatch)
    crashed = other = leased = 0
    for _ in range(60):
        for _ in range(rng.randint(1, 4)):
            lab.step()
        roll = rng.random()
        if roll < 0.05:
            lab.submit()  # a change: an unchanged tick would not plan, nor crash
            _crashing_tick(monkeypatch)
            crashed += 1
        elif roll < 0.2:
            _other_cluster_tick()
            other += 1
        leased += len(services.scheduler_tick().leases)
        checker.check_reasons()
    labstate.forget()
    # Not vacuous: most planning ticks refreshed by row, and each was compared.
    assert checker.compared == checker.refreshed >= 30
    assert checker.diffs >= 20  # most wrote only the classes whose reason changed
    assert checker.whole >= 1 + crashed  # the first tick, and one after each crash at least
    assert other >= 1
    assert leased >= 10
    # Multi-host jobs were planned too: leased, or holding hosts. Which of the two depends on
    # how long the sequence's ticks take (leases run out, workers go quiet by the clock).
    held = SchedulerTick.objects.exclude(holds={}).exists()
    assert Lease.objects.filter(slot__gt=0).exists() or held


def test_a_tick_after_a_crash_or_another_cluster_reads_the_lab_whole(monkeypatch):
    labstate.forget()
    f.host("h1", ["board:x"], worker=f.worker("w1"))
    f.job("J1", ["board:y"])
    first = services.scheduler_tick()
    f.job("J2", ["board:y"])
    refreshed = services.scheduler_tick()
    assert (first.refreshed, refreshed.refreshed) == (False, True)

    f.job("J3", ["board:y"])
    _crashing_tick(monkeypatch)
    f.job("J4", ["board:x"])
    after_crash = services.scheduler_tick()
    assert not after_crash.refreshed
    assert Job.objects.get(name="J4").status == "leased"

    labstate.forget()


def test_a_lab_older_than_the_log_keeps_is_read_whole(monkeypatch):
    labstate.forget()
    f.host("h1", ["board:x"], worker=f.worker("w1"))
    f.job("J0", ["board:z"])
    services.scheduler_tick()
    monkeypatch.setattr(snapshot, "LOG_KEPT_TAKES", 2)  # the log drops them, and says so
    for i in range(3):  # other processes' ticks, each with something to take
        f.job(f"J{i + 1}", ["board:z"])
        _other_cluster_tick()
    f.job("J4", ["board:x"])

    summary = services.scheduler_tick()

    assert not summary.refreshed
    assert [lease["job"] for lease in summary.leases] == ["J4"]
    labstate.forget()


def test_a_tick_in_another_process_is_caught_up_from_the_log(monkeypatch):
    labstate.forget()
    w = f.worker("w1")
    f.host("h1", ["board:x"], worker=w)
    f.host("h2", ["board:x"], worker=w)
    f.job("J1", ["board:z"])
    services.scheduler_tick()
    f.job("J2", ["board:x"])
    # A second scheduler process (another django-q worker or cluster) ticks and leases J2.
    env = subprocess_env(DATABASE_URL=live_database_url("labstate-other-cluster"))
    done = subprocess.run(
        [sys.executable, "manage.py", "tick"], check=False, capture_output=True, text=True, env=env
    )
    assert done.returncode == 0, done.stderr
    assert Job.objects.get(name="J2").status == "leased"
    f.job("J3", ["board:x"])
    f.job("J4", ["board:x"])
    checker = Checker(monkeypatch)

    summary = services.scheduler_tick()

    # It refreshed from what the other process took, and planned as a whole read would: had it
    # trusted its own lab, h1 and h2 would both look free and J2 still queued.
    assert summary.refreshed and checker.compared == 1
    assert [lease["job"] for lease in summary.leases] == ["J3"]
    labstate.forget()


def test_the_lab_is_read_whole_every_so_many_ticks(settings):
    labstate.forget()
    settings.SCHEDULER_WHOLE_READ_EVERY = 3
    f.host("h1", ["board:x"], worker=f.worker("w1"))
    refreshed = []
    for i in range(8):
        f.job(f"J{i}", ["board:y"])
        refreshed.append(services.scheduler_tick().refreshed)
    assert refreshed == [False, True, True, True, False, True, True, True]
    labstate.forget()


def test_a_whole_read_lets_go_of_the_lab_it_replaces_before_reading_the_new_one(
    settings, monkeypatch
):
    """Two labs in memory at once made the process one lab larger from its first whole read
    on (docs/performance.md#the-schedulers-memory-session-16)."""
    labstate.forget()
    settings.SCHEDULER_WHOLE_READ_EVERY = 1
    f.host("h1", ["board:x"], worker=f.worker("w1"))
    f.job("J0", ["board:y"])
    assert not services.scheduler_tick().refreshed
    f.job("J1", ["board:y"])
    assert services.scheduler_tick().refreshed  # the next is a whole read again
    old = labstate._kept  # the tick holds it too, as it did while reading
    assert old is not None and old.hosts and old.jobs
    real = labstate.LabState.read.__func__
    old_held_while_reading = []

    def read(cls, **kwargs: object) -> labstate.LabState:
        old_held_while_reading.append(
            len(getattr(old, "hosts", ())) + len(getattr(old, "jobs", ()))
        )
        return real(cls, **kwargs)

    monkeypatch.setattr(labstate.LabState, "read", classmethod(read))
    f.job("J2", ["board:x"])

    summary = services.scheduler_tick()

    assert not summary.refreshed and old_held_while_reading == [0]
    assert [lease["job"] for lease in summary.leases] == ["J2"]  # planned from the new lab
    labstate.forget()


def test_a_retried_tick_reads_the_lab_whole(monkeypatch):
    """A tick that rolls back on a deadlock and retries must not reuse the lab it had."""
    labstate.forget()
    f.host("h1", ["board:x"], worker=f.worker("w1"))
    f.job("J1", ["board:y"])
    services.scheduler_tick()
    f.job("J2", ["board:x"])
    real = planner.plan
    calls = []

    def deadlocked_once(**kwargs: object) -> planner.Plan:
        calls.append(1)
        if len(calls) == 1:
            raise OperationalError("deadlock detected")
        return real(**kwargs)

    monkeypatch.setattr(planner, "plan", deadlocked_once)
    summary = services.scheduler_tick()
    assert len(calls) == 2 and not summary.refreshed
    assert [lease["job"] for lease in summary.leases] == ["J2"]
    labstate.forget()


def test_a_whole_read_for_the_tick_is_frozen_out_of_the_collector(monkeypatch):
    """The kept lab is frozen (gc.freeze), and the collector is on again, even after a failure."""
    import gc

    labstate.forget()
    f.host("h1", ["board:x"], worker=f.worker("w1"))
    services.job_submit(owner="alice", spec=services.JobSpec(name="j", labels=["board:x"]))
    frozen = gc.get_freeze_count()
    assert services.scheduler_tick().leases
    assert gc.get_freeze_count() > frozen
    assert gc.isenabled()

    def broken(**kwargs: object) -> None:
        raise OperationalError("the database went away mid-read")

    labstate.forget()
    monkeypatch.setattr(labstate.LabState, "read", broken)
    with pytest.raises(OperationalError):
        services.scheduler_tick()
    assert gc.isenabled()
    labstate.forget()
