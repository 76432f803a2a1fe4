"""Tune the graph leg's parameters on a BEIR folder already indexed in a tenant (``manage.py evaluate``
ingests it). Query vectors are computed once; each setting then runs every query on the
backend. Prints JSON: per setting, nDCG@10, recall@5, recall@10, all@10 and p95 ms.

    .venv/bin/python bench/tune_graph.py ../shared/data/musique --tenant musique \\
        --grid '{"weight": [1, 1.5, 2], "seeds": [3, 5]}'

The baseline (hybrid without the graph) is always the first row.
"""

from __future__ import annotations

import argparse
import itertools
import json
import time
from pathlib import Path

from _common import emit, pctl, setup_django


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("folder", type=Path)
    parser.add_argument("--tenant", required=True)
    parser.add_argument("--grid", default="{}", help="JSON object: GraphParams field -> list of values (all combinations)")
    parser.add_argument("--queries", default="queries.jsonl")
    parser.add_argument("--qrels", default="qrels.tsv", help="judgements in the folder (e.g. SciFact's qrels_train.tsv with queries_all.jsonl)")
    parser.add_argument("--fusion", default="rrf", choices=["rrf", "score"], help="the hybrid list's fusion (score: the default weight)")
    args = parser.parse_args()
    setup_django()
    from asgiref.sync import async_to_sync

    from knowledge import rag
    from knowledge.evaluation import ndcg_at_k, read_jsonl, read_qrels, recall_at_k
    from knowledge.graph.service import PostgresGraphReads
    from knowledge.rag.backends.postgres import PostgresBackend

    qrels = read_qrels(args.folder / args.qrels)
    queries = [(str(q["_id"]), str(q["text"])) for q in read_jsonl(args.folder / args.queries) if str(q["_id"]) in qrels]
    embedder = rag.default_embedder()
    vectors = async_to_sync(embedder.embed)([t for _, t in queries], kind="query")  # type: ignore[union-attr]
    grid: dict[str, list[object]] = json.loads(args.grid)
    settings = [None] + [dict(zip(grid, values)) for values in itertools.product(*grid.values())]
    rows = []
    for options in settings:
        backend = PostgresBackend(graph=options)
        ndcg, r5, r10, complete, times = [], [], [], [], []
        for (query_id, text), vector in zip(queries, vectors, strict=True):
            norm = sum(x * x for x in vector) ** 0.5
            query = rag.RAGQuery(text, args.tenant, limit=100, vector=tuple(x / norm for x in vector),
                                 embedding_model=embedder.model_id, graph=options is not None,  # type: ignore[union-attr]
                                 fusion=args.fusion)
            started = time.perf_counter()
            hits = (async_to_sync(PostgresGraphReads().search)(backend, query).hits if options is not None
                    else async_to_sync(backend.search)(query))
            times.append((time.perf_counter() - started) * 1000)
            ranked = list(dict.fromkeys(h.chunk.document_id for h in hits))
            judged = qrels[query_id]
            ndcg.append(ndcg_at_k(ranked, judged))
            r5.append(recall_at_k(ranked, judged, 5))
            r10.append(recall_at_k(ranked, judged, 10))
            complete.append(1.0 if set(judged) <= set(ranked[:10]) else 0.0)
        n = len(queries)
        rows.append({"graph": options, "ndcg@10": round(sum(ndcg) / n, 4), "recall@5": round(sum(r5) / n, 4),
                     "recall@10": round(sum(r10) / n, 4), "all@10": round(sum(complete) / n, 4), "p95_ms": round(pctl(times, 95), 1)})
        print(json.dumps(rows[-1]), flush=True)
    emit({"benchmark": "tune_graph", "dataset": args.folder.resolve().name, "tenant": args.tenant, "fusion": args.fusion,
          "settings": rows})


if __name__ == "__main__":
    main()
