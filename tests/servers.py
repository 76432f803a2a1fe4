"""Real processes for tests: the ASGI server and django-q2 clusters, on the test database."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import quote

import httpx
import psycopg
from django.db import connections

ROOT = Path(__file__).resolve().parent.parent


def database_url(alias: str = "default") -> str:
    """A DATABASE_URL for the database the test run is using (the test database)."""
    s = connections[alias].settings_dict
    host = s["HOST"] or "localhost"
    # A socket directory goes percent-encoded into the host part (dj-database-url decodes it).
    host_part = quote(host, safe="") if host.startswith("/") else host
    port = f":{s['PORT']}" if s.get("PORT") else ""
    password = f":{quote(s['PASSWORD'], safe='')}" if s.get("PASSWORD") else ""
    return f"postgresql://{quote(s['USER'] or '', safe='')}{password}@{host_part}{port}/{s['NAME']}"


def child_env(**overrides: str) -> dict[str, str]:
    """The test process's environment pointed at the test database, plus ``overrides``."""
    env = dict(os.environ)
    env["DATABASE_URL"] = database_url()
    env.update(overrides)
    return env


@contextmanager
def scratch_database(prefix: str) -> Iterator[str]:
    """A new, empty database beside the test database, named ``<prefix>_<random>``; yields its URL, drops it after.

    For a child process that must start from nothing, as a fresh clone does (``make run``'s preparation,
    the README's commands), without touching the test database. Needs the test database (``db``).
    """
    from psycopg import sql

    name = f"{prefix}_{uuid.uuid4().hex[:8]}"
    server = database_url()
    with psycopg.connect(server, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    try:
        yield server.rsplit("/", 1)[0] + f"/{name}"
    finally:
        with psycopg.connect(server, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextmanager
def process(argv: list[str], env: Mapping[str, str], log_name: str) -> Iterator[subprocess.Popen[bytes]]:
    """Run ``argv`` for the duration of the block; its output goes to var/test-logs/<log_name>.log."""
    log_dir = ROOT / "var" / "test-logs"
    log_dir.mkdir(parents=True, exist_ok=True)
    with open(log_dir / f"{log_name}.log", "wb") as log:
        proc = subprocess.Popen(argv, cwd=ROOT, env=dict(env), stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            yield proc
        finally:
            stop_process(proc)


def stop_process(proc: subprocess.Popen[bytes], timeout: float = 15) -> None:
    """SIGTERM the leader (it stops its own children, as in production), then SIGKILL the group."""
    if proc.poll() is not None:
        return
    try:
        # Not the whole group: a django-q2 cluster whose workers also get SIGTERM
        # hangs in its own shutdown until the timeout.
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # anything the leader left behind
        except ProcessLookupError:
            pass


def read_log(log_name: str) -> str:
    path = ROOT / "var" / "test-logs" / f"{log_name}.log"
    return path.read_text(errors="replace") if path.exists() else ""


@contextmanager
def asgi_server(env: Mapping[str, str], log_name: str = "uvicorn") -> Iterator[str]:
    """Serve ``config.asgi`` with uvicorn on a free port; yields the base URL once it answers."""
    port = free_port()
    argv = [sys.executable, "-m", "uvicorn", "config.asgi:application", "--host", "127.0.0.1", "--port", str(port), "--ws", "websockets"]
    with process(argv, env, log_name) as proc:
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"uvicorn exited with {proc.returncode}:\n{read_log(log_name)[-3000:]}")
            try:
                if httpx.get(f"{base}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"uvicorn did not answer within 60 s:\n{read_log(log_name)[-3000:]}")
            time.sleep(0.2)
        yield base


@contextmanager
def qcluster(env: Mapping[str, str], log_name: str = "qcluster") -> Iterator[subprocess.Popen[bytes]]:
    """A real django-q2 cluster (``manage.py qcluster``) in its own process group."""
    with process([sys.executable, "manage.py", "qcluster"], env, log_name) as proc:
        yield proc


@contextmanager
def graceful_qcluster(env: Mapping[str, str], log_name: str) -> Iterator[subprocess.Popen[bytes]]:
    """``qcluster`` that stops gracefully: SIGTERM to the cluster's leader only.

    SIGTERM to the whole process group (what ``stop_process`` sends) kills the workers under
    the sentinel, which then waits for them until the 15 s SIGKILL fallback.
    """
    with qcluster(env, log_name=log_name) as proc:
        try:
            yield proc
        finally:
            if proc.poll() is None:
                os.kill(proc.pid, signal.SIGTERM)
                try:
                    proc.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    pass  # qcluster's own exit kills the group


def wait_for(predicate, timeout: float = 60, interval: float = 0.2, what: str = "condition"):  # type: ignore[no-untyped-def]
    """Poll ``predicate`` until it returns a truthy value; raise naming ``what`` on timeout."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(interval)


def redis_available(url: str = "redis://127.0.0.1:6379/0") -> bool:
    try:
        import redis

        return bool(redis.Redis.from_url(url, socket_connect_timeout=1).ping())
    except Exception:
        return False


def postgres_available(url: str) -> bool:
    try:
        import psycopg

        with psycopg.connect(url, connect_timeout=2):
            return True
    except Exception:
        return False
