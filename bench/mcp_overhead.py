"""``hybrid_search`` through MCP (/mcp, the SDK's client) against ``POST /v1/search`` on the same corpus, as JSON.

    .venv/bin/python bench/mcp_overhead.py [--chunks 2000] [--queries 200]

One uvicorn serving ``config.asgi`` on the database of ``make run`` (the embedded one unless
``DATABASE_URL`` says otherwise), a throwaway tenant holding ``--chunks`` windows of real text
(perturbed real embeddings, indexed as the workers would), one reader token. Both clients keep
their connection (an MCP client session; an httpx client) and send the same queries in turn,
one at a time, interleaved query by query so drift affects both alike. Reported: p50/p95 of
each and MCP's extra milliseconds at p50 (target: at most 5).

Not ``bench/mcp.py``: a script's folder comes first on ``sys.path``, and that name would hide the SDK's
``mcp`` package.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager

import httpx
from _common import ROOT, bench_tenant, emit, index_perturbed_corpus, passages, pctl, setup_django, summary


@contextmanager
def server(port: int) -> Iterator[str]:
    argv = [sys.executable, "-m", "uvicorn", "config.asgi:application", "--host", "127.0.0.1", "--port", str(port),
            "--no-access-log"]
    env = {**os.environ, "QUARRY_THROTTLE_SEARCH": "off", "QUARRY_LOG_LEVEL": "WARNING"}
    proc = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90
        while True:
            try:
                if httpx.get(f"{base}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline or proc.poll() is not None:
                raise RuntimeError("uvicorn did not start")
            time.sleep(0.3)
        yield base
    finally:
        proc.terminate()
        proc.wait(timeout=30)


async def measure(base: str, token: str, queries: list[str]) -> dict[str, list[float]]:
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    auth = {"Authorization": f"Bearer {token}"}
    times: dict[str, list[float]] = {"mcp": [], "rest": []}
    async with (
        httpx.AsyncClient(headers=auth, timeout=60) as rest,
        create_mcp_http_client(headers=auth) as http,
        Client(streamable_http_client(f"{base}/mcp", http_client=http)) as mcp,
    ):
        for warm in queries[:10]:
            await mcp.call_tool("hybrid_search", {"query": warm, "limit": 5})
            await rest.post(f"{base}/v1/search", json={"query": warm, "mode": "hybrid", "limit": 5})
        for query in queries:
            started = time.perf_counter()
            result = await mcp.call_tool("hybrid_search", {"query": query, "limit": 5})
            times["mcp"].append((time.perf_counter() - started) * 1000)
            assert not result.is_error, result.content
            started = time.perf_counter()
            response = await rest.post(f"{base}/v1/search", json={"query": query, "mode": "hybrid", "limit": 5})
            times["rest"].append((time.perf_counter() - started) * 1000)
            assert response.status_code == 200, response.text
    return times


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--chunks", type=int, default=2000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--port", type=int, default=8765)
    args = parser.parse_args()
    setup_django()
    from accounts.models import Role
    from accounts.services import api_token_create, membership_set, user_ensure

    with bench_tenant("bench-mcp") as tenant:
        seconds = index_perturbed_corpus("bench-mcp", args.chunks, min(args.chunks, 300))
        user, _ = user_ensure(username="bench-mcp-reader")
        membership_set(tenant=tenant, user=user, role=Role.READER)
        _, token = api_token_create(tenant=tenant, owner=user, role=Role.READER)
        queries = [" ".join(p.split()[:8]) for p in passages(args.queries, words_per=30, seed=7)]
        with server(args.port) as base:
            times = asyncio.run(measure(base, token, queries))
    emit({
        "benchmark": "mcp_hybrid_search_vs_rest", "chunks": args.chunks, "queries": args.queries, "index_seconds": round(seconds, 1),
        "mcp": summary(times["mcp"]), "rest": summary(times["rest"]),
        "mcp_overhead_p50_ms": round(pctl(times["mcp"], 50) - pctl(times["rest"], 50), 2),
        "mcp_overhead_p95_ms": round(pctl(times["mcp"], 95) - pctl(times["rest"], 95), 2),
        "target_overhead_p50_ms": 5,
    })


if __name__ == "__main__":
    main()
