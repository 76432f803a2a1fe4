"""Rank fusion and scoring helpers shared by the in-process backend and tests."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, TypeVar

from knowledge.rag.limits import MAX_LIMIT

if TYPE_CHECKING:
    from knowledge.rag.types import RAGHit

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


def min_max(scores: Sequence[float]) -> list[float]:
    """Each score mapped to 0..1 within its list (best 1, worst 0); a list of equal scores maps to 1."""
    if not scores:
        return []
    low, high = min(scores), max(scores)
    if high == low:
        return [1.0] * len(scores)
    return [(s - low) / (high - low) for s in scores]


def score_fusion(
    keyword: Sequence[tuple[str, float]], semantic: Sequence[tuple[str, float]], weight: float
) -> list[tuple[str, float, float, float]]:
    """Normalised score fusion of two ``(id, score)`` lists: ``keyword_norm + weight * semantic_norm``.

    Each list is min-max normalised on its own (``min_max``); an id missing from a list
    gets 0 there. Returns ``(id, fused, keyword_norm, semantic_norm)`` best first; ties
    keep first-seen order (keyword list first), as ``rrf`` does.
    """
    kw = dict(zip((i for i, _ in keyword), min_max([s for _, s in keyword]), strict=True))
    sem = dict(zip((i for i, _ in semantic), min_max([s for _, s in semantic]), strict=True))
    ids = list(dict.fromkeys([i for i, _ in keyword] + [i for i, _ in semantic]))
    fused = [(i, kw.get(i, 0.0) + weight * sem.get(i, 0.0), kw.get(i, 0.0), sem.get(i, 0.0)) for i in ids]
    return sorted(fused, key=lambda row: -row[1])


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
