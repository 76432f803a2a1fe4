"""Grid of hybrid fusions on a BEIR split: RRF (k) and normalised score fusion (weight), and the
query prefix of the embedder. Prints JSON.

    .venv/bin/python bench/tune_fusion.py --tenant scifact-bge-small --model bge-small \
        --folder ../shared/data/scifact --qrels qrels_train.tsv --queries queries_all.jsonl

Each judged query's two legs are fetched once (the top ``--depth`` chunks of keyword and of
semantic search, as hybrid search's SQL takes them) and fused here in Python with the same
maths as ``knowledge.rag.fusion`` (min-max within each list, 0 when missing); ``manage.py
evaluate`` then confirms the chosen setting through the real SQL. Tune on train splits only.
Assumes the corpus is already indexed in the tenant with ``--model`` (``manage.py ingest_beir``).
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path

from _common import emit, setup_django


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--tenant", required=True)
    parser.add_argument("--model", default="local", help="QUARRY_EMBEDDING_MODEL the tenant's chunks were embedded with")
    parser.add_argument("--folder", type=Path, required=True)
    parser.add_argument("--qrels", default="qrels_train.tsv")
    parser.add_argument("--queries", default="queries_all.jsonl")
    parser.add_argument("--depth", type=int, default=100)
    parser.add_argument("--weights", default="0.5,0.75,1,1.25,1.5,2,2.5,3")
    parser.add_argument("--rrf-k", default="20,60,100")
    parser.add_argument("--prefixes", default="none,default", help="query prefixes to try: none, default (the model's), or text")
    args = parser.parse_args()
    import os

    os.environ["QUARRY_EMBEDDING_MODEL"] = args.model
    setup_django()
    from asgiref.sync import async_to_sync
    from django.conf import settings
    from django.utils.module_loading import import_string

    from knowledge import rag
    from knowledge.evaluation import ndcg_at_k, read_jsonl, read_qrels
    from knowledge.rag.embedding import BGE_QUERY_PREFIX
    from knowledge.rag.fusion import rrf, score_fusion

    qrels = read_qrels(args.folder / args.qrels)
    queries = [(str(q["_id"]), str(q["text"])) for q in read_jsonl(args.folder / args.queries) if str(q["_id"]) in qrels]
    embedder_class = import_string(settings.QUARRY_EMBEDDER["CLASS"])
    prefixes = {"none": "", "default": BGE_QUERY_PREFIX if args.model == "bge-small" else ""}
    keyword_service = rag.tenant_service(args.tenant, embedder=None)
    keyword_lists = {}
    for query_id, text in queries:
        hits = async_to_sync(keyword_service.search)(text, mode="keyword", limit=args.depth)
        keyword_lists[query_id] = [(h.chunk.chunk_id, h.score, h.chunk.document_id) for h in hits]
    weights = [float(w) for w in args.weights.split(",")]
    ks = [int(k) for k in args.rrf_k.split(",")]
    result: dict[str, object] = {"benchmark": "tune_fusion", "tenant": args.tenant, "model": args.model, "qrels": args.qrels,
                                 "queries": len(queries), "depth": args.depth, "grid": []}
    keyword_ndcg = statistics.fmean(ndcg_at_k(_docs(keyword_lists[q]), qrels[q]) for q, _ in queries)
    result["keyword"] = round(keyword_ndcg, 4)
    for name in args.prefixes.split(","):
        prefix = prefixes.get(name, name)
        if name == "default" and not prefix:
            continue
        service = rag.tenant_service(args.tenant, embedder=embedder_class(query_prefix=prefix))
        semantic_lists = {}
        for query_id, text in queries:
            hits = async_to_sync(service.search)(text, mode="semantic", limit=args.depth)
            semantic_lists[query_id] = [(h.chunk.chunk_id, h.score, h.chunk.document_id) for h in hits]
        docs_of = {}
        for lists in (keyword_lists, semantic_lists):
            for rows in lists.values():
                docs_of.update({c: d for c, _, d in rows})
        row: dict[str, object] = {"prefix": name,
                                  "semantic": round(statistics.fmean(ndcg_at_k(_docs(semantic_lists[q]), qrels[q]) for q, _ in queries), 4)}
        for k in ks:
            row[f"rrf_k{k}"] = round(statistics.fmean(
                ndcg_at_k(list(dict.fromkeys(docs_of[c] for c, _, _ in rrf([[c for c, _, _ in keyword_lists[q]], [c for c, _, _ in semantic_lists[q]]], k=k))), qrels[q])
                for q, _ in queries), 4)
        for w in weights:
            row[f"score_w{w:g}"] = round(statistics.fmean(
                ndcg_at_k(list(dict.fromkeys(docs_of[c] for c, _, _, _ in score_fusion(
                    [(c, s) for c, s, _ in keyword_lists[q]], [(c, s) for c, s, _ in semantic_lists[q]], w))), qrels[q])
                for q, _ in queries), 4)
        result["grid"].append(row)  # type: ignore[union-attr]
    emit(result)


def _docs(rows: list[tuple[str, float, str]]) -> list[str]:
    return list(dict.fromkeys(d for _, _, d in rows))


if __name__ == "__main__":
    main()
