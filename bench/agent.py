"""Retrieval-agent latency in process (the loop, its tools and the database), as JSON.

    .venv/bin/python bench/agent.py [--chunks 2000] [--runs 30] [--concurrency 10] [--model stub|offline]

Indexes ``--chunks`` chunks of real scientific text (SciFact windows; vectors are
perturbed real embeddings of the local model, as in bench/chat.py) into a
throwaway tenant, then asks ``--runs`` questions one after another through
``chat.agent.agent_stream``, then ``--concurrency`` at once. Every run takes one
tool step of two parallel searches (hybrid + keyword of the question) and then
answers: with ``stub`` the model is tests/fake_openai.py answering instantly
through litellm's Router, so the figures are the agent's own cost; with
``offline`` it is the built-in ``quarry/offline-extractive`` (which makes one
hybrid search). Reported: time to the tool step, the tool step itself (from
the ``step`` event to its last ``tool_result``) and the whole run.

Runs against the configured database (the embedded one unless DATABASE_URL is
set), which must be migrated; the tenant is deleted afterwards.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _common import ROOT, bench_tenant, emit, index_perturbed_corpus, passages, setup_django, summary


def stub_reply(messages: list[Any]) -> Any:
    """The stub model: two parallel searches of the question first, then an answer citing what came back."""
    from tests.fake_openai import Scripted, ToolCall

    if not any(m.get("role") == "tool" for m in messages):
        question = next(m["content"] for m in reversed(messages) if m.get("role") == "user")
        return Scripted(tool_calls=(ToolCall("hybrid_search", {"query": question}), ToolCall("keyword_search", {"query": question})))
    return "The passages describe it [1], with more detail in [2]."


async def one_run(session: Any, prompt: str) -> dict[str, Any]:
    from contextlib import aclosing

    from chat.agent import agent_stream

    started = time.perf_counter()
    out: dict[str, Any] = {"to_step_ms": None, "tool_step_ms": None, "total_ms": None, "error": None, "stop_reason": None}
    step_at = None
    async with aclosing(agent_stream(session=session, prompt=prompt, reader=None)) as events:
        async for event in events:
            now = time.perf_counter()
            if event["event"] == "step" and step_at is None:
                step_at = now
                out["to_step_ms"] = (now - started) * 1000
            elif event["event"] == "tool_result" and step_at is not None and out["tool_step_ms"] is None:
                out["tool_step_ms"] = (now - step_at) * 1000  # results are sent together, after the step is saved
            elif event["event"] == "completed":
                out["total_ms"] = (now - started) * 1000
                out["stop_reason"] = event["data"]["stop_reason"]  # type: ignore[typeddict-item]
            elif event["event"] == "error":
                out["error"] = event["data"]["error"]  # type: ignore[typeddict-item]
    return out


def figures(results: list[dict[str, Any]]) -> dict[str, Any]:
    ok = [r for r in results if r["error"] is None and r["total_ms"] is not None]
    return {
        "runs": len(results), "errors": len(results) - len(ok),
        "error_kinds": sorted({r["error"] for r in results if r["error"]}),
        "stop_reasons": sorted({r["stop_reason"] for r in ok}),
        "to_tool_step": summary([r["to_step_ms"] for r in ok if r["to_step_ms"] is not None]),
        "tool_step": summary([r["tool_step_ms"] for r in ok if r["tool_step_ms"] is not None]),
        "total": summary([r["total_ms"] for r in ok]),
    }


async def measure(sessions: list[Any], queries: list[str], runs: int, concurrency: int) -> dict[str, Any]:
    for query in queries[:3]:  # warm-up: the embedding model, the Router, connection pools
        await one_run(sessions[0], query)
    sequential = [await one_run(sessions[0], queries[i % len(queries)]) for i in range(runs)]
    started = time.perf_counter()
    burst = await asyncio.gather(*(one_run(sessions[1 + i], queries[i % len(queries)]) for i in range(concurrency)))
    return {"sequential": figures(sequential),
            "concurrent": {**figures(list(burst)), "wall_seconds": round(time.perf_counter() - started, 2)}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--chunks", type=int, default=2000)
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--concurrency", type=int, default=10)
    parser.add_argument("--model", choices=("stub", "offline"), default="stub")
    parser.add_argument("--base-vectors", type=int, default=300, help="real embeddings to perturb (the rest is noise)")
    args = parser.parse_args()
    setup_django()
    sys.path.insert(0, str(ROOT))
    from asgiref.sync import async_to_sync
    from django.conf import settings

    from chat.models import ChatSession, SessionKind
    from tests.fake_openai import fake_openai_server

    queries = [" ".join(p.split()[:10]) + "?" for p in passages(200, words_per=40, seed=78)]
    with bench_tenant("bench-agent") as tenant, fake_openai_server() as stub, tempfile.TemporaryDirectory() as tmp:
        index_s = index_perturbed_corpus(tenant.slug, args.chunks, min(args.base_vectors, args.chunks))  # type: ignore[attr-defined]
        stub.chat_reply = stub_reply
        deployment = ({"model": "openai/stub", "api_base": stub.base_url, "api_key": "sk-bench"} if args.model == "stub"
                      else {"model": "quarry/offline-extractive"})
        catalog = Path(tmp) / "models.yaml"
        catalog.write_text(json.dumps({"router": {"num_retries": 0}, "models": {"chat": {"deployments": [deployment]}}}))
        settings.QUARRY_MODEL_CONFIG_PATH = catalog
        settings.QUARRY_CHAT_MEMORY_TURNS = 0  # every run is a first question: comparable prompts
        sessions = [ChatSession.objects.create(tenant=tenant, principal="bench", kind=SessionKind.AGENT)
                    for _ in range(args.concurrency + 1)]
        measured = async_to_sync(measure)(sessions, queries, args.runs, args.concurrency)
    emit({
        "benchmark": "agent_run",
        "model": "stub: tests/fake_openai.py answering instantly, via litellm's Router" if args.model == "stub"
                 else "offline: quarry/offline-extractive via litellm's Router",
        "setting": "in process (no HTTP); one tool step of parallel searches, then the answer",
        "chunks": args.chunks, "index_seconds": round(index_s, 1), **measured,
    })


if __name__ == "__main__":
    main()
