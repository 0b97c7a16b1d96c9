"""A page of jobs reads the latest reasons of its own job classes, not the whole table."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from jobs import selectors, services
from jobs.models import WaitReasonClass
from jobs.scheduling import planner, snapshot
from tests import factories as f

pytestmark = pytest.mark.django_db


def test_each_job_gets_its_class_reason_and_the_rest_of_the_table_stays_in_the_database():
    worker = f.worker()
    busy = f.host("dut1", ["board:x"], worker=worker)
    services.lease_reserve(host=busy, holder="sam", duration=timedelta(hours=1), reason="x")
    x = f.job("x", ["board:x"])
    y = f.job("y", ["board:y/2=+"])
    services.scheduler_tick()
    # A busy lab's table: thousands of classes besides the two on this page.
    WaitReasonClass.objects.bulk_create(
        WaitReasonClass(key=f'["board:other{i}"]|pin=-|suite=-', reason={"code": "busy"})
        for i in range(3000)
    )
    table = dict(WaitReasonClass.objects.values_list("key", "reason"))
    later = f.job("later", ["board:x"])  # after the tick: it waits for the next one

    with CaptureQueriesContext(connection) as captured:
        reasons = selectors.wait_reasons_for([x, y, later])

    for job in (x, y):
        key = planner.class_key(snapshot.job_state(job))
        assert reasons[job.pk] == table[key]
    assert reasons[x.pk]["code"] != reasons[y.pk]["code"]  # busy host vs no host has the label
    assert reasons[later.pk]["code"] == "pending_tick"
    reads = [q["sql"] for q in captured if "jobs_waitreasonclass" in q["sql"]]
    assert len(reads) == 1 and " IN (" in reads[0], "the page's classes are read by key"
