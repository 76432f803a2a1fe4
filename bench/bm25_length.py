"""BM25 with two definitions of a chunk's length, on indexed BEIR collections. Prints JSON.

    .venv/bin/python bench/bm25_length.py --collection scifact:../shared/data/scifact:qrels_train.tsv:queries_all.jsonl \
        --collection musique:../shared/data/musique:qrels.tsv:queries.jsonl

The search engine's length is the number of distinct lexemes (``length(search_vector)``, read from
the tsvector's header); the textbook length is the number of tokens (the sum of every lexeme's
position count). This script scores every collection both ways with the same IDF, k1 and b, in
Python over the tenant's stored tsvectors (exhaustively: no postings depth), and reports nDCG@10
per collection, length definition and grid point, so the approximation's cost is a measured number.
``--collection`` is ``TENANT:FOLDER[:QRELS[:QUERIES]]`` as in ``bench/tune_bm25.py``; the corpus
must already be indexed in the tenant (``manage.py evaluate`` does that).
"""

from __future__ import annotations

import argparse
import math
from collections import defaultdict

from _common import emit, setup_django
from tune_bm25 import Collection


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--collection", action="append", required=True, help="TENANT:FOLDER[:QRELS[:QUERIES]] (repeatable)")
    parser.add_argument("--k1", default="0.9,1.2,1.5")
    parser.add_argument("--b", default="0.3,0.5,0.75")
    args = parser.parse_args()
    setup_django()
    from django.db import connection

    from accounts.models import Tenant
    from knowledge.evaluation import ndcg_at_k, read_jsonl, read_qrels
    from knowledge.models import tenant_config_sql

    k1s = [float(x) for x in args.k1.split(",")]
    bs = [float(x) for x in args.b.split(",")]
    report: dict[str, object] = {"k1": k1s, "b": bs, "collections": {}}
    for spec in args.collection:
        c = Collection.parse(spec)
        tenant = Tenant.objects.get(slug=c.tenant)
        tf: dict[int, dict[str, int]] = defaultdict(dict)
        doc_of: dict[int, str] = {}
        with connection.cursor() as cur:
            cur.execute(
                "SELECT c.id, d.external_id, u.lexeme, coalesce(array_length(u.positions, 1), 1) "
                "FROM knowledge_chunk c JOIN knowledge_document d ON d.id = c.document_id "
                "CROSS JOIN LATERAL unnest(c.search_vector) AS u WHERE c.tenant_id = %s", [tenant.pk])
            for chunk, external, lexeme, count in cur.fetchall():
                tf[chunk][lexeme] = count
                doc_of[chunk] = external
        n = len(tf)
        df: dict[str, int] = defaultdict(int)
        postings: dict[str, list[int]] = defaultdict(list)
        for chunk, terms in tf.items():
            for lexeme in terms:
                df[lexeme] += 1
                postings[lexeme].append(chunk)
        lengths = {"distinct": {ch: float(len(t)) for ch, t in tf.items()},
                   "tokens": {ch: float(sum(t.values())) for ch, t in tf.items()}}
        avg = {name: sum(values.values()) / n for name, values in lengths.items()}
        qrels = read_qrels(c.folder / c.qrels)
        queries = {str(q["_id"]): str(q["text"]) for q in read_jsonl(c.folder / c.queries) if str(q["_id"]) in qrels}
        qterms: dict[str, list[str]] = {}
        with connection.cursor() as cur:
            for qid, text in queries.items():
                cur.execute(f"SELECT DISTINCT u FROM unnest(tsvector_to_array(to_tsvector({tenant_config_sql('%s')}, "
                            "quarry_search_text(%s)))) AS u", [tenant.pk, text])
                qterms[qid] = [row[0] for row in cur.fetchall()]
        results: dict[str, dict[str, float]] = {}
        for name, dl in lengths.items():
            for k1 in k1s:
                for b in bs:
                    ndcgs = []
                    for qid, terms in qterms.items():
                        scores: dict[int, float] = defaultdict(float)
                        for term in terms:
                            if term not in df:
                                continue
                            idf = math.log(1 + (n - df[term] + 0.5) / (df[term] + 0.5))
                            for chunk in postings[term]:
                                f = tf[chunk][term]
                                scores[chunk] += idf * f * (k1 + 1) / (f + k1 * (1 - b + b * dl[chunk] / avg[name]))
                        ranked = sorted(scores, key=lambda ch: (-scores[ch], ch))[:100]
                        ndcgs.append(ndcg_at_k(list(dict.fromkeys(doc_of[ch] for ch in ranked)), qrels[qid]))
                    results.setdefault(name, {})[f"k1={k1},b={b}"] = round(sum(ndcgs) / len(ndcgs), 4)
        report["collections"][f"{c.tenant}:{c.qrels}"] = {  # type: ignore[index]
            "chunks": n, "queries": len(qterms), "mean_length": {k: round(v, 1) for k, v in avg.items()},
            "ndcg@10": results}
    emit(report)


if __name__ == "__main__":
    main()
