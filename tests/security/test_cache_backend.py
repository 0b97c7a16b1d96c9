"""The database cache the throttles count in: one statement per set, culled on a schedule."""

from __future__ import annotations

import time

import pytest
from django.core.cache import caches
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django_q.models import Schedule

from schedsite import cache as cache_module

pytestmark = [pytest.mark.django_db, pytest.mark.postgres]


@pytest.fixture
def db_cache(settings):  # noqa: ANN001, ANN201
    settings.CACHES = {
        "default": {
            "BACKEND": "schedsite.cache.DatabaseCache",
            "LOCATION": "schedsite_cache",
            "OPTIONS": {"MAX_ENTRIES": 5},
        }
    }
    cache = caches["default"]
    cache.clear()
    return cache


def test_a_set_is_one_statement_and_reads_back_like_djangos(db_cache) -> None:  # noqa: ANN001
    with CaptureQueriesContext(connection) as captured:
        assert db_cache.set("throttle_user_1", [1.0, 2.0], 60) is None
    assert [q["sql"].split()[0] for q in captured.captured_queries] == ["INSERT"]
    assert db_cache.get("throttle_user_1") == [1.0, 2.0]
    db_cache.set("throttle_user_1", [3.0], 60)  # overwrite: the same one statement
    assert db_cache.get("throttle_user_1") == [3.0]
    assert db_cache.add("throttle_user_1", "other") is False  # add and touch stay Django's
    db_cache.set("forever", "x", None)
    assert db_cache.get("forever") == "x"


def test_the_cull_drops_expired_rows_and_then_the_oldest_past_max_entries(db_cache) -> None:  # noqa: ANN001
    db_cache.set("gone-soon", 1, 1)
    for i in range(8):
        db_cache.set(f"k{i}", i, 600)
    time.sleep(2.1)  # the expiry is stored in whole seconds
    left = cache_module.cull()["default"]
    assert db_cache.get("gone-soon") is None
    # Past MAX_ENTRIES (5) Django's cull removes a third of the rows: 8 → 6.
    assert left == 6


def test_migrate_installs_the_cull_schedule() -> None:
    schedule = Schedule.objects.get(name=cache_module.CULL_SCHEDULE)
    assert schedule.func == cache_module.CULL_FUNC and schedule.repeats == -1


def test_the_redis_cache_reuses_one_client_and_counts_like_djangos(settings) -> None:  # noqa: ANN001
    redis = pytest.importorskip("redis")
    url = "redis://127.0.0.1:6379/11"
    try:
        redis.Redis.from_url(url).ping()
    except redis.ConnectionError:
        pytest.skip("no Redis on 127.0.0.1:6379")
    settings.CACHES = {"default": {"BACKEND": "schedsite.cache.RedisCache", "LOCATION": url}}
    cache = caches["default"]
    cache.set("throttle_runner_1", [1.0, 2.0], 60)
    assert cache.get("throttle_runner_1") == [1.0, 2.0]
    assert cache._cache.get_client() is cache._cache.get_client(write=True)
    cache.delete("throttle_runner_1")
    assert cache.get("throttle_runner_1") is None
