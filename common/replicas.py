"""Read replicas (``DATABASE_REPLICA_URLS``): which database a read may use, per request.

Each replica URL is a Django database alias (``replica_1``, ``replica_2``, ...; settings). Nothing
reads from one unless two things hold:

1. The request's edge (the HTTP middleware, the MCP endpoint, the chat WebSocket) opened a
   ``Routing`` for its principal with ``begin``. Workers, commands and shells never do, so all they
   read is the primary's.
2. The read is one that need not see the caller's own latest write: the RAG backend's ``search``
   and ``fetch`` (chat's, the agent's and MCP's retrieval go through them), and the ORM reads run
   by ``replica_read`` (document lists).

Then the request's replica is chosen once, at its first such read, among the replicas that are
reachable and lag at most ``QUARRY_REPLICA_MAX_LAG_SECONDS`` (``ReplicaMonitor``: at most one
check a second per process, in a background thread, so no request waits for a check). None healthy,
a principal or a tenant pinned to the primary, or a read inside a transaction on the primary: the primary.

Read-your-writes: a request that writes what those reads return (``ReplicaRouter.db_for_write`` for
the knowledge and sources apps; the RAG backend's writes call ``note_write``) reads only the
primary from then on, and its principal (the bearer token, or the browser session) is pinned to
the primary in the shared cache for the lag bound plus one check interval: a replica used by the
next request has replayed everything older than that. A replica that fails during a read is marked
down and the read runs again on the primary: callers never see a replica's failure.

Access changes (issue 34): who may read a document is data on the replica too, so a lagging replica
would go on serving a document to a member whose access was just taken away. A change of access (a
document's list, a group's members, a group, a membership) pins the whole *tenant* to the primary
(``pin_tenant``: from the change until the same bound after its commit), and every replica-eligible
read names its tenant, so the choice checks the principal's pin and the tenant's together, in one
read of the shared cache.
"""

from __future__ import annotations

import hashlib
import logging
import os
import random
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, TypeVar

import psycopg

logger = logging.getLogger(__name__)

PRIMARY = "default"
ALIAS_PREFIX = "replica_"
# At most one round of lag checks a second per process (the bound).
CHECK_INTERVAL = 1.0
# A monitor whose last completed check is older than this (a check hanging on a dead host) is not trusted.
_STALE_AFTER = 10.0
_CHECK_CONNECT_TIMEOUT = 2
# Writes to these apps' models pin the principal to the primary: they change what replica reads return
# (documents, chunks; sources write documents). Conversations (chat) are always read on the primary, so
# writing one pins nothing: a chat or agent run stores turns and steps, and its retrieval keeps the
# replica. Accounts' bookkeeping (a token's last use) would pin every reader once a minute for nothing.
STICKY_APP_LABELS = frozenset({"knowledge", "sources"})
_PIN_KEY = "quarry:replica-pin:"
_TENANT_PIN_KEY = "quarry:replica-pin-tenant:"

# Lag in seconds as the replica sees it. Replay timestamps age while the primary is idle, so a
# replica that has replayed everything it received (and is still receiving) lags 0; otherwise the
# age of the last replayed commit, which is how far behind its data may be.
LAG_SQL = """
SELECT CASE
    WHEN NOT pg_is_in_recovery() THEN 0
    WHEN pg_last_wal_receive_lsn() IS NOT NULL AND pg_last_wal_receive_lsn() = pg_last_wal_replay_lsn()
         AND EXISTS (SELECT 1 FROM pg_stat_wal_receiver) THEN 0
    ELSE coalesce(extract(epoch FROM now() - pg_last_xact_replay_timestamp()), 'Infinity'::float8)
END::float8
"""

T = TypeVar("T")


def replica_aliases() -> tuple[str, ...]:
    """The replicas' database aliases, in the order of ``DATABASE_REPLICA_URLS`` (empty: no replicas)."""
    from django.conf import settings  # imported here: settings imports this module's constants

    return tuple(getattr(settings, "QUARRY_REPLICA_ALIASES", ()))


def max_lag() -> float:
    from django.conf import settings

    return float(getattr(settings, "QUARRY_REPLICA_MAX_LAG_SECONDS", 5.0))


# --- health -----------------------------------------------------------------------------------------


@dataclass
class Health:
    """A replica's last check: ``lag`` in seconds, None when it could not be reached."""

    lag: float | None = None
    checked_at: float = 0.0
    error: str = ""


class ReplicaMonitor:
    """Each replica's lag, checked at most once per ``CHECK_INTERVAL`` in a background thread, on a
    connection of its own (outside the request pools, so a dead replica costs no request a wait)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._reset()

    def _reset(self) -> None:
        self._pid = os.getpid()
        self._health: dict[str, Health] = {}
        self._connections: dict[str, psycopg.Connection[Any]] = {}
        self._checking = False
        self._completed_at = 0.0

    def healthy(self, aliases: tuple[str, ...], bound: float) -> list[str]:
        """The replicas usable now; starts a check in the background when the last one is a second old."""
        now = time.monotonic()
        with self._lock:
            if self._pid != os.getpid():  # a forked child: the parent's thread and connections are not ours
                self._reset()
            if not self._checking and now - self._completed_at >= CHECK_INTERVAL:
                self._checking = True
                threading.Thread(target=self._check_all, args=(aliases,), name="quarry-replica-monitor", daemon=True).start()
            if now - self._completed_at > _STALE_AFTER:
                return []
            return [a for a in aliases if (h := self._health.get(a)) is not None and h.lag is not None and h.lag <= bound]

    def health(self, alias: str) -> Health:
        return self._health.get(alias) or Health(error="not checked yet")

    def mark_down(self, alias: str, error: BaseException | str) -> None:
        """Stop using ``alias`` until its next successful check (a read on it just failed)."""
        with self._lock:
            self._health[alias] = Health(lag=None, checked_at=time.monotonic(), error=str(error).splitlines()[0] if str(error) else "")

    def _check_all(self, aliases: tuple[str, ...]) -> None:
        try:
            for alias in aliases:
                lag, error = self._check(alias)
                with self._lock:
                    self._health[alias] = Health(lag=lag, checked_at=time.monotonic(), error=error)
        finally:
            with self._lock:
                self._checking = False
                self._completed_at = time.monotonic()

    def _check(self, alias: str) -> tuple[float | None, str]:
        conn = self._connections.get(alias)
        try:
            if conn is None or conn.closed:
                conn = self._connections[alias] = psycopg.connect(**_conninfo(alias), autocommit=True)
            row = conn.execute(LAG_SQL).fetchone()
            return (float(row[0]) if row is not None else None), ""
        except psycopg.Error as exc:
            if conn is not None:
                conn.close()
            self._connections.pop(alias, None)
            return None, str(exc).splitlines()[0] if str(exc) else type(exc).__name__


def status() -> dict[str, dict[str, Any]]:
    """Each replica as this process last saw it (``/readyz``): its lag, whether reads may use it, why not."""
    aliases, bound = replica_aliases(), max_lag()
    usable = set(monitor.healthy(aliases, bound))
    out: dict[str, dict[str, Any]] = {}
    for alias in aliases:
        health = monitor.health(alias)
        out[alias] = {"usable": alias in usable, "lag_seconds": None if health.lag is None or health.lag == float("inf")
                      else round(health.lag, 3), "error": health.error or None}
    return out


def _conninfo(alias: str) -> dict[str, Any]:
    from django.db import connections

    s = connections[alias].settings_dict
    info = {"dbname": s["NAME"], "user": s.get("USER") or None, "password": s.get("PASSWORD") or None,
            "host": s.get("HOST") or None, "port": s.get("PORT") or None, "connect_timeout": _CHECK_CONNECT_TIMEOUT,
            "application_name": "quarry-replica-monitor"}
    return {k: v for k, v in info.items() if v is not None}


monitor = ReplicaMonitor()


# --- per request ----------------------------------------------------------------------------------


@dataclass
class Routing:
    """One request's choice: ``alias`` is decided at its first replica-eligible read (None: the primary)."""

    principal: str | None
    alias: str | None = None
    decided: bool = False
    wrote: bool = False
    pinned: bool = False  # the principal wrote, or its tenant's access changed, within the bound (diagnostics)
    # The tenants whose pin this request has checked: a read of another one (a chat's private store
    # beside its tenant) checks that tenant's pin before it may use the replica.
    tenants: set[str] = field(default_factory=set)


_routing: ContextVar[Routing | None] = ContextVar("quarry_replica_routing", default=None)
_in_replica_read: ContextVar[bool] = ContextVar("quarry_replica_read", default=False)


def principal_key(*, authorization: str | None = None, session_key: str | None = None) -> str | None:
    """Who a request acts for, as a pin key: its bearer token, else its browser session (hashed: never stored raw)."""
    if authorization:
        scheme, _, secret = authorization.strip().partition(" ")
        if scheme.lower() == "bearer" and secret.strip():
            return "token:" + hashlib.sha256(secret.strip().encode()).hexdigest()[:32]
    if session_key:
        return "session:" + hashlib.sha256(session_key.encode()).hexdigest()[:32]
    return None


def begin(principal: str | None) -> Routing | None:
    """Open the current request's routing (None, and nothing changes, without replicas)."""
    if not replica_aliases():
        return None
    routing = Routing(principal=principal)
    _routing.set(routing)
    return routing


def clear() -> None:
    """Close the current request's routing (its reads go to the primary again)."""
    _routing.set(None)


def current() -> Routing | None:
    return _routing.get()


def _pin_seconds() -> int:
    """How long a pin lasts: a replica still used after that has replayed everything older (its lag
    was at most the bound at a check at most one interval old)."""
    return max(1, int(max_lag() + CHECK_INTERVAL + 0.999))


def _set_pin(key: str, what: str) -> None:
    from django.core.cache import cache

    try:
        cache.set(key, 1, timeout=_pin_seconds())
    except Exception:  # noqa: BLE001 - the write succeeded; a cache outage must not turn it into an error
        logger.warning("could not pin %s to the primary", what, exc_info=True)


def finish(routing: Routing | None) -> None:
    """The request is over: pin its principal to the primary if it wrote (sync code; the shared cache)."""
    if routing is not None and routing.wrote and routing.principal:
        _set_pin(_PIN_KEY + routing.principal, routing.principal)


def pin_tenant(tenant: str) -> None:
    """Who may read what in ``tenant`` (its slug) changes in the current transaction: every request's
    replica-eligible reads of the tenant use the primary until the lag bound after the commit.

    Whoever makes the change calls this (services, workers, the admin; a no-op without replicas). The
    pin is set now as well as after the commit: a read choosing its database between the commit and
    the callback must not find the tenant unpinned. A transaction that rolls back leaves a pin that
    only costs the tenant's reads the replica for the bound.
    """
    if not replica_aliases():
        return
    from django.db import connections, transaction

    key = _TENANT_PIN_KEY + tenant
    if connections[PRIMARY].in_atomic_block:
        _set_pin(key, f"tenant {tenant}")
    transaction.on_commit(lambda: _set_pin(key, f"tenant {tenant}"), using=PRIMARY)


def note_write() -> None:
    """This request wrote product data: its later reads see it only on the primary."""
    routing = _routing.get()
    if routing is not None:
        routing.wrote = True
        routing.alias = None
        routing.decided = True


def tenant_pinned(tenant: str) -> bool:
    """Whether ``tenant``'s reads go to the primary now for an access change (diagnostics and tests)."""
    return _any_pinned([_TENANT_PIN_KEY + tenant])


def _any_pinned(keys: list[str]) -> bool:
    """Whether any of these pins is set: one read of the shared cache, however many keys."""
    from django.core.cache import cache

    from common.db import release_connection

    try:
        return bool(cache.get_many(keys))
    except Exception:  # noqa: BLE001 - unsure whether it just wrote or access changed: the primary is always right
        return True
    finally:
        # Without Redis the pins live in the primary's cache table: its connection goes back to the pool
        # now, not held idle while the search runs on the replica.
        release_connection()


def _choose(routing: Routing, tenant: str) -> str | None:
    healthy = monitor.healthy(replica_aliases(), max_lag())
    if not healthy:
        return None
    routing.tenants.add(tenant)
    keys = [_TENANT_PIN_KEY + tenant] + ([_PIN_KEY + routing.principal] if routing.principal else [])
    if _any_pinned(keys):
        routing.pinned = True
        return None
    return random.choice(healthy)


def read_alias(primary: str = PRIMARY, *, tenant: str) -> str:
    """The alias a replica-eligible read of ``tenant`` (its slug) by the current request uses: a healthy
    replica, or ``primary`` (the principal wrote, or the tenant's access changed, within the bound)."""
    from django.db import connections

    routing = _routing.get()
    if routing is None or primary != PRIMARY:
        return primary
    if connections[primary].in_atomic_block:
        return primary  # the transaction's own uncommitted writes are on the primary only
    if not routing.decided:
        routing.alias = _choose(routing, tenant)
        routing.decided = True
    elif routing.alias is not None and tenant not in routing.tenants:
        routing.tenants.add(tenant)
        if _any_pinned([_TENANT_PIN_KEY + tenant]):
            routing.alias, routing.pinned = None, True
    return routing.alias or primary


def replica_read(fn: Callable[[str], T], *, tenant: str, primary: str = PRIMARY) -> T:
    """``fn(alias)``, a read of ``tenant`` (its slug: its access pin is checked), on the request's replica
    (its ORM reads routed there too), or on ``primary``.

    A replica that cannot be reached (or whose connections are all busy) during ``fn`` is left for
    the rest of the request, marked down when it is unreachable, and ``fn`` runs again on the primary.
    """
    alias = read_alias(primary, tenant=tenant)
    if alias == primary:
        return fn(primary)
    from django.db import connections

    from common.db import database_error_kind

    token = _in_replica_read.set(True)
    try:
        return fn(alias)
    except Exception as exc:
        kind = database_error_kind(exc)
        if kind is None:
            raise
        logger.warning("replica %s %s during a read; reading the primary: %s", alias, kind, str(exc).splitlines()[0] if str(exc) else "")
        if kind == "unavailable":
            monitor.mark_down(alias, exc)
        try:
            connections[alias].close()
        except Exception:  # noqa: BLE001 - a dead connection may fail to close; it is dropped all the same
            pass
        routing = _routing.get()
        if routing is not None:
            routing.alias = None
    finally:
        _in_replica_read.reset(token)
    return fn(primary)


@contextmanager
def primary_reads() -> Iterator[None]:
    """Inside, ORM reads go to the primary even within ``replica_read`` (a read that must see the latest)."""
    token = _in_replica_read.set(False)
    try:
        yield
    finally:
        _in_replica_read.reset(token)


class ReplicaRouter:
    """Django's database router while replicas are configured (``DATABASE_ROUTERS``).

    ORM reads go to the request's replica only inside ``replica_read``; everything else reads and
    writes the primary (an object read from a replica is saved to the primary, and its related
    objects are read there). Migrations run on the primary only: the replicas follow its WAL.
    """

    def db_for_read(self, model: type, **hints: Any) -> str | None:
        if _in_replica_read.get():
            from django.db import connections

            routing = _routing.get()  # decided by the replica_read this ORM read runs in
            if routing is None or routing.alias is None or connections[PRIMARY].in_atomic_block:
                return PRIMARY
            return routing.alias
        return self._not_a_replica(hints)

    def db_for_write(self, model: type, **hints: Any) -> str | None:
        if model._meta.app_label in STICKY_APP_LABELS:  # type: ignore[attr-defined]
            note_write()
        return self._not_a_replica(hints) or PRIMARY

    def allow_relation(self, obj1: Any, obj2: Any, **hints: Any) -> bool | None:
        ours = {PRIMARY, *replica_aliases()}
        return True if obj1._state.db in ours and obj2._state.db in ours else None

    def allow_migrate(self, db: str, app_label: str, model_name: str | None = None, **hints: Any) -> bool | None:
        return False if db in replica_aliases() else None

    @staticmethod
    def _not_a_replica(hints: dict[str, Any]) -> str | None:
        instance = hints.get("instance")
        db = getattr(getattr(instance, "_state", None), "db", None)
        if db is None:
            return None
        return PRIMARY if db in replica_aliases() else db
