"""Grid of ColBERT re-ranking settings over tuning collections; prints JSON (issue 36).

    .venv/bin/python bench/tune_rerank.py \
        --collection scifact:../shared/data/scifact:qrels_train.tsv:queries_all.jsonl \
        --collection musique:../shared/data/musique:qrels.tsv:queries.jsonl

Each ``--collection TENANT:FOLDER:QRELS:QUERIES`` names an indexed tenant (``manage.py evaluate``
indexes it) and its judgements; tune on train splits only. Each judged query's hybrid search
(the deployment's fusion) is read once, ``max(depths)`` deep; every candidate passage is encoded
once by ``knowledge.rag.reranking.ColbertReranker`` (at 384 dimensions and the longest window),
and every grid point re-ranks from those vectors: how deep to re-rank, the MaxSim weight of the
blend (``replace``: MaxSim order alone), how many dimensions to keep, int8 against float16
vectors, and the passage window (tokens). Also reported: what storing the vectors at ingest
would cost (bytes per chunk at each precision and width) and the encoding time per passage.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import numpy as np

from _common import emit, setup_django


def _int8(v: np.ndarray) -> np.ndarray:
    """Per-token symmetric int8, dequantised: what int8 storage would give back."""
    scale = np.abs(v).max(axis=1, keepdims=True) / 127.0
    return (np.round(v / np.clip(scale, 1e-12, None)).astype(np.int8) * scale).astype(np.float32)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--collection", action="append", required=True, help="TENANT:FOLDER:QRELS:QUERIES")
    parser.add_argument("--depths", default="10,20,30,50")
    parser.add_argument("--weights", default="0.1,0.25,0.5,1,2,replace")
    parser.add_argument("--dimensions", default="96,128,384")
    parser.add_argument("--windows", default="180,300,512", help="passage tokens read")
    parser.add_argument("--max-queries", type=int, default=0, help="first N judged queries of each collection (0: all)")
    parser.add_argument("--vectors", action="append", default=[], type=Path,
                        help="passage vectors bench/colbert_vectors.py wrote (encoded once; others are encoded here)")
    parser.add_argument("--save-vectors", type=Path, default=None,
                        help="write every candidate's vectors here, in colbert_vectors.py's format (for rerank_eval.py)")
    args = parser.parse_args()
    setup_django()
    from asgiref.sync import async_to_sync

    from knowledge import rag
    from knowledge.evaluation import ndcg_at_k, read_jsonl, read_qrels
    from knowledge.rag.reranking import ColbertReranker, _minmax
    from knowledge.rag.types import embedding_input

    depths = [int(d) for d in args.depths.split(",")]
    weights = args.weights.split(",")
    dims = [int(d) for d in args.dimensions.split(",")]
    windows = [int(w) for w in args.windows.split(",")]
    model = ColbertReranker(document_length=max(windows))
    stored: dict[str, np.ndarray] = {}
    for path in args.vectors:
        with np.load(path) as saved:
            stored.update({key: saved[key] for key in saved.files})
    report: dict[str, object] = {"collections": {}, "grid": []}
    data = {}
    for spec in args.collection:
        tenant, folder, qrels_name, queries_name = spec.split(":")
        qrels = read_qrels(Path(folder) / qrels_name)
        queries = [(str(q["_id"]), str(q["text"])) for q in read_jsonl(Path(folder) / queries_name) if str(q["_id"]) in qrels]
        if args.max_queries:
            queries = queries[: args.max_queries]
        service = rag.tenant_service(tenant)
        runs, texts = {}, {}
        for qid, text in queries:
            hits = async_to_sync(service.search)(text, limit=max(depths))
            runs[qid] = (text, [(h.chunk.chunk_id, h.chunk.document_id, h.score) for h in hits])
            for h in hits:
                texts[h.chunk.chunk_id] = embedding_input(h.chunk.title, h.chunk.text)
        ids = sorted(texts)
        vectors = {c: stored[model._key(texts[c])] for c in ids if model._key(texts[c]) in stored}
        todo = [c for c in ids if c not in vectors]
        started = time.perf_counter()
        for start in range(0, len(todo), 64):
            part = todo[start : start + 64]
            for cid, v in zip(part, model.encode_passages([texts[c] for c in part]), strict=True):
                vectors[cid] = v.astype(np.float16)
        per_passage_ms = (time.perf_counter() - started) * 1000 / max(1, len(todo))
        if args.save_vectors:
            np.savez(args.save_vectors.with_name(f"{args.save_vectors.stem}-{tenant}.npz"),
                     **{model._key(texts[c]): v for c, v in vectors.items()})
        qvec = {qid: model.encode_query(text) for qid, (text, _) in runs.items()}
        tokens = [vectors[c].shape[0] for c in ids]
        mean_tokens = statistics.fmean(tokens)
        report["collections"][tenant] = {  # type: ignore[index]
            "queries": len(runs), "passages": len(ids), "passages_encoded_here": len(todo),
            "encode_ms_per_passage": round(per_passage_ms, 1) if todo else None,
            "tokens_per_passage_mean": round(mean_tokens, 1), "tokens_per_passage_p95": int(np.percentile(tokens, 95)),
            "bytes_per_chunk": {f"{p}/{d}": int(mean_tokens * d * (1 if p == "int8" else 2) + (mean_tokens * 4 if p == "int8" else 0))
                                for p in ("fp16", "int8") for d in dims},
            "baseline_ndcg@10": round(statistics.fmean(ndcg_at_k(list(dict.fromkeys(d for _, d, _ in hits)), qrels[q])
                                                       for q, (_, hits) in runs.items()), 4),
        }
        data[tenant] = (qrels, runs, vectors, qvec)

    for window in windows:
        for dim in dims:
            for precision in ("fp16", "int8"):
                if precision == "int8" and (window != max(windows)):
                    continue
                prepared = {}
                for tenant, (qrels, runs, vectors, qvec) in data.items():
                    cut = {}
                    for cid, v in vectors.items():
                        x = v[:window, :dim].astype(np.float32)
                        x /= np.clip(np.linalg.norm(x, axis=1, keepdims=True), 1e-9, None)
                        cut[cid] = _int8(x) if precision == "int8" else x
                    qs = {}
                    for q, v in qvec.items():
                        y = v[:, :dim]
                        qs[q] = y / np.clip(np.linalg.norm(y, axis=1, keepdims=True), 1e-9, None)
                    sims = {q: {cid: float(np.max(qs[q] @ cut[cid].T, axis=1).mean()) for cid, _, _ in hits} for q, (_, hits) in runs.items()}
                    prepared[tenant] = sims
                for depth in depths:
                    for weight in weights:
                        point = {"window": window, "dimensions": dim, "precision": precision, "depth": depth, "weight": weight}
                        for tenant, (qrels, runs, _, _) in data.items():
                            scores = []
                            for q, (_, hits) in runs.items():
                                head, tail = hits[:depth], hits[depth:]
                                s = [prepared[tenant][q][cid] for cid, _, _ in head]
                                if weight == "replace":
                                    key = s
                                else:
                                    key = [f + float(weight) * m for f, m in zip(_minmax([h[2] for h in head]), _minmax(s), strict=True)]
                                order = sorted(range(len(head)), key=lambda i: -key[i])
                                ranked = [head[i][1] for i in order] + [d for _, d, _ in tail]
                                scores.append(ndcg_at_k(list(dict.fromkeys(ranked)), qrels[q]))
                            point[tenant] = round(statistics.fmean(scores), 4)
                        point["mean"] = round(statistics.fmean(point[t] for t in data), 4)
                        report["grid"].append(point)  # type: ignore[union-attr]
    report["best"] = sorted(report["grid"], key=lambda p: -p["mean"])[:10]  # type: ignore[arg-type,index]
    emit(report)


if __name__ == "__main__":
    main()
