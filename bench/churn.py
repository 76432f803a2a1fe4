"""One tenant's churn against other tenants' search quality and latency (issue 22), as JSON.

    .venv/bin/python bench/churn.py [../shared/data/musique] [--churn 100000] [--scenarios quiet,ingest]

The issue's three steps, on the configured database (the embedded one by default):

1. Tenant A ingests the BEIR folder through the product's write path (``document_ingest``,
   the local embedder); its semantic nDCG@10 and Recall@100 are measured, and its quiet
   hybrid search latency.
2. A churn tenant stores ``--churn`` chunks (perturbed real embeddings, indexed to the end as
   the workers would, like ``bench/search_latency.py``) and is deleted, then the chunk table
   is vacuumed as autovacuum would; all of it in a child process at a worker's priority
   (``QUARRY_WORKER_NICE``; set it to 0 in the environment to compare).
   Tenant A searches all the while (hybrid, page of 10,
   query vectors computed up front): its p95 during the churn and any failed search.
3. Tenant B ingests the same folder and is measured; A is measured again.

Scenario ``quiet`` runs B's ingestion after the churn, ``ingest`` during it (in a second
child process). Every
measurement is taken on two paths: ``default`` (the product's backend: a tenant of at
most ``QUARRY_SEMANTIC_EXACT_MAX_CHUNKS`` chunks ranks by exact cosine) and ``hnsw``
(``exact_max_chunks=0``: every tenant through the shared HNSW index, which is what every
search did before issue 22). After each scenario the index repair runs as the schedule would
(``indexes_repair``: ``REINDEX INDEX CONCURRENTLY`` of the worst index past the bloat bound),
and B is measured once more on the ``hnsw`` path: whether the rebuild restores what the
churn cost large tenants.

Targets (issue 22): B and A within 0.005 nDCG@10 and 0.01 Recall@100 of A's first
measurement, A's p95 during the churn at most 2x its quiet p95, no failed search.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
from _common import ROOT, emit, index_perturbed_corpus, setup_django, summary

# ../shared beside a clone, or beside the folder of worktrees (as bench/_common.py finds SciFact).
MUSIQUE = next((p for p in (ROOT.parent / "shared" / "data" / "musique", ROOT.parent.parent / "shared" / "data" / "musique")
                if p.exists()), ROOT.parent / "shared" / "data" / "musique")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("folder", type=Path, nargs="?", default=MUSIQUE, help="a BEIR folder (corpus.jsonl, queries.jsonl, qrels.tsv)")
    parser.add_argument("--churn", type=int, default=100_000, help="chunks the churn tenant stores and then deletes")
    parser.add_argument("--scenarios", default="quiet,ingest", help="quiet: B ingests after the churn; ingest: during it")
    parser.add_argument("--keep", action="store_true", help="keep tenants A and B afterwards")
    parser.add_argument("--worker", choices=["churn", "ingest"], help=argparse.SUPPRESS)  # a child process's part
    parser.add_argument("--tenant", help=argparse.SUPPRESS)
    args = parser.parse_args()
    setup_django()
    if args.worker:
        print(json.dumps(_worker(args)))
        return
    from asgiref.sync import async_to_sync
    from django.db import connection

    from accounts.models import Tenant
    from knowledge import rag
    from knowledge.evaluation import read_jsonl, read_qrels
    from knowledge.rag.backends.postgres import PostgresBackend
    from knowledge.rag.embedding import LOCAL_MODEL_ID
    from knowledge.services import index_health

    qrels = read_qrels(args.folder / "qrels.tsv")
    queries = [(str(q["_id"]), str(q["text"])) for q in read_jsonl(args.folder / "queries.jsonl") if str(q["_id"]) in qrels]
    vectors = np.array(async_to_sync(rag.LocalEmbedder().embed)([t for _, t in queries], kind="query"), dtype=np.float64)
    paths = {"default": PostgresBackend(), "hnsw": PostgresBackend(exact_max_chunks=0)}
    with connection.cursor() as cursor:
        cursor.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'")
        row = cursor.fetchone()
        cursor.execute("SHOW server_version")
        server = cursor.fetchone()[0]
    result: dict[str, Any] = {
        "benchmark": "churn", "folder": str(args.folder), "queries": len(queries), "churn_chunks": args.churn,
        "server_version": server, "pgvector": row[0] if row else None,
        "exact_max_chunks": paths["default"].exact_max_chunks, "scenarios": {},
    }
    if row is None:
        result["note"] = "no pgvector: every search is exact, so the shared index cannot cost quality here"

    def quality(slug: str, path: str) -> dict[str, float]:
        """Semantic nDCG@10 and Recall@100 of every judged query, straight on the backend."""
        from knowledge.evaluation import ndcg_at_k, recall_at_k

        ndcgs, recalls = [], []
        for (query_id, text), vector in zip(queries, vectors, strict=True):
            query = rag.RAGQuery(text, slug, mode=rag.SearchMode.SEMANTIC, limit=100, vector=tuple(vector), embedding_model=LOCAL_MODEL_ID)
            hits = async_to_sync(paths[path].search)(query)
            ranked = list(dict.fromkeys(h.chunk.document_id for h in hits))
            ndcgs.append(ndcg_at_k(ranked, qrels[query_id]))
            recalls.append(recall_at_k(ranked, qrels[query_id]))
        return {"ndcg@10": round(float(np.mean(ndcgs)), 4), "recall@100": round(float(np.mean(recalls)), 4)}

    def both(slug: str) -> dict[str, dict[str, float]]:
        return {path: quality(slug, path) for path in paths}

    def search_once(slug: str, i: int) -> float:
        text, vector = queries[i % len(queries)][1], vectors[i % len(queries)]
        query = rag.RAGQuery(text, slug, mode=rag.SearchMode.HYBRID, limit=10, vector=tuple(vector), embedding_model=LOCAL_MODEL_ID)
        started = time.perf_counter()
        async_to_sync(paths["default"].search)(query)
        return (time.perf_counter() - started) * 1000

    def child(*worker: str) -> subprocess.Popen[str]:
        """This script as another process (as the workers are): the churn, or B's ingestion."""
        command = [sys.executable, __file__, str(args.folder), "--churn", str(args.churn), "--worker", *worker]
        return subprocess.Popen(command, stdout=subprocess.PIPE, text=True)

    def outcome(process: subprocess.Popen[str]) -> Any:
        out, _ = process.communicate()
        return json.loads(out) if process.returncode == 0 and out.strip() else {"error": f"exit status {process.returncode}"}

    def hnsw_index() -> dict[str, Any] | None:
        found = [h.as_json() for h in index_health.index_health_report() if h.method == "hnsw"]
        return found[0] if found else None

    slug_a, slug_b = "bench-churn-a", "bench-churn-b"
    result["a_ingest_s"] = _ingest(slug_a, args.folder)
    result["a_first"] = both(slug_a)
    quiet = [search_once(slug_a, i) for i in range(3 * len(queries))]
    result["a_quiet_latency"] = summary(quiet)
    for scenario in [s.strip() for s in args.scenarios.split(",") if s.strip()]:
        if scenario not in ("quiet", "ingest"):
            parser.error(f"unknown scenario {scenario!r}: use quiet or ingest")
        figures: dict[str, Any] = {"hnsw_before": hnsw_index()}
        Tenant.objects.filter(slug=slug_b).delete()
        churner = child("churn")
        ingester = child("ingest", "--tenant", slug_b) if scenario == "ingest" else None
        during, failures, i = [], [], 0
        while churner.poll() is None or (ingester is not None and ingester.poll() is None):
            try:
                during.append(search_once(slug_a, i))
            except Exception as exc:  # noqa: BLE001 - a failed search is a figure of the benchmark
                failures.append(repr(exc))
            i += 1
        figures["churn"] = outcome(churner)
        figures["a_latency_during_churn"] = summary(during)
        figures["a_p95_ratio"] = round(summary(during)["p95_ms"] / result["a_quiet_latency"]["p95_ms"], 2) if during else None
        figures["failed_searches"] = len(failures)
        figures["failures"] = failures[:5]
        figures["b_ingest_s"] = outcome(ingester) if ingester is not None else _ingest(slug_b, args.folder)
        figures["hnsw_after_churn"] = hnsw_index()
        figures["b"] = both(slug_b)
        figures["a_again"] = both(slug_a)
        # The schedule rebuilds one index a run (the worst past the bound); run it until nothing is due.
        started, rebuilt = time.perf_counter(), []
        for _ in range(4):
            repaired = index_health.indexes_repair(trigger="command")
            if not repaired["rebuilt"]:
                break
            rebuilt.append(repaired["rebuilt"])
        figures["repair"] = {"seconds": round(time.perf_counter() - started, 1), "rebuilt": rebuilt}
        figures["hnsw_after_repair"] = hnsw_index()
        figures["b_after_repair"] = both(slug_b)
        first = result["a_first"]["default"]
        figures["within_targets"] = {
            who: abs(figures[who]["default"]["ndcg@10"] - first["ndcg@10"]) <= 0.005
            and abs(figures[who]["default"]["recall@100"] - first["recall@100"]) <= 0.01
            for who in ("b", "a_again")
        } | {"a_p95_at_most_2x": bool(figures["a_p95_ratio"] is not None and figures["a_p95_ratio"] <= 2.0),
             "no_failed_search": not failures}
        result["scenarios"][scenario] = figures
        print(json.dumps({scenario: figures}), file=sys.stderr, flush=True)  # a long run's figures so far
    if not args.keep:
        Tenant.objects.filter(slug__in=[slug_a, slug_b]).delete()
    emit(result)


def _ingest(slug: str, folder: Path) -> float:
    """A fresh tenant ``slug`` holding the folder's corpus (the product's write path); returns seconds."""
    from accounts.models import Tenant
    from accounts.services import tenant_create
    from knowledge.evaluation import ingest_beir_corpus

    Tenant.objects.filter(slug=slug).delete()
    tenant, _ = tenant_create(slug=slug)
    started = time.perf_counter()
    ingest_beir_corpus(tenant=tenant, corpus=folder / "corpus.jsonl")
    return round(time.perf_counter() - started, 1)


def _worker(args: argparse.Namespace) -> Any:
    """The child process's part: B's ingestion, or the churn (store ``--churn`` chunks, index them
    to the end, delete the tenant, vacuum as autovacuum would)."""
    from django.db import connection

    from accounts.models import Tenant
    from accounts.services import tenant_create
    from knowledge.apps import worker_lower_priority

    niceness = worker_lower_priority()  # what every django-q2 worker does when it starts (QUARRY_WORKER_NICE)
    if args.worker == "ingest":
        return {"seconds": _ingest(args.tenant, args.folder), "niceness": niceness}
    slug = "bench-churn-x"
    Tenant.objects.filter(slug=slug).delete()
    tenant_create(slug=slug)
    stored_s = index_perturbed_corpus(slug, args.churn, 1000)
    started = time.perf_counter()
    Tenant.objects.filter(slug=slug).delete()
    deleted_s = time.perf_counter() - started
    with connection.cursor() as cursor:
        cursor.execute("VACUUM (ANALYZE) knowledge_chunk")  # what autovacuum does within minutes
    return {"store_and_index_s": round(stored_s, 1), "delete_s": round(deleted_s, 1), "niceness": niceness}


if __name__ == "__main__":
    main()
