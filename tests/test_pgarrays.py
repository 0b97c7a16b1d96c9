"""Array literals bind exactly the values they were built from, and id filters built on them
find the same rows however many ids they carry (PostgreSQL)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from django.db import connection

from schedsite.pgarrays import bigint_array, text_array

pytestmark = [pytest.mark.django_db, pytest.mark.postgres]

AWKWARD = [
    "",
    "plain",
    "NULL",
    'say "hi"',
    "back\\slash",
    '\\"',
    "a,b",
    "{braces}",
    "  spaced  ",
    "tab\tnew\nline",
    "ünïcødé ✓",
    "'quote'",
]


def _select(sql: str, param: str) -> object:
    with connection.cursor() as cursor:
        cursor.execute(sql, [param])
        return cursor.fetchone()[0]


def test_text_arrays_round_trip_whatever_the_text():
    assert _select("SELECT %s::text[]", text_array(AWKWARD)) == AWKWARD
    assert _select("SELECT %s::text[]", text_array([])) == []


def test_bigint_arrays_round_trip_with_nulls():
    values = [1, 0, -5, 2**62, None, 42]
    assert _select("SELECT %s::bigint[]", bigint_array(values)) == values


def test_bigint_arrays_refuse_anything_but_integers():
    with pytest.raises(ValueError):
        bigint_array(["1}, {2"])  # type: ignore[list-item]


def test_timestamps_bound_as_text_arrays_keep_their_instant():
    at = datetime(2026, 11, 26, 18, 0, 0, 123456, tzinfo=UTC)
    assert _select("SELECT %s::timestamptz[]", text_array([at.isoformat()])) == [at]


@pytest.mark.parametrize("extra", [0, 2_000])  # placeholders, or one array past 1,000 ids
def test_id_filters_find_the_same_rows_as_placeholders_or_as_one_array(extra):
    from hosts.models import Host
    from jobs.scheduling.snapshot import ID_PLACEHOLDERS_MAX, id_list
    from tests import factories as f

    wanted = [f.host(f"h{i}").pk for i in range(3)]
    f.host("other")
    ids = wanted + [10**9 + i for i in range(extra)]  # ids no host has
    assert (len(ids) > ID_PLACEHOLDERS_MAX) == bool(extra)
    found = Host.objects.filter(pk__in=id_list(ids)).values_list("pk", flat=True)
    assert sorted(found) == sorted(wanted)
