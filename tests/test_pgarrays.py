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


@pytest.mark.parametrize("extra", [0, 2_000])  # = ANY(array), or unnest past 1,000 ids
def test_in_array_finds_the_rows_pk_in_finds(extra):
    from django.db.models import Q

    from hosts.models import Host
    from jobs.models import Lease
    from schedsite.pgarrays import ARRAY_PROBES_MAX
    from tests import factories as f

    wanted = [f.host(f"h{i}").pk for i in range(3)]
    f.host("other")
    ids = wanted + [10**9 + i for i in range(extra)]  # ids no host has
    assert (len(ids) > ARRAY_PROBES_MAX) == bool(extra)
    found = Host.objects.filter(pk__in_array=ids).values_list("pk", flat=True)
    assert sorted(found) == sorted(wanted)
    # On a foreign key too, negated, and as one SQL parameter however many ids.
    assert Host.objects.exclude(pk__in_array=ids).count() == 1
    query = Host.objects.filter(Q(pk__in_array=ids)).query
    assert len(query.sql_with_params()[1]) == 1
    assert not Lease.objects.filter(host_id__in_array=ids).exists()


def test_in_array_of_no_ids_finds_nothing():
    from hosts.models import Host
    from tests import factories as f

    f.host("h")
    assert list(Host.objects.filter(pk__in_array=[])) == []
    assert Host.objects.exclude(pk__in_array=[]).count() == 1


def test_in_array_is_a_plain_in_list_on_sqlite():
    """The embedded demo runs on SQLite: there the lookup binds one placeholder per id."""
    from django.db.backends.sqlite3.base import DatabaseWrapper

    from hosts.models import Host

    sqlite = DatabaseWrapper(
        {**connection.settings_dict, "ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:"},
        alias="sqlite-check",
    )
    query = Host.objects.filter(pk__in_array=[3, 1, 2]).values("pk").query
    sql, params = query.get_compiler(connection=sqlite).as_sql()
    assert '"hosts_host"."id" IN (%s, %s, %s)' in sql
    assert params == (3, 1, 2)
