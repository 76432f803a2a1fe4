"""Encode a BEIR corpus's passages with the ColBERT re-ranker once, to a file; prints JSON (issue 36).

    .venv/bin/python bench/colbert_vectors.py ../shared/data/scifact/corpus.jsonl var/colbert-scifact.npz

Each record is chunked by the deployment's chunker, and each chunk encoded as the stage encodes a
candidate (``embedding_input(title, text)``, the deployment's ``QUARRY_RERANKER``). The file maps the
stage's cache keys to float16 token vectors, so ``bench/tune_rerank.py --vectors`` and
``bench/rerank_eval.py`` skip encoding: on this shared 2-core machine a passage costs 50-250 ms,
which makes a held-out evaluation of every candidate take longer than the session it runs in.
Reports what that encoding cost per passage: the ingest-time cost of storing vectors.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import numpy as np

from _common import emit, setup_django


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("corpus", type=Path)
    parser.add_argument("out", type=Path)
    args = parser.parse_args()
    setup_django()
    from knowledge import rag
    from knowledge.evaluation import read_jsonl
    from knowledge.rag.factory import chunker
    from knowledge.rag.types import embedding_input

    model = rag.reranker()
    assert model is not None
    split = chunker()
    texts: list[str] = []
    for record in read_jsonl(args.corpus):
        text = str(record.get("text") or "").strip()
        title = str(record.get("title") or "").strip() or None
        if not text and title:
            text, title = title, None
        if not text:
            continue
        document = rag.RAGDocument(str(record["_id"]), text, title=title)
        texts += [embedding_input(title, piece if isinstance(piece, str) else piece.text) for piece in split.split(document)]
    started = time.perf_counter()
    vectors: dict[str, np.ndarray] = {}
    for start in range(0, len(texts), 64):
        part = texts[start : start + 64]
        for text, v in zip(part, model.encode_passages(part), strict=True):
            vectors[model._key(text)] = v.astype(np.float16)
    elapsed = time.perf_counter() - started
    args.out.parent.mkdir(parents=True, exist_ok=True)
    np.savez(args.out, **vectors)
    tokens = [v.shape[0] for v in vectors.values()]
    emit({"corpus": str(args.corpus), "passages": len(vectors), "reranker": repr(model),
          "encode_ms_per_passage": round(elapsed * 1000 / max(1, len(texts)), 1),
          "tokens_per_passage_mean": round(statistics.fmean(tokens), 1),
          "bytes_per_passage_fp16_384": round(statistics.fmean(tokens) * 384 * 2)})


if __name__ == "__main__":
    main()
