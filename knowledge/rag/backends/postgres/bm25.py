"""BM25F: the one home of its constants and its formula, for the postings' impact and for scoring.

The postings store each term's impact (its saturated frequency with the default k1 and b, the
order keyword search reads a term's postings in); a query scores with the backend's own k1 and b
(SQL parameters ``%(bm25_k1)s`` and ``%(bm25_b)s``). Both come from ``_saturation`` below, so the
two can never drift apart. The migrations that rewrote postings (0004, 0013, 0016) write their
numbers out on purpose: a migration is frozen in time and must not change when this file does.
"""

from __future__ import annotations

# Okapi BM25 defaults, chosen with the title weight on two collections at once (bench/tune_bm25f.py over
# SciFact's train split and MuSiQue, every judged query counted once: the flattest region of the grid,
# README); the backend takes others. The postings' stored impact uses these (manage.py
# rebuild_search_stats recomputes it); queries score with the backend's own k1 and b.
BM25_K1 = 1.2
BM25_B = 0.75
# BM25F over a chunk's two fields: an occurrence in the title counts this many times, one in the text
# once. The tsvector marks title occurrences with weight A (knowledge.models.Chunk.search_vector),
# and the postings store the weighted frequency, so changing it means rebuilding them (a migration).
TITLE_WEIGHT = 3
# A lexeme's weighted frequency in a chunk, from ``unnest(c.search_vector) AS u``.
WEIGHTED_TF = (
    f"(coalesce(array_length(u.positions, 1), 1) + {TITLE_WEIGHT - 1} * coalesce(cardinality(array_positions(u.weights, 'A')), 0))"
)
# The query's k1 and b, as named SQL parameters of every search statement.
K1_PARAM = "%(bm25_k1)s"
B_PARAM = "%(bm25_b)s"


def avgdl_sql(tokens: str, chunks: str) -> str:
    """The corpus's average document length from its token and chunk counts (at least 1)."""
    return f"greatest(coalesce({tokens}::float8 / nullif({chunks}, 0), 1), 1)"


def idf_sql(n: str, df: str) -> str:
    """BM25's (non-negative) inverse document frequency of a term found in ``df`` of ``n`` chunks."""
    return f"ln(1 + ({n} - {df} + 0.5) / ({df} + 0.5))"


def _saturation(tf: str, dl: str, avgdl: str, k1: str, b: str) -> str:
    return f"{tf} / ({tf} + {k1} * (1 - {b} + {b} * {dl} / {avgdl}))"


def impact_sql(tf: str, dl: str, avgdl: str) -> str:
    """A posting's stored impact: its term's saturated frequency with the default k1 and b."""
    return _saturation(f"{tf}::float8", dl, avgdl, repr(BM25_K1), repr(BM25_B))


def contribution_sql(idf: str, tf: str, dl: str, avgdl: str) -> str:
    """One term's share of a chunk's score, with the query's k1 and b (``K1_PARAM``, ``B_PARAM``)."""
    return f"{idf} * ({K1_PARAM} + 1) * {_saturation(tf, dl, avgdl, K1_PARAM, B_PARAM)}"
