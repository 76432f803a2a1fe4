"""Retrieval quality on BEIR-format folders (corpus.jsonl, queries.jsonl, qrels.tsv).

Used by ``manage.py evaluate`` and ``manage.py ingest_beir``. Hits are chunks;
they are mapped to their documents (first occurrence wins) before scoring, as
BEIR judges documents. nDCG uses trec_eval's linear gain.
"""

from __future__ import annotations

import csv
import json
import math
import statistics
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from asgiref.sync import async_to_sync

from accounts.models import Tenant
from knowledge import rag
from knowledge.services.documents import document_ingest


@dataclass(frozen=True)
class ModeResult:
    """Averages over the judged queries. ``all_at_10``: the share of queries with every judged
    document in the top 10 (what a multi-hop question needs to be answerable)."""

    ndcg_at_10: float
    recall_at_100: float
    p50_ms: float
    p95_ms: float
    queries: int
    recall_at_5: float = 0.0
    recall_at_10: float = 0.0
    all_at_10: float = 0.0
    # A re-ranked mode's stage alone (inside p50/p95): its latency per query, and the queries it was not applied to.
    rerank_p50_ms: float | None = None
    rerank_p95_ms: float | None = None
    rerank_not_applied: int | None = None

    def as_json(self) -> dict[str, float | int]:
        out = {"ndcg@10": round(self.ndcg_at_10, 4), "recall@5": round(self.recall_at_5, 4),
               "recall@10": round(self.recall_at_10, 4), "all@10": round(self.all_at_10, 4),
               "recall@100": round(self.recall_at_100, 4),
               "p50_ms": round(self.p50_ms, 2), "p95_ms": round(self.p95_ms, 2), "queries": self.queries}
        if self.rerank_p50_ms is not None:
            out |= {"rerank_p50_ms": round(self.rerank_p50_ms, 2), "rerank_p95_ms": round(self.rerank_p95_ms or 0.0, 2),
                    "rerank_not_applied": self.rerank_not_applied or 0}
        return out


# ``evaluate --graph``: hybrid search with the knowledge graph's leg, reported under this name.
GRAPH_MODE = "hybrid+graph"
# Hybrid search with normalised score fusion is reported under this name; "hybrid" is RRF.
SCORE_FUSION_MODE = "hybrid+score"
SCORE_GRAPH_MODE = "hybrid+score+graph"
# ``evaluate --rerank colbert``: hybrid search then the ColBERT stage (knowledge.rag.reranking), per fusion.
RERANK_MODE = "hybrid+rerank"
SCORE_RERANK_MODE = "hybrid+score+rerank"


def read_jsonl(path: Path) -> Iterator[dict[str, object]]:
    with path.open(encoding="utf-8") as fh:
        for number, line in enumerate(fh, start=1):
            if line.strip():
                try:
                    yield json.loads(line)
                except json.JSONDecodeError as exc:
                    raise ValueError(f"{path.name} line {number}: not valid JSON ({exc.msg})") from None


def read_qrels(path: Path) -> dict[str, dict[str, int]]:
    """``{query id: {document id: relevance}}``, relevance > 0 only; the header row is skipped."""
    qrels: dict[str, dict[str, int]] = {}
    with path.open(encoding="utf-8") as fh:
        for row in csv.reader(fh, delimiter="\t"):
            if len(row) < 3 or not row[2].strip().lstrip("-").isdigit():
                continue  # header or blank
            if int(row[2]) > 0:
                qrels.setdefault(row[0], {})[row[1]] = int(row[2])
    return qrels


def ingest_beir_corpus(*, tenant: Tenant, corpus: Path, batch_size: int = 100, progress: Callable[[int], object] | None = None) -> tuple[int, int]:
    """Index every corpus.jsonl record (``_id``, ``title``, ``text``); returns (documents, chunks)."""
    batch: list[rag.RAGDocument] = []
    documents = chunks = 0

    def flush() -> None:
        nonlocal chunks, documents
        if batch:
            chunks += document_ingest(tenant=tenant, documents=batch, actor="beir")
            documents += len(batch)
            if progress:
                progress(len(batch))
            batch.clear()

    for record in read_jsonl(corpus):
        text = str(record.get("text") or "").strip()
        title = str(record.get("title") or "").strip() or None
        if not text and title:
            text, title = title, None
        if not text:
            continue  # BEIR corpora contain a few empty records; nothing to index
        batch.append(rag.RAGDocument(str(record["_id"]), text, title=title, metadata={"dataset": corpus.parent.name}))
        if len(batch) >= batch_size:
            flush()
    flush()
    return documents, chunks


def ndcg_at_k(ranked: list[str], relevant: dict[str, int], k: int = 10) -> float:
    dcg = sum(relevant.get(doc, 0) / math.log2(i + 2) for i, doc in enumerate(ranked[:k]))
    ideal = sorted(relevant.values(), reverse=True)[:k]
    idcg = sum(rel / math.log2(i + 2) for i, rel in enumerate(ideal))
    return dcg / idcg if idcg else 0.0


def recall_at_k(ranked: list[str], relevant: dict[str, int], k: int = 100) -> float:
    return len(set(ranked[:k]) & set(relevant)) / len(relevant) if relevant else 0.0


def percentile(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, math.ceil(q / 100 * len(ordered)) - 1))
    return ordered[index]


def evaluate_modes(
    *, tenant: Tenant, folder: Path, modes: list[rag.SearchMode], qrels_file: str = "qrels.tsv",
    queries_file: str = "queries.jsonl", progress: Callable[[int], object] | None = None, rerank: bool = False,
    service: rag.RAGService | None = None, graph: bool = False, fusions: tuple[rag.Fusion, ...] = (rag.Fusion.RRF, rag.Fusion.SCORE),
    fusion_weight: float | None = None, colbert: bool = False, reader: rag.Reader | None = None,
) -> dict[str, ModeResult]:
    """``reader``: search as that member reads (issue 34; None: the operator's full view).

    Run every judged query in every mode (and hybrid with the graph leg when ``graph``);
    latency includes query embedding. Hybrid mode runs once per fusion of ``fusions``: RRF
    as ``hybrid``, score fusion (weight ``fusion_weight``, None: the service's) as ``hybrid+score``;
    so does the graph (``hybrid+graph``, ``hybrid+score+graph``). ``colbert``: hybrid search per fusion
    again, its candidates re-ranked by the deployment's re-ranker (``rag.rerank``), as ``hybrid+rerank``
    and ``hybrid+score+rerank``; their latency includes the stage's (also reported alone).
    ``rerank``: the seed's cosine re-ordering inside every hybrid search (``evaluate --rerank cosine``)."""
    qrels = read_qrels(folder / qrels_file)
    queries = [(str(q["_id"]), str(q["text"])) for q in read_jsonl(folder / queries_file) if str(q["_id"]) in qrels]
    service = service or rag.tenant_service(tenant.slug, reader=reader)
    runs: list[tuple[str, rag.SearchMode, bool, rag.Fusion, bool]] = []
    for mode in modes:
        if mode is not rag.SearchMode.HYBRID:
            runs.append((mode.value, mode, False, rag.Fusion.RRF, False))
            continue
        for fusion in fusions:
            runs.append((mode.value if fusion is rag.Fusion.RRF else SCORE_FUSION_MODE, mode, False, fusion, False))
    if graph:
        for fusion in fusions:
            runs.append((GRAPH_MODE if fusion is rag.Fusion.RRF else SCORE_GRAPH_MODE, rag.SearchMode.HYBRID, True, fusion, False))
    if colbert:
        for fusion in fusions:
            runs.append((RERANK_MODE if fusion is rag.Fusion.RRF else SCORE_RERANK_MODE, rag.SearchMode.HYBRID, False, fusion, True))
    results: dict[str, ModeResult] = {}
    for name, mode, with_graph, fusion, staged in runs:
        ndcgs, recalls, r5, r10, complete, latencies, stage, skipped = [], [], [], [], [], [], [], 0
        for query_id, text in queries:
            started = time.perf_counter()
            hits = async_to_sync(service.search)(text, mode=mode, limit=100, rerank=rerank, graph=with_graph,
                                                 fusion=fusion, fusion_weight=fusion_weight)
            if staged:
                searched = time.perf_counter()
                reranked = async_to_sync(rag.rerank)(text, hits, limit=100)
                stage.append((time.perf_counter() - searched) * 1000)
                skipped += not reranked.applied
                hits = reranked.hits
            latencies.append((time.perf_counter() - started) * 1000)
            ranked = list(dict.fromkeys(h.chunk.document_id for h in hits))
            judged = qrels[query_id]
            ndcgs.append(ndcg_at_k(ranked, judged))
            recalls.append(recall_at_k(ranked, judged))
            r5.append(recall_at_k(ranked, judged, 5))
            r10.append(recall_at_k(ranked, judged, 10))
            complete.append(1.0 if set(judged) <= set(ranked[:10]) else 0.0)
            if progress:
                progress(1)
        results[name] = ModeResult(
            ndcg_at_10=_mean(ndcgs), recall_at_100=_mean(recalls), recall_at_5=_mean(r5), recall_at_10=_mean(r10),
            all_at_10=_mean(complete), p50_ms=percentile(latencies, 50), p95_ms=percentile(latencies, 95), queries=len(queries),
            **({"rerank_p50_ms": percentile(stage, 50), "rerank_p95_ms": percentile(stage, 95), "rerank_not_applied": skipped}
               if staged else {}),
        )
    return results


def _mean(values: list[float]) -> float:
    return statistics.fmean(values) if values else 0.0
