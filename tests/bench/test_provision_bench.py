"""The provisioning benchmark on a tiny lab: its report, and the physics of reimaging."""

from __future__ import annotations

import pytest
from django.utils import timezone

from bench.provision import (
    FIGURES,
    STRATEGIES,
    Shape,
    builds_at,
    builds_policy,
    goals,
    main,
    means,
    simulate,
    submissions,
)
from hosts.choices import EventKind
from hosts.models import Host, HostEvent, Provision, Worker
from jobs.choices import JobStatus
from jobs.models import Job, Lease, Suite
from jobs.scheduler_models import SchedulerSettings

# 40 hosts (4 boards of 10, in 2 pools, 8 chameleons), a suite of 2-5 jobs every 2 minutes
# for half an hour, 3 builds in flight with a new one every 10 minutes: builds change hands all
# the time, and most ticks find several free hosts a job fits, some on its build, some not.
TINY = Shape(
    hosts=40,
    workers=2,
    hours=0.5,
    step=60,
    provision_minutes=5,
    test_minutes=(1, 4),
    builds_in_flight=3,
    new_build_every_minutes=10,
    suite_jobs=(2, 5),
    suite_every_minutes=2,
)
SEED = 2


def day(strategy: str) -> dict:
    return simulate(
        TINY,
        strategy=strategy,
        seed=SEED,
        start=timezone.now(),
        planned=submissions(TINY, SEED),
    )


def empty_lab() -> None:
    """What a day left, gone, so that the next day starts on an empty lab as each run does."""
    Lease.objects.all().delete()
    Suite.objects.all().delete()
    Job.objects.all().delete()
    HostEvent.objects.all().delete()
    Host.objects.all().delete()
    Worker.objects.all().delete()


@pytest.mark.django_db
def test_a_day_reports_its_figures_and_every_provision_writes_the_hosts_build():
    report = day("first-fit")
    assert report["strategy"] == "first-fit" and report["seed"] == SEED
    assert report["jobs_finished"] > 0
    assert report["jobs_started"] >= report["jobs_finished"]
    assert report["jobs_submitted"] == Job.objects.count()
    assert report["jobs_finished"] == Job.objects.filter(status=JobStatus.PASSED).count()
    assert report["jobs_finished_per_hour"] == report["jobs_finished"] / TINY.hours
    assert 0 < report["provisions_done"] <= report["provisions"] <= report["jobs_started"]
    per_1000 = round(1000 * report["provisions"] / report["jobs_started"], 1)
    assert report["provisions_per_1000_jobs"] == per_1000
    # Each provision costs its minutes of host time; those still under way at the day's end
    # count up to it.
    hours = TINY.provision_minutes / 60
    assert report["provisions_done"] * hours - 0.01 <= report["provision_host_hours"]
    assert report["provision_host_hours"] <= report["provisions"] * hours + 0.01
    assert report["provisioning_share"] + report["testing_share"] <= 1
    assert report["leases_lost"] == 0
    # The runner wrote the host's build once per provision that ended, and a test only ever
    # runs on a host that carries its build.
    # ... through `start` with the build: a provisioned event and a Provision row each, and
    # every lease that provisioned said so (provision_to) when the tick made it.
    writes = HostEvent.objects.filter(actor="provision-runner", kind=EventKind.PROVISIONED)
    assert writes.count() == report["provisions_done"] == Provision.objects.count()
    assert report["provision_to_disagrees"] == 0
    assert report["leases_with_provision_to"] == report["provisions"]
    leases = Lease.objects.active().filter(job__status=JobStatus.RUNNING)
    running = list(leases.select_related("job__suite", "host"))
    assert running
    for lease in running:
        assert lease.host.current_build == lease.job.build_to_test
    assert Host.objects.exclude(current_build="").count() == TINY.hosts


@pytest.mark.django_db
def test_ignoring_builds_provisions_more_often():
    ignored = day("none")
    empty_lab()
    preferred = day("first-fit")
    assert ignored["jobs_submitted"] == preferred["jobs_submitted"]  # the same submissions
    assert ignored["provisions_per_1000_jobs"] > preferred["provisions_per_1000_jobs"]
    assert ignored["provision_host_hours"] > preferred["provision_host_hours"]


@pytest.mark.django_db
def test_the_strategy_is_the_ticks_policy_inside_the_block_only():
    assert SchedulerSettings.load().policy().builds == "min-cost"
    with builds_policy("none"):
        assert SchedulerSettings.load().policy().builds == "none"
    assert SchedulerSettings.load().policy().builds == "min-cost"
    with pytest.raises(RuntimeError), builds_policy("first-fit"):
        raise RuntimeError
    assert SchedulerSettings.load().policy().builds == "min-cost"
    with builds_policy("same-build-first", 45):
        policy = SchedulerSettings.load().policy()
        assert (policy.builds, policy.same_build_first_minutes) == ("min-cost", 45)
    assert SchedulerSettings.load().policy().same_build_first_minutes == 0
    with pytest.raises(ValueError), builds_policy("cheapest"):
        pass


def test_the_submissions_are_one_seeds_under_every_strategy():
    first = submissions(TINY, SEED)
    assert first == submissions(TINY, SEED)
    assert first != submissions(TINY, SEED + 1)
    # Each suite tests a build in flight when it arrives, 5-40 jobs on the default shape.
    for suite in first:
        assert suite.build in builds_at(TINY, suite.at_s)
        assert TINY.suite_jobs[0] <= len(suite.jobs) <= TINY.suite_jobs[1]
    assert builds_at(TINY, 0) == ["R120", "R121", "R122"]
    assert builds_at(TINY, 25 * 60) == ["R122", "R123", "R124"]
    assert len({s.build for s in first}) > TINY.builds_in_flight  # builds came and went


def test_the_means_and_the_goal_compare_min_cost_with_first_fit():
    def run(strategy: str, seed: int, provisions: float, per_hour: float) -> dict:
        return {
            "strategy": strategy,
            "seed": seed,
            "provisions_per_1000_jobs": provisions,
            "provision_host_hours": provisions / 100,
            "jobs_finished_per_hour": per_hour,
        }

    runs = [
        run("first-fit", 1, 300, 900),
        run("first-fit", 2, 500, 800),
        run("min-cost", 1, 350, 880),
        run("min-cost", 2, 350, 830),
    ]
    none = {
        "same_build_first_fewer_provisions": None,
        "same_build_first_as_many_jobs_per_hour": None,
    }
    mean = means(runs)
    assert set(mean) == {"first-fit", "min-cost"}
    assert mean["first-fit"] == {"seeds": 2, **dict(zip(FIGURES, (400, 4, 850), strict=True))}
    assert goals(mean) == {"fewer_provisions": True, "as_many_jobs_per_hour": True, **none}
    runs[3]["jobs_finished_per_hour"] = 810
    assert goals(means(runs)) == {"fewer_provisions": True, "as_many_jobs_per_hour": False, **none}
    assert goals(means(runs[:2])) == {
        "fewer_provisions": None,
        "as_many_jobs_per_hour": None,
        **none,
    }
    runs += [run("same-build-first", 1, 420, 900), run("same-build-first", 2, 300, 800)]
    assert goals(means(runs)) == {
        "fewer_provisions": True,
        "as_many_jobs_per_hour": False,
        "same_build_first_fewer_provisions": True,  # 360 < 400
        "same_build_first_as_many_jobs_per_hour": True,  # 850 >= 850
    }
    assert STRATEGIES == ("none", "first-fit", "min-cost", "same-build-first")


@pytest.mark.parametrize(
    "argv",
    [
        ["--hours", "0"],
        ["--test-minutes", "5", "1"],
        ["--hosts", "0"],
        ["--any-board-share", "1.5"],
        ["--strategies", "cheapest"],
    ],
)
def test_bad_options_are_refused_before_anything_runs(argv, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 2
    assert "error" in capsys.readouterr().err
