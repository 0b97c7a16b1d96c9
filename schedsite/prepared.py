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
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Generic, TypeVar

from django.db import DEFAULT_DB_ALIAS, connections, transaction
from django.db.models import Model, QuerySet
from django.db.models.sql import UpdateQuery
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


@dataclass(frozen=True)
class _CompiledUpdate:
    sql: str
    params: tuple
    slots: tuple[int, ...]  # for each value, the index of its parameter


class PreparedUpdate:
    """An `update()` compiled to SQL once per process, then run with other values.

    `build(*values)` gives a queryset and the fields to set, as `queryset.update(**fields)`
    takes them. Building the UPDATE each call (the filter, the values to set, the compile) cost
    more CPU than PostgreSQL took to run it, three times on a runner's `complete`
    (docs/performance.md#the-runner-protocol). A run answers what `update()` would: the number
    of rows changed.

    The values are `int`, `str` or `datetime` (a time zone aware one), each of them one
    parameter of the SQL of its own, where the SQL does not depend on it (checked when it
    compiles): an exact lookup, or a value to set. Elsewhere than on PostgreSQL, or with a value
    the compiled SQL cannot take as it is (another type, a naive datetime, an int past bigint),
    the update is built as Django builds it.
    """

    def __init__(self, build: Callable[..., tuple[QuerySet, dict[str, Any]]], *kinds: type):
        for kind in kinds:
            _placeholder(kind, 0)  # TypeError for a kind it cannot take
        self._build, self._kinds = build, kinds
        # Per database alias: the SQL holds no connection, only the backend's quoting.
        self._compiled: dict[str, _CompiledUpdate] = {}

    def run(self, *values: Any, using: str = DEFAULT_DB_ALIAS) -> int:
        """The rows changed by the update of build(*values)."""
        if len(values) != len(self._kinds):
            raise TypeError(f"expected {len(self._kinds)} values, got {len(values)}")
        exact = connections[using].vendor == "postgresql" and all(
            _as_it_is(kind, value) for kind, value in zip(self._kinds, values, strict=True)
        )
        if not exact:
            queryset, fields = self._build(*values)
            return queryset.using(using).update(**fields)
        compiled = self._compiled.get(using)
        if compiled is None:
            compiled = self._compiled[using] = self._prepare(using)
        params = list(compiled.params)
        for slot, value in zip(compiled.slots, values, strict=True):
            params[slot] = value
        # As update() does: an error inside a caller's transaction marks it for rollback.
        with transaction.mark_for_rollback_on_error(using), connections[using].cursor() as cursor:
            cursor.execute(compiled.sql, params)
            return cursor.rowcount

    def _prepare(self, using: str) -> _CompiledUpdate:
        placeholders = [_update_placeholder(kind, i) for i, kind in enumerate(self._kinds)]
        queryset, fields = self._build(*placeholders)
        query = queryset.using(using).query.chain(UpdateQuery)
        query.add_update_values(fields)
        query.annotations = {}
        sql, params = query.get_compiler(using).as_sql()
        if query.related_updates:
            raise ValueError("a prepared update sets the fields of one table only")
        slots = []
        for placeholder in placeholders:
            found = [i for i, param in enumerate(params) if param == placeholder]
            if len(found) != 1:
                raise ValueError(
                    f"a prepared value must be one parameter of the SQL ({len(found)} found)"
                )
            slots.append(found[0])
        return _CompiledUpdate(sql, tuple(params), tuple(slots))


def _as_it_is(kind: type, value: Any) -> bool:
    """Whether the value goes into the SQL as it is, as Django would send it."""
    if type(value) is not kind:
        return False
    if kind is int:
        return BIGINT[0] <= value <= BIGINT[1]
    return kind is not datetime or value.tzinfo is not None


def _update_placeholder(kind: type, index: int) -> object:
    # A datetime placeholder of its own for each value: an update may set two times.
    if kind is datetime:
        return _AT + timedelta(days=index)
    return _placeholder(kind, index)


# update_one's prepared updates, by the rows' key, the fields set and their values' types.
_UPDATES: dict[tuple, PreparedUpdate] = {}
_TAKEN = (int, str, datetime)


def update_one(
    key: Hashable, rows: Callable[[], QuerySet], pk: int, fields: Mapping[str, Any]
) -> int:
    """`rows().filter(pk=pk).update(**fields)`, compiled once for each `key` (what names the
    rows' filter: the same key, the same filter) and set of fields; the rows changed.

    A str's subclass (a TextChoices member) is sent as its text, as Django sends it; a value
    of any other type than int, str and datetime (None, an expression) has Django build the
    update each call."""
    values = [str(value) if isinstance(value, str) else value for value in fields.values()]
    kinds = tuple(type(value) for value in values)
    if not all(kind in _TAKEN for kind in kinds):
        return rows().filter(pk=pk).update(**fields)
    names = tuple(fields)
    shape = (key, names, kinds)
    prepared = _UPDATES.get(shape)
    if prepared is None:

        def build(pk: int, *values: Any) -> tuple[QuerySet, dict[str, Any]]:
            return rows().filter(pk=pk), dict(zip(names, values, strict=True))

        prepared = _UPDATES.setdefault(shape, PreparedUpdate(build, int, *kinds))
    return prepared.run(pk, *values)
