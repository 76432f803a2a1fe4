"""Search latency per mode at N chunks, beside in-process references, as JSON.

    .venv/bin/python bench/search_latency.py [--sizes 10000,100000] [--queries 200] [--graph]

Chunks are windows of real scientific text (SciFact) so term statistics are
natural. Vectors are *perturbed real embeddings*: SciFact's 5,183 document
embeddings (or 1,000 passages embedded on the spot), each reused with Gaussian
noise; random unit vectors would make
any ANN recall figure meaningless. Query vectors are real embeddings of short
queries. Query embedding is excluded from every timing. References, timed on
the same queries in the same run: bm25s (keyword), NumPy exact dot product
(semantic), both plus RRF (hybrid). ``semantic_recall@10`` compares the
database's semantic top 10 with NumPy's exact top 10. ``--graph`` also times hybrid search
with the knowledge graph's leg (the graph the indexer extracted from the same chunks) and
reports its p95 over plain hybrid's.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Sequence

import numpy as np
from _common import bench_tenant, emit, passages, perturbed, setup_django

DIM = 384


def pctl(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q / 100 * len(ordered)) - 1))]


def summary(times: list[float]) -> dict[str, float]:
    return {"p50_ms": round(pctl(times, 50), 2), "p95_ms": round(pctl(times, 95), 2), "mean_ms": round(statistics.fmean(times), 2)}


class TableEmbedder:
    """Hands out precomputed vectors by text (the model cost was paid up front)."""

    model_id = "bench/perturbed-minilm"
    dimension = DIM

    def __init__(self, table: dict[str, list[float]]) -> None:
        self.table = table

    async def embed(self, texts: Sequence[str], *, kind: str = "document") -> list[list[float]]:
        return [self.table[t] for t in texts]


def _base_vectors(local: object, fallback_texts: list[str]) -> np.ndarray:
    """Real embeddings to perturb: SciFact's, when ``manage.py evaluate`` already indexed them
    (5,183 distinct documents), else 1,000 passages embedded now."""
    from asgiref.sync import async_to_sync

    from knowledge.models import Chunk

    stored = list(
        Chunk.objects.filter(tenant__slug="scifact", embedding__isnull=False, embedding_model="local/all-MiniLM-L6-v2-int8")
        .values_list("embedding", flat=True)[:20000]
    )
    if len(stored) >= 1000:
        return np.array(stored, dtype=np.float64)
    return np.array(async_to_sync(local.embed)(fallback_texts), dtype=np.float64)  # type: ignore[attr-defined]


def _exact_top(vectors: np.ndarray, query: np.ndarray, k: int) -> list[str]:
    scores = vectors @ query
    top = np.argpartition(-scores, k)[:k]
    return [f"c{i}" for i in top[np.argsort(-scores[top])]]


def _timed_searches(
    backend: object, namespace: str, mode: object, texts: Sequence[str], vectors: np.ndarray, limit: int, graph: bool = False
) -> tuple[list[float], list[list[str]]]:
    """Each query once, straight on the backend (no query embedding): milliseconds and result ids."""
    from asgiref.sync import async_to_sync

    from knowledge import rag

    times, pages = [], []
    for qi, text in enumerate(texts):
        query = rag.RAGQuery(text, namespace, mode=mode, limit=limit,  # type: ignore[arg-type]
                             vector=None if mode is rag.SearchMode.KEYWORD else tuple(vectors[qi]), embedding_model=TableEmbedder.model_id,
                             graph=graph)
        started = time.perf_counter()
        hits = async_to_sync(backend.search)(query)  # type: ignore[attr-defined]
        times.append((time.perf_counter() - started) * 1000)
        pages.append([h.chunk.document_id for h in hits])
    return times, pages


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--limit", type=int, default=10)
    parser.add_argument("--noise", type=float, default=0.02, help="per-dimension sigma of the perturbation")
    parser.add_argument("--ef-search", default="", help="extra HNSW ef_search values to report semantic recall@10 and latency for")
    parser.add_argument("--backlog", type=int, default=0, help="then store this many more chunks un-indexed and measure again")
    parser.add_argument("--graph", action="store_true", help="also time hybrid search with the graph leg")
    args = parser.parse_args()
    setup_django()
    import bm25s
    from asgiref.sync import async_to_sync
    from django.db import connection

    from knowledge import rag
    from knowledge.services.indexing import backlog_index
    from knowledge.rag.backends.postgres import PostgresBackend, maintenance
    from knowledge.rag.fusion import rrf

    local = rag.LocalEmbedder()
    sizes = [int(s) for s in args.sizes.split(",")]
    biggest = max(sizes)
    texts = passages(biggest, words_per=120, seed=11)
    base = _base_vectors(local, texts[:1000])
    rng = np.random.default_rng(5)
    query_texts = [" ".join(p.split()[:8]) for p in passages(args.queries, words_per=40, seed=99)]
    query_vectors = np.array(async_to_sync(local.embed)(query_texts, kind="query"), dtype=np.float64)

    result: dict[str, object] = {"benchmark": "search_latency", "limit": args.limit, "queries": args.queries,
                                 "database": connection.settings_dict["HOST"] or "localhost", "sizes": {}}
    for n in sizes:
        vectors = perturbed(base, n, args.noise, rng)
        table = {texts[i]: vectors[i].tolist() for i in range(n)}
        with bench_tenant(f"bench-search-{n}") as tenant:
            service = rag.postgres(TableEmbedder(table), namespace=tenant.slug)  # type: ignore[attr-defined]
            started = time.perf_counter()
            for start in range(0, n, 1000):
                docs = [rag.RAGDocument(f"c{i}", texts[i]) for i in range(start, min(start + 1000, n))]
                async_to_sync(service.ingest)(docs)
            ingest_s = time.perf_counter() - started
            started = time.perf_counter()
            backlog_index(namespace=tenant.slug)  # type: ignore[attr-defined]  # what the workers do after a bulk load
            index_s = time.perf_counter() - started
            with connection.cursor() as cursor:
                cursor.execute("ANALYZE knowledge_chunk, knowledge_posting, knowledge_termstat")  # as autovacuum would after a bulk load
            backend = PostgresBackend()
            figures: dict[str, object] = {"ingest_seconds": round(ingest_s, 1), "index_seconds": round(index_s, 1)}
            db_semantic: list[list[str]] = []
            for mode in rag.SearchMode:
                times, pages = _timed_searches(backend, tenant.slug, mode, query_texts, query_vectors, args.limit)  # type: ignore[attr-defined]
                if mode is rag.SearchMode.SEMANTIC:
                    db_semantic = pages
                figures[mode.value] = summary(times)
            if args.graph:
                # Interleaved, query by query, so both see the same machine load.
                plain_times, graph_times = [], []
                for qi, text in enumerate(query_texts):
                    for graph, bucket in ((False, plain_times), (True, graph_times)):
                        bucket += _timed_searches(backend, tenant.slug, rag.SearchMode.HYBRID, [text], query_vectors[qi:qi + 1],  # type: ignore[attr-defined]
                                                  args.limit, graph=graph)[0]
                figures["hybrid_interleaved"] = summary(plain_times)
                figures["hybrid+graph"] = summary(graph_times)
                figures["graph_p95_over_hybrid"] = round(figures["hybrid+graph"]["p95_ms"] / max(figures["hybrid_interleaved"]["p95_ms"], 1e-3), 2)  # type: ignore[index]

            # References over the same data, in process.
            retriever = bm25s.BM25()
            retriever.index(bm25s.tokenize(texts[:n], stopwords="en", show_progress=False), show_progress=False)
            kw_times, sem_times, hyb_times, recalls = [], [], [], []
            for qi, text in enumerate(query_texts):
                started = time.perf_counter()
                tokens = bm25s.tokenize([text], stopwords="en", show_progress=False)
                if tokens.vocab:
                    retriever.retrieve(tokens, k=min(100, n), show_progress=False)
                kw_times.append((time.perf_counter() - started) * 1000)
                started = time.perf_counter()
                scores = vectors @ query_vectors[qi]
                top = np.argpartition(-scores, args.limit)[: args.limit]
                exact = [f"c{i}" for i in top[np.argsort(-scores[top])]]
                sem_times.append((time.perf_counter() - started) * 1000)
                recalls.append(len(set(exact) & set(db_semantic[qi])) / args.limit)
                started = time.perf_counter()
                if tokens.vocab:
                    kw_docs, _ = retriever.retrieve(tokens, k=min(100, n), show_progress=False)
                    kw_ids = [f"c{i}" for i in kw_docs[0]]
                else:
                    kw_ids = []
                scores = vectors @ query_vectors[qi]  # the reference's semantic leg is timed here too
                top100 = np.argpartition(-scores, 100)[:100]
                sem_ids = [f"c{i}" for i in top100[np.argsort(-scores[top100])]]
                rrf([kw_ids, sem_ids])[: args.limit]
                hyb_times.append((time.perf_counter() - started) * 1000)
            figures["reference"] = {"keyword_bm25s": summary(kw_times), "semantic_numpy": summary(sem_times),
                                    "hybrid_bm25s_numpy_rrf": summary(hyb_times)}
            figures["ratio_p95"] = {
                "keyword": round(figures["keyword"]["p95_ms"] / max(figures["reference"]["keyword_bm25s"]["p95_ms"], 1e-3), 2),  # type: ignore[index]
                "semantic": round(figures["semantic"]["p95_ms"] / max(figures["reference"]["semantic_numpy"]["p95_ms"], 1e-3), 2),  # type: ignore[index]
                "hybrid": round(figures["hybrid"]["p95_ms"] / max(figures["reference"]["hybrid_bm25s_numpy_rrf"]["p95_ms"], 1e-3), 2),  # type: ignore[index]
            }
            figures["semantic_recall@10"] = round(statistics.fmean(recalls), 4)
            exact_top = [_exact_top(vectors, query_vectors[qi], args.limit) for qi in range(len(query_texts))]
            for ef in [int(x) for x in args.ef_search.split(",") if x.strip()]:
                tuned = PostgresBackend(ef_search=ef)
                times, recalls_ef = [], []
                for qi, text in enumerate(query_texts):
                    query = rag.RAGQuery(text, tenant.slug, mode=rag.SearchMode.SEMANTIC, limit=args.limit,  # type: ignore[attr-defined]
                                         vector=tuple(query_vectors[qi]), embedding_model=TableEmbedder.model_id)
                    started = time.perf_counter()
                    hits = async_to_sync(tuned.search)(query)
                    times.append((time.perf_counter() - started) * 1000)
                    recalls_ef.append(len(set(exact_top[qi]) & {h.chunk.document_id for h in hits}) / args.limit)
                figures[f"semantic_ef_search_{ef}"] = {**summary(times), "recall@10": round(statistics.fmean(recalls_ef), 4)}
            if args.backlog:
                # A bulk load in progress: chunks stored but not yet indexed are searched exactly.
                extra = passages(args.backlog, words_per=120, seed=12)
                extra_vectors = perturbed(base, args.backlog, args.noise, rng)
                table.update({t: extra_vectors[i].tolist() for i, t in enumerate(extra)})
                deferred = rag.service(PostgresBackend(inline_index_max_chunks=0), TableEmbedder(table), namespace=tenant.slug)  # type: ignore[attr-defined]
                for start in range(0, args.backlog, 1000):
                    async_to_sync(deferred.ingest)([rag.RAGDocument(f"b{i}", extra[i]) for i in range(start, min(start + 1000, args.backlog))])
                with_backlog: dict[str, object] = {"backlog_chunks": maintenance.backlog(backend, tenant.slug)}
                for mode in rag.SearchMode:
                    with_backlog[mode.value] = summary(_timed_searches(backend, tenant.slug, mode, query_texts, query_vectors, args.limit)[0])  # type: ignore[attr-defined]
                figures["with_backlog"] = with_backlog
            result["sizes"][str(n)] = figures  # type: ignore[index]
    emit(result)


if __name__ == "__main__":
    main()
