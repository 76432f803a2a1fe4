"""Limits that only a real server shows: the per-process connection pool under exhaustion, request
bodies refused while they stream in, and throttles under a concurrent burst across processes
(uvicorn + config.asgi, real sockets)."""

from __future__ import annotations

import asyncio
import json
import select
import socket
import threading
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import httpx
import pytest

from accounts.models import Role
from knowledge.models import Document
from tests.factories import make_member, make_tenant, make_token
from tests.fake_openai import fake_openai_server, hash_vector
from tests.servers import asgi_server, child_env, read_log, redis_available

pytestmark = pytest.mark.django_db(transaction=True)


def editor_token(slug: str) -> str:
    tenant = make_tenant(slug)
    return make_token(tenant, make_member(tenant, Role.EDITOR, f"{slug}-editor"))


# --- the connection pool ---------------------------------------------------------------------------------


def test_an_exhausted_pool_answers_503_overloaded_then_recovers() -> None:
    token = editor_token("pooled")
    with fake_openai_server() as provider:
        # A slow embedding provider: an ingest holds its pooled connection while it embeds (its
        # writes follow in one transaction); a search gives it back while its query is embedded.
        provider.vectors = lambda texts: (time.sleep(4), [hash_vector(t, 8) for t in texts])[1]
        env = child_env(
            QUARRY_DB_POOL_SIZE="1", QUARRY_DB_POOL_MIN_SIZE="1", QUARRY_DB_POOL_TIMEOUT="1",
            QUARRY_EMBEDDING_MODEL="openai/text-embedding-fake", QUARRY_EMBEDDING_DIMENSION="8",
            QUARRY_EMBEDDING_API_BASE=provider.base_url, QUARRY_EMBEDDING_API_KEY="sk-test", QUARRY_EMBEDDING_RETRIES="0",
        )
        with asgi_server(env, log_name="uvicorn-pool") as base:
            headers = {"Authorization": f"Bearer {token}"}
            assert httpx.get(f"{base}/v1/me", headers=headers, timeout=10).status_code == 200
            slow: dict[str, Any] = {}

            def hold(name: str, path: str, body: dict[str, Any]) -> threading.Thread:
                def call() -> None:
                    slow[name] = httpx.post(f"{base}{path}", headers=headers, timeout=30, json=body)
                thread = threading.Thread(target=call)
                thread.start()
                time.sleep(1.0)  # the call is now embedding
                return thread

            searching = hold("search", "/v1/search", {"query": "anything", "mode": "semantic"})
            beside_search = httpx.get(f"{base}/v1/me", headers=headers, timeout=10)
            searching.join(timeout=30)
            assert beside_search.status_code == 200, beside_search.text  # the search holds no connection meanwhile
            assert slow["search"].status_code == 200, slow["search"].text

            ingesting = hold("ingest", "/v1/documents", {"documents": [{"id": "slow", "text": "Slow to embed."}]})
            started = time.monotonic()
            busy = httpx.get(f"{base}/v1/me", headers=headers, timeout=10)
            waited = time.monotonic() - started
            ready = httpx.get(f"{base}/readyz", timeout=10)
            ingesting.join(timeout=30)
            assert busy.status_code == 503, busy.text
            assert busy.json() == {"error": "overloaded", "detail": "The server is busy: every database connection is in use. Try again shortly."}
            assert busy.headers["Retry-After"] == "2" and waited >= 0.9  # it waited for the pool first
            assert ready.status_code == 503 and ready.json()["status"] == "overloaded"
            assert slow["ingest"].status_code == 200, slow["ingest"].text
            assert httpx.get(f"{base}/v1/me", headers=headers, timeout=10).status_code == 200
        # Refused at its first query (the token's lookup), not swallowed as an unreachable throttle store.
        assert "not throttling" not in read_log("uvicorn-pool")


# --- request bodies over the limit -------------------------------------------------------------------------

MIB = 1024 * 1024


def _host_port(base: str) -> tuple[str, int]:
    host, port = base.removeprefix("http://").split(":")
    return host, int(port)


def _read_response(sock: socket.socket, timeout: float = 10) -> bytes:
    sock.settimeout(timeout)
    data = b""
    while b"\r\n\r\n" not in data or len(data) < data.index(b"\r\n\r\n") + 4 + _length(data):
        chunk = sock.recv(65536)
        if not chunk:
            break
        data += chunk
    return data


def _length(data: bytes) -> int:
    head = data.split(b"\r\n\r\n", 1)[0].decode("latin-1").lower()
    for line in head.split("\r\n"):
        if line.startswith("content-length:"):
            return int(line.split(":", 1)[1])
    return 0


def _body(response: bytes) -> Any:
    return json.loads(response.split(b"\r\n\r\n", 1)[1])


def test_a_streamed_body_over_the_request_limit_is_refused_while_it_arrives(tmp_path: Path) -> None:
    token = editor_token("streamed")
    env = child_env(QUARRY_MAX_REQUEST_BYTES=str(1 * MIB), QUARRY_DATA_DIR=str(tmp_path))
    with asgi_server(env, log_name="uvicorn-body-limit") as base:
        # Chunked, so no Content-Length announces the size: the server must count as the bytes come.
        sock = socket.create_connection(_host_port(base))
        boundary = "quarry-boundary"
        sock.sendall((
            "POST /v1/documents/upload HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            f"Authorization: Bearer {token}\r\nContent-Type: multipart/form-data; boundary={boundary}\r\n"
            "Transfer-Encoding: chunked\r\n\r\n"
        ).encode())
        part = (f'--{boundary}\r\nContent-Disposition: form-data; name="files"; filename="huge.txt"\r\n'
                "Content-Type: text/plain\r\n\r\n").encode()
        sock.sendall(f"{len(part):x}\r\n".encode() + part + b"\r\n")
        chunk = b"x" * (256 * 1024)
        framed = f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n"
        sent, total = 0, 64 * MIB
        while sent < total:
            readable, _, _ = select.select([sock], [], [], 0)
            if readable:
                break  # the server has answered before the body ended
            try:
                sock.sendall(framed)
            except (BrokenPipeError, ConnectionResetError):
                break
            sent += len(chunk)
        response = _read_response(sock)
        sock.close()
        assert response.startswith(b"HTTP/1.1 413"), response[:200]
        assert _body(response) == {"error": "request_too_large",
                                   "detail": "The request is larger than the limit of 1 MB (QUARRY_MAX_REQUEST_BYTES)."}
        # Refused long before the 64 MiB were sent (socket buffers hold a few MiB at most).
        assert sent < 24 * MIB, sent
    assert not Document.objects.exists()
    assert not list((tmp_path / "media").rglob("*huge*"))


def test_a_declared_length_over_the_limit_is_refused_before_the_body_is_sent() -> None:
    env = child_env(QUARRY_MAX_REQUEST_BYTES=str(1 * MIB))
    with asgi_server(env, log_name="uvicorn-length-limit") as base:
        sock = socket.create_connection(_host_port(base))
        sock.sendall((
            "POST /v1/documents HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            f"Content-Length: {200 * MIB}\r\n\r\n"
        ).encode())
        response = _read_response(sock)
        sock.close()
        assert response.startswith(b"HTTP/1.1 413") and _body(response)["error"] == "request_too_large"


def test_a_file_over_the_upload_limit_is_413_naming_it_and_nothing_is_stored(tmp_path: Path) -> None:
    token = editor_token("perfile")
    env = child_env(QUARRY_UPLOAD_MAX_BYTES=str(64 * 1024), QUARRY_DATA_DIR=str(tmp_path))
    with asgi_server(env, log_name="uvicorn-file-limit") as base:
        files = [("files", ("small.txt", b"tiny", "text/plain")), ("files", ("big.txt", b"y" * (200 * 1024), "text/plain"))]
        response = httpx.post(f"{base}/v1/documents/upload", headers={"Authorization": f"Bearer {token}"}, files=files, timeout=30)
        assert response.status_code == 413, response.text
        message = "big.txt is over the upload limit of 65,536 bytes (QUARRY_UPLOAD_MAX_BYTES); nothing was uploaded."
        assert response.json() == {"error": "request_too_large", "detail": message, "fields": {"files": [message]}}
        fine = httpx.post(f"{base}/v1/documents/upload", headers={"Authorization": f"Bearer {token}"},
                          files=files[:1], timeout=30)
        assert fine.status_code == 202
    assert list(Document.objects.values_list("external_id", flat=True)) == ["small.txt"]
    assert [p.name.split("-", 1)[1] for p in (tmp_path / "media").rglob("*.txt")] == ["small.txt"]


# --- throttles under a concurrent burst ------------------------------------------------------------------

RATE = 40
BURST = 240
REDIS_URL = "redis://127.0.0.1:6379/0"


async def _burst(bases: list[str], token: str) -> list[httpx.Response]:
    """``BURST`` searches with one token, all in flight at once, spread over the servers in ``bases``."""
    limits = httpx.Limits(max_connections=BURST, max_keepalive_connections=0)
    async with httpx.AsyncClient(limits=limits, timeout=120) as client:
        return await asyncio.gather(*(
            client.post(f"{bases[n % len(bases)]}/v1/search", headers={"Authorization": f"Bearer {token}"},
                        json={"query": "anything", "mode": "keyword"})
            for n in range(BURST)
        ))


def _assert_exactly_the_rate_passed(responses: list[httpx.Response]) -> None:
    statuses = [r.status_code for r in responses]
    assert (statuses.count(200), statuses.count(429)) == (RATE, BURST - RATE), sorted(set(statuses))
    for refused in (r for r in responses if r.status_code == 429):
        assert 1 <= int(refused.headers["Retry-After"]) <= 60
        assert refused.json()["error"] == "throttled" and f"at most {RATE}/min" in refused.json()["detail"]


@pytest.mark.parametrize("store", ["postgresql", pytest.param("redis", marks=[
    pytest.mark.redis, pytest.mark.skipif(not redis_available(REDIS_URL), reason="no Redis server at 127.0.0.1:6379")])])
def test_a_concurrent_burst_across_two_servers_gets_exactly_the_rate(store: str) -> None:
    token = editor_token(f"burst-{store}")
    env = child_env(QUARRY_THROTTLE_SEARCH=f"{RATE}/min", QUARRY_DB_POOL_TIMEOUT="60",
                    REDIS_URL=REDIS_URL if store == "redis" else "")
    if store == "redis":
        import redis  # only here: the PostgreSQL case must not need the client

        # Another run's token with the same id must not have left a count behind.
        client = redis.Redis.from_url(REDIS_URL)
        for key in client.scan_iter("quarry:throttle:search:*"):
            client.delete(key)
    with ExitStack() as servers:
        # Two processes, as `make run` behind a balancer: the limit is the token's, not each process's.
        bases = [servers.enter_context(asgi_server(env, log_name=f"uvicorn-burst-{store}-{n}")) for n in range(2)]
        responses = asyncio.run(_burst(bases, token))
    _assert_exactly_the_rate_passed(responses)
