"""pgvector HNSW recall@10 against exact search: the vectors' construction versus the index's settings, as JSON.

    .venv/bin/python bench/hnsw_recall.py [--n 100000] [--queries 200] [--settings 16:64,32:128]
        [--ef-search 40,100,200,400] [--constructions peers,windows,peers-sigma0.02,windows-sigma0.04]
        [--types vector,halfvec,bit] [--claims test|train]

``search_latency.py`` reported recall@10 0.5-0.625 at 100,000 chunks on its own construction while
the peers' benchmark reads 0.978 with pgvector's HNSW at ef_search 100. This isolates the two causes:
each construction's vectors go into a scratch table (``bench_hnsw_recall``, dropped at the end), an
HNSW index is built per ``m:ef_construction`` and per stored type (``vector`` is what Quarry indexes
today, ``halfvec`` the half-precision candidate), and every ``ef_search`` is measured against NumPy's
exact top 10 over the same float32 vectors. No tenant filter, no Quarry code: only the index.
``bit`` indexes ``binary_quantize(v)`` (48 bytes a vector) and re-ranks ``ef_search`` candidates by
their full cosine: the one layout that would fit 1.5 KB a chunk with a half-precision column beside it.

Constructions (``search_latency.py``'s two, and their crossings):
  peers            SciFact's 5,183 document embeddings, sigma 0.04, SciFact test claims as queries
  windows          1,000 passages embedded now, sigma 0.02, 8-word windows as queries (the earlier bench)
  peers-sigma0.02  SciFact's base with the earlier sigma;  windows-sigma0.04: the earlier base with the peers' sigma
The JSON also gives, per construction, how close the exact 10th and 11th neighbours are (the median gap
of their cosines): where it is far below float32's resolution of a cosine, "the" top 10 is a tie.
"""

from __future__ import annotations

import argparse
import statistics
import struct
import sys
import time

import numpy as np
from _common import emit, passages, perturbed, setup_django
from search_latency import _cached, _scifact


def _copy_vectors(cursor: object, vectors: np.ndarray) -> None:
    """Binary COPY of (id, vector) rows: pgvector's binary form is int16 dim, int16 0, float4s big-endian."""
    dim = vectors.shape[1]
    big = vectors.astype(">f4")
    header = b"PGCOPY\n\xff\r\n\x00" + struct.pack(">ii", 0, 0)
    row_head = struct.Struct(">hii")
    vec_head = struct.Struct(">ihh")
    with cursor.copy("COPY bench_hnsw_recall (id, v) FROM STDIN WITH (FORMAT binary)") as copy:  # type: ignore[attr-defined]
        copy.write(header)
        chunk = []
        for i in range(len(vectors)):
            chunk.append(row_head.pack(2, 4, i) + vec_head.pack(4 + 4 * dim, dim, 0) + big[i].tobytes())
            if len(chunk) == 5000:
                copy.write(b"".join(chunk))
                chunk = []
        copy.write(b"".join(chunk) + struct.pack(">h", -1))


def _train_claims(local: object, queries: int) -> np.ndarray:
    """The query embeddings of SciFact's first ``queries`` train claims (those ``qrels_train.tsv`` judges):
    what a setting is chosen on, so that the test claims only ever measure it."""
    import json

    from asgiref.sync import async_to_sync
    from _common import SCIFACT

    judged = {line.split("\t")[0] for line in (SCIFACT.parent / "qrels_train.tsv").read_text(encoding="utf-8").splitlines()[1:]}
    with (SCIFACT.parent / "queries_all.jsonl").open(encoding="utf-8") as fh:
        claims = [q["text"] for q in map(json.loads, fh) if q["_id"] in judged][:queries]
    tag = local.model_id.replace("/", "_")  # type: ignore[attr-defined]
    return np.asarray(_cached(f"scifact_train_queries{len(claims)}_{tag}",
                              lambda: async_to_sync(local.embed)(claims, kind="query")), dtype=np.float32)  # type: ignore[attr-defined]


def _construction(name: str, n: int, queries: int, local: object, claims: str = "test") -> tuple[np.ndarray, np.ndarray]:
    from asgiref.sync import async_to_sync

    peers_base, _, peers_queries = _scifact(local, queries)
    if claims == "train":
        peers_queries = _train_claims(local, queries)
    texts = passages(1000, words_per=120, seed=11, distinct=True)
    windows_base = _cached("windows_base1000", lambda: async_to_sync(local.embed)(texts))  # type: ignore[attr-defined]
    window_queries = [" ".join(p.split()[:8]) for p in passages(queries, words_per=40, seed=99)]
    windows_queries = _cached(f"windows_queries{queries}", lambda: async_to_sync(local.embed)(window_queries, kind="query"))  # type: ignore[attr-defined]
    base, qv, sigma = {
        "peers": (peers_base, peers_queries, 0.04),
        "windows": (windows_base, windows_queries, 0.02),
        "peers-sigma0.02": (peers_base, peers_queries, 0.02),
        "windows-sigma0.04": (windows_base, windows_queries, 0.04),
    }[name]
    vectors = perturbed(np.asarray(base, dtype=np.float64), n, sigma, np.random.default_rng(5)).astype(np.float32)
    return vectors, np.asarray(qv, dtype=np.float32)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, default=100000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--settings", default="16:64,32:128", help="m:ef_construction pairs")
    parser.add_argument("--ef-search", default="40,100,200,400")
    parser.add_argument("--constructions", default="peers,windows,peers-sigma0.02,windows-sigma0.04")
    parser.add_argument("--types", default="vector,halfvec")
    parser.add_argument("--claims", choices=("test", "train"), default="test",
                        help="the peers' queries: SciFact's test claims (to report) or its train claims (to choose a setting on)")
    args = parser.parse_args()
    setup_django()
    from django.db import connection

    from knowledge import rag

    local = rag.LocalEmbedder()
    settings = [tuple(int(x) for x in pair.split(":")) for pair in args.settings.split(",")]
    ef_values = [int(x) for x in args.ef_search.split(",")]
    dim = 384
    result: dict[str, object] = {"benchmark": "hnsw_recall", "n": args.n, "claims": args.claims, "limit": 10, "constructions": {}}
    with connection.cursor() as cursor:
        cursor.execute("SELECT version(), (SELECT extversion FROM pg_extension WHERE extname = 'vector')")
        result["server"], result["pgvector"] = cursor.fetchone()
    for name in args.constructions.split(","):
        vectors, query_vectors = _construction(name, args.n, args.queries, local, args.claims)
        scores = query_vectors @ vectors.T
        order = np.argsort(-scores, axis=1)[:, :11]
        exact = [set(row[:10].tolist()) for row in order]
        gaps = [float(scores[q, order[q, 9]] - scores[q, order[q, 10]]) for q in range(len(order))]
        figures: dict[str, object] = {"median_gap_10th_11th": float(f"{statistics.median(gaps):.2e}"),
                                      "median_cosine_10th": round(float(statistics.median(scores[q, order[q, 9]] for q in range(len(order)))), 4)}
        with connection.cursor() as cursor:
            cursor.execute("DROP TABLE IF EXISTS bench_hnsw_recall")
            cursor.execute(f"CREATE UNLOGGED TABLE bench_hnsw_recall (id int PRIMARY KEY, v vector({dim}))")
            _copy_vectors(cursor, vectors)
            cursor.execute("ANALYZE bench_hnsw_recall")
            for kind in args.types.split(","):
                expression, cast, ops = {
                    "vector": ("v", f"::vector({dim})", "vector_cosine_ops"),
                    "halfvec": (f"(v::halfvec({dim}))", f"::halfvec({dim})", "halfvec_cosine_ops"),
                    # Binary quantization: a 48-byte signature per vector in the index, the candidates
                    # re-ranked by their full cosine (ef_search is then the number of candidates).
                    "bit": (f"(binary_quantize(v)::bit({dim}))", "", "bit_hamming_ops"),
                }[kind]
                for m, ef_construction in settings:
                    cursor.execute("DROP INDEX IF EXISTS bench_hnsw_recall_idx")
                    cursor.execute("SET maintenance_work_mem = '3GB'")  # a million halfvec entries build in memory
                    started = time.perf_counter()
                    cursor.execute(f"CREATE INDEX bench_hnsw_recall_idx ON bench_hnsw_recall USING hnsw ({expression} {ops}) "
                                   f"WITH (m = {m}, ef_construction = {ef_construction})")
                    build = time.perf_counter() - started
                    cursor.execute("SELECT pg_relation_size('bench_hnsw_recall_idx')")
                    size = cursor.fetchone()[0]
                    entry: dict[str, object] = {"build_seconds": round(build, 1), "index_bytes_per_vector": round(size / args.n)}
                    print(name, kind, m, ef_construction, entry, file=sys.stderr, flush=True)
                    for ef in ef_values:
                        # pgvector caps ef_search at 1,000; past it the bit layout takes its candidates the
                        # way Quarry's search does: ef_search 1,000 and iterative scans until the LIMIT is met.
                        cursor.execute(f"SET hnsw.ef_search = {min(ef, 1000)}")
                        cursor.execute(f"SET hnsw.iterative_scan = {'relaxed_order' if ef > 1000 else 'off'}")
                        recalls, times = [], []
                        for qi, q in enumerate(query_vectors):
                            literal = "[" + ",".join(f"{x:.7g}" for x in q) + "]"
                            started = time.perf_counter()
                            if kind == "bit":
                                cursor.execute(
                                    f"SELECT id FROM (SELECT id, v FROM bench_hnsw_recall ORDER BY {expression} <~> "
                                    f"binary_quantize(%s::vector({dim}))::bit({dim}) LIMIT {ef}) c ORDER BY v <=> %s::vector({dim}) LIMIT 10",
                                    [literal, literal])
                            else:
                                cursor.execute(f"SELECT id FROM bench_hnsw_recall ORDER BY {expression} <=> %s{cast} LIMIT 10", [literal])
                            got = {row[0] for row in cursor.fetchall()}
                            times.append((time.perf_counter() - started) * 1000)
                            recalls.append(len(got & exact[qi]) / 10)
                        entry[f"ef_search_{ef}"] = {"recall@10": round(statistics.fmean(recalls), 4),
                                                    "p50_ms": round(statistics.median(times), 2),
                                                    "p95_ms": round(statistics.quantiles(times, n=20)[-1], 2)}
                        print(name, kind, m, ef_construction, ef, entry[f"ef_search_{ef}"], file=sys.stderr, flush=True)
                    figures[f"{kind} m={m} ef_construction={ef_construction}"] = entry
                    print(name, kind, m, ef_construction, entry, file=sys.stderr, flush=True)
            cursor.execute("DROP TABLE bench_hnsw_recall")
        result["constructions"][name] = figures  # type: ignore[index]
    emit(result)


if __name__ == "__main__":
    main()
