"""Throttles (answered 429 with ``Retry-After`` in the project's error shape) and the client's address.

- ``ScopedTokenThrottle`` (every API view, through DEFAULT_THROTTLE_CLASSES; MCP tool calls too): a
  view that sets ``throttle_scope`` (a name of ``QUARRY_THROTTLE_RATES``, or ``{method: name}``) is
  limited per API token, per signed-in user without one, else per client address.
- ``BadTokenThrottle``: bearer tokens that do not exist, per client address. Only misses are counted,
  and only a miss is refused: a valid token always passes, so one client behind a shared address
  (an office's NAT) guessing or misconfigured cannot lock out everyone else there.

The algorithm is a fixed window that opens at a key's first request: one atomic "increment, or
start a new window if the last one ended" per request, whose result (the count so far and when the
window ends) decides. Why fixed and not sliding: one counter per key and one round trip, exact (a
burst of N gets exactly the rate through, whatever the concurrency) and an exact ``Retry-After``; a
window anchored at the first request has no calendar boundary for a burst to straddle. The price:
a client that waits for its window to end and bursts again can get twice the rate within a short
span, once. That is fine for what these limits are for (protecting the service, not billing).

Counts live where every app process sees them (``QUARRY_THROTTLE_STORE``): Redis when ``REDIS_URL``
is set (``RedisCounters``: SET NX + INCR + PTTL in one MULTI), else a table in PostgreSQL
(``PostgresCounters``: one ``INSERT ... ON CONFLICT DO UPDATE ... RETURNING``). A read-modify-write
of a cached value is not enough: concurrent requests all read the same count (issue 30: 800 of 800
searches passed a 600/min limit). A Redis that fails lets the request through (the throttles protect
the service, they must not stop it); PostgreSQL's errors are the database's: the request fails as it
would at its next query.
"""

from __future__ import annotations

import functools
import logging
import math
import random
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, connections
from django.http import HttpRequest
from django.utils.module_loading import import_string
from rest_framework import exceptions
from rest_framework.throttling import BaseThrottle

logger = logging.getLogger(__name__)

_PERIODS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def client_ip(request: HttpRequest) -> str | None:
    """The client's address: the TCP peer, or behind ``QUARRY_TRUSTED_PROXIES`` proxies the address the
    outermost one saw (X-Forwarded-For read from the right, so a client cannot choose it). None when
    unknown (a request made in process)."""
    remote = request.META.get("REMOTE_ADDR") or None
    proxies = settings.QUARRY_TRUSTED_PROXIES
    forwarded = request.META.get("HTTP_X_FORWARDED_FOR")
    if not proxies or not forwarded:
        return remote
    hops = [hop.strip() for hop in forwarded.split(",") if hop.strip()]
    return hops[-min(proxies, len(hops))] if hops else remote


class Throttled(exceptions.Throttled):
    """429 with a whole number of seconds to wait (at least 1), so ``Retry-After`` is always useful.
    DRF appends "Expected available in N seconds." to ``detail``."""

    def __init__(self, wait: float, detail: str) -> None:
        super().__init__(wait=max(1, math.ceil(wait)), detail=detail)


# --- the shared counters ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Hit:
    """What one counted request learned: the window's count including it, and seconds until the window ends."""

    count: int
    resets_in: float


class Counters(Protocol):
    """A store of fixed-window counters shared by every process (``QUARRY_THROTTLE_STORE``'s BACKEND).

    ``hit`` must be atomic: N concurrent calls on one key within a window return the counts 1..N,
    each exactly once. It returns None when the store is unreachable and the request should pass.
    """

    def hit(self, key: str, window_seconds: int) -> Hit | None: ...


class PostgresCounters:
    """Counters in a PostgreSQL table (``LOCATION``, ``accounts.ThrottleCount``'s), one upsert per hit.

    The upsert takes the key's row lock, so concurrent hits on one key queue for a statement's time
    each and every one sees its own count. It runs in autocommit on the request's connection (no
    view wraps the authentication in a transaction), so the lock is held for that statement only.
    """

    # Expired windows are deleted by every this-many-th hit on average, a bounded batch at a time:
    # keys of one-off addresses (bad tokens from many places) would otherwise pile up.
    CULL_EVERY = 500
    CULL_BATCH = 1000

    def __init__(self, location: str, using: str = DEFAULT_DB_ALIAS) -> None:
        self.table = connections[using].ops.quote_name(location)
        self.using = using

    def hit(self, key: str, window_seconds: int) -> Hit:
        # statement_timestamp(), not now(): inside a caller's transaction now() would be its start.
        sql = f"""
            INSERT INTO {self.table} AS t (key, hits, window_ends)
            VALUES (%s, 1, statement_timestamp() + make_interval(secs => %s))
            ON CONFLICT (key) DO UPDATE SET
                hits = CASE WHEN t.window_ends <= statement_timestamp() THEN 1 ELSE t.hits + 1 END,
                window_ends = CASE WHEN t.window_ends <= statement_timestamp() THEN EXCLUDED.window_ends
                                   ELSE t.window_ends END
            RETURNING hits, EXTRACT(EPOCH FROM window_ends - statement_timestamp())
        """
        with connections[self.using].cursor() as cursor:
            cursor.execute(sql, [key, window_seconds])
            count, resets_in = cursor.fetchone()
            if random.randrange(self.CULL_EVERY) == 0:
                cursor.execute(
                    f"DELETE FROM {self.table} WHERE key IN (SELECT key FROM {self.table} "
                    "WHERE window_ends < statement_timestamp() LIMIT %s)", [self.CULL_BATCH])
        return Hit(count=int(count), resets_in=float(resets_in))


class RedisCounters:
    """Counters in Redis (``LOCATION``: a redis:// URL): SET NX with the window's TTL, INCR, PTTL in one
    MULTI/EXEC, so the window's expiry is set exactly once, by its first hit, and never lost to a race."""

    PREFIX = "quarry:throttle:"
    # A throttle waits at most this long for Redis before letting the request through.
    TIMEOUT_SECONDS = 0.5

    def __init__(self, location: str) -> None:
        import redis  # here: the package is needed only when Redis is configured

        self._errors: tuple[type[BaseException], ...] = (redis.RedisError, OSError)
        self.client = redis.Redis.from_url(location, socket_timeout=self.TIMEOUT_SECONDS,
                                           socket_connect_timeout=self.TIMEOUT_SECONDS)

    def hit(self, key: str, window_seconds: int) -> Hit | None:
        name = self.PREFIX + key
        try:
            with self.client.pipeline(transaction=True) as pipe:
                pipe.set(name, 0, px=window_seconds * 1000, nx=True)
                pipe.incr(name)
                pipe.pttl(name)
                _, count, ttl_ms = pipe.execute()
        except self._errors as exc:
            logger.warning("throttle: Redis unavailable (%s); not throttling", type(exc).__name__)
            return None
        return Hit(count=int(count), resets_in=max(ttl_ms, 0) / 1000)


@functools.lru_cache(maxsize=8)
def _build_counters(backend: str, location: str) -> Counters:
    # One per process and configuration: a Redis client owns its connection pool.
    return import_string(backend)(location)  # type: ignore[no-any-return]


def counters() -> Counters:
    """The configured store (``QUARRY_THROTTLE_STORE``: ``{"BACKEND": dotted path, "LOCATION": ...}``)."""
    store = settings.QUARRY_THROTTLE_STORE
    return _build_counters(store["BACKEND"], store["LOCATION"])


@dataclass(frozen=True)
class Limit:
    """One scope's rate: at most ``count`` requests per ``seconds``."""

    scope: str
    rate: str
    count: int
    seconds: int

    @classmethod
    def of(cls, scope: str) -> Limit | None:
        """The scope's limit from ``QUARRY_THROTTLE_RATES`` (``<count>/<s|min|hour|day>``), None when off."""
        rate = settings.QUARRY_THROTTLE_RATES.get(scope)
        if rate is None:
            return None
        count, period = rate.split("/")
        return cls(scope=scope, rate=rate, count=int(count), seconds=_PERIODS[period[0]])

    def hit(self, ident: str, detail: str) -> None:
        """Count one request of ``ident`` (``kind:id``); raise ``Throttled`` once the window holds more than the rate."""
        found = counters().hit(f"{self.scope}:{ident}", self.seconds)
        if found is not None and found.count > self.count:
            raise Throttled(found.resets_in, detail)


# --- the throttles ---------------------------------------------------------------------------------


class ScopedTokenThrottle(BaseThrottle):
    """Limits the views that name a ``throttle_scope``, per token (else user, else address).

    Every request is counted, refused ones too: within a window that only raises a count that
    already refuses, and the window's end does not move.
    """

    def allow_request(self, request: Any, view: Any) -> bool:
        """True, or raise ``Throttled`` (429 with ``Retry-After``) when the caller is over the scope's rate."""
        scope = getattr(view, "throttle_scope", None)
        if isinstance(scope, Mapping):
            scope = scope.get(request.method)
        limit = Limit.of(scope) if scope else None
        if limit is None:
            return True
        token = getattr(request, "auth", None)
        user = getattr(request, "user", None)
        if token is not None and getattr(token, "pk", None) is not None:
            ident = f"token:{token.pk}"
        elif user is not None and user.is_authenticated:
            ident = f"user:{user.pk}"
        else:
            ident = f"ip:{client_ip(request) or 'unknown'}"
        limit.hit(ident, f"Too many {scope} requests for this {ident.split(':')[0]}: at most {limit.rate}.")
        return True


class BadTokenThrottle:
    """Unknown or malformed bearer tokens, per client address (``QUARRY_THROTTLE_BAD_TOKENS``).

    Contract for authenticators: look the presented token up first (a digest lookup: cheap, and its
    timing says nothing about how close a guess was), let a valid one through without consulting
    this throttle, and call ``record_miss`` for a miss. So a valid token is never refused here,
    whatever its neighbours at the same address did; a miss over the limit is 429 instead of 401.
    An address over the limit still learns whether a token is valid (200 against 429), as it did
    with 401 before the limit: what makes guessing hopeless is the secret's 256 bits, not this rate.
    What the rate buys is a refusal clients back off from, and a bound on log and audit noise.
    """

    scope = "bad_token"

    def __init__(self, request: HttpRequest) -> None:
        self.ident = f"ip:{client_ip(request) or 'unknown'}"

    def record_miss(self) -> None:
        """Count a miss of this address; raise ``Throttled`` when it is over the limit."""
        limit = Limit.of(self.scope)
        if limit is not None:
            limit.hit(self.ident, f"Too many invalid API tokens from this address: at most {limit.rate}.")
