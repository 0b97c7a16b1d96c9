"""PostgreSQL array literals for bulk statements: `%s::bigint[]` and `%s::text[]` parameters.

psycopg adapts a Python list element by element in Python code: a cold tick binds arrays of
10,000 ids and texts to a handful of statements, and adapting them took about 0.2 s of it. A
literal is built by str.join and str.replace, in C: about a millisecond for 10,000 elements.
The `in_array` lookup filters by many ids the same way. One large value (not an array) is
better sent apart from the statement: `server_bound_cursor`.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager

from django.core.exceptions import EmptyResultSet
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.backends.postgresql.base import ServerBindingCursor
from django.db.backends.utils import CursorWrapper
from django.db.models import Field, ForeignObject, Lookup


@contextmanager
def server_bound_cursor(connection: BaseDatabaseWrapper) -> Iterator[CursorWrapper]:
    """A cursor of `connection` (PostgreSQL) that sends its values apart from the statement.

    Django's psycopg cursors bind client-side: each value is quoted into the statement's text,
    which the server then reads through again. For one large text value (a tick's wait-reason
    table, about 450 KB of JSON) that took 3.7 ms of which 1.2 remain when the value travels as
    a parameter of its own. Still Django's cursor (its wrappers, query log and error handling);
    only the psycopg cursor class differs, for this cursor alone. Its statements are not
    prepared: Django connects with psycopg's prepare_threshold off unless DATABASES' OPTIONS
    set one, so PgBouncer in transaction mode keeps working (docs/deployment.md).
    """
    connection.ensure_connection()
    raw = connection.connection
    client = raw.cursor_factory
    raw.cursor_factory = ServerBindingCursor
    try:
        cursor = connection.cursor()
    finally:
        raw.cursor_factory = client
    with cursor:
        yield cursor


def bigint_array(values: Iterable[int | None]) -> str:
    """`{1,2,NULL}`: every element goes through int(), so only digits and signs reach the text."""
    return "{" + ",".join("NULL" if v is None else str(int(v)) for v in values) + "}"


def text_array(values: Iterable[str]) -> str:
    """`{"a","b \\"c\\""}`: every element quoted, its backslashes and double quotes escaped."""
    return (
        "{"
        + ",".join('"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"' for v in values)
        + "}"
    )


# Up to this many ids, `in_array` is `= ANY(array)`, which PostgreSQL answers with an index
# probe per id, as it does `IN (%s, …)`; more are `IN (SELECT unnest(array))`, planned as a
# hash join over the table (at 10,000 ids in a cold tick, faster than 10,000 probes).
ARRAY_PROBES_MAX = 1000


class InArray(Lookup):
    """`pk__in_array=ids`: `pk__in` bound as one array parameter on PostgreSQL.

    A tick after a hundred changes filters by hundreds of ids in several statements; as
    placeholders, Django prepared each id and psycopg parsed each statement's long text, a few
    milliseconds a tick. Elsewhere (SQLite) it is a plain `IN` list.

    Give it a set (or any iterable but a list or tuple): Django resolves a list or tuple value
    element by element, in case one is an expression — two Python frames per id, for about
    1,700 ids a tick after a hundred changes, all plain integers.
    """

    lookup_name = "in_array"
    prepare_rhs = False

    def as_sql(self, compiler, connection):  # noqa: ANN001, ANN201 (Django's signature)
        lhs, params = self.process_lhs(compiler, connection)
        ids = list(self.rhs)
        if not ids:
            raise EmptyResultSet
        if connection.vendor != "postgresql":
            return f"{lhs} IN ({', '.join(['%s'] * len(ids))})", (*params, *map(int, ids))
        if len(ids) > ARRAY_PROBES_MAX:
            return f"{lhs} IN (SELECT unnest(%s::bigint[]))", (*params, bigint_array(ids))
        return f"{lhs} = ANY(%s::bigint[])", (*params, bigint_array(ids))


Field.register_lookup(InArray)
ForeignObject.register_lookup(InArray)  # foreign keys take only lookups registered on them
