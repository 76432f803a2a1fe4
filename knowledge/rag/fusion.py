"""Rank fusion and scoring helpers shared by the in-process backend and tests."""

from __future__ import annotations

import math
from collections.abc import Sequence


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


def cosine(a: Sequence[float], b: Sequence[float]) -> float:
    if len(a) != len(b):
        return -math.inf
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    na = math.sqrt(sum(x * x for x in a))
    nb = math.sqrt(sum(y * y for y in b))
    if na == 0 or nb == 0:
        return 0.0
    return dot / (na * nb)
