"""Where hybrid search ranks the one passage that answers, inside a long repetitive log; prints JSON.

    .venv/bin/python bench/buried_match.py --lines 20000

A throwaway tenant gets a harbour log of ``--lines`` near-identical lines (about 300 bytes each:
20,000 lines are 6 MB, as in the report of issue 30) with one memo line that answers "Where is the
harbour master's spare key for the pilot boat?". The question is searched in every mode with the
deployment's embedder; the result is the rank of the memo's passage in keyword, semantic, hybrid RRF,
hybrid score fusion as this release computes it (``knowledge.rag.fusion.score_fusion``, through
the real SQL), and as the release before computed it (min-max within each leg's list, weight 1.5,
recomputed here from the same two legs).
"""

from __future__ import annotations

import argparse
import random

from _common import bench_tenant, emit, setup_django

QUESTION = "Where is the harbour master's spare key for the pilot boat?"
MEMO = ("Memo from the harbour master: the spare key for the pilot boat hangs in the blue key cabinet in the "
        "slipway office, behind the tide tables.")


def harbour_log(lines: int, seed: int = 7) -> str:
    """A watch log: the same few dozen words again and again, in slightly different orders."""
    rng = random.Random(seed)
    vessels = ["MV Aurora", "MV Selkie", "tug Bran", "ferry Islay", "trawler Kittiwake", "barge Tern"]
    out = []
    for n in range(lines):
        if n == lines // 2:
            out.append(MEMO)
            continue
        hour, minute = divmod(n * 7 % 1440, 60)
        out.append(
            f"{hour:02d}:{minute:02d} watch log, harbour office: {rng.choice(vessels)} moored at berth {rng.randint(1, 9)}; "
            f"tide {rng.uniform(0.2, 4.8):.1f} m {rng.choice(['rising', 'falling', 'slack'])}; wind {rng.choice(['N', 'NW', 'W', 'SW'])} "
            f"{rng.randint(3, 30)} kn; visibility {rng.choice(['good', 'moderate', 'poor'])}; pilot boat on standby at the "
            f"pontoon; berth inspection done, fenders and lines checked, nothing to report from the quay."
        )
    return "\n".join(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lines", type=int, default=20000)
    parser.add_argument("--keep", action="store_true", help="keep the tenant (bench-buried) for a look in the app")
    args = parser.parse_args()
    setup_django()
    from asgiref.sync import async_to_sync

    from knowledge import rag
    from knowledge.rag.fusion import FUSION_DEPTH, min_max
    from knowledge.services.indexing import backlog_drain

    with bench_tenant("bench-buried", keep=args.keep) as tenant:
        service = rag.tenant_service(tenant.slug)  # type: ignore[attr-defined]
        log = harbour_log(args.lines)
        async_to_sync(service.ingest)([rag.RAGDocument("harbour-log", log, title="Harbour watch log")])
        backlog_drain(namespace=tenant.slug)  # type: ignore[attr-defined]

        def rank(hits: list[rag.RAGHit]) -> int | None:
            return next((n for n, h in enumerate(hits, start=1) if "spare key for the pilot boat" in h.chunk.text), None)

        legs = {mode: async_to_sync(service.search)(QUESTION, mode=mode, limit=FUSION_DEPTH) for mode in ("keyword", "semantic")}
        kw = dict(zip((h.chunk.chunk_id for h in legs["keyword"]), min_max([h.score for h in legs["keyword"]]), strict=True))
        sem = dict(zip((h.chunk.chunk_id for h in legs["semantic"]), min_max([h.score for h in legs["semantic"]]), strict=True))
        by_id = {h.chunk.chunk_id: h for h in legs["keyword"] + legs["semantic"]}
        previous = sorted(by_id, key=lambda c: -(kw.get(c, 0.0) + 1.5 * sem.get(c, 0.0)))
        sims = [h.score for h in legs["semantic"]]
        result: dict[str, object] = {
            "benchmark": "buried_match", "log_bytes": len(log.encode()), "question": QUESTION,
            "semantic_top100_cosines": [round(min(sims), 4), round(max(sims), 4)] if sims else None,
            "rank": {
                "keyword": rank(legs["keyword"]),
                "semantic": rank(legs["semantic"]),
                "hybrid_rrf": rank(async_to_sync(service.search)(QUESTION, mode="hybrid", fusion="rrf", limit=FUSION_DEPTH)),
                "hybrid_score": rank(async_to_sync(service.search)(QUESTION, mode="hybrid", fusion="score", limit=FUSION_DEPTH)),
                "hybrid_score_previous": rank([by_id[c] for c in previous]),
            },
        }
        emit(result)


if __name__ == "__main__":
    main()
