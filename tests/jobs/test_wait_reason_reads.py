"""A page of jobs reads the latest tick's reasons for its own job classes, not the whole table."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from jobs import selectors, services
from jobs.models import SchedulerTick
from jobs.scheduling import planner, snapshot
from tests import factories as f

pytestmark = [pytest.mark.django_db, pytest.mark.postgres]


def test_each_job_gets_its_class_reason_and_the_rest_of_the_table_stays_in_the_database():
    worker = f.worker()
    busy = f.host("dut1", ["board:x"], worker=worker)
    services.lease_reserve(host=busy, holder="sam", duration=timedelta(hours=1), reason="x")
    x = f.job("x", ["board:x"])
    y = f.job("y", ["board:y/2=+"])
    services.scheduler_tick()
    tick = SchedulerTick.objects.latest("id")
    # A busy lab's table: thousands of classes besides the two on this page.
    table = {f'["board:other{i}"]|pin=-|suite=-': {"code": "busy"} for i in range(3000)}
    table.update(tick.wait_reasons)
    SchedulerTick.objects.filter(pk=tick.pk).update(wait_reasons=table)
    later = f.job("later", ["board:x"])  # after the tick: it waits for the next one

    with CaptureQueriesContext(connection) as captured:
        reasons = selectors.wait_reasons_for([x, y, later])

    for job in (x, y):
        key = planner.class_key(snapshot.job_state(job))
        assert reasons[job.pk] == table[key]
    assert reasons[x.pk]["code"] != reasons[y.pk]["code"]  # busy host vs no host has the label
    assert reasons[later.pk]["code"] == "pending_tick"
    whole = [q["sql"] for q in captured if '"wait_reasons"' in q["sql"] and "->" not in q["sql"]]
    assert whole == [], "a query read the whole wait-reason table"


def test_where_json_paths_cannot_name_a_class_key_the_table_is_read_whole(monkeypatch):
    """SQLite (the embedded demo) cannot name a key holding a double quote in a JSON path, and
    every class key with labels holds some: there the page's reasons come from the whole table.
    The same jobs get the same reasons either way."""
    f.host("dut1", ["board:x"], worker=f.worker())
    f.job("x1", ["board:x"])
    jobs = [f.job("x2", ["board:x"]), f.job("y", ["board:y"])]
    services.scheduler_tick()  # x1 takes the host; x2 and y wait
    by_path = selectors.wait_reasons_for(jobs)

    monkeypatch.setattr(connection, "vendor", "sqlite")
    whole = selectors.wait_reasons_for(jobs)

    assert whole == by_path
    assert {reason["code"] for reason in whole.values()} == {"outranked", "no_matching_host"}
