"""Access inside a tenant (issue 34): search latency and recall with half the documents restricted, as JSON.

    .venv/bin/python bench/permissions.py [--chunks 100000] [--queries 200] [--limit 10] [--keep]

One tenant of ``--chunks`` one-chunk documents (windows of SciFact text, vectors perturbed real MiniLM
embeddings, as bench/search_latency.py), indexed to the steady state (postings, HNSW); then every other
document is restricted to a group (``document_access_set``: one UPDATE of the documents, one of their
chunks). Each query runs, interleaved so both see the same machine load, as:

- ``unrestricted``: trusted code, no access test (what every search was before access lists);
- ``restricted_reader``: a member outside the group, who may read half the tenant;
- ``group_member``: a member of the group (the access test passes for every chunk).

Straight on the backend (query embedding excluded), hybrid and semantic mode. Recall@10 of the restricted
reader's pages against exact search over what they may read: semantic against NumPy's exact top 10 over
the readable vectors, hybrid against the backend's exact plan (``exact_max_chunks`` above the tenant's
size) for the same reader; and the unrestricted searches' recall against the same references over all
chunks, for comparison. ``p95_ratio``: restricted reader's p95 over unrestricted p95 (target 1.25).
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import numpy as np
from _common import TableEmbedder, bench_tenant, emit, passages, perturbed, setup_django, summary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--chunks", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--limit", type=int, default=10)
    parser.add_argument("--base", type=int, default=1000, help="real embeddings to perturb")
    parser.add_argument("--keep", action="store_true", help="keep the tenant (bench-permissions) afterwards")
    args = parser.parse_args()
    setup_django()
    from asgiref.sync import async_to_sync
    from django.db import connection

    from accounts.models import Group
    from knowledge import rag
    from knowledge.models import Document
    from knowledge.rag.backends.postgres import PostgresBackend
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
    load_before = os.getloadavg()

    with bench_tenant("bench-permissions", keep=args.keep) as tenant:
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
        exact = PostgresBackend(exact_max_chunks=10 * n)
        readers = {"unrestricted": None, "restricted_reader": rag.Reader(10**9, ()), "group_member": rag.Reader(10**9 + 1, (group.pk,))}

        def run(which: PostgresBackend, mode: rag.SearchMode, qi: int, reader: rag.Reader | None) -> tuple[float, list[str]]:
            query = rag.RAGQuery(query_texts[qi], tenant.slug, mode=mode, limit=args.limit, vector=tuple(query_vectors[qi]),  # type: ignore[attr-defined]
                                 embedding_model=LOCAL_MODEL_ID, reader=reader)
            began = time.perf_counter()
            hits = async_to_sync(which.search)(query)
            return (time.perf_counter() - began) * 1000, [h.chunk.document_id for h in hits]

        readable = np.arange(n) % 2 == 1
        figures: dict[str, object] = {}
        for mode in (rag.SearchMode.HYBRID, rag.SearchMode.SEMANTIC):
            times: dict[str, list[float]] = {name: [] for name in readers}
            pages: dict[str, list[list[str]]] = {name: [] for name in readers}
            for qi in range(len(query_texts)):
                for name, reader in readers.items():
                    took, page = run(backend, mode, qi, reader)
                    times[name].append(took)
                    pages[name].append(page)
            recall: dict[str, float] = {}
            short = sum(1 for page in pages["restricted_reader"] if len(page) < args.limit)
            leaked = sum(1 for page in pages["restricted_reader"] for d in page if int(d[1:]) % 2 == 0)
            for name, mask in (("restricted_reader", readable), ("unrestricted", np.ones(n, dtype=bool))):
                scores: list[float] = []
                for qi in range(len(query_texts)):
                    if mode is rag.SearchMode.SEMANTIC:
                        sims = np.where(mask, vectors @ query_vectors[qi], -np.inf)
                        top = np.argpartition(-sims, args.limit)[: args.limit]
                        reference = {f"c{i}" for i in top}
                    else:
                        reference = set(run(exact, mode, qi, readers[name])[1])
                    scores.append(len(reference & set(pages[name][qi])) / args.limit)
                recall[name] = round(statistics.fmean(scores), 4)
            figures[mode.value] = {
                **{name: summary(values) for name, values in times.items()},
                "p95_ratio": round(summary(times["restricted_reader"])["p95_ms"] / max(summary(times["unrestricted"])["p95_ms"], 1e-3), 2),  # type: ignore[index]
                "recall@10_vs_exact": recall, "short_pages": short, "restricted_hits_leaked": leaked,
            }
        emit({
            "benchmark": "permissions", "chunks": n, "restricted_share": 0.5, "queries": args.queries, "limit": args.limit,
            "ingest_and_index_seconds": round(ingest_s, 1), "restrict_seconds": round(restrict_s, 1),
            "loadavg_before": [round(x, 2) for x in load_before], "loadavg_after": [round(x, 2) for x in os.getloadavg()],
            "cpus": os.cpu_count(), **figures,
        })


if __name__ == "__main__":
    main()
