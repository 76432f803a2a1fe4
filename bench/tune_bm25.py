"""Grid search of BM25's k1 and b (and postings depth) over one or more BEIR collections. Prints JSON.

    .venv/bin/python bench/tune_bm25.py --collection scifact:../shared/data/scifact:qrels_train.tsv:queries_all.jsonl \
        --collection musique:../shared/data/musique:qrels.tsv:queries.jsonl

Each ``--collection`` is ``TENANT:FOLDER[:QRELS[:QUERIES]]`` (default: SciFact's train split in tenant
``scifact``). The corpus must already be indexed in the tenant (``manage.py evaluate`` does that;
keyword search needs no vectors, so ``QUARRY_EMBEDDING_MODEL=none`` makes it quick). Never tune on a
test split: report with ``manage.py evaluate`` on it.

For every grid point the report gives each collection's nDCG@10, its share of that collection's best
("relative"), and their mean and minimum. ``chosen`` is the point with the highest minimum relative
score of its neighbourhood (itself and the grid points next to it, away from the grid's edges): a
choice in a flat region, good on every collection, rather than the peak of one.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path

from _common import emit, setup_django

DEFAULT = f"scifact:{Path(__file__).resolve().parent.parent.parent / 'shared' / 'data' / 'scifact'}:qrels_train.tsv:queries_all.jsonl"


@dataclass(frozen=True)
class Collection:
    tenant: str
    folder: Path
    qrels: str
    queries: str

    @classmethod
    def parse(cls, spec: str) -> Collection:
        parts = spec.split(":")
        if len(parts) < 2:
            raise SystemExit(f"--collection {spec!r}: expected TENANT:FOLDER[:QRELS[:QUERIES]]")
        return cls(parts[0], Path(parts[1]), parts[2] if len(parts) > 2 else "qrels.tsv", parts[3] if len(parts) > 3 else "queries.jsonl")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--collection", action="append", default=None, help="TENANT:FOLDER[:QRELS[:QUERIES]] (repeatable)")
    parser.add_argument("--k1", default="0.6,0.9,1.2,1.5,1.8")
    parser.add_argument("--b", default="0.3,0.5,0.75,0.9")
    parser.add_argument("--per-term", default="1000")
    args = parser.parse_args()
    collections = [Collection.parse(spec) for spec in (args.collection or [DEFAULT])]
    setup_django()
    from accounts.models import Tenant
    from knowledge import rag
    from knowledge.evaluation import evaluate_modes
    from knowledge.rag.backends.postgres import PostgresBackend

    k1s = [float(x) for x in args.k1.split(",")]
    bs = [float(x) for x in args.b.split(",")]
    per_terms = [int(x) for x in args.per_term.split(",")]
    tenants = {c.tenant: Tenant.objects.get(slug=c.tenant) for c in collections}
    scores: dict[tuple[int, float, float], dict[str, float]] = {}
    for per_term in per_terms:
        for k1 in k1s:
            for b in bs:
                backend = PostgresBackend(k1=k1, b=b, postings_per_term=per_term)
                for c in collections:
                    service = rag.service(backend, None, namespace=c.tenant)
                    result = evaluate_modes(tenant=tenants[c.tenant], folder=c.folder, modes=[rag.SearchMode.KEYWORD],
                                            qrels_file=c.qrels, queries_file=c.queries, service=service)
                    scores.setdefault((per_term, k1, b), {})[c.tenant] = result["keyword"].ndcg_at_10
    best = {c.tenant: max(point[c.tenant] for point in scores.values()) for c in collections}
    grid = []
    for (per_term, k1, b), by_tenant in scores.items():
        relative = {t: by_tenant[t] / best[t] if best[t] else 0.0 for t in by_tenant}
        grid.append({"per_term": per_term, "k1": k1, "b": b, "ndcg@10": by_tenant, "relative": relative,
                     "mean_relative": sum(relative.values()) / len(relative), "min_relative": min(relative.values())})

    def neighbourhood_floor(point: dict[str, object]) -> float:
        i, j = k1s.index(point["k1"]), bs.index(point["b"])  # type: ignore[arg-type]
        near = [p for p in grid if p["per_term"] == point["per_term"]
                and abs(k1s.index(p["k1"]) - i) <= 1 and abs(bs.index(p["b"]) - j) <= 1]
        return min(float(p["min_relative"]) for p in near)

    def interior(point: dict[str, object]) -> bool:  # an edge point has fewer neighbours, so a flattering floor
        return 0 < k1s.index(point["k1"]) < len(k1s) - 1 and 0 < bs.index(point["b"]) < len(bs) - 1  # type: ignore[arg-type]

    for point in grid:
        point["neighbourhood_min_relative"] = neighbourhood_floor(point)
    candidates = [p for p in grid if interior(p)] or grid
    chosen = max(candidates, key=lambda p: (p["neighbourhood_min_relative"], p["mean_relative"]))
    emit({"benchmark": "tune_bm25", "collections": [f"{c.tenant}:{c.folder.name}:{c.qrels}" for c in collections],
          "best_per_collection": best, "chosen": chosen, "grid": grid})


if __name__ == "__main__":
    main()
