"""Real processes: django-q2 workers on both brokers, Channels on both layers, health under failure."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import uuid

import httpx
import pytest
import websockets
from django_q.models import Success
from django_q.tasks import async_task

from tests.servers import ROOT, asgi_server, child_env, qcluster, redis_available, wait_for

REDIS_URL = "redis://127.0.0.1:6379/0"
needs_redis = pytest.mark.skipif(not redis_available(REDIS_URL), reason="no Redis server at 127.0.0.1:6379 (this machine kind provides one)")


def successful_result(task_id: str) -> object | None:
    task = Success.objects.filter(id=task_id).first()
    return task.result if task else None


@pytest.mark.django_db(transaction=True)
def test_orm_broker_task_runs_on_a_real_worker() -> None:
    # The test process enqueues through the ORM broker (REDIS_URL is unset here);
    # the queue is named after the cluster, so the worker keeps the default name.
    task_id = async_task("config.tasks.worker_ping", "hello-orm")
    with qcluster(child_env(REDIS_URL=""), log_name="qcluster-orm"):
        result = wait_for(lambda: successful_result(task_id), timeout=90, what=f"task {task_id} on the ORM broker")
    assert result == "hello-orm"


@pytest.mark.django_db(transaction=True)
def test_task_workers_run_at_the_lower_priority_the_setting_names() -> None:
    """Workers yield the CPU to requests: each lowers its own priority by QUARRY_WORKER_NICE when it starts."""
    task_id = async_task("config.tasks.worker_niceness")
    with qcluster(child_env(REDIS_URL="", QUARRY_WORKER_NICE="7"), log_name="qcluster-nice"):
        result = wait_for(lambda: successful_result(task_id), timeout=90, what=f"task {task_id} on the ORM broker")
    assert result == min(19, os.nice(0) + 7)


@needs_redis
@pytest.mark.django_db(transaction=True)
def test_redis_broker_task_runs_on_a_real_worker() -> None:
    # Both the producer and the worker are separate processes configured by REDIS_URL,
    # exactly as deployed; the result lands in PostgreSQL where the test reads it.
    name = f"redis-{uuid.uuid4().hex[:6]}"
    env = child_env(QUARRY_Q_NAME=name, REDIS_URL=REDIS_URL)
    enqueue = subprocess.run(
        [sys.executable, "manage.py", "shell", "--no-imports", "-c",
         "from django_q.tasks import async_task; from django_q.brokers import get_broker; "
         "b = get_broker(); print(type(b).__name__); print(async_task('config.tasks.worker_ping', 'hello-redis', broker=b))"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120,
    )
    assert enqueue.returncode == 0, enqueue.stderr
    broker_name, task_id = enqueue.stdout.split()[-2:]
    assert broker_name == "Redis"
    with qcluster(env, log_name=name):
        result = wait_for(lambda: successful_result(task_id), timeout=90, what=f"task {task_id} on the Redis broker")
    assert result == "hello-redis"


async def ws_roundtrip(base: str) -> dict[str, object]:
    url = base.replace("http://", "ws://") + "/ws/ping/"
    async with websockets.connect(url, origin=base.replace("127.0.0.1", "localhost")) as ws:
        await ws.send(json.dumps({"ping": "marco"}))
        return json.loads(await asyncio.wait_for(ws.recv(), timeout=10))


@pytest.mark.django_db(transaction=True)
def test_websocket_over_in_memory_layer() -> None:
    with asgi_server(child_env(REDIS_URL="")) as base:
        assert asyncio.run(ws_roundtrip(base)) == {"pong": "marco"}


@needs_redis
@pytest.mark.django_db(transaction=True)
def test_websocket_over_redis_layer() -> None:
    with asgi_server(child_env(REDIS_URL=REDIS_URL), log_name="uvicorn-redis") as base:
        assert asyncio.run(ws_roundtrip(base)) == {"pong": "marco"}


@pytest.mark.django_db(transaction=True)
def test_websocket_from_a_foreign_origin_is_refused() -> None:
    async def attempt(base: str) -> None:
        url = base.replace("http://", "ws://") + "/ws/ping/"
        async with websockets.connect(url, origin="http://evil.example"):
            pass

    with asgi_server(child_env()) as base:
        with pytest.raises(websockets.exceptions.InvalidStatus):
            asyncio.run(attempt(base))


def test_health_endpoints_when_the_database_is_down() -> None:
    # Port 9 on loopback: nothing listens, so every connection is refused at once; the pool gives up after 1 s.
    env = child_env(DATABASE_URL="postgresql://postgres@127.0.0.1:9/quarry", QUARRY_DB_POOL_TIMEOUT="1")
    with asgi_server(env, log_name="uvicorn-db-down") as base:
        assert httpx.get(f"{base}/healthz").status_code == 200
        ready = httpx.get(f"{base}/readyz", timeout=10)
        assert ready.status_code == 503 and ready.json()["database"] == "unreachable"
        api = httpx.get(f"{base}/v1/me", headers={"Authorization": "Bearer qry_whatever"}, timeout=10)
        assert api.status_code == 503 and api.headers["Retry-After"] == "5"
        assert api.json() == {"error": "database_unavailable", "detail": "The database is not reachable. Try again shortly."}
        admin = httpx.get(f"{base}/admin/", cookies={"sessionid": "a" * 32}, timeout=10)
        assert admin.status_code == 503 and "Traceback" not in admin.text
        # The WebSocket handshake reads the session before any consumer runs: an accepted socket that
        # says why and closes with 1013 (try again later), never an HTTP 500.
        assert asyncio.run(ws_refusal(base)) == (
            {"event": "error", "data": {"error": "database_unavailable", "detail": "The database is not reachable. Try again shortly."},
             "request_id": None},
            1013,
        )


async def ws_refusal(base: str) -> tuple[object, int]:
    url = base.replace("http://", "ws://") + "/ws/chat/"
    async with websockets.connect(url, origin=base, additional_headers={"Cookie": "sessionid=" + "a" * 32}) as ws:
        frame = json.loads(await asyncio.wait_for(ws.recv(), timeout=15))
        with pytest.raises(websockets.exceptions.ConnectionClosed):
            await asyncio.wait_for(ws.recv(), timeout=15)
        return frame, ws.close_code


def test_readyz_answers_ok_with_a_database(db: None, client) -> None:  # type: ignore[no-untyped-def]
    response = client.get("/readyz")
    assert response.status_code == 200 and response.json() == {"status": "ok", "database": "ok"}
