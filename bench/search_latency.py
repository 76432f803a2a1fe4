"""Search latency per mode at N chunks, beside in-process references, as JSON.

    .venv/bin/python bench/search_latency.py [--sizes 100000,1000000] [--queries 200] [--graph]
        [--construction peers|windows] [--ef-search 40,200] [--keep-last]
        [--ingest service|restore] [--service-sample 10000] [--maintenance-work-mem 3GB] [--no-warm]

Chunks are distinct windows of real scientific text (SciFact) so term statistics are
natural. Vectors are *perturbed real embeddings*; random unit vectors would make any ANN
recall figure meaningless. ``--construction peers`` (the default) builds them as the peers'
benchmark does: SciFact's 5,183 document embeddings (title + text, the local model), each
reused in turn as ``unit(v + N(0, 0.04^2 I))``, and the queries are SciFact's test claims with
their real query embeddings. ``windows`` is this script's earlier construction: 1,000 passages
embedded on the spot (or the ``scifact`` tenant's stored vectors) with sigma 0.02, and 8-word
windows as queries; the README compares the two. Query embedding is excluded from every timing.
References, timed on the same queries in the same run: bm25s (keyword), NumPy exact dot product
(semantic), both plus RRF (hybrid). ``semantic_recall@10`` compares the database's semantic
top 10 with NumPy's exact top 10. ``bytes_per_chunk``: each relation of the chunk's tables
(heap, TOAST, every index) over the chunks stored, and the vector's own share (its column and
the HNSW index). ``--graph`` also times hybrid search with the knowledge graph's leg (the graph the
indexer extracted from the same chunks) and reports its p95 over plain hybrid's.

``--ingest`` (the JSON's ``ingest_path``) says how each size's chunks are stored. ``service`` (the
default): the product's path, ``service.ingest`` in batches of 1,000 (chunking, the embedding
cache, the write transaction; the chunks land as a backlog) then ``backlog_index`` (postings, the
HNSW entry of each chunk one at a time, the graph). ``restore``: the way a restored or bulk-loaded
database is built: the HNSW index, the chunks' full-text GIN index and the postings' impact index
are dropped, the chunks are cut by the service's chunker and written by the product's write
transaction (``writes.replace``: documents, binary COPY of chunks, term statistics and, indexing
inline, postings) in batches of 5,000 documents, and the three indexes then built again with ``CREATE INDEX`` (``index_seconds``). It skips what a
restore does not do: the embedding cache's round trip and the HNSW insertions one chunk at a time,
which made the service path about 50-200 chunks/s here (5 hours for a million). ``--service-sample N``
(with ``restore``) also times N chunks through the service path at the first size, into a second
tenant beside the loaded one (all indexes present), and reports them as ``service_path_sample``.
``--maintenance-work-mem`` sets the index builds' memory (pgvector builds HNSW in memory when the
graph fits); ``settings`` in the JSON records the server's settings that matter here.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
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
    """Hands out precomputed vectors by text (the model cost was paid up front).

    ``rows`` maps each text to its row of ``vectors`` (float32): a million vectors as Python
    lists would take 12 GB, as one array 1.5 GB."""

    model_id = "bench/perturbed-minilm"
    dimension = DIM

    def __init__(self, rows: dict[str, int], vectors: np.ndarray) -> None:
        self.rows = rows
        self.vectors = vectors

    async def embed(self, texts: Sequence[str], *, kind: str = "document") -> list[list[float]]:
        return [self.vectors[self.rows[t]].astype(np.float64).tolist() for t in texts]


def _cached(name: str, compute: object) -> np.ndarray:
    """An array kept under var/bench/ (embedding SciFact takes minutes on 2 cores)."""
    from _common import ROOT

    path = ROOT / "var" / "bench" / f"{name}.npy"
    if path.exists():
        return np.load(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    array = np.asarray(compute(), dtype=np.float32)  # type: ignore[operator]
    np.save(path, array)
    return array


def _scifact(local: object, queries: int) -> tuple[np.ndarray, list[str], np.ndarray]:
    """SciFact's document embeddings (title + " " + text), its first ``queries`` test claims and their query embeddings."""
    import json

    from asgiref.sync import async_to_sync
    from _common import SCIFACT

    with SCIFACT.open(encoding="utf-8") as fh:
        docs = [json.loads(line) for line in fh]
    with (SCIFACT.parent / "queries.jsonl").open(encoding="utf-8") as fh:
        claims = [json.loads(line)["text"] for line in fh][:queries]
    model = local.model_id  # type: ignore[attr-defined]
    tag = model.replace("/", "_")

    def embed_all(texts: list[str], kind: str) -> list[list[float]]:
        out: list[list[float]] = []
        for start in range(0, len(texts), 256):
            out += async_to_sync(local.embed)(texts[start:start + 256], kind=kind)  # type: ignore[attr-defined]
        return out

    base = _cached(f"scifact_corpus_{tag}", lambda: embed_all([f"{d.get('title', '')} {d.get('text', '')}" for d in docs], "document"))
    query_vectors = _cached(f"scifact_queries{len(claims)}_{tag}", lambda: embed_all(claims, "query"))
    return base, claims, query_vectors


def _base_vectors(local: object, fallback_texts: list[str]) -> np.ndarray:
    """Real embeddings to perturb: SciFact's, when ``manage.py evaluate`` already indexed them
    (5,183 distinct documents), else 1,000 passages embedded now."""
    from asgiref.sync import async_to_sync
    from django.db import connection

    from knowledge.rag import factory
    from knowledge.rag.backends.postgres import sql as q

    # Read through the backend's own SQL: where pgvector is installed the vector is the halfvec column.
    pgvector = factory.backend().has_pgvector()  # type: ignore[attr-defined]
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT {q.stored_vector_sql(pgvector)} FROM knowledge_chunk c JOIN accounts_tenant t ON t.id = c.tenant_id "
            f"WHERE t.slug = 'scifact' AND c.embedding_model = %s AND {q.has_vector_sql(pgvector)} LIMIT 20000",
            ["local/all-MiniLM-L6-v2-int8"],
        )
        stored = [row[0] for row in cursor.fetchall()]
    if len(stored) >= 1000:
        return np.array(stored, dtype=np.float64)
    return np.array(async_to_sync(local.embed)(fallback_texts), dtype=np.float64)  # type: ignore[attr-defined]


def _bytes_per_chunk(n: int) -> dict[str, object]:
    """Every relation of the chunk's tables (heap, TOAST, indexes) in bytes per chunk stored (all tenants'),
    and the vector's share: its column (average stored size) plus the HNSW index."""
    from django.db import connection

    with connection.cursor() as cursor:
        # The vector's column: embedding_half (halfvec) where pgvector is installed (migration 0022), else embedding.
        cursor.execute("SELECT 1 FROM pg_attribute WHERE attrelid = 'knowledge_chunk'::regclass AND attname = 'embedding_half' "
                       "AND NOT attisdropped")
        vector = "coalesce(pg_column_size(embedding_half), 0) + coalesce(pg_column_size(embedding), 0)" if cursor.fetchone() \
            else "pg_column_size(embedding)"
        cursor.execute(f"SELECT count(*), coalesce(avg({vector}), 0) FROM knowledge_chunk")
        chunks, column = cursor.fetchone()
        cursor.execute(
            """
            SELECT t.relname, r.relname, pg_relation_size(r.oid)
            FROM pg_class t
            JOIN LATERAL (
                SELECT t.oid UNION ALL SELECT t.reltoastrelid WHERE t.reltoastrelid <> 0
                UNION ALL SELECT indexrelid FROM pg_index WHERE indrelid = t.oid
                UNION ALL SELECT indexrelid FROM pg_index WHERE indrelid = t.reltoastrelid AND t.reltoastrelid <> 0
            ) rel(oid) ON true
            JOIN pg_class r ON r.oid = rel.oid
            WHERE t.relname IN ('knowledge_chunk', 'knowledge_posting', 'knowledge_termstat', 'knowledge_mention',
                                'knowledge_entity', 'knowledge_relation')
            ORDER BY t.relname, r.relname
            """
        )
        rows = cursor.fetchall()
    chunks = max(int(chunks), 1)
    relations: dict[str, dict[str, int]] = {}
    for table, relation, size in rows:
        relations.setdefault(table, {})[relation] = round(size / chunks)
    hnsw = sum(b for rels in relations.values() for name, b in rels.items() if name.startswith("chunk_embedding_hnsw"))
    return {"chunks_stored": chunks, "relations": relations,
            "tables_total": {t: sum(r.values()) for t, r in relations.items()},
            "vector": {"column": round(float(column)), "hnsw": hnsw, "total": round(float(column)) + hnsw}}


# Built after a restore's load instead of entry by entry during it (see the docstring's ``restore``).
DEFERRED_INDEXES = ("chunk_search_vector_gin", "posting_term_impact")
RESTORE_BATCH = 5000  # documents (here one chunk each) per write transaction of a restore
SETTINGS = ("shared_buffers", "maintenance_work_mem", "max_parallel_maintenance_workers", "work_mem", "effective_cache_size",
            "max_wal_size", "jit", "hnsw.ef_search")


def _server_settings(cursor: object) -> dict[str, str]:
    out = {}
    for name in SETTINGS:
        try:
            cursor.execute(f"SELECT current_setting('{name}', true)")  # type: ignore[attr-defined]
            out[name] = cursor.fetchone()[0]  # type: ignore[attr-defined]
        except Exception:  # noqa: BLE001 - a setting this server lacks is reported as absent
            out[name] = None
    return out


def _deferred_definitions() -> dict[str, str]:
    """The definitions of the indexes a restore builds after its load: every HNSW index and ``DEFERRED_INDEXES``."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = current_schema() "
            "AND (indexname = ANY(%s) OR indexname LIKE 'chunk\\_embedding\\_hnsw\\_%%')",
            [list(DEFERRED_INDEXES)],
        )
        return dict(cursor.fetchall())


def _build_indexes(definitions: dict[str, str], maintenance_work_mem: str) -> None:
    """Create the indexes ``definitions`` holds unless they exist (a failed load builds them too)."""
    from django.db import connection

    with connection.cursor() as cursor:
        if maintenance_work_mem:
            cursor.execute("SELECT set_config('maintenance_work_mem', %s, false)", [maintenance_work_mem])
        for name, definition in definitions.items():
            started = time.perf_counter()
            cursor.execute(definition.replace("CREATE INDEX ", "CREATE INDEX IF NOT EXISTS ", 1)
                           .replace("CREATE UNIQUE INDEX ", "CREATE UNIQUE INDEX IF NOT EXISTS ", 1))
            print(f"  built {name} in {time.perf_counter() - started:.0f} s", file=sys.stderr, flush=True)


def _restore_load(service: object, namespace: str, texts: Sequence[str], vectors: np.ndarray, n: int, *,
                  graph: bool, definitions: dict[str, str], maintenance_work_mem: str) -> tuple[float, float]:
    """Store chunks c0..c{n-1} the way a restore builds a database (the docstring's ``restore``);
    returns (seconds to write chunks, statistics and postings, seconds to build the deferred indexes)."""
    from django.db import connection

    from knowledge import rag
    from knowledge.rag.backends.postgres import PostgresBackend, writes
    from knowledge.rag.checks import plan_documents, prepared_chunks
    from knowledge.rag.types import PreparedDocument, content_hash, embedding_input

    with connection.cursor() as cursor:
        for name in definitions:
            cursor.execute(f'DROP INDEX IF EXISTS "{name}"')
    # Every write indexes inline (postings in its own transaction, no backlog flag to flip after);
    # with the HNSW index dropped, that costs no HNSW insertion.
    writer = PostgresBackend(inline_index_max_chunks=RESTORE_BATCH, extract_graph=graph)
    try:
        started = time.perf_counter()
        for start in range(0, n, RESTORE_BATCH):
            docs = [rag.RAGDocument(f"c{i}", texts[i]) for i in range(start, min(start + RESTORE_BATCH, n))]
            prepared = []
            for doc, pieces in plan_documents(service.chunker, docs):  # type: ignore[attr-defined]
                row = int(doc.id[1:])
                found = {content_hash(embedding_input(doc.title, p.text)): vectors[row] for p in pieces}
                prepared.append(PreparedDocument(document=doc, content_hash=content_hash(doc.text),
                                                 chunks=tuple(prepared_chunks(doc, pieces, found, TableEmbedder.model_id))))
            writes.replace(writer, namespace, prepared, None, "user")
            if start and start % 100_000 == 0:
                print(f"  stored {start} ({time.perf_counter() - started:.0f} s)", file=sys.stderr, flush=True)
        load_s = time.perf_counter() - started
        print(f"  stored and posted {n} in {load_s:.0f} s", file=sys.stderr, flush=True)
    finally:
        started = time.perf_counter()
        _build_indexes(definitions, maintenance_work_mem)
    return load_s, time.perf_counter() - started


def _service_load(service: object, namespace: str, texts: Sequence[str], start: int, stop: int) -> tuple[float, float]:
    """The product's path: ``service.ingest`` in batches of 1,000, then ``backlog_index``; returns both durations."""
    from asgiref.sync import async_to_sync

    from knowledge import rag
    from knowledge.services.indexing import backlog_index

    started = time.perf_counter()
    for first in range(start, stop, 1000):
        docs = [rag.RAGDocument(f"c{i}", texts[i]) for i in range(first, min(first + 1000, stop))]
        async_to_sync(service.ingest)(docs)  # type: ignore[attr-defined]
    ingest_s = time.perf_counter() - started
    started = time.perf_counter()
    backlog_index(namespace=namespace)  # what the workers do after a bulk load
    return ingest_s, time.perf_counter() - started


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
    parser.add_argument("--construction", choices=("peers", "windows"), default="peers",
                        help="peers: SciFact embeddings + sigma 0.04, SciFact claims as queries; windows: the earlier construction")
    parser.add_argument("--keep-last", action="store_true", help="keep the largest size's tenant (to measure migrations on it)")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--limit", type=int, default=10)
    parser.add_argument("--noise", type=float, default=None, help="per-dimension sigma of the perturbation (peers 0.04, windows 0.02)")
    parser.add_argument("--ef-search", default="", help="fixed hnsw.ef_search values (PostgresBackend(ef_search=); by default it grows with "
                        "the tenant: sql.hnsw_ef_search) to report semantic recall@10 and latency for")
    parser.add_argument("--backlog", type=int, default=0, help="then store this many more chunks un-indexed and measure again")
    parser.add_argument("--graph", action="store_true", help="also time hybrid search with the graph leg")
    parser.add_argument("--ingest", choices=("service", "restore"), default="service",
                        help="service: the product's ingest and indexer; restore: a restore's bulk load, indexes built after")
    parser.add_argument("--service-sample", type=int, default=0,
                        help="with --ingest restore: time this many chunks through the service path at the first size")
    parser.add_argument("--maintenance-work-mem", default="", help="maintenance_work_mem for the index builds (e.g. 3GB)")
    parser.add_argument("--warm", action=argparse.BooleanOptionalAction, default=True,
                        help="one untimed pass of every mode before the timed ones (--no-warm: time the first, cold pass)")
    args = parser.parse_args()
    setup_django()
    import bm25s
    from asgiref.sync import async_to_sync
    from django.db import connection

    from knowledge import rag
    from knowledge.rag.backends.postgres import PostgresBackend, maintenance
    from knowledge.rag.fusion import rrf

    local = rag.LocalEmbedder()
    sizes = [int(s) for s in args.sizes.split(",")]
    biggest = max(sizes)
    texts = passages(biggest, words_per=120, seed=11, distinct=True)
    rows = {t: i for i, t in enumerate(texts)}
    rng = np.random.default_rng(5)
    if args.construction == "peers":
        base, query_texts, query_vectors = _scifact(local, args.queries)
        noise = 0.04 if args.noise is None else args.noise
    else:
        base = _base_vectors(local, texts[:1000])
        query_texts = [" ".join(p.split()[:8]) for p in passages(args.queries, words_per=40, seed=99)]
        query_vectors = np.array(async_to_sync(local.embed)(query_texts, kind="query"), dtype=np.float64)
        noise = 0.02 if args.noise is None else args.noise
    query_vectors = np.asarray(query_vectors, dtype=np.float64)
    query32 = query_vectors.astype(np.float32)  # the references multiply in float32 (a float64 copy of 1M vectors is 3 GB)

    result: dict[str, object] = {"benchmark": "search_latency", "limit": args.limit, "queries": len(query_texts),
                                 "construction": args.construction, "noise": noise, "base_vectors": len(base),
                                 "database": connection.settings_dict["HOST"] or "localhost", "sizes": {}}
    with connection.cursor() as cursor:
        cursor.execute("SELECT version(), (SELECT extversion FROM pg_extension WHERE extname = 'vector')")
        result["server"], result["pgvector"] = cursor.fetchone()
        if args.maintenance_work_mem:
            cursor.execute("SELECT set_config('maintenance_work_mem', %s, false)", [args.maintenance_work_mem])
        result["settings"] = _server_settings(cursor)
    result["ingest_path"] = args.ingest
    result["warmed"] = args.warm
    definitions = _deferred_definitions() if args.ingest == "restore" else {}
    for n in sizes:
        vectors = perturbed(base, n, noise, rng).astype(np.float32)
        with bench_tenant(f"bench-search-{n}", keep=args.keep_last and n == biggest) as tenant:
            service = rag.postgres(TableEmbedder(rows, vectors), namespace=tenant.slug)  # type: ignore[attr-defined]
            if args.ingest == "restore":
                ingest_s, index_s = _restore_load(service, tenant.slug, texts, vectors, n, graph=args.graph,  # type: ignore[attr-defined]
                                                  definitions=definitions, maintenance_work_mem=args.maintenance_work_mem)
            else:
                ingest_s, index_s = _service_load(service, tenant.slug, texts, 0, n)  # type: ignore[attr-defined]
            with connection.cursor() as cursor:
                cursor.execute("ANALYZE knowledge_chunk, knowledge_posting, knowledge_termstat")  # as autovacuum would after a bulk load
            backend = PostgresBackend()
            figures: dict[str, object] = {"ingest_seconds": round(ingest_s, 1), "index_seconds": round(index_s, 1),
                                          "bytes_per_chunk": _bytes_per_chunk(n)}
            print(f"{n}: stored and indexed ({ingest_s:.0f} s + {index_s:.0f} s)", file=sys.stderr, flush=True)
            if args.ingest == "restore" and args.service_sample and n == sizes[0]:
                # The product's own path, timed beside the bulk load: a second tenant, every index in place.
                sample = min(args.service_sample, n)
                with bench_tenant(f"bench-search-sample-{n}") as other:
                    sampled = rag.postgres(TableEmbedder(rows, vectors), namespace=other.slug)  # type: ignore[attr-defined]
                    s_ingest, s_index = _service_load(sampled, other.slug, texts, 0, sample)  # type: ignore[attr-defined]
                figures["service_path_sample"] = {"chunks": sample, "beside_chunks": n, "ingest_seconds": round(s_ingest, 1),
                                                  "index_seconds": round(s_index, 1),
                                                  "chunks_per_second": round(sample / max(s_ingest + s_index, 1e-3), 1)}
                print(f"  service path: {sample} chunks in {s_ingest:.0f} s + {s_index:.0f} s", file=sys.stderr, flush=True)
            if args.warm:
                # One untimed pass of every mode first: a serving database is warm, and straight after the
                # index builds the first pass reads every index page from disk (the 1M run's cold tails).
                for mode in rag.SearchMode:
                    _timed_searches(backend, tenant.slug, mode, query_texts, query_vectors, args.limit)  # type: ignore[attr-defined]
                if args.graph:
                    _timed_searches(backend, tenant.slug, rag.SearchMode.HYBRID, query_texts, query_vectors, args.limit, graph=True)  # type: ignore[attr-defined]
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
                scores = vectors @ query32[qi]
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
                scores = vectors @ query32[qi]  # the reference's semantic leg is timed here too
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
            exact_top = [_exact_top(vectors, query32[qi], args.limit) for qi in range(len(query_texts))]
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
                extra_vectors = perturbed(base, args.backlog, noise, rng).astype(np.float32)
                deferred = rag.service(PostgresBackend(inline_index_max_chunks=0),  # type: ignore[attr-defined]
                                       TableEmbedder({t: i for i, t in enumerate(extra)}, extra_vectors), namespace=tenant.slug)  # type: ignore[attr-defined]
                for start in range(0, args.backlog, 1000):
                    async_to_sync(deferred.ingest)([rag.RAGDocument(f"b{i}", extra[i]) for i in range(start, min(start + 1000, args.backlog))])
                with_backlog: dict[str, object] = {"backlog_chunks": maintenance.backlog(backend, tenant.slug)}
                for mode in rag.SearchMode:
                    with_backlog[mode.value] = summary(_timed_searches(backend, tenant.slug, mode, query_texts, query_vectors, args.limit)[0])  # type: ignore[attr-defined]
                figures["with_backlog"] = with_backlog
            result["sizes"][str(n)] = figures  # type: ignore[index]
            print(json.dumps({str(n): figures}), file=sys.stderr, flush=True)  # a size's figures survive a later size's failure
    emit(result)


if __name__ == "__main__":
    main()
