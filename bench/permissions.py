"""Access inside a tenant (issue 34): search latency and recall with half the documents restricted, as JSON.

    .venv/bin/python bench/permissions.py [--chunks 100000] [--queries 200] [--repeats 3] [--recall-queries 50] [--limit 10] [--keep] [--reuse]

One tenant of ``--chunks`` one-chunk documents (windows of SciFact text, vectors perturbed real MiniLM
embeddings, as bench/search_latency.py), indexed to the steady state (postings, HNSW); then every other
document is restricted to a group (``document_access_set``: one UPDATE of the documents, one of their
chunks), and the chunk table vacuumed as autovacuum would after that rewrite. Each query runs as:

- ``unrestricted``: trusted code, no access test (what every search was before access lists);
- ``restricted_reader``: a member outside the group, who may read half the tenant;
- ``group_member``: a member of the group (the access test passes for every chunk).

Straight on the backend (query embedding excluded), in hybrid, semantic and keyword mode. Noise: the
machine is shared, so the three readers run interleaved (query by query, their order rotating), each
``--repeats`` times, and a query's time for a reader is the median of its repeats. Reported per mode:
each reader's percentiles; ``p95_ratio``, the restricted reader's p95 over the unrestricted p95 (the
issue's figure, target 1.25); ``paired_ratio``, the median and p90 over queries of the restricted time
over the unrestricted time of the same query (steadier than a ratio of two tails).

Recall@10 (over the first ``--recall-queries``) of the restricted reader's pages against exact search over what they may read, and of the
unrestricted pages against exact search over all: semantic against NumPy's exact top 10 over the
readable vectors; hybrid and keyword against the backend's exact plans (every matching chunk scored
from its tsvector, exact cosine) for the same reader. Target: the restricted reader's recall equals
the unrestricted one's.

``--keep`` leaves the tenant (bench-permissions) in place; ``--reuse`` then measures it again without
ingesting (e.g. before and after an index change), if it holds ``--chunks`` chunks restricted as above.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import numpy as np
from _common import TableEmbedder, bench_tenant, emit, passages, pctl, perturbed, setup_django, summary

SLUG = "bench-permissions"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--chunks", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=3, help="runs of each query per reader (their median counts)")
    parser.add_argument("--limit", type=int, default=10)
    parser.add_argument("--recall-queries", type=int, default=50,
                        help="queries whose recall is measured (the exact plans cost ~1 s each at 100,000 chunks)")
    parser.add_argument("--base", type=int, default=1000, help="real embeddings to perturb")
    parser.add_argument("--modes", default="hybrid,semantic,keyword")
    parser.add_argument("--keep", action="store_true", help=f"keep the tenant ({SLUG}) afterwards")
    parser.add_argument("--reuse", action="store_true", help="measure a tenant kept by --keep again, without ingesting")
    args = parser.parse_args()
    setup_django()
    from asgiref.sync import async_to_sync
    from django.db import connection

    from accounts.models import Group, Tenant
    from knowledge import rag
    from knowledge.models import Chunk, Document
    from knowledge.rag.backends.postgres import PostgresBackend
    from knowledge.rag.backends.postgres import plan as search_plan
    from knowledge.rag.backends.postgres import sql as q
    from knowledge.rag.embedding import LOCAL_MODEL_ID
    from knowledge.services.access import document_access_set
    from knowledge.services.indexing import backlog_index

    n = args.chunks
    texts = passages(n, words_per=120, seed=31)
    local = rag.LocalEmbedder()
    base = np.array(async_to_sync(local.embed)(texts[: args.base]), dtype=np.float64)
    vectors = perturbed(base, n, 0.04, np.random.default_rng(31))
    query_texts = [" ".join(p.split()[:8]) for p in passages(args.queries, words_per=40, seed=99)]
    query_vectors = np.array(async_to_sync(local.embed)(query_texts, kind="query"), dtype=np.float64)
    modes = [rag.SearchMode(m) for m in args.modes.split(",")]
    load_before = os.getloadavg()

    ingest_s: float | None = None
    restrict_s: float | None = None
    if args.reuse:
        tenant = Tenant.objects.filter(slug=SLUG).first()
        group = Group.objects.filter(tenant=tenant, name="payroll").first() if tenant else None
        if tenant is None or group is None or Chunk.objects.filter(tenant=tenant).count() != n:
            sys.exit(f"--reuse: no kept tenant {SLUG} of {n} chunks with its group (run with --keep first)")
        keeper = None
    else:
        keeper = bench_tenant(SLUG, keep=args.keep)
        tenant = keeper.__enter__()
    try:
        if not args.reuse:
            service = rag.postgres(TableEmbedder({t: vectors[i].tolist() for i, t in enumerate(texts)}, LOCAL_MODEL_ID),
                                   namespace=tenant.slug)  # type: ignore[attr-defined]
            started = time.perf_counter()
            for start in range(0, n, 1000):
                async_to_sync(service.ingest)([rag.RAGDocument(f"c{i}", texts[i]) for i in range(start, min(start + 1000, n))])
            backlog_index(namespace=tenant.slug)  # type: ignore[attr-defined]
            ingest_s = time.perf_counter() - started
            group = Group.objects.create(tenant=tenant, name="payroll")
            started = time.perf_counter()
            restricted_ids = [f"c{i}" for i in range(0, n, 2)]
            document_access_set(documents=Document.objects.filter(tenant=tenant, external_id__in=restricted_ids),
                                principals=[f"g:{group.pk}"], actor="bench")
            restrict_s = time.perf_counter() - started
        with connection.cursor() as cursor:
            cursor.execute("VACUUM ANALYZE knowledge_chunk")  # as autovacuum would after the rewrite of half the rows
            cursor.execute("ANALYZE knowledge_document, knowledge_posting, knowledge_termstat")

        backend = PostgresBackend()
        readers = {"unrestricted": None, "restricted_reader": rag.Reader(10**9, ()), "group_member": rag.Reader(10**9 + 1, (group.pk,))}
        names = list(readers)

        def query_of(mode: rag.SearchMode, qi: int, reader: rag.Reader | None) -> rag.RAGQuery:
            return rag.RAGQuery(query_texts[qi], tenant.slug, mode=mode, limit=args.limit, vector=tuple(query_vectors[qi]),  # type: ignore[attr-defined]
                                embedding_model=LOCAL_MODEL_ID, reader=reader)

        def run(mode: rag.SearchMode, qi: int, reader: rag.Reader | None) -> tuple[float, list[str]]:
            query = query_of(mode, qi, reader)
            began = time.perf_counter()
            hits = async_to_sync(backend.search)(query)
            return (time.perf_counter() - began) * 1000, [h.chunk.document_id for h in hits]

        def exact_page(mode: rag.SearchMode, qi: int, reader: rag.Reader | None) -> set[str]:
            """The backend's exact plans (both legs scored exhaustively) for the reader: the reference."""
            query = query_of(mode, qi, reader)
            rows = search_plan._run(backend, query, q.parse_query(query.text), tenant.pk,  # type: ignore[attr-defined]
                                    exact_keyword=mode is not rag.SearchMode.SEMANTIC, exact_semantic=mode is not rag.SearchMode.KEYWORD)
            return {row["external_id"] for row in rows[: args.limit]}

        readable = np.arange(n) % 2 == 1
        figures: dict[str, object] = {}
        for mode in modes:
            for qi in range(min(5, len(query_texts))):  # warm the caches and the connection before timing
                for reader in readers.values():
                    run(mode, qi, reader)
            times: dict[str, list[float]] = {name: [] for name in names}
            pages: dict[str, list[list[str]]] = {name: [] for name in names}
            for qi in range(len(query_texts)):
                took: dict[str, list[float]] = {name: [] for name in names}
                for repeat in range(args.repeats):
                    shift = (qi + repeat) % len(names)  # who goes first rotates: no reader always pays a cold start
                    for name in names[shift:] + names[:shift]:
                        ms, page = run(mode, qi, readers[name])
                        took[name].append(ms)
                        if repeat == 0:
                            pages[name].append(page)
                for name in names:
                    times[name].append(statistics.median(took[name]))
            recall: dict[str, float] = {}
            short = sum(1 for page in pages["restricted_reader"] if len(page) < args.limit)
            leaked = sum(1 for page in pages["restricted_reader"] for d in page if int(d[1:]) % 2 == 0)
            for name, mask in (("restricted_reader", readable), ("unrestricted", np.ones(n, dtype=bool))):
                scores: list[float] = []
                for qi in range(min(args.recall_queries, len(query_texts))):
                    if mode is rag.SearchMode.SEMANTIC:
                        sims = np.where(mask, vectors @ query_vectors[qi], -np.inf)
                        top = np.argpartition(-sims, args.limit)[: args.limit]
                        reference = {f"c{i}" for i in top}
                    else:
                        reference = exact_page(mode, qi, readers[name])
                    if reference:
                        scores.append(len(reference & set(pages[name][qi])) / len(reference))
                recall[name] = round(statistics.fmean(scores), 4) if scores else float("nan")
            paired = [r / max(u, 1e-3) for r, u in zip(times["restricted_reader"], times["unrestricted"])]
            figures[mode.value] = {
                **{name: summary(values) for name, values in times.items()},
                "p95_ratio": round(summary(times["restricted_reader"])["p95_ms"] / max(summary(times["unrestricted"])["p95_ms"], 1e-3), 2),  # type: ignore[index]
                "paired_ratio": {"median": round(statistics.median(paired), 2), "p90": round(pctl(paired, 90), 2)},
                "recall@10_vs_exact": recall, "short_pages": short, "restricted_hits_leaked": leaked,
            }
        emit({
            "benchmark": "permissions", "chunks": n, "restricted_share": 0.5, "queries": args.queries, "repeats": args.repeats,
        "recall_queries": min(args.recall_queries, args.queries),
            "limit": args.limit, "reused": args.reuse,
            "ingest_and_index_seconds": round(ingest_s, 1) if ingest_s is not None else None,
            "restrict_seconds": round(restrict_s, 1) if restrict_s is not None else None,
            "loadavg_before": [round(x, 2) for x in load_before], "loadavg_after": [round(x, 2) for x in os.getloadavg()],
            "cpus": os.cpu_count(), **figures,
        })
    finally:
        if keeper is not None:
            keeper.__exit__(None, None, None)


if __name__ == "__main__":
    main()
