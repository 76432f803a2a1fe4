"""BM25 scored exhaustively from the stored tsvectors over a grid of title weight, k1, b and length
definition, on indexed BEIR collections; picks the flattest point. Prints JSON.

    .venv/bin/python bench/tune_bm25f.py --collection scifact:../shared/data/scifact:qrels_train.tsv:queries_all.jsonl \
        --collection musique:../shared/data/musique:qrels.tsv:queries.jsonl

``--collection`` is ``TENANT:FOLDER[:QRELS[:QUERIES]]`` as in ``bench/tune_bm25.py``; the corpus must
already be indexed in the tenant (``manage.py evaluate`` does that; ``QUARRY_EMBEDDING_MODEL=none``
makes it quick). Never tune on a test split: report with ``manage.py evaluate`` on it.

Every chunk is scored with the same statistics the engine uses (Lucene's IDF over the tenant's
chunks, the average length of its chunks), in NumPy and without a postings depth, so a grid point
costs milliseconds per query and any title weight can be tried without re-indexing:

- ``--title-weights``: how many times an occurrence in the chunk's title counts (BM25F with two
  fields of one length: the title's lexemes are in the tsvector once, as the body's are; weight w
  adds w - 1 occurrences per title occurrence). 1 is plain BM25 over title and text.
- ``--lengths``: ``distinct`` (the number of distinct lexemes, the engine's, read from the
  tsvector's header) and/or ``tokens`` (the textbook token count, with title occurrences weighted).

``chosen`` is the interior point (not on an edge of any axis) whose neighbourhood (itself and the
points one step away on every axis) keeps the highest pooled nDCG@10: the mean over every judged
query of every collection, each query counted once. ``by_min_relative`` is the point
``tune_bm25.py``'s rule would take (the highest minimum share of each collection's best, collections
counted alike); with a title-weight axis it follows MuSiQue (100 questions whose answers are
paragraphs titled by the names they ask about) towards the grid's edge, where SciFact's 809 claims
lose what they gained, so the pooled rule decides.
"""

from __future__ import annotations

import argparse
import itertools
import math
from dataclasses import dataclass

import numpy as np

from _common import emit, setup_django
from tune_bm25 import Collection


@dataclass
class Indexed:
    """One tenant's chunks as BM25 sees them: per lexeme, its chunks' rows, occurrences, title occurrences."""

    documents: list[str]  # row -> the chunk's document id (rows in chunk primary-key order, the engine's tie order)
    postings: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]]
    distinct: np.ndarray  # row -> distinct lexemes
    tokens: np.ndarray  # row -> occurrences in the text and title (each title occurrence once)
    title_tokens: np.ndarray  # row -> occurrences in the title


def load(tenant_id: int) -> Indexed:
    from django.db import connection

    from knowledge.models import tenant_config_sql

    with connection.cursor() as cur:
        cur.execute("SELECT c.id, d.external_id FROM knowledge_chunk c JOIN knowledge_document d ON d.id = c.document_id "
                    "WHERE c.tenant_id = %s ORDER BY c.id", [tenant_id])
        chunks = cur.fetchall()
        row_of = {pk: i for i, (pk, _) in enumerate(chunks)}
        cur.execute(
            "SELECT c.id, u.lexeme, coalesce(array_length(u.positions, 1), 1), coalesce(array_length(t.positions, 1), 0) "
            "FROM knowledge_chunk c CROSS JOIN LATERAL unnest(c.search_vector) AS u "
            f"LEFT JOIN LATERAL unnest(to_tsvector({tenant_config_sql('%s')}, quarry_search_text(coalesce(c.title, '')))) AS t "
            "ON t.lexeme = u.lexeme WHERE c.tenant_id = %s",
            [tenant_id, tenant_id],
        )
        rows = cur.fetchall()
    n = len(chunks)
    by_lexeme: dict[str, list[tuple[int, int, int]]] = {}
    distinct, tokens, title_tokens = np.zeros(n), np.zeros(n), np.zeros(n)
    for pk, lexeme, tf, ttf in rows:
        r = row_of[pk]
        by_lexeme.setdefault(lexeme, []).append((r, tf, min(ttf, tf)))
        distinct[r] += 1
        tokens[r] += tf
        title_tokens[r] += min(ttf, tf)
    postings = {lex: tuple(np.array(col, dtype=float if i else np.int64) for i, col in enumerate(zip(*items)))  # type: ignore[misc]
                for lex, items in by_lexeme.items()}
    return Indexed([doc for _, doc in chunks], postings, distinct, tokens, title_tokens)  # type: ignore[arg-type]


def ndcg(index: Indexed, terms: list[list[str]], qrels: list[dict[str, int]], *, w: float, k1: float, b: float, length: str) -> float:
    from knowledge.evaluation import ndcg_at_k

    n = len(index.documents)
    dl = index.distinct if length == "distinct" else index.tokens + (w - 1) * index.title_tokens
    norm = k1 * (1 - b + b * dl / max(float(dl.mean()), 1.0))
    total = 0.0
    for query_terms, judged in zip(terms, qrels, strict=True):
        scores = np.zeros(n)
        for term in query_terms:
            if term not in index.postings:
                continue
            rows, tf, ttf = index.postings[term]
            df = len(rows)
            idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
            weighted = tf + (w - 1) * ttf
            scores[rows] += idf * weighted * (k1 + 1) / (weighted + norm[rows])
        scores = np.round(scores, 9)
        matched = np.flatnonzero(scores > 0)
        top = matched[np.lexsort((matched, -scores[matched]))][:100]
        total += ndcg_at_k(list(dict.fromkeys(index.documents[r] for r in top)), judged)
    return total / max(len(qrels), 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--collection", action="append", required=True, help="TENANT:FOLDER[:QRELS[:QUERIES]] (repeatable)")
    parser.add_argument("--title-weights", default="1,2,3,4")
    parser.add_argument("--k1", default="0.6,0.9,1.2,1.5,1.8")
    parser.add_argument("--b", default="0.3,0.5,0.75,0.9")
    parser.add_argument("--lengths", default="distinct")
    args = parser.parse_args()
    setup_django()
    from django.db import connection

    from accounts.models import Tenant
    from knowledge.evaluation import read_jsonl, read_qrels
    from knowledge.models import tenant_config_sql

    axes = {"title_weight": [float(x) for x in args.title_weights.split(",")], "k1": [float(x) for x in args.k1.split(",")],
            "b": [float(x) for x in args.b.split(",")]}
    lengths = args.lengths.split(",")
    collections = [Collection.parse(spec) for spec in args.collection]
    loaded: dict[str, Indexed] = {}
    grid: dict[tuple[str, float, float, float], dict[str, float]] = {}
    sizes: dict[str, int] = {}
    for c in collections:
        tenant = Tenant.objects.get(slug=c.tenant)
        if c.tenant not in loaded:
            loaded[c.tenant] = load(tenant.pk)
        judged = read_qrels(c.folder / c.qrels)
        queries = [(str(q["_id"]), str(q["text"])) for q in read_jsonl(c.folder / c.queries) if str(q["_id"]) in judged]
        terms: list[list[str]] = []
        with connection.cursor() as cur:
            for _, text in queries:  # tokenized as the engine tokenizes queries
                cur.execute(f"SELECT DISTINCT u FROM unnest(tsvector_to_array(to_tsvector({tenant_config_sql('%s')}, "
                            "quarry_search_text(%s)))) AS u", [tenant.pk, text])
                terms.append([row[0] for row in cur.fetchall()])
        qrels = [judged[qid] for qid, _ in queries]
        name = f"{c.tenant}:{c.qrels}"
        sizes[name] = len(qrels)
        for length in lengths:
            for w, k1, b in itertools.product(axes["title_weight"], axes["k1"], axes["b"]):
                grid.setdefault((length, w, k1, b), {})[name] = round(ndcg(loaded[c.tenant], terms, qrels, w=w, k1=k1, b=b, length=length), 4)
    names = [f"{c.tenant}:{c.qrels}" for c in collections]
    best = {name: max(point[name] for point in grid.values()) for name in names}
    points = []
    for (length, w, k1, b), scores in grid.items():
        relative = {name: scores[name] / best[name] if best[name] else 0.0 for name in names}
        pooled = sum(scores[name] * sizes[name] for name in names) / sum(sizes.values())
        points.append({"length": length, "title_weight": w, "k1": k1, "b": b, "ndcg@10": scores, "pooled": round(pooled, 4),
                       "min_relative": round(min(relative.values()), 4), "mean_relative": round(sum(relative.values()) / len(relative), 4)})

    def steps(point: dict[str, object]) -> list[int]:
        return [axes[axis].index(point[axis]) for axis in ("title_weight", "k1", "b")]  # type: ignore[arg-type]

    for point in points:
        here = steps(point)
        near = [p for p in points if p["length"] == point["length"] and all(abs(a - b) <= 1 for a, b in zip(steps(p), here))]
        point["neighbourhood_pooled"] = min(float(p["pooled"]) for p in near)  # type: ignore[arg-type]
        point["neighbourhood_min_relative"] = min(float(p["min_relative"]) for p in near)  # type: ignore[arg-type]
    interior = [p for p in points if all(0 < s < len(axes[axis]) - 1 for s, axis in zip(steps(p), ("title_weight", "k1", "b")))]
    chosen = max(interior or points, key=lambda p: (p["neighbourhood_pooled"], p["pooled"]))
    by_min_relative = max(interior or points, key=lambda p: (p["neighbourhood_min_relative"], p["mean_relative"]))
    emit({"benchmark": "tune_bm25f", "collections": names, "queries": sizes, "best_per_collection": best, "chosen": chosen,
          "by_min_relative": by_min_relative, "grid": sorted(points, key=lambda p: (p["length"], p["title_weight"], p["k1"], p["b"]))})


if __name__ == "__main__":
    main()
