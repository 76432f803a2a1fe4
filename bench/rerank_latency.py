"""What the ColBERT stage adds to a search, cold and warm; prints JSON (issue 36).

    .venv/bin/python bench/rerank_latency.py --tenant scifact --queries ../shared/data/scifact/queries.jsonl --count 50

For ``--count`` queries of the file: hybrid search (the deployment's fusion) for a page of 10, then
the stage (``rag.rerank``, the deployment's ``QUARRY_RERANKER``: its depth of candidates) with an
empty passage cache (``cold``: every candidate encoded, as for a first search over those passages)
and again for the same queries (``warm``: the cache holds them; only the query is encoded).
Reports p50/p95 of the search alone and of what the stage adds, the passages encoded per query,
and the cache's bytes per passage (float16 token vectors). The machine may be shared: run it
alone for figures to compare.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

from _common import emit, pctl, setup_django


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tenant", required=True)
    parser.add_argument("--queries", required=True, type=Path, help="a BEIR queries.jsonl")
    parser.add_argument("--count", type=int, default=50)
    parser.add_argument("--limit", type=int, default=10)
    args = parser.parse_args()
    setup_django()
    from asgiref.sync import async_to_sync

    from knowledge import rag

    texts = [json.loads(line)["text"] for line in args.queries.read_text(encoding="utf-8").splitlines() if line.strip()][: args.count]
    service = rag.tenant_service(args.tenant)
    model = rag.reranker()
    assert model is not None, "QUARRY_RERANKER is None"
    model.load()
    async_to_sync(service.search)("warm up the embedder", limit=args.limit)
    depth = rag.rerank_depth(args.limit)
    searched, candidates = [], []
    for text in texts:
        started = time.perf_counter()
        candidates.append(async_to_sync(service.search)(text, limit=depth))
        searched.append((time.perf_counter() - started) * 1000)
    report: dict[str, object] = {"tenant": args.tenant, "queries": len(texts), "limit": args.limit, "depth": depth,
                                 "reranker": repr(model), "search_p50_ms": round(pctl(searched, 50), 1),
                                 "search_p95_ms": round(pctl(searched, 95), 1)}
    for phase in ("cold", "warm"):
        if phase == "cold":
            model._cache.clear()
            model._cache_used = 0
        added, encoded = [], []
        for text, hits in zip(texts, candidates, strict=True):
            started = time.perf_counter()
            result = async_to_sync(rag.rerank)(text, hits, limit=args.limit)
            added.append((time.perf_counter() - started) * 1000)
            encoded.append(result.encoded)
        report[phase] = {"added_p50_ms": round(pctl(added, 50), 1), "added_p95_ms": round(pctl(added, 95), 1),
                         "passages_encoded_per_query": round(statistics.fmean(encoded), 1)}
    entries = len(model._cache)
    report["cache_bytes_per_passage"] = round(model._cache_used / entries) if entries else None
    report["cache_passages"] = entries
    emit(report)


if __name__ == "__main__":
    main()
