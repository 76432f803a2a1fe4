"""The throttles' shared counters (``common.throttling``): atomic under concurrency, one window per key,
in PostgreSQL and in Redis. The 429 answers themselves are tested through the API (test_hardening,
test_limits_live, test_mcp)."""

from __future__ import annotations

import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from django.db import connections

from common.throttling import counters
from tests.servers import redis_available

pytestmark = pytest.mark.django_db(transaction=True)

REDIS_URL = "redis://127.0.0.1:6379/0"
STORES = {
    "postgresql": {"BACKEND": "common.throttling.PostgresCounters", "LOCATION": "quarry_throttle"},
    "redis": {"BACKEND": "common.throttling.RedisCounters", "LOCATION": REDIS_URL},
}


@pytest.fixture(params=["postgresql", pytest.param("redis", marks=[
    pytest.mark.redis, pytest.mark.skipif(not redis_available(REDIS_URL), reason="no Redis server at 127.0.0.1:6379")])])
def store(request: Any, settings: Any) -> str:
    settings.QUARRY_THROTTLE_STORE = STORES[request.param]
    return request.param


def _hit(key: str, window: int) -> int:
    try:
        found = counters().hit(key, window)
        assert found is not None
        return found.count
    finally:
        connections.close_all()  # this thread's connection


def test_concurrent_hits_on_one_key_each_get_their_own_count(store: str) -> None:
    key = f"test:{uuid.uuid4().hex}"
    with ThreadPoolExecutor(max_workers=8) as pool:
        counts = list(pool.map(lambda _: _hit(key, 60), range(80)))
    assert sorted(counts) == list(range(1, 81))


def test_a_window_ends_its_first_hits_time_later_and_the_next_starts_from_one(store: str) -> None:
    key, other = f"test:{uuid.uuid4().hex}", f"test:{uuid.uuid4().hex}"
    first = counters().hit(key, 1)
    assert first is not None and first.count == 1 and 0 < first.resets_in <= 1
    second = counters().hit(key, 1)
    assert second is not None and second.count == 2 and second.resets_in <= first.resets_in
    assert counters().hit(other, 1).count == 1  # type: ignore[union-attr]
    time.sleep(1.1)
    again = counters().hit(key, 1)
    assert again is not None and again.count == 1 and again.resets_in > 0.5
