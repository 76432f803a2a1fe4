"""Chunks longer than the embedder's window: truncated (what ingest does) or embedded in windows and pooled.

    .venv/bin/python bench/embedding_windows.py --tenant scifact-bge --folder ../shared/data/scifact \
        --split qrels_train.tsv:queries_all.jsonl --split qrels.tsv:queries.jsonl

Reads the tenant's stored chunk vectors (a corpus ``manage.py evaluate`` indexed with the local
model), finds the chunks whose embedding input (title and text) is longer than the model's window,
embeds each of those as overlapping windows of the window's size (``--stride`` tokens apart), and
averages the windows' unit vectors into one (renormalised: a chunk keeps one vector). Then it ranks
every split's queries by cosine similarity over all chunks, once with the stored (truncated) vectors
and once with the long chunks' pooled ones, and prints nDCG@10 of semantic search for both as JSON.
"""

from __future__ import annotations

import argparse
import asyncio

import numpy as np

from _common import emit, setup_django


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tenant", required=True)
    parser.add_argument("--folder", required=True)
    parser.add_argument("--split", action="append", required=True, help="QRELS:QUERIES in the folder (repeatable)")
    parser.add_argument("--model", default="bge-small", help="a local model name (bge-small or local)")
    parser.add_argument("--stride", type=int, default=256, help="tokens between the starts of two windows")
    args = parser.parse_args()
    setup_django()
    from pathlib import Path

    from django.db.models.expressions import RawSQL
    from tokenizers import Tokenizer

    from accounts.models import Tenant
    from knowledge.evaluation import ndcg_at_k, read_jsonl, read_qrels
    from knowledge.models import Chunk
    from knowledge.rag import factory
    from knowledge.rag.backends.postgres import sql as pg_sql
    from knowledge.rag.factory import embedder_named
    from knowledge.rag.types import embedding_input

    embedder = embedder_named(args.model)
    tokenizer, session = embedder._load()
    whole = Tokenizer.from_str(tokenizer.to_str())
    whole.no_truncation()
    whole.no_padding()
    tenant = Tenant.objects.get(slug=args.tenant)
    # The stored vector as the backend reads it: the halfvec column where pgvector is installed (migration 0022).
    stored_vector = RawSQL(pg_sql.stored_vector_sql(factory.backend().has_pgvector(), alias="knowledge_chunk"), [])  # type: ignore[attr-defined]
    rows = list(Chunk.objects.filter(tenant=tenant, embedding_model=embedder.model_id).annotate(vector=stored_vector)
                .values_list("id", "document__external_id", "document__title", "text", "vector").order_by("id"))
    if not rows:
        raise SystemExit(f"tenant {args.tenant!r} holds no vectors of {embedder.model_id}")
    docs = [r[1] for r in rows]
    stored = np.array([r[4] for r in rows], dtype=np.float64)
    pooled = stored.copy()
    window = embedder.max_length - 2  # [CLS] and [SEP] around every window
    cls_id, sep_id = whole.token_to_id("[CLS]"), whole.token_to_id("[SEP]")
    lengths, long_rows, windows_total = [], [], 0
    for i, (_, _, title, text, _) in enumerate(rows):
        ids = whole.encode(embedding_input(title, text), add_special_tokens=False).ids
        lengths.append(len(ids) + 2)
        if len(ids) <= window:
            continue
        long_rows.append(i)
        starts = list(range(0, len(ids) - window + args.stride, args.stride))
        pieces = [[cls_id, *ids[s : s + window], sep_id] for s in starts if s < len(ids)]
        windows_total += len(pieces)
        vectors = np.vstack([embedder._run_batch(session, [piece], embedder.pooling) for piece in pieces])
        weights = np.array([len(p) for p in pieces], dtype=np.float64)[:, None]
        mean = (vectors * weights).sum(axis=0)
        pooled[i] = mean / np.linalg.norm(mean)
    report: dict[str, object] = {
        "tenant": args.tenant, "model": embedder.model_id, "chunks": len(rows), "window_tokens": embedder.max_length,
        "stride": args.stride, "longer_than_window": len(long_rows), "windows_embedded": windows_total,
        "share_longer": round(len(long_rows) / len(rows), 4), "splits": {}}
    folder = Path(args.folder)
    for split in args.split:
        qrels_file, queries_file = split.split(":")
        qrels = read_qrels(folder / qrels_file)
        queries = [(str(q["_id"]), str(q["text"])) for q in read_jsonl(folder / queries_file) if str(q["_id"]) in qrels]
        qvecs = np.array([asyncio.run(embedder.embed([text], kind="query"))[0] for _, text in queries])
        result: dict[str, float] = {}
        touched = 0
        for name, matrix in (("truncated", stored), ("windows_pooled", pooled)):
            scores = qvecs @ matrix.T
            ndcgs = []
            for q, (qid, _) in enumerate(queries):
                top = np.argsort(-scores[q], kind="stable")[:200]
                ranked = list(dict.fromkeys(docs[j] for j in top))
                ndcgs.append(ndcg_at_k(ranked, qrels[qid]))
                if name == "truncated":
                    touched += any(docs[j] in qrels[qid] for j in long_rows)
            result[name] = round(float(np.mean(ndcgs)), 4)
        result["queries"] = len(queries)
        result["queries_judging_a_long_chunks_document"] = touched
        report["splits"][split] = result  # type: ignore[index]
    emit(report)


if __name__ == "__main__":
    main()
