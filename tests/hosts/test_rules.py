"""Which jobs a host fits: one rule (hosts.rules.job_fits_host), asked five ways."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from django.utils import timezone

from hosts.models import Host
from hosts.rules import job_fits_host, missing_labels
from jobs.models import Job, encode_labels
from jobs.scheduling import planner
from jobs.scheduling.planner.matching import Matching
from jobs.scheduling.queue import fitting_jobs
from tests import factories as f

pytestmark = pytest.mark.django_db


@dataclass(frozen=True)
class Fit:
    needs: frozenset[str]  # the job's labels
    carries: frozenset[str]  # the host's labels
    pinned: str = ""  # "", "this" (the host) or "other" (another host carrying every label)


def fit(needs: str, carries: str, pinned: str = "") -> Fit:
    return Fit(frozenset(needs.split()), frozenset(carries.split()), pinned)


CASES = {
    "no labels, any host": (fit("", ""), True),
    "no labels, a host with labels": (fit("", "a b"), True),
    "its one label": (fit("a", "a"), True),
    "a subset of the host's labels": (fit("a", "a b"), True),
    "all its labels, exactly": (fit("a b", "a b"), True),
    "one label missing": (fit("a b", "a"), False),
    "a label the host lacks": (fit("c", "a b"), False),
    "labels, a host with none": (fit("a", ""), False),
    "pinned to the host, which carries its labels": (fit("a", "a b", "this"), True),
    "pinned to the host, no labels": (fit("", "", "this"), True),
    "pinned to the host, which lacks a label": (fit("a c", "a b", "this"), False),
    "pinned to another host": (fit("a", "a b", "other"), False),
    "pinned to another host, no labels": (fit("", "", "other"), False),
}


@pytest.mark.parametrize(("case", "expected"), CASES.values(), ids=CASES.keys())
def test_every_reader_of_the_fit_rule_gives_the_same_answer(case: Fit, expected: bool):
    host = f.host("dut1", sorted(case.carries))
    other = f.host("dut2", sorted(case.needs | case.carries))
    pin = {"": None, "this": host, "other": other}[case.pinned]
    job = Job.objects.create(name="t1", label_key=encode_labels(case.needs), host=pin)
    pin_id = pin.pk if pin else None

    # The rule itself.
    rule = job_fits_host(
        labels=case.needs, pinned_host_id=pin_id, host_id=host.pk, host_labels=case.carries
    )
    assert rule is expected
    # The planner's values, as preemption and the what-if plan ask.
    now = timezone.now()
    state = planner.HostState(id=host.pk, hostname="dut1", labels=case.carries)
    job_state = planner.JobState(
        id=job.pk, name="t1", suite_id=None, priority=40, submitted_at=now, labels=case.needs,
        pinned_host_id=pin_id,
    )  # fmt: skip
    assert job_state.fits(state) is expected
    # The matching's class-level bitsets: is the host's class eligible for the job's class?
    # (A class is hosts with one label set; a pinned job's class is its host's, and which host
    # of the class it gets is assign_hosts' business.)
    if pin is None:
        other_state = planner.HostState(id=other.pk, hostname="dut2", labels=case.needs)
        matching = Matching([state, other_state], set())
        eligible = matching.eligible[matching.job_class(case.needs, None)]
        assert bool(eligible >> matching.class_of_host[host.pk] & 1) is expected
    # The SQL twin on the host side: hosts a job fits (submission, counts, filters).
    hosts = Host.objects.fitting(sorted(case.needs), pin_id)
    assert hosts.filter(pk=host.pk).exists() is expected
    # The SQL twin on the job side: jobs a host fits (the host page's waiting jobs).
    jobs = fitting_jobs(Job.objects.all(), host_id=host.pk, host_labels=host.label_names)
    assert jobs.filter(pk=job.pk).exists() is expected


def test_missing_labels_names_what_the_host_lacks_sorted():
    assert missing_labels(frozenset({"c", "a", "b"}), frozenset({"b"})) == ["a", "c"]
    assert missing_labels(frozenset({"a"}), frozenset({"a", "b"})) == []
