"""Graph reads: the graph leg of a search, triplets for a question, an entity's neighbours, pictures.

The graph leg is a spreading activation over entity-chunk links, one or two hops:

1. Seeds: the top hybrid hits (weight 1/rank) and the entities the query names.
2. Hop 1: the seeds' entities (each weighted by its mentions and its IDF, pruned when it
   occurs in too large a share of the tenant's chunks), the ``entity_fanout`` strongest;
   from each, its ``chunks_per_entity`` strongest mentions (chunks *about* it first),
   activation divided by the entity's chunk count to the power ``beta``.
3. Hop 2 (``hops=2``): the same from the ``frontier`` best hop-1 chunks, damped by ``damping``.
4. Each candidate's activation is multiplied by ``((1 + cos) / 2) ** similarity_power``,
   its cosine similarity to the query mapped to 0..1, and the best ``candidates`` (seeds and the
   protected hybrid top excluded) form the graph's ranked list.
5. Fusion (``fuse``): the list is ordered again by activation plus ``agreement`` times the
   candidate's own hybrid RRF score (a passage both the graph and the words reach), and its first
   ``admit`` join the page right after the hybrid list's first ``insert_after`` hits.

One SQL statement; every table read is keyed by the tenant; the metadata filter applies to
every chunk the expansion passes through. Work is bounded by the fan-out parameters,
whatever the size of the tenant.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from knowledge.graph.extract import MAX_REFERENCE_TOKENS, STOP_WORDS, deaccent, normalize
from knowledge.rag.graph_types import GraphCandidate, GraphLeg, GraphNode, GraphRelation, Neighbor, Neighborhood, Picture, Triplet

MAX_QUERY_NGRAM = MAX_REFERENCE_TOKENS  # a query names what the gazetteer holds
_WORD = re.compile(r"[^\W_]+")


@dataclass(frozen=True)
class GraphParams:
    """The graph leg's bounds and weights, tuned on MuSiQue's 100 questions with ``bench/tune_graph.py``.

    What the tuning showed (recall@10 / all judged in the top 10; hybrid alone 0.687 / 0.38):
    fusing every graph candidate as an equal RRF list lowered nDCG@10 from 0.631 to 0.45-0.57,
    because nine in ten candidates are not judged relevant and they reordered hybrid search's
    first page. Leaving the hybrid top 10 out of the graph list (``protect``), keeping only
    candidates with an activation of at least 0.15 and trusting the list's first ranks (RRF k 5)
    gave 0.753 / 0.47 with nDCG@10 0.622, and no RRF weight or k did better than 0.52 all@10
    without the graph's first ranks taking hybrid's first places (nDCG@10 0.50-0.54).

    The missing hop is usually the graph list's first or second candidate, but its activation is
    often small (0.02-0.05: the similarity weighting and the seed's rank shrink it), while wrong
    candidates rank high when only one path leads to them. So (second round, ``fuse``): the list is
    ordered by activation plus 3 times the candidate's own hybrid RRF score (``agreement``; 2 to 5
    come out within one question), candidates below an activation of 0.01 are dropped, and only the
    first 2 (``admit``; 1: 0.47, 3: 0.51) enter the page, after hybrid's 6th hit (``insert_after``):
    0.781 / 0.52 with nDCG@10 0.670, above hybrid alone (0.631), because hybrid's best hits keep
    their places. Places 3 to 6 tie on MuSiQue; SciFact's train split (809 claims, not its test
    split) chose 6: nDCG@10 0.7197 against 0.7188 after the 4th (hybrid alone 0.7192). Scaling down the seed's own title (``self_weight`` 0.2:
    it leads to sibling passages of one article), a damping of 0.5 or 1 and a relation boost of 1
    came out best or equal; a boost of 3 and 10 seeds instead of 5 were worse.

    Third round (bge-small, the graph placed in a score-fused hybrid list as well as an RRF one;
    ``bench/tune_graph.py --fusion score|rrf --grid '{"admit": [...], "insert_after": [...]}'``):
    ``admit`` 3 instead of 2. MuSiQue, score fusion: all@10 0.57 -> 0.64, nDCG@10 0.731 -> 0.745
    (hybrid alone 0.48 / 0.705); RRF: 0.48 -> 0.52, 0.682 -> 0.687. SciFact's train split, score
    fusion: nDCG@10 0.7705 either way (hybrid alone 0.7729; admit 1: 0.7738, but MuSiQue 0.55).
    ``insert_after`` 8 changed neither collection by more than 0.002; 10 is hybrid alone.
    """

    seeds: int = 5
    hops: int = 2
    damping: float = 0.5
    entity_fanout: int = 20
    chunks_per_entity: int = 10
    frontier: int = 20
    max_share: float = 0.05
    min_pruned: int = 20
    beta: float = 0.5
    # From an entity to its chunks, a chunk *about* it (title, heading) counts fully; one that only
    # mentions it counts this much (multi-hop questions cross from a name to the passage about it).
    link_weight: float = 0.3
    named_weight: float = 1.0
    # An entity that a relation ties to an entity the question names ("Hello Love ... by Hank Snow")
    # gets this much activation per unit of relation weight: the likeliest next hop.
    relation_weight: float = 1.0
    # From a chunk to its entities, the name it is *about* (its title, its headings) counts this much:
    # it leads back to the chunk's own siblings, not to what it points at.
    self_weight: float = 0.2
    similarity_power: float = 1.0
    candidates: int = 30
    # Candidates below this activation stay out of the list: a weak path (a common name, a long
    # way round) says little.
    min_activation: float = 0.01
    # The graph list leaves out the hybrid top this many (the seeds always): it adds passages
    # hybrid search ranked low or missed, and never reorders its first page.
    protect: int = 10
    # Fusion (see ``fuse``): how much a candidate's own hybrid RRF score adds to its activation when
    # the list is ordered, how many of the list join the page, and after how many hybrid hits.
    agreement: float = 3.0
    admit: int = 3
    insert_after: int = 6
    # How deep the hybrid list is read: the seeds, the protected top and the RRF scores ``agreement``
    # uses come from it (ranks down to 100 carry the evidence: reading 20 gave 0.49 all@10, not 0.52).
    hybrid_depth: int = 100

    def __post_init__(self) -> None:
        for name in ("seeds", "entity_fanout", "chunks_per_entity", "frontier", "candidates", "min_pruned", "hybrid_depth"):
            if not 1 <= getattr(self, name) <= 1000:
                raise ValueError(f"graph {name} must be between 1 and 1000")
        if not 0 <= self.protect <= 100 or not (math.isfinite(self.min_activation) and 0 <= self.min_activation <= 10):
            raise ValueError("graph protect must be between 0 and 100, min_activation between 0 and 10")
        if not 0 <= self.admit <= 100 or not 0 <= self.insert_after <= 100:
            raise ValueError("graph admit and insert_after must be between 0 and 100")
        if self.hops not in (1, 2):
            raise ValueError("graph hops must be 1 or 2")
        for name in ("damping", "max_share", "beta", "link_weight", "named_weight", "relation_weight", "self_weight", "similarity_power", "agreement"):
            value = getattr(self, name)
            if not (math.isfinite(value) and 0 <= value <= 10):
                raise ValueError(f"graph {name} must be between 0 and 10")


def query_names(text: str) -> list[tuple[str, int, int]]:
    """Candidate entity keys in a query: ``(key, first token, end token)`` of its word n-grams.

    One-word keys only where the word is capitalized (a name), unless the query has no
    capitals at all; n-grams of stop words only are no names.
    """
    original = _WORD.findall(deaccent(text))
    lower = [w.casefold() for w in original]
    any_capital = any(w[:1].isupper() for w in original)
    found: dict[str, tuple[str, int, int]] = {}
    for size in range(1, MAX_QUERY_NGRAM + 1):
        for start in range(0, len(lower) - size + 1):
            words = lower[start:start + size]
            if all(w in STOP_WORDS for w in words):
                continue
            if size == 1 and any_capital and not original[start][:1].isupper():
                continue
            key = normalize(" ".join(words))
            if key and key not in found:
                found[key] = (key, start, start + size)
    return list(found.values())


def readable_entity_sql(readable: Sequence[str] | None, entity: str = "knowledge_entity.id") -> tuple[str, list[object]]:
    """``AND`` an entity (the column ``entity``) is mentioned in a chunk whose access list names one of
    ``readable`` (a reader's principals; None: trusted code, no test), with its positional parameter.
    An entity known only from chunks the reader may not read does not exist for them (issue 34)."""
    if readable is None:
        return "", []
    return (
        " AND EXISTS (SELECT 1 FROM knowledge_mention rm JOIN knowledge_chunk rc ON rc.id = rm.chunk_id "
        f"WHERE rm.entity_id = {entity} AND rc.access && %s::varchar[])",
        [list(readable)],
    )


def named_entities(cursor: Any, tenant_id: int, text: str, readable: Sequence[str] | None = None) -> list[tuple[int, str, str, str]]:
    """The tenant's entities the query names, longest first, none inside a longer one: ``(id, key, name, type)``
    (``readable``: only those the reader knows of, see ``readable_entity_sql``)."""
    names = query_names(text)
    return _named_entities(cursor, tenant_id, names, readable)[0] if names else []


def _named_entities(cursor: Any, tenant_id: int, names: list[tuple[str, int, int]],
                    readable: Sequence[str] | None = None) -> tuple[list[tuple[int, str, str, str]], bool]:
    """``named_entities`` of a query's ``query_names`` and whether the tenant has a graph at all, in one round trip."""
    # A row of NULLs follows the named entities when the tenant holds any entity: one statement
    # instead of two, which at the graph leg's size is a measurable share of its time.
    known, known_params = readable_entity_sql(readable)
    cursor.execute(
        f"SELECT id, normalized, name, type FROM knowledge_entity WHERE tenant_id = %s AND normalized = ANY(%s) {known} "
        "UNION ALL (SELECT NULL, NULL, NULL, NULL FROM knowledge_entity WHERE tenant_id = %s LIMIT 1)",
        [tenant_id, [key for key, _, _ in names], *known_params, tenant_id],
    )
    found = cursor.fetchall()
    rows = {key: (entity_id, key, name, kind) for entity_id, key, name, kind in found if entity_id is not None}
    spans = sorted(((end - start, start, end, key) for key, start, end in names if key in rows), reverse=True)
    taken: list[tuple[int, int]] = []
    out = []
    for _, start, end, key in spans:
        if any(s <= start and end <= e for s, e in taken):
            continue  # "love" inside "hello love"
        taken.append((start, end))
        out.append(rows[key])
    return out, bool(found)


def similarity_sql(dimension: int | None, has_vector: bool) -> str:
    """The candidate's cosine similarity to the query (vectors are unit length), 1 without a query vector."""
    if not has_vector:
        return "1.0"
    if dimension is not None:
        d = int(dimension)
        # Where pgvector is installed the vector is the halfvec column (knowledge.rag.backends.postgres.sql).
        return (f"CASE WHEN vector_dims(c.embedding_half) = {d} AND c.embedding_model = %(model)s "
                f"THEN 1 - ((c.embedding_half::halfvec({d})) <=> %(vec_text)s::halfvec({d})) ELSE 0 END")
    return ("CASE WHEN array_length(c.embedding, 1) = %(dim)s AND c.embedding_model = %(model)s "
            "THEN (SELECT sum(a * b) FROM unnest(c.embedding, %(vec)s::float8[]) AS t(a, b)) ELSE 0 END")


def _to_chunks(entities: str) -> str:
    """An entity's strongest chunks (the index's order), those about it counting fully."""
    return f"""
        SELECT m.chunk_id, CASE WHEN m.extractor IN ('title', 'heading') THEN m.weight ELSE m.weight * %(link_weight)s END AS weight
        FROM knowledge_mention m
        WHERE m.tenant_id = %(tenant)s AND m.entity_id = {entities}.id
        ORDER BY m.weight DESC, m.chunk_id
        LIMIT %(per_entity)s
    """


def graph_leg_sql(where: str, *, hops: int, dimension: int | None, has_vector: bool, restricted: bool = False) -> str:
    """The graph leg as one statement (``where``: extra conditions on alias ``c``, named parameters;
    ``restricted``: a reader's, whose principals ``%(readable)s`` also bound the relations it follows)."""
    stated = " AND EXISTS (SELECT 1 FROM knowledge_chunk rc WHERE rc.id = r.chunk_id AND rc.access && %(readable)s::varchar[])" if restricted else ""
    pruned = "e.chunk_count <= greatest(%(max_share)s * corpus.n, %(min_pruned)s)"
    out_weight = "(CASE WHEN m.extractor IN ('title', 'heading') THEN m.weight * %(self_weight)s ELSE m.weight END)"
    # IDF scaled to 0..1 (1 for an entity of one chunk), so activation only decays along a path.
    idf = "(ln(1 + corpus.n / greatest(e.chunk_count, 1)) / ln(1 + corpus.n))"
    hop2 = ""
    union2 = ""
    if hops == 2:
        hop2 = f""",
ent2 AS MATERIALIZED (
    SELECT e.id, e.chunk_count AS df, %(damping)s * sum(f.act * {out_weight}) * {idf} AS act,
           (array_agg(f.via ORDER BY f.act * {out_weight} DESC, f.id))[1] AS via
    FROM frontier f
    JOIN knowledge_mention m ON m.tenant_id = %(tenant)s AND m.chunk_id = f.id
    JOIN knowledge_entity e ON e.id = m.entity_id
    CROSS JOIN corpus
    WHERE {pruned} AND NOT EXISTS (SELECT 1 FROM ent1 WHERE ent1.id = e.id)
    GROUP BY e.id, e.chunk_count, corpus.n
    ORDER BY act DESC, e.id
    LIMIT %(fanout)s
),
hop2 AS (
    SELECT x.chunk_id AS id, ent2.via AS p1, ent2.id AS p2, ent2.act * x.weight / power(ent2.df, %(beta)s) AS act
    FROM ent2 CROSS JOIN LATERAL ({_to_chunks("ent2")}) x
)"""
        union2 = "UNION ALL SELECT id, p1, p2, act FROM hop2"
    # hop1's chunks come from the tenant's mentions: only a metadata filter needs their rows here
    # (reading ~200 chunk rows is a fifth of the leg's time at 100,000 chunks).
    frontier_filter = f"JOIN knowledge_chunk c ON c.id = h.id WHERE c.tenant_id = %(tenant)s {where}" if where else ""
    return f"""WITH corpus AS MATERIALIZED (
    SELECT greatest(coalesce(max(chunk_count), 0), 2)::float8 AS n FROM knowledge_corpusstat WHERE tenant_id = %(tenant)s
),
seed AS MATERIALIZED (
    SELECT c.id, s.w FROM unnest(%(seed_ids)s::text[], %(seed_w)s::float8[]) AS s(chunk_id, w)
    JOIN knowledge_chunk c ON c.tenant_id = %(tenant)s AND c.chunk_id = s.chunk_id
),
ent1 AS MATERIALIZED (
    SELECT e.id, e.chunk_count AS df, sum(a.w) * {idf} AS act
    FROM (
        SELECT m.entity_id, s.w * {out_weight} AS w FROM seed s
        JOIN knowledge_mention m ON m.tenant_id = %(tenant)s AND m.chunk_id = s.id
        UNION ALL
        SELECT n.id, %(named_weight)s FROM unnest(%(named)s::bigint[]) AS n(id)
        UNION ALL
        SELECT rel.other, %(relation_weight)s * rel.weight FROM unnest(%(named)s::bigint[]) AS n(id)
        JOIN knowledge_entity ne ON ne.id = n.id CROSS JOIN corpus
        CROSS JOIN LATERAL (
            (SELECT r.object_id AS other, r.weight FROM knowledge_relation r
             WHERE r.tenant_id = %(tenant)s AND r.subject_id = n.id{stated} ORDER BY r.weight DESC, r.object_id LIMIT %(per_entity)s)
            UNION ALL
            (SELECT r.subject_id, r.weight FROM knowledge_relation r
             WHERE r.tenant_id = %(tenant)s AND r.object_id = n.id{stated} ORDER BY r.weight DESC, r.subject_id LIMIT %(per_entity)s)
        ) rel
        WHERE ne.chunk_count <= greatest(%(max_share)s * corpus.n, %(min_pruned)s)  -- a pruned name leads nowhere
    ) a
    JOIN knowledge_entity e ON e.id = a.entity_id AND e.tenant_id = %(tenant)s
    CROSS JOIN corpus
    WHERE {pruned}
    GROUP BY e.id, e.chunk_count, corpus.n
    ORDER BY act DESC, e.id
    LIMIT %(fanout)s
),
hop1 AS MATERIALIZED (
    SELECT x.chunk_id AS id, ent1.id AS p1, NULL::bigint AS p2, ent1.act * x.weight / power(ent1.df, %(beta)s) AS act
    FROM ent1 CROSS JOIN LATERAL ({_to_chunks("ent1")}) x
),
frontier AS MATERIALIZED (
    SELECT h.id, sum(h.act) AS act, (array_agg(h.p1 ORDER BY h.act DESC, h.p1))[1] AS via
    FROM hop1 h {frontier_filter}
    GROUP BY h.id
    ORDER BY act DESC, h.id
    LIMIT %(frontier)s
){hop2},
reached AS (
    -- The path of a chunk is its strongest single contribution.
    SELECT id, sum(act) AS act, (array_agg(p1 ORDER BY act DESC, p1, p2))[1] AS p1, (array_agg(p2 ORDER BY act DESC, p1, p2))[1] AS p2
    FROM (SELECT id, p1, p2, act FROM hop1 {union2}) r
    WHERE NOT EXISTS (SELECT 1 FROM seed WHERE seed.id = r.id)
    GROUP BY id
),
scored AS (
    -- Cosine similarity mapped to 0..1, so a candidate the question hardly resembles still counts, less.
    SELECT c.chunk_id, r.p1, r.p2, r.act * power(greatest((1 + ({similarity_sql(dimension, has_vector)})) / 2, 0), %(sim_power)s) AS score
    FROM reached r JOIN knowledge_chunk c ON c.id = r.id
    WHERE c.tenant_id = %(tenant)s {where}
)
SELECT s.chunk_id, s.score, e1.name, e2.name, s.p1, s.p2
FROM scored s
JOIN knowledge_entity e1 ON e1.id = s.p1
LEFT JOIN knowledge_entity e2 ON e2.id = s.p2
WHERE s.score > %(min_activation)s AND NOT s.chunk_id = ANY(%(protected)s::text[])
ORDER BY s.score DESC, s.chunk_id
LIMIT %(candidates)s"""


def graph_leg(
    cursor: Any, *, tenant_id: int, text: str, seeds: Sequence[str], params: GraphParams, where: str,
    where_params: dict[str, Any], vector: Sequence[float] | None, model: str, dimension: int | None,
    readable: Sequence[str] | None = None,
) -> GraphLeg:
    """Run the graph leg for a query whose hybrid hits, best first, are ``seeds`` (chunk ids).

    ``readable``: the reader's principals (None: trusted code). Then ``where`` holds the same access test
    (``plan.where``), and the named entities, the relations followed and the diagnostics are bounded by
    it too: nothing of the leg comes from a chunk the reader may not read."""
    named, has_graph = _named_entities(cursor, tenant_id, query_names(text), readable)
    if not has_graph:
        return GraphLeg()
    top = list(seeds)[: params.seeds]
    query: dict[str, Any] = {
        "tenant": tenant_id, "seed_ids": top, "seed_w": [1.0 / (i + 1) for i in range(len(top))],
        "named": [row[0] for row in named], "named_weight": params.named_weight,
        "relation_weight": params.relation_weight, "self_weight": params.self_weight, "max_share": params.max_share,
        "min_pruned": params.min_pruned, "fanout": params.entity_fanout, "per_entity": params.chunks_per_entity,
        "beta": params.beta, "link_weight": params.link_weight, "frontier": params.frontier, "damping": params.damping, "sim_power": params.similarity_power,
        "candidates": params.candidates, "model": model, "min_activation": params.min_activation,
        "protected": list(seeds)[: params.protect], **where_params,
    }
    if vector is not None:
        # pgvector's cast reads the text form; plain SQL the float8[] (send only the one used).
        query.update(dim=len(vector), **({"vec_text": "[" + ",".join(map(repr, vector)) + "]"} if dimension is not None
                                         else {"vec": list(vector)}))
    if readable is not None:
        query["readable"] = list(readable)
    cursor.execute(graph_leg_sql(where, hops=params.hops, dimension=dimension, has_vector=vector is not None,
                                 restricted=readable is not None), query)
    rows = cursor.fetchall()
    candidates = tuple(
        GraphCandidate(chunk_id, float(score), (first,) if second is None else (first, second))
        for chunk_id, score, first, second, _, _ in rows
    )
    path_ids = sorted({entity_id for *_, p1, p2 in rows for entity_id in (p1, p2) if entity_id is not None})
    nodes, relations = _diagnostics(cursor, tenant_id, path_ids, readable=readable)
    return GraphLeg(
        candidates=candidates, named=tuple(GraphNode(name, kind) for _, _, name, kind in named),
        nodes=nodes, relations=relations, entities=1,
    )


def _diagnostics(cursor: Any, tenant_id: int, entity_ids: Sequence[int], limit: int = 20,
                 readable: Sequence[str] | None = None) -> tuple[tuple[GraphNode, ...], tuple[GraphRelation, ...]]:
    """The entities on the leg's paths and the relations among them (at most ``limit`` each; ``readable``:
    only relations stated in chunks the reader may read)."""
    if not entity_ids:
        return (), ()
    ids = list(entity_ids)
    stated = " AND c.access && %(readable)s::varchar[]" if readable is not None else ""
    # Both lists in one statement (one round trip), each as a JSON array of rows in its order.
    cursor.execute(
        f"""
        SELECT
            (SELECT coalesce(json_agg(json_build_array(n.name, n.type) ORDER BY n.chunk_count, n.id), '[]')
             FROM (SELECT id, name, type, chunk_count FROM knowledge_entity
                   WHERE tenant_id = %(tenant)s AND id = ANY(%(ids)s) ORDER BY chunk_count, id LIMIT %(limit)s) n),
            (SELECT coalesce(json_agg(json_build_array(x.s, x.p, x.o, x.c) ORDER BY x.w DESC, x.c), '[]')
             FROM (SELECT s.name AS s, r.predicate AS p, o.name AS o, c.chunk_id AS c, r.weight AS w
                   FROM knowledge_relation r
                   JOIN knowledge_entity s ON s.id = r.subject_id JOIN knowledge_entity o ON o.id = r.object_id
                   JOIN knowledge_chunk c ON c.id = r.chunk_id
                   WHERE r.tenant_id = %(tenant)s AND r.subject_id = ANY(%(ids)s) AND r.object_id = ANY(%(ids)s){stated}
                   ORDER BY r.weight DESC, c.chunk_id
                   LIMIT %(limit)s) x)
        """,
        {"tenant": tenant_id, "ids": ids, "limit": limit, **({"readable": list(readable)} if readable is not None else {})},
    )
    nodes_json, relations_json = cursor.fetchone()
    nodes = tuple(GraphNode(*row) for row in _json_rows(nodes_json))
    return nodes, tuple(GraphRelation(*row) for row in _json_rows(relations_json))


def _json_rows(value: Any) -> list[list[Any]]:
    """A json column as psycopg returns it (already parsed) or as text (a connection without the loader)."""
    return json.loads(value) if isinstance(value, str) else list(value)


def graph_triplets(
    cursor: Any, *, tenant_id: int, text: str, seeds: Sequence[str], limit: int, where: str, where_params: dict[str, Any],
    params: GraphParams, readable: Sequence[str] | None = None,
) -> list[Triplet]:
    """Relations relevant to a question: those of the entities it names and of its top hits' entities.

    A relation scores the activation of its ends (both ends relevant counts most), times its
    weight; stated relations (a pattern or a model's) count double a sentence's co-occurrence.
    Each relevant entity contributes its 200 strongest relations from each end (ties by the other
    end, the order of its indexes): a hub's relations are cut by weight, never by where rows lie.
    """
    named = named_entities(cursor, tenant_id, text, readable)  # ``where`` bounds the relations' chunks
    top = list(seeds)[: params.seeds]
    query: dict[str, Any] = {
        "tenant": tenant_id, "named": [row[0] for row in named], "named_weight": 2.0 * params.named_weight,
        "seed_ids": top, "seed_w": [1.0 / (i + 1) for i in range(len(top))], "fanout": params.entity_fanout,
        "max_share": params.max_share, "min_pruned": params.min_pruned, "limit": limit, **where_params,
    }
    cursor.execute(
        f"""
        WITH corpus AS MATERIALIZED (
            SELECT greatest(coalesce(max(chunk_count), 0), 1)::float8 AS n FROM knowledge_corpusstat WHERE tenant_id = %(tenant)s
        ),
        seed AS MATERIALIZED (
            SELECT c.id, s.w FROM unnest(%(seed_ids)s::text[], %(seed_w)s::float8[]) AS s(chunk_id, w)
            JOIN knowledge_chunk c ON c.tenant_id = %(tenant)s AND c.chunk_id = s.chunk_id
        ),
        ents AS MATERIALIZED (
            SELECT e.id, sum(a.w) * ln(1 + corpus.n / greatest(e.chunk_count, 1)) AS act
            FROM (
                SELECT m.entity_id, s.w * m.weight AS w FROM seed s
                JOIN knowledge_mention m ON m.tenant_id = %(tenant)s AND m.chunk_id = s.id
                UNION ALL
                SELECT n.id, %(named_weight)s FROM unnest(%(named)s::bigint[]) AS n(id)
            ) a
            JOIN knowledge_entity e ON e.id = a.entity_id AND e.tenant_id = %(tenant)s CROSS JOIN corpus
            WHERE e.chunk_count <= greatest(%(max_share)s * corpus.n, %(min_pruned)s)
            GROUP BY e.id, e.chunk_count, corpus.n
            ORDER BY act DESC, e.id
            LIMIT %(fanout)s
        ),
        rel AS (
            SELECT DISTINCT ON (r.subject_id, r.predicate, r.object_id) r.subject_id, r.predicate, r.object_id, r.chunk_id,
                   (coalesce(a.act, 0) + coalesce(b.act, 0)) * r.weight * (CASE WHEN r.extractor = 'sentence' THEN 1 ELSE 2 END)
                   * (CASE WHEN a.id IS NOT NULL AND b.id IS NOT NULL THEN 2 ELSE 1 END) AS score
            FROM ents x
            CROSS JOIN LATERAL (
                (SELECT * FROM knowledge_relation r WHERE r.tenant_id = %(tenant)s AND r.subject_id = x.id
                 ORDER BY r.weight DESC, r.object_id LIMIT 200)
                UNION ALL
                (SELECT * FROM knowledge_relation r WHERE r.tenant_id = %(tenant)s AND r.object_id = x.id
                 ORDER BY r.weight DESC, r.subject_id LIMIT 200)
            ) r
            LEFT JOIN ents a ON a.id = r.subject_id
            LEFT JOIN ents b ON b.id = r.object_id
            JOIN knowledge_chunk c ON c.id = r.chunk_id AND c.tenant_id = %(tenant)s {where}
            ORDER BY r.subject_id, r.predicate, r.object_id, score DESC, r.chunk_id
        )
        SELECT s.name, s.type, rel.predicate, o.name, o.type, c.chunk_id, rel.score
        FROM rel JOIN knowledge_entity s ON s.id = rel.subject_id JOIN knowledge_entity o ON o.id = rel.object_id
        JOIN knowledge_chunk c ON c.id = rel.chunk_id
        ORDER BY rel.score DESC, c.chunk_id, s.name, o.name
        LIMIT %(limit)s
        """,
        query,
    )
    return [Triplet(GraphNode(sn, st), predicate, GraphNode(on, ot), chunk_id, float(score))
            for sn, st, predicate, on, ot, chunk_id, score in cursor.fetchall()]


def entity_lookup(cursor: Any, tenant_id: int, name: str, readable: Sequence[str] | None = None) -> tuple[int, str, str, int] | None:
    """The entity called ``name`` (by its key; else the most mentioned one whose key starts with it), among
    those the reader knows of (``readable``, see ``readable_entity_sql``)."""
    key = normalize(name)
    if not key:
        return None
    known, known_params = readable_entity_sql(readable)
    cursor.execute(
        f"SELECT id, name, type, chunk_count FROM knowledge_entity WHERE tenant_id = %s AND normalized = %s {known}",
        [tenant_id, key, *known_params],
    )
    row = cursor.fetchone()
    if row is None:
        pattern = key.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
        cursor.execute(
            f"SELECT id, name, type, chunk_count FROM knowledge_entity WHERE tenant_id = %s AND normalized LIKE %s {known} "
            "ORDER BY chunk_count DESC, id LIMIT 1",
            [tenant_id, pattern, *known_params],
        )
        row = cursor.fetchone()
    return row


def graph_neighbors(cursor: Any, *, tenant_id: int, name: str, limit: int, where: str = "", where_params: dict[str, Any] | None = None,
                    readable: Sequence[str] | None = None) -> Neighborhood:
    """An entity's neighbours through the relations its chunks state, strongest first, each with the linking chunks
    (from its 2,000 strongest relations at each end). ``readable``: a reader's principals; then only what
    chunks they may read state (the entity itself included)."""
    if readable is not None:
        where = f"{where} AND c.access && %(readable)s::varchar[]"
        where_params = {**(where_params or {}), "readable": list(readable)}
    found = entity_lookup(cursor, tenant_id, name, readable)
    if found is None:
        return Neighborhood(None)
    entity_id, entity_name, entity_type, _ = found
    params = {"tenant": tenant_id, "entity": entity_id, "limit": limit, **(where_params or {})}
    cursor.execute(
        f"""
        SELECT c.chunk_id FROM knowledge_mention m JOIN knowledge_chunk c ON c.id = m.chunk_id
        WHERE m.tenant_id = %(tenant)s AND m.entity_id = %(entity)s AND c.tenant_id = %(tenant)s {where}
        ORDER BY m.weight DESC, c.chunk_id LIMIT 3
        """,
        params,
    )
    about = tuple(row[0] for row in cursor.fetchall())
    cursor.execute(
        f"""
        WITH rel AS (
            (SELECT r.object_id AS other, r.predicate, r.chunk_id, r.weight FROM knowledge_relation r
             WHERE r.tenant_id = %(tenant)s AND r.subject_id = %(entity)s ORDER BY r.weight DESC, r.object_id LIMIT 2000)
            UNION ALL
            (SELECT r.subject_id, r.predicate, r.chunk_id, r.weight FROM knowledge_relation r
             WHERE r.tenant_id = %(tenant)s AND r.object_id = %(entity)s ORDER BY r.weight DESC, r.subject_id LIMIT 2000)
        )
        SELECT e.name, e.type, array_agg(DISTINCT rel.predicate), (array_agg(c.chunk_id ORDER BY rel.weight DESC, c.chunk_id))[1:3],
               sum(rel.weight) AS weight
        FROM rel JOIN knowledge_entity e ON e.id = rel.other
        JOIN knowledge_chunk c ON c.id = rel.chunk_id AND c.tenant_id = %(tenant)s {where}
        GROUP BY e.id, e.name, e.type
        ORDER BY weight DESC, e.name
        LIMIT %(limit)s
        """,
        params,
    )
    neighbors = tuple(Neighbor(GraphNode(n, t), tuple(sorted(p)), tuple(chunks), float(w)) for n, t, p, chunks, w in cursor.fetchall())
    return Neighborhood(GraphNode(entity_name, entity_type), about, neighbors)


def graph_picture(cursor: Any, *, tenant_id: int, chunk_ids: Sequence[str], expand: bool, limit: int = 8,
                  readable: Sequence[str] | None = None) -> Picture:
    """How ``chunk_ids`` connect through the entities they mention.

    Without ``expand`` (a set of cited passages): the entities two or more of them mention.
    With ``expand`` (one passage on its document's page): its most telling entities (rarest
    first) and, for each, up to three passages of other documents that mention it.
    """
    ids = list(dict.fromkeys(chunk_ids))
    if not ids:
        return Picture()
    # A reader's picture holds only chunks they may read (unreadable ids are omitted as unknown ones).
    visible = " AND c.access && %s::varchar[]" if readable is not None else ""
    visible_params: list[object] = [list(readable)] if readable is not None else []
    cursor.execute(
        f"""
        SELECT c.chunk_id, e.id, e.name, e.type, e.chunk_count, m.weight
        FROM knowledge_chunk c
        JOIN knowledge_mention m ON m.tenant_id = c.tenant_id AND m.chunk_id = c.id
        JOIN knowledge_entity e ON e.id = m.entity_id
        WHERE c.tenant_id = %s AND c.chunk_id = ANY(%s){visible}
        """,
        [tenant_id, ids, *visible_params],
    )
    rows = cursor.fetchall()
    by_entity: dict[int, tuple[GraphNode, int, set[str]]] = {}
    for chunk_id, entity_id, name, kind, count, _ in rows:
        entry = by_entity.setdefault(entity_id, (GraphNode(name, kind), count, set()))
        entry[2].add(chunk_id)
    links: list[tuple[str, int]] = []
    entities: list[tuple[int, GraphNode]] = []
    passages = list(ids)
    if not expand:
        shared = sorted((e for e in by_entity.items() if len(e[1][2]) >= 2), key=lambda e: (-len(e[1][2]), e[1][1], e[1][0].name))
        for entity_id, (node, _, chunks) in shared[: 3 * limit]:
            entities.append((entity_id, node))
            links += [(chunk_id, entity_id) for chunk_id in ids if chunk_id in chunks]
    else:
        # Rarest first (they say most); an entity in more than a tenth of the tenant's chunks says little.
        ranked = sorted(by_entity.items(), key=lambda e: (e[1][1], e[1][0].name))[:limit]
        if ranked:
            cursor.execute(
                f"""
                SELECT x.entity_id, x.chunk_id FROM unnest(%s::bigint[]) AS e(id)
                CROSS JOIN LATERAL (
                    SELECT m.entity_id, c.chunk_id FROM knowledge_mention m JOIN knowledge_chunk c ON c.id = m.chunk_id
                    WHERE m.tenant_id = %s AND m.entity_id = e.id AND NOT m.chunk_id = ANY(
                        SELECT id FROM knowledge_chunk WHERE tenant_id = %s AND chunk_id = ANY(%s)){visible}
                    ORDER BY m.weight DESC, m.chunk_id LIMIT 3
                ) x
                """,
                [[entity_id for entity_id, _ in ranked], tenant_id, tenant_id, ids, *visible_params],
            )
            others = cursor.fetchall()
            for entity_id, (node, _, chunks) in ranked:
                entities.append((entity_id, node))
                links += [(chunk_id, entity_id) for chunk_id in ids if chunk_id in chunks]
            for entity_id, chunk_id in others:
                if chunk_id not in passages:
                    passages.append(chunk_id)
                links.append((chunk_id, entity_id))
    cursor.execute(
        "SELECT c.chunk_id, d.external_id, c.title FROM knowledge_chunk c JOIN knowledge_document d ON d.id = c.document_id "
        f"WHERE c.tenant_id = %s AND c.chunk_id = ANY(%s){visible}",
        [tenant_id, passages, *visible_params],
    )
    found = {chunk_id: (chunk_id, document_id, title or document_id) for chunk_id, document_id, title in cursor.fetchall()}
    return Picture(
        passages=tuple(found[p] for p in passages if p in found), entities=tuple(entities),
        links=tuple(link for link in links if link[0] in found), focus=tuple(p for p in ids if p in found),
    )


def fuse(hybrid: Sequence[tuple[str, float]], candidates: Sequence[GraphCandidate], params: GraphParams,
         rrf_scores: Mapping[str, float] | None = None) -> list[tuple[str, float, GraphCandidate | None]]:
    """The fused ranking: ``(chunk id, score, the graph candidate or None)``, best first, scores non-increasing.

    ``hybrid``: the hybrid list, best first, with its scores (RRF or score fusion); ``rrf_scores``:
    each of its hits' RRF score (None: the list's own scores are RRF scores); ``candidates``: the
    graph leg's list. The list is ordered by activation plus ``agreement`` times the candidate's hybrid
    RRF score (0 when hybrid search did not return it; RRF's scale whatever fusion ordered the page,
    the scale ``agreement`` was tuned on); its first ``admit`` move to just after the hybrid list's
    first ``insert_after`` hits and take the score of the hit that follows them (the last one
    before them when none follows), so every other hit keeps its order and its score.
    """
    rrf = dict(hybrid) if rrf_scores is None else rrf_scores
    ordered = sorted(candidates, key=lambda c: (-(c.score + params.agreement * rrf.get(c.chunk_id, 0.0)), c.chunk_id))
    admitted = {c.chunk_id: c for c in ordered[: params.admit]}
    rest = [(cid, score) for cid, score in hybrid if cid not in admitted]
    head, tail = rest[: params.insert_after], rest[params.insert_after:]
    if tail:
        slot = tail[0][1]
    elif head:
        slot = head[-1][1]
    else:
        slot = 1.0 / 61  # no hybrid hit at all: the score of a first rank in one RRF list
    return ([(cid, score, None) for cid, score in head] + [(cid, slot, c) for cid, c in admitted.items()]
            + [(cid, score, None) for cid, score in tail])
