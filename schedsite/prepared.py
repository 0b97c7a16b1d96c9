"""Hot queries compiled to SQL once per process, then run with other values.

Turning a `select_related` queryset into SQL costs more CPU in Django than PostgreSQL takes to
run it: about 1 ms for the runner protocol's lease read, 0.5 ms for the token lookup, on calls
that cost 5–7 ms in all (docs/performance.md#the-runner-protocol). A `PreparedQuery` builds its
queryset once per thread with placeholder values, keeps the compiled SQL, the compiler that
knows how to turn its rows into model instances and its converters, and on each run swaps the
real values into the parameters and lets Django's own iterable build the instances
(select_related, annotations, prefetches).

Only for querysets whose SQL does not depend on the values: each value must be an `int` or a
`str` that ends up as one parameter of its own (an exact lookup), never a list, a None or an
expression; `prepare` checks that each placeholder comes out as exactly one parameter.

A value may also be `Ids`, ids filtered by with the `in_array` lookup (schedsite.pgarrays),
which binds them as one array parameter on PostgreSQL: the SQL has one shape up to
ARRAY_PROBES_MAX ids and another beyond, each compiled once. Given no ids, the query returns
no rows without running: an id array must filter the rows the query returns, as
`filter(pk__in_array=ids)` on them does. Elsewhere (SQLite, a parameter per id) the queryset
is built each run.

One value may be a `datetime`, the time the query asks about (the tick's `now`): every
datetime parameter of the SQL must then be that time or a fixed distance from it (`now`,
`now - timeout`, `now + gap`), and each run moves them all by the same amount. On PostgreSQL
only, where datetimes reach the driver as they are; elsewhere the queryset is built each run.
"""

from __future__ import annotations

import copy
import threading
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Generic, TypeVar

from django.db import DEFAULT_DB_ALIAS, connections
from django.db.models import Model, QuerySet
from django.db.models.sql.compiler import SQLCompiler

from schedsite import pgarrays

M = TypeVar("M", bound=Model)

# PostgreSQL's bigint: an int outside it matches no row (Django answers such a lookup with an
# empty result; the prepared SQL must not send it).
BIGINT = (-(2**63), 2**63 - 1)


# The placeholder of a datetime value, far from any real time; a parameter within NEAR of it
# is derived from the value.
_AT = datetime(1901, 1, 1, tzinfo=UTC)
_NEAR = timedelta(days=3650)


class Ids:
    """The kind of a prepared value that is many ids: a set (or any sized iterable) of ints."""


def _placeholder(kind: type, index: int, many: bool = False) -> object:
    if kind is Ids:
        # Distinct from every real id and from each other placeholder; past ARRAY_PROBES_MAX
        # for the SQL of many ids.
        start = -987_654_321_000 - 10_000 * (index + 1)
        return list(range(start, start + (pgarrays.ARRAY_PROBES_MAX + 1 if many else 1)))
    if kind is datetime:
        return _AT
    if kind is int:
        return -987_654_321_000 - index
    if kind is str:
        return f"\x1fprepared-{index}\x1f"
    raise TypeError(f"a prepared query takes int or str values, not {kind.__name__}")


@dataclass(frozen=True)
class _Compiled(Generic[M]):
    queryset: QuerySet[M]
    compiler: SQLCompiler
    sql: str
    params: tuple
    slots: tuple[int, ...]  # for each value, the index of its parameter
    converters: dict  # what Django turns each column's value with, found once too
    # A datetime value's parameters: (index, distance from the value) of each.
    shifted: tuple[tuple[int, timedelta], ...] = ()


class PreparedQuery(Generic[M]):
    """A queryset of `build(*values)`, compiled on its first run for each `variant`."""

    def __init__(
        self,
        build: Callable[..., QuerySet[M]],
        *kinds: type,
        variant: Callable[[], Hashable] = lambda: None,
    ) -> None:
        # `variant`: whatever else the SQL depends on (a setting baked into a LIMIT, say).
        if kinds.count(datetime) > 1:
            raise TypeError("a prepared query takes at most one datetime value")
        self._build, self._kinds, self._variant = build, kinds, variant
        # Per thread: a compiler holds the thread's connection (gthread workers have several).
        self._local = threading.local()

    def all(self, *values: Any, using: str = DEFAULT_DB_ALIAS) -> list[M]:
        """The rows of build(*values), as instances."""
        many = self._check(values)
        if many is None:
            return []  # no row can match
        if (datetime in self._kinds or Ids in self._kinds) and connections[
            using
        ].vendor != "postgresql":
            return list(self._build(*values).using(using))
        cache = getattr(self._local, "compiled", None)
        if cache is None:
            cache = self._local.compiled = {}
        key = (using, self._variant(), *many)
        compiled = cache.get(key)
        if compiled is None:
            compiled = cache[key] = self._prepare(using, many)
        params = list(compiled.params)
        for slot, kind, value in zip(compiled.slots, self._kinds, values, strict=True):
            if slot >= 0:
                params[slot] = pgarrays.bigint_array(value) if kind is Ids else value
        if compiled.shifted:
            at = next(v for kind, v in zip(self._kinds, values, strict=True) if kind is datetime)
            for slot, distance in compiled.shifted:
                params[slot] = at + distance
        compiler = copy.copy(compiled.compiler)
        # On the connection this thread has now: the one it had when the query was prepared
        # may since have been replaced (closed, or swapped by a test's or a server's thread),
        # and running on it would read outside the caller's transaction — on SQLite's shared
        # in-memory test database, it even found the tick's own tables locked.
        compiler.connection = connections[using]
        compiler.as_sql = lambda *_args, **_kwargs: (compiled.sql, tuple(params))
        compiler.get_converters = lambda _expressions: compiled.converters
        queryset = compiled.queryset._chain()
        queryset.query.get_compiler = lambda *_args, **_kwargs: compiler
        return list(queryset)

    def _check(self, values: tuple) -> list[bool] | None:
        """Per Ids value, whether it holds more than ARRAY_PROBES_MAX ids; None if no row can
        match (no ids, an int out of range). TypeError for a value of the wrong kind."""
        if len(values) != len(self._kinds):
            raise TypeError(f"expected {len(self._kinds)} values, got {len(values)}")
        many: list[bool] = []
        for kind, value in zip(self._kinds, values, strict=True):
            if kind is Ids:
                if isinstance(value, (str, bytes)) or not hasattr(value, "__len__"):
                    raise TypeError(f"expected ids, got {type(value).__name__}")
                if not value:
                    return None
                many.append(len(value) > pgarrays.ARRAY_PROBES_MAX)
                continue
            if type(value) is not kind:
                raise TypeError(f"expected {kind.__name__}, got {type(value).__name__}")
            if kind is int and not BIGINT[0] <= value <= BIGINT[1]:
                return None
        return many

    def first(self, *values: Any, using: str = DEFAULT_DB_ALIAS) -> M | None:
        """The one row of build(*values) (a lookup by a unique key), or None."""
        rows = self.all(*values, using=using)
        return rows[0] if rows else None

    def _prepare(self, using: str, many: list[bool]) -> _Compiled[M]:
        sizes = iter(many)
        placeholders = [
            _placeholder(kind, i, next(sizes) if kind is Ids else False)
            for i, kind in enumerate(self._kinds)
        ]
        queryset = self._build(*placeholders).using(using)
        compiler = queryset.query.get_compiler(using=using)
        sql, params = compiler.as_sql()
        slots = []
        shifted = tuple(
            (i, param - _AT) for i, param in enumerate(params) if isinstance(param, datetime)
        )
        if any(abs(distance) > _NEAR for _i, distance in shifted) or (
            shifted and datetime not in self._kinds
        ):
            raise ValueError("every datetime parameter must be derived from the prepared time")
        for placeholder in placeholders:
            if isinstance(placeholder, datetime):
                if not shifted:
                    raise ValueError("the prepared time is not a parameter of the SQL")
                slots.append(-1)  # moved with its derived parameters (`shifted`)
                continue
            if isinstance(placeholder, list):  # ids: in_array's one array parameter
                placeholder = pgarrays.bigint_array(placeholder)  # type: ignore[assignment]
            found = [i for i, param in enumerate(params) if param == placeholder]
            if len(found) != 1:
                raise ValueError(
                    f"a prepared value must be one parameter of the SQL ({len(found)} found)"
                )
            slots.append(found[0])
        converters = compiler.get_converters(
            [col[0] for col in compiler.select[: compiler.col_count]]
        )
        return _Compiled(queryset, compiler, sql, tuple(params), tuple(slots), converters, shifted)
