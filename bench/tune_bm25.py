"""Grid search of BM25's k1 and b (and postings depth) on a BEIR train split. Prints JSON.

    .venv/bin/python bench/tune_bm25.py --tenant scifact --folder ../shared/data/scifact

Assumes the corpus is already indexed in the tenant (``manage.py evaluate`` does that).
Tune here on qrels_train.tsv; report with ``manage.py evaluate`` on the test split.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from _common import emit, setup_django


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--tenant", default="scifact")
    parser.add_argument("--folder", type=Path, default=Path(__file__).resolve().parent.parent.parent / "shared" / "data" / "scifact")
    parser.add_argument("--k1", default="0.9,1.2,1.5")
    parser.add_argument("--b", default="0.5,0.75,0.9")
    parser.add_argument("--per-term", default="1000")
    args = parser.parse_args()
    setup_django()
    from accounts.models import Tenant
    from knowledge import rag
    from knowledge.evaluation import evaluate_modes
    from knowledge.rag.backends.postgres import PostgresBackend

    tenant = Tenant.objects.get(slug=args.tenant)
    grid = []
    for per_term in [int(x) for x in args.per_term.split(",")]:
        for k1 in [float(x) for x in args.k1.split(",")]:
            for b in [float(x) for x in args.b.split(",")]:
                backend = PostgresBackend(k1=k1, b=b, postings_per_term=per_term)
                service = rag.service(backend, None, namespace=tenant.slug)
                result = evaluate_modes(tenant=tenant, folder=args.folder, modes=[rag.SearchMode.KEYWORD],
                                        qrels_file="qrels_train.tsv", queries_file="queries_all.jsonl", service=service)
                grid.append({"k1": k1, "b": b, "per_term": per_term, **result["keyword"].as_json()})
    best = max(grid, key=lambda r: r["ndcg@10"])
    emit({"benchmark": "tune_bm25", "split": "train", "best": best, "grid": grid})


if __name__ == "__main__":
    main()
