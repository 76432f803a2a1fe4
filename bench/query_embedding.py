"""Query-embedding latency of the local models: each query embedded alone, as a search does. Prints JSON.

    .venv/bin/python bench/query_embedding.py [--queries 300] [--models local,bge-small]

Queries are SciFact's test queries (short claims) when ../shared/data is there, else passages of
12 words. Reports wall-clock p50/p95 per model and the process CPU time per query (comparable on
a loaded machine, where wall-clock is not); the models are interleaved query by query, so both
see the same load.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time

from _common import SCIFACT, emit, passages, summary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--models", default="local,bge-small")
    parser.add_argument("--threads", type=int, default=None, help="onnxruntime intra-op threads (default: one per core)")
    args = parser.parse_args()
    from knowledge.rag.embedding import BgeSmallEmbedder, LocalEmbedder

    queries_file = SCIFACT.parent / "queries.jsonl"
    if queries_file.exists():
        texts = [json.loads(line)["text"] for line in queries_file.open(encoding="utf-8")][: args.queries]
    else:
        texts = passages(args.queries, words_per=12, seed=5)
    classes = {"local": LocalEmbedder, "bge-small": BgeSmallEmbedder}
    embedders = {name: classes[name](threads=args.threads) for name in args.models.split(",")}
    for embedder in embedders.values():
        embedder.load()
        asyncio.run(embedder.embed(["warm up"], kind="query"))
    wall: dict[str, list[float]] = {name: [] for name in embedders}
    cpu: dict[str, float] = dict.fromkeys(embedders, 0.0)
    for text in texts:
        for name, embedder in embedders.items():
            started, cpu_started = time.perf_counter(), time.process_time()
            embedder._embed_sync([embedder.query_prefix + text])  # the work of embed(kind="query"), without the thread hop
            wall[name].append((time.perf_counter() - started) * 1000)
            cpu[name] += time.process_time() - cpu_started
    emit({
        "benchmark": "query_embedding", "queries": len(texts),
        "models": {name: {"model_id": embedders[name].model_id, **(summary(wall[name]) or {}),
                          "cpu_ms_per_query": round(1000 * cpu[name] / len(texts), 2)} for name in embedders},
    })


if __name__ == "__main__":
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    main()
