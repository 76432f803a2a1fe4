"""Rank fusion and scoring helpers shared by the in-process backend and tests."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, TypeVar

from knowledge.rag.limits import MAX_LIMIT

if TYPE_CHECKING:
    from knowledge.rag.types import RAGHit

# Candidates each leg hands to hybrid fusion (both backends).
FUSION_DEPTH = 100
# Score fusion's semantic range floor and the places each leg's first hits are kept within
# (score_fusion): chosen on SciFact train and MuSiQue with bge-small, bench/tune_fusion.py.
SEMANTIC_SPREAD_FLOOR = 0.1
Places = tuple[tuple[int, int], ...]
LEG_PLACES: Places = ((1, 3), (3, 20))

# How many hits past the passages an answer reads (the chat's QUARRY_CHAT_RETRIEVAL_TOP_K, an agent
# tool's limit) a graph search asks for, so that the passages the graph places (GraphParams.admit,
# 3, after hybrid's insert_after-th hit, the 6th) are on the page.
GRAPH_PAGE_EXTRA = 10

Hit = TypeVar("Hit", bound="RAGHit")


def rrf(rankings: Sequence[Sequence[str]], k: int = 60) -> list[tuple[str, float, int]]:
    """Reciprocal Rank Fusion: ``score = sum 1/(k + rank)`` over the lists (rank from 1).

    Returns ``(id, score, fused rank)`` best first; ties keep first-seen order.
    """
    scores: dict[str, float] = {}
    for ranking in rankings:
        for rank, item in enumerate(ranking, start=1):
            scores[item] = scores.get(item, 0.0) + 1.0 / (k + rank)
    ordered = sorted(scores.items(), key=lambda kv: -kv[1])
    return [(item, score, position) for position, (item, score) in enumerate(ordered, start=1)]


def leg_norms(scores: Sequence[float], *, anchor_zero: bool = False, spread_floor: float = 0.0) -> list[float]:
    """One leg's scores (best first or not) mapped onto 0..1 by that leg's own evidence, best 1.

    ``low``, what a chunk outside the list would score, is the list's minimum, or 0 with
    ``anchor_zero`` (a keyword list shorter than the fusion depth holds every match, and a chunk
    outside it matches nothing: BM25 0). Min-max against a short list's own minimum gave its last
    real match 0 (a two-hit keyword list's second hit, BM25 8.81, fused to 0 and ranked 100th).
    ``spread_floor``: the smallest score range that is stretched to the whole 0..1. A plateau of
    near-identical scores (a long repetitive log: cosines 0.632-0.636 down the whole list) is
    noise, not a ranking; min-max stretched it to 0..1 and let it outrank the only keyword match
    of a question (BM25 38.8 against 7.6 for the next). A list of equal scores maps to 1 when
    there is no floor (nothing tells its members apart, and each is as good as the best).
    """
    if not scores:
        return []
    high = max(scores)
    low = min(0.0 if anchor_zero else min(scores), high)
    spread = max(high - low, spread_floor)
    if spread <= 0:
        return [1.0] * len(scores)
    return [(s - low) / spread for s in scores]


def min_max(scores: Sequence[float]) -> list[float]:
    """Each score mapped to 0..1 within its list (best 1, worst 0); a list of equal scores maps to 1."""
    return leg_norms(scores)


def score_fusion(
    keyword: Sequence[tuple[str, float]], semantic: Sequence[tuple[str, float]], weight: float, *,
    depth: int = FUSION_DEPTH, spread_floor: float = SEMANTIC_SPREAD_FLOOR, places: Places = LEG_PLACES, rrf_k: int = 60,
) -> list[tuple[str, float, float, float]]:
    """Normalised score fusion of two ``(id, score)`` lists, best first: ``keyword_norm + weight * semantic_norm``.

    The keyword list is normalised against 0 when it is shorter than ``depth`` (it holds every
    match), else against its last score; the semantic list against its last score with a range of
    at least ``spread_floor`` (``leg_norms``). An id missing from a list gets 0 there.

    ``places``: ``(n, m)`` pairs, each keeping every leg's first ``n`` hits within the page's first
    ``m``: where such a hit would rank lower, its fused score is raised to that of the first hit it
    must pass, so scores stay in descending order. A leg's strongest matches are what fusion must
    never bury, whatever the other leg's list looks like (seen: the one chunk that answered, first
    in keyword by BM25 38.8 against 7.6, ranked 8th under a plateau of log lines).

    Returns ``(id, fused, keyword_norm, semantic_norm)``; a raised hit goes before the hit it
    ties, other ties go by RRF rank (``rrf_k``), as the SQL of the PostgreSQL backend orders them.
    """
    kw = dict(zip((i for i, _ in keyword), leg_norms([s for _, s in keyword], anchor_zero=len(keyword) < depth), strict=True))
    sem = dict(zip((i for i, _ in semantic), leg_norms([s for _, s in semantic], spread_floor=spread_floor), strict=True))
    ids = list(dict.fromkeys([i for i, _ in keyword] + [i for i, _ in semantic]))
    fused = {i: kw.get(i, 0.0) + weight * sem.get(i, 0.0) for i in ids}
    rrf_rank = {i: rank for i, _, rank in rrf([[i for i, _ in keyword], [i for i, _ in semantic]], k=rrf_k)}
    raised: set[str] = set()
    # Widest first: a narrower place raises its hits above the wider one's floor, never below.
    for count, within in sorted(places, key=lambda place: -place[1]):
        kept = {i for ranking in (keyword, semantic) for i, _ in ranking[:count]}
        others = [i for i in sorted(ids, key=lambda i: (-fused[i], i not in raised, rrf_rank[i])) if i not in kept]
        # The first within places hold the kept hits and the best others; the first other left
        # out sets the score a kept hit needs to rank before it.
        if len(others) > within - len(kept) >= 0:
            floor = fused[others[within - len(kept)]]
            for i in kept:
                if fused[i] < floor:
                    fused[i] = floor
                    raised.add(i)
    order = sorted(ids, key=lambda i: (-fused[i], i not in raised, rrf_rank[i]))
    return [(i, fused[i], kw.get(i, 0.0), sem.get(i, 0.0)) for i in order]


def cosine(a: Sequence[float], b: Sequence[float]) -> float:
    if len(a) != len(b):
        return -math.inf
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    na = math.sqrt(sum(x * x for x in a))
    nb = math.sqrt(sum(y * y for y in b))
    if na == 0 or nb == 0:
        return 0.0
    return dot / (na * nb)


def graph_page(limit: int) -> int:
    """How many hits a graph search reads for an answer of ``limit`` passages (``with_graph_placed``)."""
    return min(MAX_LIMIT, limit + GRAPH_PAGE_EXTRA)


def with_graph_placed(page: Sequence[Hit], limit: int) -> list[Hit]:
    """The passages an answer reads from a graph search's ``page``: the first ``limit`` hits the graph
    did not place (hybrid search's own, as without the graph) and every hit it placed, in page order.

    The graph places its few passages below hybrid's first hits, where nDCG@10 says they help; an
    answer reads fewer than 10, and would otherwise never see them.
    """
    kept: list[Hit] = []
    plain = 0
    for hit in page:
        if hit.graph_path:
            kept.append(hit)
        elif plain < limit:
            kept.append(hit)
            plain += 1
    return kept
