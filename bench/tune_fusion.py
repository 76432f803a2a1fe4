"""Grid of hybrid score fusions over tuning collections; prints JSON.

    .venv/bin/python bench/tune_fusion.py \
        --collection scifact:../shared/data/scifact:qrels_train.tsv:queries_all.jsonl \
        --collection musique:../shared/data/musique:qrels.tsv:queries.jsonl

Each ``--collection TENANT:FOLDER:QRELS:QUERIES`` names an indexed tenant (``manage.py
ingest_beir`` or ``manage.py evaluate`` index it) and its judgements; tune on train splits only.
Each judged query's two legs are fetched once (the top ``FUSION_DEPTH`` chunks of keyword and of
semantic search, as hybrid search's SQL takes them) and fused here with
``knowledge.rag.fusion.score_fusion`` for every point of the grid: the semantic weight, the
semantic leg's spread floor and the places each leg's first hits are kept within (``1x3+3x20``:
each leg's first hit within the first 3, its first 3 within the first 20). ``manage.py
evaluate`` then confirms the chosen setting through the real SQL.

Beside nDCG@10, each point reports how often fusion buries a leg's strong matches: the share of
queries with one of the keyword leg's first 3 outside the fused top 20 (``kw3_out_of_20``), and
with the keyword or semantic leg's first hit outside the fused top 3 (``kw1_out_of_3``,
``sem1_out_of_3``). ``previous`` is the fusion of the release before (min-max within each
list, no floor, no place kept, weight 1.5). The choice: among the points with places that lose no
collection more than 0.002 against ``previous``, the one whose neighbourhood on the grid (the
adjacent weights and floors) has the best mean nDCG@10 over the collections (each counts once,
whatever its size); ties go to the point's own mean, then to the more places kept.
"""

from __future__ import annotations

import argparse
import itertools
import statistics
from pathlib import Path

from _common import emit, setup_django


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--collection", action="append", required=True, help="TENANT:FOLDER:QRELS:QUERIES")
    parser.add_argument("--weights", default="1,1.25,1.5,1.75,2,2.5")
    parser.add_argument("--floors", default="0,0.05,0.1,0.15,0.2,0.3")
    parser.add_argument("--places", default="none;1x3;1x5;1x3+3x20;1x3+2x10;2x5+3x20",
                        help="semicolon-separated sets of NxM places (each leg's first N within the first M), none for none")
    args = parser.parse_args()
    setup_django()
    from asgiref.sync import async_to_sync

    from knowledge import rag
    from knowledge.evaluation import ndcg_at_k, read_jsonl, read_qrels
    from knowledge.rag.fusion import FUSION_DEPTH, min_max, score_fusion

    collections = []
    for spec in args.collection:
        tenant, folder, qrels_name, queries_name = spec.split(":")
        qrels = read_qrels(Path(folder) / qrels_name)
        queries = [(str(q["_id"]), str(q["text"])) for q in read_jsonl(Path(folder) / queries_name) if str(q["_id"]) in qrels]
        service = rag.tenant_service(tenant)
        legs = {}
        for query_id, text in queries:
            legs[query_id] = tuple(
                [(h.chunk.chunk_id, h.score, h.chunk.document_id)
                 for h in async_to_sync(service.search)(text, mode=mode, limit=FUSION_DEPTH)]
                for mode in ("keyword", "semantic"))
        collections.append((tenant, qrels, legs))

    def measure(fuse: object) -> dict[str, dict[str, float]]:
        out = {}
        for tenant, qrels, legs in collections:
            ndcg, kw3, kw1, sem1 = [], 0, 0, 0
            for query_id, (keyword, semantic) in legs.items():
                docs = {c: d for c, _, d in keyword + semantic}
                order = [c for c, *_ in fuse([(c, s) for c, s, _ in keyword], [(c, s) for c, s, _ in semantic])]  # type: ignore[operator]
                ndcg.append(ndcg_at_k(list(dict.fromkeys(docs[c] for c in order)), qrels[query_id]))
                kw3 += any(c not in order[:20] for c, _, _ in keyword[:3])
                kw1 += bool(keyword) and keyword[0][0] not in order[:3]
                sem1 += bool(semantic) and semantic[0][0] not in order[:3]
            n = len(legs)
            out[tenant] = {"ndcg@10": round(statistics.fmean(ndcg), 4), "kw3_out_of_20": round(kw3 / n, 4),
                           "kw1_out_of_3": round(kw1 / n, 4), "sem1_out_of_3": round(sem1 / n, 4)}
        return out

    def previous(keyword: list[tuple[str, float]], semantic: list[tuple[str, float]], weight: float) -> list[tuple[str, float]]:
        kw = dict(zip((i for i, _ in keyword), min_max([s for _, s in keyword]), strict=True))
        sem = dict(zip((i for i, _ in semantic), min_max([s for _, s in semantic]), strict=True))
        ids = list(dict.fromkeys([i for i, _ in keyword] + [i for i, _ in semantic]))
        return sorted(((i, kw.get(i, 0.0) + weight * sem.get(i, 0.0)) for i in ids), key=lambda r: -r[1])

    result: dict[str, object] = {"benchmark": "tune_fusion", "collections": {t: len(l) for t, _, l in collections}}
    before = measure(lambda k, s: previous(k, s, 1.5))
    result["previous"] = before
    grid = []
    for weight, floor, places in itertools.product(
            [float(w) for w in args.weights.split(",")], [float(f) for f in args.floors.split(",")], args.places.split(";")):
        kept = tuple(tuple(int(n) for n in place.split("x")) for place in places.split("+") if place != "none")
        figures = measure(lambda k, s, w=weight, f=floor, p=kept: score_fusion(k, s, w, spread_floor=f, places=p))
        mean = statistics.fmean(f["ndcg@10"] for f in figures.values())
        keeps = all(figures[t]["ndcg@10"] >= before[t]["ndcg@10"] - 0.002 for t in figures)
        grid.append({"weight": weight, "spread_floor": floor, "places": places, "mean_ndcg@10": round(mean, 4),
                     "keeps_previous": keeps, **figures})
    # The neighbourhood rule: weight and floor trade against each other (a higher floor shrinks the
    # semantic part, a higher weight gives it back), so single points of a ridge are noise; the
    # choice is the point whose 3 x 3 neighbourhood on the grid (itself included) has the best
    # mean, among the points with places that keep every collection.
    weights = sorted({row["weight"] for row in grid})
    floors = sorted({row["spread_floor"] for row in grid})
    by_point = {(row["weight"], row["spread_floor"], row["places"]): row for row in grid}
    for row in grid:
        wi, fi = weights.index(row["weight"]), floors.index(row["spread_floor"])
        around = [by_point[(w, f, row["places"])]["mean_ndcg@10"]
                  for w in weights[max(0, wi - 1): wi + 2] for f in floors[max(0, fi - 1): fi + 2]]
        row["neighbourhood_ndcg@10"] = round(statistics.fmean(around), 4)  # type: ignore[arg-type]
    # Ties: the point's own mean, then the more places kept (they cost nothing where they tie).
    grid.sort(key=lambda row: (-row["neighbourhood_ndcg@10"], -row["mean_ndcg@10"], -len(str(row["places"]))))  # type: ignore[operator]
    result["chosen"] = next((row for row in grid if row["keeps_previous"] and row["places"] != "none"), None)
    result["grid"] = grid
    emit(result)


if __name__ == "__main__":
    main()
