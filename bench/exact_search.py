"""What exact semantic search costs a tenant, by its size, beside the HNSW path, as JSON.

    .venv/bin/python bench/exact_search.py [--sizes 1000,2000,5000,10000,20000] [--queries 100]

Chooses ``QUARRY_SEMANTIC_EXACT_MAX_CHUNKS`` (issue 22): a tenant at or below it is
ranked by exact cosine over its own chunks (through its b-tree, no ANN). One tenant
grows to each size in turn (perturbed real embeddings, as in bench/search_latency.py,
all indexed and ANALYZEd); at each size the same queries run in SEMANTIC and HYBRID
mode through the exact path (``exact_max_chunks`` above the size) and the HNSW path
(``exact_max_chunks=0``), with recall@10 of each against NumPy's exact top 10.
Query embedding is excluded from every timing.

Every chunk carries ``{"shelf": i % SHELVES}``; ``semantic_filtered_*`` runs the semantic
queries filtered to one shelf (1/50 of the tenant). The default backend
(``exact_max_chunks`` 2,000) ranks such a search exactly whenever the shelf holds at most
2,000 chunks, whatever the tenant's size; ``hnsw`` is the ANN path with iterative scans.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
from _common import bench_tenant, emit, passages, perturbed, setup_django
from search_latency import TableEmbedder, _base_vectors, summary

SHELVES = 50


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", default="1000,2000,5000,10000,20000")
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--limit", type=int, default=10)
    parser.add_argument("--noise", type=float, default=0.02)
    args = parser.parse_args()
    setup_django()
    from asgiref.sync import async_to_sync
    from django.db import connection

    from knowledge import rag
    from knowledge.rag.backends.postgres import PostgresBackend
    from knowledge.services.indexing import backlog_index

    local = rag.LocalEmbedder()
    sizes = sorted(int(s) for s in args.sizes.split(","))
    texts = passages(sizes[-1], words_per=120, seed=11)
    base = _base_vectors(local, texts[:1000])
    vectors = perturbed(base, sizes[-1], args.noise, np.random.default_rng(5))
    table = {texts[i]: vectors[i].tolist() for i in range(len(texts))}
    # A text drawn twice is stored with the vector the table gives it (the later one): rank those.
    stored_vectors = np.array([table[t] for t in texts])
    query_texts = [" ".join(p.split()[:8]) for p in passages(args.queries, words_per=40, seed=99)]
    query_vectors = np.array(async_to_sync(local.embed)(query_texts, kind="query"), dtype=np.float64)
    with connection.cursor() as cursor:
        cursor.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'")
        row = cursor.fetchone()
        cursor.execute("SHOW server_version")
        server = cursor.fetchone()[0]
    result: dict[str, object] = {"benchmark": "exact_search", "limit": args.limit, "queries": args.queries,
                                 "server_version": server, "pgvector": row[0] if row else None, "sizes": {}}
    paths = {"exact": PostgresBackend(exact_max_chunks=10**9), "hnsw": PostgresBackend(exact_max_chunks=0)}
    filtered_paths = {"default": PostgresBackend(), "hnsw": PostgresBackend(exact_max_chunks=0)}
    with bench_tenant("bench-exact") as tenant:
        service = rag.postgres(TableEmbedder(table), namespace=tenant.slug)  # type: ignore[attr-defined]
        stored = 0
        for n in sizes:
            for start in range(stored, n, 1000):
                async_to_sync(service.ingest)([rag.RAGDocument(f"c{i}", texts[i], metadata={"shelf": i % SHELVES}) for i in range(start, min(start + 1000, n))])
            stored = n
            backlog_index(namespace=tenant.slug)  # type: ignore[attr-defined]
            with connection.cursor() as cursor:
                cursor.execute("ANALYZE knowledge_chunk, knowledge_posting, knowledge_termstat")
            truth = []
            for qi in range(len(query_texts)):
                scores = stored_vectors[:n] @ query_vectors[qi]
                top = np.argpartition(-scores, args.limit)[: args.limit]
                truth.append({f"c{i}" for i in top})
            figures: dict[str, object] = {}
            for path, backend in paths.items():
                for mode in (rag.SearchMode.SEMANTIC, rag.SearchMode.HYBRID):
                    times, recalls = [], []
                    for qi, text in enumerate(query_texts):
                        query = rag.RAGQuery(text, tenant.slug, mode=mode, limit=args.limit, vector=tuple(query_vectors[qi]),  # type: ignore[attr-defined]
                                             embedding_model=TableEmbedder.model_id)
                        started = time.perf_counter()
                        hits = async_to_sync(backend.search)(query)
                        times.append((time.perf_counter() - started) * 1000)
                        if mode is rag.SearchMode.SEMANTIC:
                            recalls.append(len(truth[qi] & {h.chunk.document_id for h in hits}) / args.limit)
                    entry: dict[str, object] = summary(times)
                    if recalls:
                        entry["recall@10"] = round(statistics.fmean(recalls), 4)
                    figures[f"{mode.value}_{path}"] = entry
            shelf = np.arange(n) % SHELVES == 0
            for path, backend in filtered_paths.items():
                times, recalls = [], []
                for qi, text in enumerate(query_texts):
                    scores = np.where(shelf, stored_vectors[:n] @ query_vectors[qi], -np.inf)
                    want = {f"c{i}" for i in np.argsort(-scores)[: args.limit]}
                    query = rag.RAGQuery(text, tenant.slug, mode=rag.SearchMode.SEMANTIC, limit=args.limit,  # type: ignore[attr-defined]
                                         vector=tuple(query_vectors[qi]), embedding_model=TableEmbedder.model_id, filters={"shelf": 0})
                    started = time.perf_counter()
                    hits = async_to_sync(backend.search)(query)
                    times.append((time.perf_counter() - started) * 1000)
                    recalls.append(len(want & {h.chunk.document_id for h in hits}) / args.limit)
                figures[f"semantic_filtered_{path}"] = summary(times) | {"recall@10": round(statistics.fmean(recalls), 4),
                                                                         "candidates": int(shelf.sum())}
            result["sizes"][str(n)] = figures  # type: ignore[index]
    emit(result)


if __name__ == "__main__":
    main()
