"""Database connections: the per-process pool's options, and what a database error means for the caller.

Every process (the ASGI server, each django-q2 process, a management command) has its own
psycopg pool (Django's ``DATABASES["default"]["OPTIONS"]["pool"]``), so the pool's
``max_size`` bounds the database work one process does at once. A request that finds every
connection busy waits up to the pool's timeout, then fails as ``overloaded`` (503 with
``Retry-After``); ``unavailable`` is kept for a server that cannot be reached at all.

With a pool, both cases surface as the same ``PoolTimeout``: the pool opens connections in
its own threads, so the caller never sees why they failed. ``TrackedConnection`` (the pool's
connection class) remembers the last failed attempt to connect, and that tells them apart:
a timeout while attempts to connect are failing (refused, unknown host) means unreachable;
a timeout while connecting works, or fails with "too many clients", means busy.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Literal

import psycopg
from psycopg import errors as pg_errors

DatabaseErrorKind = Literal["overloaded", "unavailable"]

# A failed attempt to connect older than this no longer explains a pool timeout.
_FAILURE_MEMORY_SECONDS = 60.0
_TOO_MANY_CLIENTS = ("too many clients", "too many connections", "remaining connection slots are reserved", "no more connections allowed")


@dataclass(frozen=True)
class _ConnectFailure:
    at: float
    overload: bool


class _ConnectState:
    """The outcome of this process's latest attempt to open a database connection."""

    def __init__(self) -> None:
        self.failure: _ConnectFailure | None = None
        self.succeeded_at = 0.0

    def record_failure(self, exc: BaseException) -> None:
        self.failure = _ConnectFailure(at=time.monotonic(), overload=is_too_many_clients(exc))

    def record_success(self) -> None:
        self.succeeded_at = time.monotonic()

    def unreachable(self) -> bool:
        """True while the latest attempts to connect fail for a reason other than the server being full."""
        failure = self.failure
        return (
            failure is not None and not failure.overload and failure.at >= self.succeeded_at
            and time.monotonic() - failure.at < _FAILURE_MEMORY_SECONDS
        )


connect_state = _ConnectState()


class TrackedConnection(psycopg.Connection):  # type: ignore[type-arg]
    """The pool's connection class: an ordinary psycopg connection whose ``connect`` records its outcome."""

    @classmethod
    def connect(cls, conninfo: str = "", **kwargs: Any) -> TrackedConnection:  # type: ignore[override]
        try:
            connection = super().connect(conninfo, **kwargs)
        except psycopg.OperationalError as exc:
            connect_state.record_failure(exc)
            raise
        connect_state.record_success()
        return connection  # type: ignore[return-value]


def is_too_many_clients(exc: BaseException) -> bool:
    """The server refused a connection because it is full (SQLSTATE 53300, or PgBouncer's wording)."""
    if isinstance(exc, pg_errors.TooManyConnections):
        return True
    text = str(exc).lower()
    return any(phrase in text for phrase in _TOO_MANY_CLIENTS)


def _chain(exc: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


# The sentences of "database_unavailable" and "overloaded", HTTP or WebSocket (chat.events uses them too).
DATABASE_UNAVAILABLE = "The database is not reachable. Try again shortly."
OVERLOADED = "The server is busy: every database connection is in use. Try again shortly."
DATABASE_ERRORS: dict[str, tuple[str, str]] = {
    "unavailable": ("database_unavailable", DATABASE_UNAVAILABLE),
    "overloaded": ("overloaded", OVERLOADED),
}
# Seconds a client should wait: a restart takes a few; a busy pool frees up within its timeout.
RETRY_AFTER = {"unavailable": "5", "overloaded": "2"}


def database_error_kind(exc: BaseException) -> DatabaseErrorKind | None:
    """``overloaded``, ``unavailable`` or None (the error is about the query, not about reaching the server).

    Django wraps the driver's exceptions (``django.db.OperationalError`` with the psycopg or
    pool exception as its cause), so the whole chain is examined.
    """
    from django.db import InterfaceError, OperationalError  # here: common.db is imported by settings
    from psycopg_pool import PoolTimeout, TooManyRequests

    for cause in _chain(exc):
        if isinstance(cause, TooManyRequests):
            return "overloaded"
        if isinstance(cause, PoolTimeout):
            return "unavailable" if connect_state.unreachable() else "overloaded"
        if isinstance(cause, psycopg.OperationalError) and is_too_many_clients(cause):
            return "overloaded"
    if isinstance(exc, OperationalError | InterfaceError | psycopg.OperationalError | psycopg.InterfaceError):
        return "unavailable"
    return None


def pool_options(*, min_size: int, max_size: int, timeout: float, max_waiting: int) -> dict[str, Any]:
    """Django's ``OPTIONS["pool"]``: psycopg_pool.ConnectionPool arguments.

    ``reconnect_timeout`` is kept short: while the server is down the pool retries with a
    doubling delay, and a long budget would keep it waiting (up to a minute between two
    attempts) after the server is back. Giving up early lets the next request start a
    fresh attempt at once.
    """
    return {
        "min_size": min(min_size, max_size),
        "max_size": max_size,
        "timeout": timeout,
        "max_waiting": max_waiting,
        "reconnect_timeout": max(10.0, 2 * timeout),
        "connection_class": TrackedConnection,
        "name": "quarry",
    }


# --- fork safety -------------------------------------------------------------------------------------
#
# django-q2 forks its workers, pusher and monitor from the cluster's sentinel, which has used the
# database (the scheduler) and so holds a pool: its background threads do not exist in the child,
# and its connections' sockets are shared with the parent. A forked child must start a pool of its
# own and leave the parent's connections alone: they are kept referenced (never finalized, which
# would send a Terminate message on the parent's socket) and simply forgotten.

_inherited: list[object] = []
_fork_hook_lock = threading.Lock()
_fork_hook_installed = False


def _forget_inherited_connections() -> None:
    from django.db import connections
    from django.db.backends.postgresql.base import DatabaseWrapper

    pools = DatabaseWrapper._connection_pools
    _inherited.extend(pools.values())
    pools.clear()
    for alias in connections:
        wrapper = connections[alias]
        if getattr(wrapper, "connection", None) is not None:
            _inherited.append(wrapper.connection)
            wrapper.connection = None


def install_fork_safety() -> None:
    """Register (once per process) the hook that gives forked children their own pool."""
    global _fork_hook_installed
    with _fork_hook_lock:
        if _fork_hook_installed or not hasattr(os, "register_at_fork"):
            return
        os.register_at_fork(after_in_child=_forget_inherited_connections)
        _fork_hook_installed = True


# --- Long requests: hold a pooled connection only while using it ----------------------------


def release_connection() -> None:
    """Give this thread's connection back to the pool (outside a transaction; inside one it must stay)."""
    from django.db import connection  # imported here: this module is read by settings, before Django is set up

    if not connection.in_atomic_block:
        connection.close()


async def db_step(fn: Any, /, *args: Any, **kwargs: Any) -> Any:
    """``fn(*args, **kwargs)`` on the request's database thread, then its connection goes back to the pool.

    A streamed answer lasts seconds to minutes and touches the database only now and then (admission,
    memory, the stored exchange, agent checkpoints): holding one pooled connection for all of it would
    let a few dozen streams take the whole pool (``overloaded`` for everyone else).
    """
    from asgiref.sync import sync_to_async

    def step() -> Any:
        try:
            return fn(*args, **kwargs)
        finally:
            release_connection()

    return await sync_to_async(step)()
