"""Array literals bind exactly the values they were built from, and id filters built on them
find the same rows however many ids they carry (PostgreSQL)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from django.db import DatabaseError, connection, transaction
from django.test.utils import CaptureQueriesContext

from schedsite.pgarrays import bigint_array, server_bound_cursor, text_array

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


def test_a_server_bound_cursor_sends_the_value_apart_and_leaves_other_cursors_as_they_were():
    """The value arrives exactly (quotes, backslashes, non-ASCII) without being quoted into the
    statement, Django still logs the statement, and the next cursor binds client-side again,
    also after a statement that failed."""
    value = "|".join(AWKWARD) * 50
    with CaptureQueriesContext(connection) as queries, server_bound_cursor(connection) as cursor:
        cursor.execute("SELECT %s::text, length(%s::text)", [value, value])
        assert cursor.fetchone() == (value, len(value))
    assert len(queries) == 1
    assert value not in queries[0]["sql"]  # bound apart: the statement says $1, not the text
    with CaptureQueriesContext(connection) as queries, connection.cursor() as cursor:
        cursor.execute("SELECT %s::text", ["plain"])
    assert queries[0]["sql"] == "SELECT 'plain'::text"  # quoted in: client-side
    with (
        pytest.raises(DatabaseError),
        transaction.atomic(),
        server_bound_cursor(connection) as cursor,
    ):
        cursor.execute("SELECT %s::int", ["not a number"])
    with connection.cursor() as cursor:
        cursor.execute("SELECT %s::text", ["again"])
        assert cursor.fetchone() == ("again",)
    assert type(connection.connection.cursor()).__name__ == "Cursor"  # Django's client cursor
    # Run more often than psycopg's threshold for preparing, it is still never prepared: a
    # prepared statement would break PgBouncer in transaction mode.
    for _ in range(8):
        with server_bound_cursor(connection) as cursor:
            cursor.execute("SELECT %s::text", ["again"])
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_prepared_statements")
        assert cursor.fetchone() == (0,)
