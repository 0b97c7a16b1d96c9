"""The caches the throttles count in: a database set in one statement, a Redis client reused.

Without Redis (`REDIS_URL`), DRF's throttles keep their counts in Django's database cache. Its
`set` counts the table's rows (to cull past MAX_ENTRIES inline), then selects and updates the
key in a transaction: four statements on every throttled request, on top of the read. On
PostgreSQL this backend sets a key with one `INSERT … ON CONFLICT DO UPDATE`, and the culling
runs from a django-q schedule instead (`cull`, every CACHE_CULL_MINUTES): expired rows are
deleted, and past MAX_ENTRIES Django's own cull drops the oldest. Everything else, and every
other database, is Django's DatabaseCache unchanged (docs/performance.md#throttles).
"""

from __future__ import annotations

import base64
import pickle
from datetime import UTC, datetime

from django.conf import settings
from django.core.cache import caches
from django.core.cache.backends.base import DEFAULT_TIMEOUT
from django.core.cache.backends.db import DatabaseCache as DjangoDatabaseCache
from django.core.cache.backends.redis import RedisCache as DjangoRedisCache
from django.core.cache.backends.redis import RedisCacheClient as DjangoRedisCacheClient
from django.db import DatabaseError, connections, router
from django.utils import timezone

from schedsite.schedules import install_every

CULL_FUNC = "schedsite.cache.cull"
CULL_SCHEDULE = "schedsite cache cull"


class RedisCacheClient(DjangoRedisCacheClient):
    """Django's Redis client, made once per connection pool instead of once per operation.

    Django builds a `redis.Redis` for every get and set, and its constructor fills a table of
    a few hundred response callbacks: a tenth of a millisecond a throttled request spends twice
    (docs/performance.md#throttles). A client is safe to share: it takes a connection from
    its pool for each command.
    """

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)
        self._clients: dict[int, object] = {}

    def get_client(self, key: object = None, *, write: bool = False) -> object:
        pool = self._get_connection_pool(write)
        client = self._clients.get(id(pool))
        if client is None:
            client = self._clients[id(pool)] = self._client(connection_pool=pool)
        return client


class RedisCache(DjangoRedisCache):
    """Django's Redis cache with the client above."""

    def __init__(self, server: str, params: dict) -> None:
        super().__init__(server, params)
        self._class = RedisCacheClient


class DatabaseCache(DjangoDatabaseCache):
    def _base_set(
        self, mode: str, key: str, value: object, timeout: object = DEFAULT_TIMEOUT
    ) -> bool:
        db = router.db_for_write(self.cache_model_class)
        connection = connections[db]
        if mode != "set" or connection.vendor != "postgresql":
            return super()._base_set(mode, key, value, timeout)
        timeout = self.get_backend_timeout(timeout)
        expires = datetime.max if timeout is None else datetime.fromtimestamp(timeout, tz=UTC)
        expires = connection.ops.adapt_datetimefield_value(expires.replace(microsecond=0))
        pickled = base64.b64encode(pickle.dumps(value, self.pickle_protocol)).decode("latin1")
        table = connection.ops.quote_name(self._table)
        sql = (
            f"INSERT INTO {table} (cache_key, value, expires) VALUES (%s, %s, %s) "  # noqa: S608 — the configured table name, quoted
            "ON CONFLICT (cache_key) DO UPDATE "
            "SET value = EXCLUDED.value, expires = EXCLUDED.expires"
        )
        try:
            with connection.cursor() as cursor:
                cursor.execute(sql, [key, pickled, expires])
        except DatabaseError:
            return False  # as Django's: a failed set is a miss, not an error
        return True

    def cull_now(self) -> int:
        """Delete expired rows, then cull as Django would past MAX_ENTRIES; rows left."""
        db = router.db_for_write(self.cache_model_class)
        connection = connections[db]
        table = connection.ops.quote_name(self._table)
        now = timezone.now().replace(microsecond=0)
        with connection.cursor() as cursor:
            cursor.execute(
                f"DELETE FROM {table} WHERE expires < %s",  # noqa: S608 — the configured table name, quoted
                [connection.ops.adapt_datetimefield_value(now)],
            )
            cursor.execute(f"SELECT COUNT(*) FROM {table}")  # noqa: S608 — as above
            rows = cursor.fetchone()[0]
            if rows > self._max_entries:
                self._cull(db, cursor, now, rows)
                cursor.execute(f"SELECT COUNT(*) FROM {table}")  # noqa: S608 — as above
                rows = cursor.fetchone()[0]
        return rows


def cull() -> dict:
    """The schedule's task: cull every cache of this backend."""
    left = {}
    for alias in settings.CACHES:
        cache = caches[alias]
        if isinstance(cache, DatabaseCache):
            left[alias] = cache.cull_now()
    return left


def install_schedule(**_kwargs: object) -> None:
    """Install the cull's schedule once (idempotent across migrations and restarts)."""
    install_every(CULL_SCHEDULE, CULL_FUNC, settings.CACHE_CULL_MINUTES)
