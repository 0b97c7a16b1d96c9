"""`bench.tick --churn`: N completions and N submissions, then a tick that leases N hosts."""

from __future__ import annotations

import argparse

import pytest
from django.utils import timezone

from bench import dbload
from bench import tick as tick_bench
from bench.labgen import LabShape, generate
from jobs import services
from jobs.models import Job

pytestmark = [pytest.mark.django_db, pytest.mark.postgres]


def test_each_churn_size_is_timed_and_leases_the_hosts_its_completions_freed():
    dbload.load(generate(LabShape(30, 300, 4, 6, seed=5)), now=timezone.now(), analyze=False)
    tick_bench._heartbeat_workers()
    services.scheduler_tick()
    submitted = Job.objects.count()

    churn = tick_bench._churn([1, 5], repeats=2)

    assert set(churn) == {"1", "5"}
    assert churn["5"]["leased"] == 5
    assert churn["5"]["runs"] == 2
    assert churn["5"]["queries"] > 0
    assert Job.objects.count() == submitted + 2 * (1 + 5)
    assert Job.objects.filter(status="passed").count() == 2 * (1 + 5)


@pytest.mark.parametrize("text", ["", "0", "1,x", "-3"])
def test_a_churn_list_that_is_not_positive_numbers_is_refused(text):
    with pytest.raises(argparse.ArgumentTypeError):
        tick_bench._sizes(text)


def test_a_churn_list_is_read_in_order():
    assert tick_bench._sizes("1,10,100") == [1, 10, 100]
