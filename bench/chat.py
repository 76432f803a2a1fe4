"""Streaming chat latency through a real uvicorn server, as JSON.

    .venv/bin/python bench/chat.py [--chunks 10000] [--requests 100] [--concurrency 50] [--model stub|offline]

Indexes ``--chunks`` chunks of real scientific text (SciFact windows) into a
throwaway tenant, starts ``uvicorn config.asgi:application`` on 127.0.0.1 (the
same process layout as production) and sends ``POST /v1/chat/completions``
with ``stream: true``, measuring from the request to the ``citations`` frame
and to the first ``text_delta``: ``--requests`` one after another, then
``--concurrency`` streams at once (which must all end with ``completed``).

The model: ``stub`` is tests/fake_openai.py (an OpenAI-compatible server in this
process, answering instantly with a 40-word reply in one-word deltas) reached
through litellm's Router like any hosted model; ``offline`` is the built-in
``quarry/offline-extractive``. Retrieval is the real hybrid search: each query
is embedded by the server with the local model; chunk vectors are perturbed
real embeddings (as in bench/search_latency.py), stored under the local
model's id so the server's semantic leg uses them.

Runs against the configured database (the embedded one unless DATABASE_URL is
set), which must be migrated; the tenant is deleted afterwards.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import secrets
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _common import ROOT, bench_tenant, emit, index_perturbed_corpus, passages, setup_django, summary

STUB_REPLY = " ".join(["The passages say that this is how it works [1]."] * 4)  # 40 words


async def one_stream(client: Any, base: str, headers: dict[str, str], session_id: str, prompt: str) -> dict[str, Any]:
    """Timings of one streamed answer; ``error`` set when it did not end with ``completed``."""
    started = time.perf_counter()
    out: dict[str, Any] = {"citations_ms": None, "first_delta_ms": None, "total_ms": None, "error": None}
    last = None
    try:
        async with client.stream("POST", f"{base}/v1/chat/completions", headers=headers,
                                 json={"session_id": session_id, "prompt": prompt, "stream": True}) as response:
            if response.status_code != 200:
                out["error"] = f"HTTP {response.status_code}"
                return out
            async for line in response.aiter_lines():
                if not line.startswith("event: "):
                    continue
                last = line[len("event: "):]
                elapsed = (time.perf_counter() - started) * 1000
                if last == "citations" and out["citations_ms"] is None:
                    out["citations_ms"] = elapsed
                elif last == "text_delta" and out["first_delta_ms"] is None:
                    out["first_delta_ms"] = elapsed
    except Exception as exc:  # a transport failure is an error of the run, not of the script
        out["error"] = type(exc).__name__
        return out
    out["total_ms"] = (time.perf_counter() - started) * 1000
    if last != "completed":
        out["error"] = f"ended with {last}"
    return out


async def run(base: str, token: str, queries: list[str], requests: int, concurrency: int) -> dict[str, Any]:
    import httpx

    headers = {"Authorization": f"Bearer {token}"}
    limits = httpx.Limits(max_connections=concurrency + 10, max_keepalive_connections=concurrency + 10)
    async with httpx.AsyncClient(timeout=120, limits=limits) as client:

        async def new_session() -> str:
            response = await client.post(f"{base}/v1/chat/sessions", json={}, headers=headers)
            response.raise_for_status()
            return response.json()["session_id"]

        session = await new_session()
        for query in queries[:5]:  # warm-up: the model files, the Router, connection pools
            await one_stream(client, base, headers, session, query)
        sequential = [await one_stream(client, base, headers, session, queries[i % len(queries)]) for i in range(requests)]
        sessions = [await new_session() for _ in range(concurrency)]
        started = time.perf_counter()
        burst = await asyncio.gather(*(one_stream(client, base, headers, sessions[i], queries[i % len(queries)])
                                       for i in range(concurrency)))
        burst_s = time.perf_counter() - started

    def figures(results: list[dict[str, Any]]) -> dict[str, Any]:
        ok = [r for r in results if r["error"] is None]
        errors = [r["error"] for r in results if r["error"] is not None]
        return {
            "streams": len(results), "errors": len(errors), "error_kinds": sorted(set(errors)),
            "to_citations": summary([r["citations_ms"] for r in ok]) if ok else None,
            "to_first_text_delta": summary([r["first_delta_ms"] for r in ok]) if ok else None,
            "to_completed": summary([r["total_ms"] for r in ok]) if ok else None,
        }

    return {"sequential": figures(sequential), "concurrent": {**figures(burst), "wall_seconds": round(burst_s, 2)}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--chunks", type=int, default=10_000)
    parser.add_argument("--requests", type=int, default=100)
    parser.add_argument("--concurrency", type=int, default=50)
    parser.add_argument("--model", choices=("stub", "offline"), default="stub")
    parser.add_argument("--base-vectors", type=int, default=500, help="real embeddings to perturb (the rest is noise)")
    args = parser.parse_args()
    setup_django()
    sys.path.insert(0, str(ROOT))
    from django.conf import settings
    from accounts.models import Role
    from accounts.services import api_token_create, membership_set, user_ensure
    from tests.fake_openai import fake_openai_server
    from tests.servers import asgi_server, child_env

    queries = [" ".join(p.split()[:10]) + "?" for p in passages(200, words_per=40, seed=77)]
    with bench_tenant("bench-chat") as tenant, fake_openai_server() as stub, tempfile.TemporaryDirectory() as tmp:
        index_s = index_perturbed_corpus(tenant.slug, args.chunks, min(args.base_vectors, args.chunks))  # type: ignore[attr-defined]
        user, _ = user_ensure(username="bench-chat-reader", password=None)
        membership_set(user=user, tenant=tenant, role=Role.READER)
        _, token = api_token_create(tenant=tenant, owner=user, role=Role.READER)
        stub.chat_reply = STUB_REPLY
        deployment = ({"model": "openai/stub", "api_base": stub.base_url, "api_key": "sk-bench"} if args.model == "stub"
                      else {"model": "quarry/offline-extractive"})
        catalog = Path(tmp) / "models.yaml"
        catalog.write_text(json.dumps({"router": {"num_retries": 0}, "models": {"chat": {"deployments": [deployment]}}}))
        # The server runs as in production: DEBUG off (no query log kept in memory), logs at WARNING.
        env = child_env(QUARRY_MODEL_CONFIG_PATH=str(catalog), QUARRY_LOG_LEVEL="WARNING", DEBUG="0",
                        SECRET_KEY=secrets.token_urlsafe(50))
        with asgi_server(env, log_name="bench-chat-uvicorn") as base:
            measured = asyncio.run(run(base, token, queries, args.requests, args.concurrency))
    target = measured["sequential"]["to_first_text_delta"]
    emit({
        "benchmark": "chat_stream",
        "model": "stub: tests/fake_openai.py answering instantly, via litellm's Router" if args.model == "stub"
                 else "offline: quarry/offline-extractive via litellm's Router",
        "server": "uvicorn config.asgi:application, 1 process, 127.0.0.1",
        "chunks": args.chunks, "top_k": settings.QUARRY_CHAT_RETRIEVAL_TOP_K, "index_seconds": round(index_s, 1),
        **measured,
        "target_p95_first_text_delta_ms": 150,
        "meets_target": bool(target and target["p95_ms"] <= 150 and measured["concurrent"]["errors"] == 0),
    })


if __name__ == "__main__":
    main()
