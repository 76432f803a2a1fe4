"""Ingestion throughput: chunk-and-store with a trivial embedder, and the pipeline's
overhead over the default local embedder's own time. Prints JSON.

Requests of 1,000 documents exceed the inline-indexing limit, so the first figure
is the rate at which chunks are stored and searchable (exactly, as the backlog);
the second is the rate at which the indexer then gives them postings and HNSW
entries, as the workers would, and the third is both together.

    .venv/bin/python bench/ingest.py [--chunks 100000] [--local-docs 300] [--graph-chunks 20000]
    .venv/bin/python bench/ingest.py --local-only --local-model bge-small   # one local model's figure alone

The ``graph`` figure is the knowledge graph's cost in the indexer: the same titled documents
(titles are real SciFact titles, so chunks name each other's now and then) indexed by a backend
that extracts the graph and by one that does not, the indexer's seconds per chunk compared.

Runs against the configured database (the embedded one unless DATABASE_URL is set),
in a throwaway tenant that is deleted afterwards.
"""

from __future__ import annotations

import argparse
import math
import random
import time
from collections.abc import Sequence

from _common import bench_tenant, emit, passages, setup_django


class TrivialEmbedder:
    """Precomputed-cost-free vectors: measures everything but the model."""

    model_id = "bench/trivial"
    dimension = 384

    def __init__(self) -> None:
        rng = random.Random(1)
        self._table = []
        for _ in range(997):
            v = [rng.gauss(0, 1) for _ in range(self.dimension)]
            n = math.sqrt(sum(x * x for x in v))
            self._table.append([x / n for x in v])

    async def embed(self, texts: Sequence[str], *, kind: str = "document") -> list[list[float]]:
        return [self._table[hash(t) % len(self._table)] for t in texts]


class TimedEmbedder:
    """Wraps an embedder and adds up the time spent inside it."""

    def __init__(self, inner: object) -> None:
        self.inner = inner
        self.model_id = inner.model_id  # type: ignore[attr-defined]
        self.dimension = inner.dimension  # type: ignore[attr-defined]
        self.seconds = 0.0
        self.texts = 0

    async def embed(self, texts: Sequence[str], *, kind: str = "document") -> list[list[float]]:
        started = time.perf_counter()
        try:
            return await self.inner.embed(texts, kind=kind)  # type: ignore[attr-defined]
        finally:
            self.seconds += time.perf_counter() - started
            self.texts += len(texts)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--chunks", type=int, default=100_000)
    parser.add_argument("--batch", type=int, default=1000, help="documents per ingest call")
    parser.add_argument("--local-docs", type=int, default=300)
    parser.add_argument("--graph-chunks", type=int, default=20_000, help="0: skip the graph figure")
    parser.add_argument("--skip-throughput", action="store_true", help="only the graph figure")
    parser.add_argument("--local-only", action="store_true", help="only the local embedder's figure")
    parser.add_argument("--local-model", default="local", choices=["local", "bge-small"],
                        help="the local model to time (QUARRY_EMBEDDING_MODEL's names)")
    args = parser.parse_args()
    setup_django()
    from asgiref.sync import async_to_sync
    from django.db import connection

    from knowledge import rag
    from knowledge.rag.backends.postgres import maintenance
    from knowledge.services.indexing import backlog_index

    result: dict[str, object] = {"benchmark": "ingest", "database": connection.settings_dict["HOST"] or "localhost"}
    if args.local_only:
        result["local_embedder"] = local_throughput(args.local_docs, args.local_model)
        emit(result)
        return
    if args.graph_chunks:
        result["graph"] = graph_cost(args.graph_chunks, args.batch)
    if args.skip_throughput:
        emit(result)
        return
    texts = passages(args.chunks, words_per=150, seed=1)  # ~1,000 characters: one chunk per document
    with bench_tenant("bench-ingest") as tenant:
        service = rag.postgres(TrivialEmbedder(), namespace=tenant.slug)  # type: ignore[attr-defined]
        started = time.perf_counter()
        stored = 0
        for start in range(0, len(texts), args.batch):
            docs = [rag.RAGDocument(f"doc-{i}", texts[i]) for i in range(start, min(start + args.batch, len(texts)))]
            stored += async_to_sync(service.ingest)(docs)
        elapsed = time.perf_counter() - started
        backlog = maintenance.backlog(service.backend, tenant.slug)  # type: ignore[arg-type]
        started = time.perf_counter()
        indexed = backlog_index(namespace=tenant.slug)  # type: ignore[attr-defined]
        index_seconds = time.perf_counter() - started
        result["trivial_embedder"] = {
            "chunks": stored, "seconds": round(elapsed, 2), "chunks_per_second": round(stored / elapsed, 1),
            "documents_per_request": args.batch, "backlog_after_ingest": backlog,
            "index_seconds": round(index_seconds, 2), "index_chunks_per_second": round(indexed / index_seconds, 1) if indexed else None,
            "stored_and_indexed_chunks_per_second": round(stored / (elapsed + index_seconds), 1),
        }
        # Re-ingesting unchanged documents: no embedding, same replacement work.
        started = time.perf_counter()
        docs = [rag.RAGDocument(f"doc-{i}", texts[i]) for i in range(args.batch)]
        async_to_sync(service.ingest)(docs)
        result["trivial_embedder"]["reingest_unchanged_chunks_per_second"] = round(args.batch / (time.perf_counter() - started), 1)

    result["local_embedder"] = local_throughput(args.local_docs, args.local_model)
    emit(result)


def local_throughput(count: int, model: str) -> dict[str, object]:
    """Chunks per second through the whole pipeline with a local model, and the pipeline's share."""
    from asgiref.sync import async_to_sync

    from knowledge import rag

    embedder_class = {"local": rag.LocalEmbedder, "bge-small": rag.BgeSmallEmbedder}[model]
    local_texts = passages(count, words_per=200, seed=2)
    with bench_tenant("bench-ingest-local") as tenant:
        embedder = TimedEmbedder(embedder_class())
        embedder_class().load()  # model load is start-up cost, not per-ingest cost
        service = rag.postgres(embedder, namespace=tenant.slug)  # type: ignore[attr-defined]
        started, cpu_started = time.perf_counter(), time.process_time()
        stored = 0
        for start in range(0, len(local_texts), 100):
            docs = [rag.RAGDocument(f"doc-{i}", local_texts[i]) for i in range(start, min(start + 100, len(local_texts)))]
            stored += async_to_sync(service.ingest)(docs)
        total, cpu = time.perf_counter() - started, time.process_time() - cpu_started
        return {
            "model": embedder.model_id, "chunks": stored, "seconds": round(total, 2), "embedder_seconds": round(embedder.seconds, 2),
            "chunks_per_second": round(stored / total, 1),
            "pipeline_overhead_percent": round(100 * (total - embedder.seconds) / embedder.seconds, 2),
            # This process's CPU time (all its threads) per chunk: comparable on a shared, loaded machine
            # where wall-clock rates are not.
            "cpu_ms_per_chunk": round(1000 * cpu / stored, 1),
        }


def graph_cost(count: int, batch: int) -> dict[str, object]:
    """The indexer's seconds per chunk with and without graph extraction, on the same titled documents."""
    import json

    from asgiref.sync import async_to_sync

    from knowledge import rag
    from knowledge.models import Entity, Mention
    from knowledge.rag.backends.postgres import PostgresBackend, maintenance
    from _common import SCIFACT

    titles = [json.loads(line).get("title") or "Untitled" for line in SCIFACT.open(encoding="utf-8")] if SCIFACT.exists() else ["Untitled"]
    texts = passages(count, words_per=150, seed=3)
    figures: dict[str, object] = {"chunks": count}
    # Two tenants with the same documents, indexed in alternating batches so both see the same machine load.
    with bench_tenant("bench-graph-without") as plain, bench_tenant("bench-graph-with") as graphed:
        backends = {"without_graph": PostgresBackend(inline_index_max_chunks=0, extract_graph=False),
                    "with_graph": PostgresBackend(inline_index_max_chunks=0, extract_graph=True)}
        tenants = {"without_graph": plain, "with_graph": graphed}
        for label, backend in backends.items():
            service = rag.service(backend, TrivialEmbedder(), namespace=tenants[label].slug)  # type: ignore[attr-defined]
            for start in range(0, count, batch):
                docs = [rag.RAGDocument(f"doc-{i}", texts[i], title=titles[i % len(titles)]) for i in range(start, min(start + batch, count))]
                async_to_sync(service.ingest)(docs)
        seconds = dict.fromkeys(backends, 0.0)
        pending = set(backends)
        while pending:
            for label in sorted(pending):
                started = time.perf_counter()
                done = maintenance.index_backlog(backends[label], tenants[label].slug, limit=500)
                seconds[label] += time.perf_counter() - started
                if not done:
                    pending.discard(label)
        for label, value in seconds.items():
            figures[f"index_seconds_{label}"] = round(value, 2)
            figures[f"index_ms_per_chunk_{label}"] = round(1000 * value / count, 3)
        figures["entities"] = Entity.objects.filter(tenant=graphed).count()
        figures["mentions"] = Mention.objects.filter(tenant=graphed).count()
    base = figures["index_seconds_without_graph"]
    figures["graph_overhead_percent"] = round(100 * (figures["index_seconds_with_graph"] - base) / base, 1)  # type: ignore[operator]
    return figures


if __name__ == "__main__":
    main()
