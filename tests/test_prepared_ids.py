"""`PreparedQuery` with many ids (`Ids`): compiled once per shape, run with any ids, the rows
the queryset would give. On PostgreSQL the ids are one array parameter swapped in each run; on
SQLite the queryset is built each run — both must answer alike."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from hosts.models import Host
from schedsite import pgarrays
from schedsite.prepared import Ids, PreparedQuery
from tests import factories as f

pytestmark = pytest.mark.django_db


def _names(ids):  # noqa: ANN001, ANN202
    return (
        Host.objects.filter(pk__in_array=ids)
        .order_by("hostname")
        .values_list("hostname", flat=True)
    )


@pytest.fixture
def hosts() -> dict[str, int]:
    rack = f.worker("rack-1")
    return {name: f.host(name, ["board:x"], worker=rack).pk for name in ("a", "b", "c", "d", "e")}


def test_each_run_answers_for_its_own_ids(hosts):
    query = PreparedQuery(_names, Ids)
    assert query.all({hosts["a"], hosts["c"]}) == ["a", "c"]
    assert query.all([hosts["e"]]) == ["e"]  # the same SQL, other ids
    assert query.all(frozenset(hosts.values())) == ["a", "b", "c", "d", "e"]
    assert query.all({hosts["b"], 10**12}) == ["b"]  # an id no row has matches nothing


def test_more_ids_than_probes_take_the_other_shape_and_still_answer(hosts, monkeypatch):
    monkeypatch.setattr(pgarrays, "ARRAY_PROBES_MAX", 2)
    query = PreparedQuery(_names, Ids)
    with CaptureQueriesContext(connection) as queries:
        assert query.all({hosts["a"], hosts["b"], hosts["d"]}) == ["a", "b", "d"]
        assert query.all({hosts["c"]}) == ["c"]
    if connection.vendor == "postgresql":
        many, few = (q["sql"] for q in queries.captured_queries)
        assert "unnest" in many and "unnest" not in few


def test_no_ids_match_no_row_without_a_query(hosts):
    query = PreparedQuery(_names, Ids)
    with CaptureQueriesContext(connection) as queries:
        assert query.all(set()) == []
    assert queries.captured_queries == []


def test_ids_must_be_a_collection_of_ids(hosts):
    query = PreparedQuery(_names, Ids)
    with pytest.raises(TypeError, match="expected ids"):
        query.all("12")
    with pytest.raises(TypeError, match="expected ids"):
        query.all(iter([hosts["a"]]))
