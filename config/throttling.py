"""Throttles (answered 429 with ``Retry-After`` in the project's error shape) and the client's address.

- ``ScopedTokenThrottle`` (every API view, through DEFAULT_THROTTLE_CLASSES): a view that sets
  ``throttle_scope`` (a name of ``QUARRY_THROTTLE_RATES``, or ``{method: name}``) is limited per
  API token, per signed-in user without one, else per client address.
- ``BadTokenThrottle``: bearer tokens that do not exist, per client address. Consulted by the
  bearer authenticator before it looks a token up, so a client guessing tokens is refused without
  a query, and counted after each miss.

Counts live in the ``default`` cache, which every process shares (PostgreSQL or Redis). A Redis
cache that fails lets the request through: the throttles protect the service, they must not stop
it. The database cache's errors are the database's: the request fails as it would at its next query.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from typing import Any

from django.conf import settings
from django.core.cache import cache as default_cache
from django.db import DatabaseError
from django.http import HttpRequest
from rest_framework import exceptions
from rest_framework.throttling import SimpleRateThrottle

logger = logging.getLogger(__name__)


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


class _Window(SimpleRateThrottle):
    """A sliding window of request times in the shared cache (DRF's algorithm, fail-open)."""

    cache = default_cache

    def __init__(self, scope: str) -> None:  # the rate is chosen per scope at call time
        self.scope = scope
        self.rate = settings.QUARRY_THROTTLE_RATES.get(scope)
        self.num_requests, self.duration = self.parse_rate(self.rate)

    def _load(self, key: str) -> list[float] | None:
        try:
            history = self.cache.get(key, [])
        except DatabaseError:
            raise  # the database cache: the request cannot go on without the database anyway (503 at once)
        except Exception as exc:  # noqa: BLE001 - an unreachable cache must not fail the request
            logger.warning("throttle %s: cache unavailable (%s); not throttling", self.scope, type(exc).__name__)
            return None
        self.now = self.timer()
        while history and history[-1] <= self.now - self.duration:
            history.pop()
        return history

    def _store(self, key: str, history: list[float]) -> None:
        try:
            self.cache.set(key, history, self.duration)
        except DatabaseError:
            raise
        except Exception as exc:  # noqa: BLE001
            logger.warning("throttle %s: cache unavailable (%s)", self.scope, type(exc).__name__)

    def seconds_until_free(self, history: list[float]) -> float:
        """When the oldest request of a full window leaves it."""
        return self.duration - (self.now - history[-1]) if history else float(self.duration)


class ScopedTokenThrottle(SimpleRateThrottle):
    """Limits the views that name a ``throttle_scope``, per token (else user, else address)."""

    def __init__(self) -> None:  # no rate of its own: it depends on the view
        self.rate = None

    def allow_request(self, request: Any, view: Any) -> bool:
        scope = getattr(view, "throttle_scope", None)
        if isinstance(scope, Mapping):
            scope = scope.get(request.method)
        if not scope or settings.QUARRY_THROTTLE_RATES.get(scope) is None:
            return True
        window = _Window(scope)
        token = getattr(request, "auth", None)
        user = getattr(request, "user", None)
        if token is not None and getattr(token, "pk", None) is not None:
            ident = f"token:{token.pk}"
        elif user is not None and user.is_authenticated:
            ident = f"user:{user.pk}"
        else:
            ident = f"ip:{client_ip(request) or 'unknown'}"
        key = f"throttle:{scope}:{ident}"
        history = window._load(key)
        if history is None:
            return True
        if len(history) >= window.num_requests:
            raise Throttled(window.seconds_until_free(history),
                            f"Too many {scope} requests for this {ident.split(':')[0]}: at most {window.rate}.")
        history.insert(0, window.now)
        window._store(key, history)
        return True


class BadTokenThrottle:
    """Unknown or malformed bearer tokens, per client address (``QUARRY_THROTTLE_BAD_TOKENS``)."""

    scope = "bad_token"

    def __init__(self, request: HttpRequest) -> None:
        self.window = _Window(self.scope)
        self.key = f"throttle:{self.scope}:ip:{client_ip(request) or 'unknown'}"

    def check(self) -> None:
        """Raise ``Throttled`` while this address has used up its allowance of bad tokens."""
        if self.window.rate is None:
            return
        history = self.window._load(self.key)
        if history is not None and len(history) >= self.window.num_requests:
            raise Throttled(self.window.seconds_until_free(history),
                            f"Too many invalid API tokens from this address: at most {self.window.rate}.")

    def record_failure(self) -> None:
        if self.window.rate is None:
            return
        history = self.window._load(self.key)
        if history is not None:
            history.insert(0, self.window.now)
            self.window._store(self.key, history)
