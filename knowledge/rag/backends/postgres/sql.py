"""The search statements of the PostgreSQL backend: the legs, their fusion, filters, the HNSW index.

All values travel as parameters; the only things formatted into SQL text are
integers we produced (vector dimensions) and fixed fragments.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass

from knowledge.models import tenant_config_sql as tenant_config_sql
from knowledge.rag.backends.postgres.bm25 import WEIGHTED_TF, avgdl_sql, contribution_sql, idf_sql
from knowledge.rag.fusion import FUSION_DEPTH, LEG_PLACES, SEMANTIC_SPREAD_FLOOR
from knowledge.rag.types import FilterValue, Reader

# Candidates each leg hands to the fusion (RRF or normalised score fusion) in hybrid mode.
HYBRID_DEPTH = FUSION_DEPTH
# Postings read per query term, best impact first (keyword search's fast path).
POSTINGS_PER_TERM = 1000
# Semantic search's safety net (``_ann_checked``) needs the keyword leg's best page, not its exact
# order: it reads fewer postings per term (at 100,000 chunks the full leg tripled semantic search's time).
NET_POSTINGS_PER_TERM = 100
# The fast path's best this many times the page's depth are completed with the terms whose
# postings were cut (see keyword_leg_sql): SciFact's test split lost 0.003 nDCG@10 to the cut.
RESCORE_FACTOR = 3
# The fewest entries the HNSW walk keeps (``hnsw.ef_search``) in any tenant: at 100,000 chunks it gave
# recall@10 0.98 (bench/hnsw_recall.py, SciFact's train claims). ``PostgresBackend(ef_search=)`` fixes it instead.
HNSW_EF_SEARCH = 100
# work_mem for a search with a keyword leg (set for its transaction only), a cap rather than an allocation:
# the candidates' hash aggregate at 1,000 postings a term (7 terms, 6,671 chunks, a million-chunk tenant)
# spilled 664 kB to disk at 4MB and still 240 kB at 16MB (the aggregate's spill partitions take their
# share), none at 64MB (EXPLAIN ANALYZE, claim 3 of bench/search_latency.py); it uses about 1.5 MB.
SEARCH_WORK_MEM = "64MB"
# pgvector caps hnsw.ef_search here.
EF_SEARCH_MAX = 1000
# The walk must widen as the tenant grows, or recall falls: at 1,000,000 chunks ef_search 100 gave 0.78,
# 400 0.92, 600 0.958, 800 0.975 (bench/hnsw_recall.py --n 1000000 --types halfvec --claims train).
# 0.7 * sqrt(n) is 222 at 100,000 (0.995) and 700 at 1,000,000 (between 0.958 and 0.975), for p95 19-29 ms there.
EF_SEARCH_PER_SQRT = 0.7

# Where pgvector is installed a chunk's vector lives in ``embedding_half`` (halfvec, 2 bytes a dimension:
# 776 bytes at 384 against 3,096 for the float8[]), moved there from ``embedding`` by a trigger on every
# write (migration 0022), and the HNSW index is over the halfvec (about 1,170 bytes an entry at 384,
# against 2,048 over ``::vector``): recall within 0.006 of the float4 index at the same ef_search.
# Without pgvector the vector stays in ``embedding`` (float8[]) and search is exact in plain SQL.
HALF_COLUMN = "embedding_half"


def hnsw_ef_search(tenant_chunks: int) -> int:
    """The HNSW walk's list (``hnsw.ef_search``) for a tenant of ``tenant_chunks`` chunks:
    ``EF_SEARCH_PER_SQRT * sqrt(n)`` within ``[HNSW_EF_SEARCH, EF_SEARCH_MAX]`` (the caller raises it
    to twice the page's depth)."""
    return min(EF_SEARCH_MAX, max(HNSW_EF_SEARCH, math.ceil(EF_SEARCH_PER_SQRT * math.sqrt(max(0, tenant_chunks)))))


def hnsw_index_name(dimension: int) -> str:
    return f"chunk_embedding_hnsw_{int(dimension)}"


def create_hnsw_index_sql(dimension: int) -> str:
    """The ANN index for one dimension: indexed chunks' halfvecs (the backlog is searched exactly)."""
    d = int(dimension)
    return (
        f"CREATE INDEX IF NOT EXISTS {hnsw_index_name(d)} ON knowledge_chunk "
        f"USING hnsw (({HALF_COLUMN}::halfvec({d})) halfvec_cosine_ops) "
        f"WHERE indexed AND vector_dims({HALF_COLUMN}) = {d}"
    )


def has_vector_sql(pgvector: bool, alias: str = "c") -> str:
    """A chunk holds a vector: where pgvector is installed the trigger keeps ``embedding`` NULL."""
    if pgvector:
        return f"({alias}.{HALF_COLUMN} IS NOT NULL OR {alias}.embedding IS NOT NULL)"
    return f"{alias}.embedding IS NOT NULL"


def stored_vector_sql(pgvector: bool, alias: str = "c") -> str:
    """A chunk's vector read back as float8[] (NULL without one)."""
    if pgvector:
        return f"coalesce({alias}.{HALF_COLUMN}::real[]::float8[], {alias}.embedding)"
    return f"{alias}.embedding"


def _cosine_sql(d: int) -> str:
    """Cosine similarity of the chunk's halfvec of ``d`` dimensions to the query (``%(vec_text)s``)."""
    return f"1 - ((c.{HALF_COLUMN}::halfvec({d})) <=> %(vec_text)s::halfvec({d}))"


def drop_hnsw_index_sql(dimension: int) -> str:
    return f"DROP INDEX IF EXISTS {hnsw_index_name(int(dimension))}"


def filter_sql(filters: Mapping[str, FilterValue], alias: str = "c") -> tuple[str, list[object]]:
    """``AND``-joined JSONB containment tests: equality in one ``@>``, membership as ``@> ANY``."""
    clauses: list[str] = []
    params: list[object] = []
    equal = {k: v for k, v in filters.items() if not isinstance(v, tuple)}
    if equal:
        clauses.append(f"{alias}.metadata @> %s::jsonb")
        params.append(json.dumps(equal))
    for name, members in filters.items():
        if isinstance(members, tuple):
            clauses.append(f"{alias}.metadata @> ANY(%s::jsonb[])")
            params.append([json.dumps({name: m}) for m in members])
    return ("".join(f" AND {c}" for c in clauses), params)


def access_sql(reader: Reader | None, alias: str = "c") -> tuple[str, dict[str, object]]:
    """The reader's access test on a chunk (``alias``), with its named parameter: ``"" `` for trusted
    code (no reader). A chunk is readable when its access list shares a principal with the reader's,
    ``*`` (the whole tenant) being everyone's; part of the statement, so pages are never short of it
    and counts never include what the reader may not see."""
    if reader is None:
        return "", {}
    return ACCESS_CLAUSE.replace("c.", f"{alias}.", 1), {"readable": reader.principals}


# A reader's access test on alias ``c`` (``access_sql``), as the keyword leg recognises it.
ACCESS_CLAUSE = " AND c.access && %(readable)s::varchar[]"
# With the access test alone, the postings path checks it on this many times its candidates (the best by
# their partial score), not on every posting read: most readers read most of a tenant, and a chunk row per
# posting read cost restricted searches 1.8x (bench/permissions.py). A reader who may read less than about
# a fourth of the best comes back short, and the exact plan answers (plan.search), so pages stay full.
ACCESS_PRERANK = 4


_PHRASE = re.compile(r'"([^"]*)"')
_NEGATED = re.compile(r'(?:^|\s)-(\w[\w\'-]*)')


@dataclass(frozen=True)
class ParsedQuery:
    """Natural text split into what to rank by and what must (not) match.

    Every positive word counts (OR), so a question matches what shares any term
    and BM25 decides; ``"quoted phrases"`` must appear and ``-words`` must not,
    as with websearch syntax. ``or`` is accepted and changes nothing (OR is the default).
    """

    positive: str
    phrases: tuple[str, ...]
    negated: tuple[str, ...]


def parse_query(text: str) -> ParsedQuery:
    phrases = tuple(p.strip() for p in _PHRASE.findall(text) if p.strip())
    rest = _PHRASE.sub(" ", text)
    negated = tuple(_NEGATED.findall(rest))
    rest = _NEGATED.sub(" ", rest)
    positive = " ".join([rest, *phrases])
    return ParsedQuery(positive=positive, phrases=phrases, negated=negated)


def keyword_match_sql(parsed: ParsedQuery, alias: str = "c") -> tuple[str, list[object]]:
    """Extra ``AND`` clauses for phrases and negated words.

    Each is tokenized with the chunk's own configuration, as its tsvector was (a tenant's chunks
    all share one; see ``Chunk.search_config``), and through ``quarry_search_text`` as the index is."""
    clauses: list[str] = []
    params: list[object] = []
    phrase = f"phraseto_tsquery({alias}.search_config, quarry_search_text(%s))"
    words = f"plainto_tsquery({alias}.search_config, quarry_search_text(%s))"
    for text in parsed.phrases:
        # An all-stop-word phrase gives an empty tsquery, which matches nothing: skip it instead.
        clauses.append(f"(numnode({phrase}) = 0 OR {alias}.search_vector @@ {phrase})")
        params += [text, text]
    for word in parsed.negated:
        clauses.append(f"(numnode({words}) = 0 OR NOT {alias}.search_vector @@ {words})")
        params += [word, word]
    return ("".join(f" AND {c}" for c in clauses), params)


# The query's lexemes with their IDF, and an OR-tsquery over them (built from
# lexemes already normalized, hence the 'simple' configuration, which only lowercases).
# The query text is tokenized exactly as chunks are: the tenant's configuration over
# ``quarry_search_text`` (see knowledge.models).
# MATERIALIZED: computed once, not once per candidate chunk.
#
# Document length is the number of distinct lexemes, length(search_vector): it is
# stored in the tsvector's header (no unnest per candidate), and over SciFact and MuSiQue
# it ranks as well as the token count (bench/tune_bm25f.py --lengths distinct,tokens).
KEYWORD_PRELUDE = f"""
qterms AS MATERIALIZED (
    SELECT DISTINCT lexeme FROM unnest(tsvector_to_array(to_tsvector({tenant_config_sql()}, quarry_search_text(%(kw_text)s)))) AS lexeme
),
corpus AS MATERIALIZED (
    SELECT greatest(coalesce(max(chunk_count), 0), 1)::float8 AS n,
           {avgdl_sql("max(token_count)", "max(chunk_count)")} AS avgdl
    FROM knowledge_corpusstat WHERE tenant_id = %(tenant)s
),
stats AS MATERIALIZED (
    SELECT q.lexeme, coalesce(t.df, 0) AS df,
           {idf_sql("corpus.n", "coalesce(t.df, 0)")} AS idf
    FROM qterms q CROSS JOIN corpus
    LEFT JOIN knowledge_termstat t ON t.tenant_id = %(tenant)s AND t.lexeme = q.lexeme
),
tsq AS MATERIALIZED (
    SELECT to_tsquery('simple', string_agg(quote_literal(lexeme), ' | ')) AS q,
           array_agg(lexeme) AS terms
    FROM qterms
)"""


def _bm25_scored(where: str) -> str:
    """Matching chunks of the tenant with their exact BM25 score from the tsvector (alias ``c``, no order)."""
    return f"""
    SELECT c.id, sc.score
    FROM knowledge_chunk c CROSS JOIN tsq CROSS JOIN corpus
    CROSS JOIN LATERAL (
        SELECT round(sum({contribution_sql("s.idf", "x.tf", "length(c.search_vector)", "corpus.avgdl")})::numeric, 9)::float8 AS score
        FROM (
            SELECT u.lexeme, {WEIGHTED_TF}::float8 AS tf
            FROM unnest(c.search_vector) AS u WHERE u.lexeme = ANY(tsq.terms)
        ) x
        JOIN stats s ON s.lexeme = x.lexeme
    ) sc
    WHERE tsq.q IS NOT NULL AND c.tenant_id = %(tenant)s AND c.search_vector @@ tsq.q {where}"""


def keyword_leg_sql(where: str, depth_param: str, *, exact: bool = False) -> str:
    """Top chunks by BM25 among those sharing any term with the query (and passing ``where``).

    Scores are rounded to 9 decimals where they are summed: the postings path and the tsvector path
    add the same terms in different orders, and equal scores must tie the same way on both (then by id).

    Default: read each term's best ``per_term`` postings by impact and add up
    the exact BM25 contributions found there. That is the chunk's whole score
    unless one of the query's terms has more than ``per_term`` postings (a
    common word) and the chunk was not among that term's best: so the best
    ``RESCORE_FACTOR`` x depth chunks of that sum then get the missing terms'
    contributions from their own postings (a primary-key lookup each) before the
    page is cut. Only a chunk outside those candidates can still be ranked a little
    low. Chunks in the backlog (no postings yet) are scored exactly from their
    tsvectors and join the same ranking. ``exact``: score every matching chunk from
    its tsvector (the fallback when filters leave the fast path short of a full page).
    """
    if exact:
        return f"""
kw AS ({_bm25_scored(where)}
    ORDER BY score DESC, id
    LIMIT %({depth_param})s
)"""
    join = f"JOIN knowledge_chunk c ON c.id = post.id WHERE c.tenant_id = %(tenant)s {where}" if where else ""
    contribution = contribution_sql("s.idf", "p.tf", "p.dl", "corpus.avgdl")
    # The access test alone: rank the postings' chunks first, then test the best few (ACCESS_PRERANK).
    ranked = ""
    source = "post"
    if where == ACCESS_CLAUSE:
        ranked = f"""
post_ranked AS MATERIALIZED (
    SELECT id, partial, counted FROM post ORDER BY partial DESC, id LIMIT {ACCESS_PRERANK * RESCORE_FACTOR} * %({depth_param})s
),"""
        source = "post_ranked post"
    return f"""
post AS (
    SELECT p.chunk_id AS id, sum({contribution}) AS partial, array_agg(s.lexeme) AS counted
    FROM stats s CROSS JOIN corpus
    CROSS JOIN LATERAL (
        SELECT p.chunk_id, p.tf::float8 AS tf, p.dl::float8 AS dl FROM knowledge_posting p
        WHERE p.tenant_id = %(tenant)s AND p.lexeme = s.lexeme
        ORDER BY p.impact DESC
        LIMIT %(per_term)s
    ) p
    GROUP BY p.chunk_id
),
truncated AS MATERIALIZED (
    SELECT array_agg(lexeme) AS terms FROM stats WHERE df > %(per_term)s
),{ranked}
post_top AS (
    SELECT post.id, post.partial, post.counted FROM {source} {join}
    ORDER BY post.partial DESC, post.id
    LIMIT {RESCORE_FACTOR} * %({depth_param})s
),
post_scored AS (
    SELECT t.id, round((t.partial + coalesce(m.missing, 0))::numeric, 9)::float8 AS score
    FROM post_top t CROSS JOIN truncated
    LEFT JOIN LATERAL (
        SELECT sum({contribution}) AS missing
        FROM knowledge_posting p JOIN stats s ON s.lexeme = p.lexeme CROSS JOIN corpus
        WHERE truncated.terms IS NOT NULL AND p.chunk_id = t.id
          AND p.lexeme = ANY(truncated.terms) AND NOT p.lexeme = ANY(t.counted)
    ) m ON true
),
kw_backlog AS ({_bm25_scored(where + " AND NOT c.indexed")}
),
kw AS (
    SELECT id, score FROM (
        SELECT id, score FROM post_scored
        UNION ALL
        SELECT id, score FROM kw_backlog
    ) merged
    ORDER BY score DESC, id
    LIMIT %({depth_param})s
)"""


def semantic_leg_sql(where: str, depth_param: str, dimension: int | None, *, exact: bool = False) -> str:
    """Top chunks by cosine similarity (vectors are unit length, so a dot product).

    With ``dimension`` (pgvector present): the HNSW index's nearest halfvecs by cosine, or with
    ``exact`` the cosine of every (filtered) row of the tenant (``+ 0`` keeps the index out of it).
    Without pgvector: exact plain SQL over the float8[] column.
    """
    if dimension is not None:
        d = int(dimension)
        # On the ANN path the tenant test is written so no b-tree can serve it: with stale
        # statistics the planner otherwise scans the tenant's rows and sorts them all (100x slower).
        tenant = "c.tenant_id" if exact else "(c.tenant_id + 0)"
        filters = f"c.embedding_model = %(model)s AND vector_dims(c.{HALF_COLUMN}) = {d} {where}"
        order = f"ORDER BY ((c.{HALF_COLUMN}::halfvec({d})) <=> %(vec_text)s::halfvec({d}))"
        if exact:
            return f"""
sem AS (
    SELECT c.id, {_cosine_sql(d)} AS sim
    FROM knowledge_chunk c
    WHERE c.tenant_id = %(tenant)s AND {filters}
    {order} + 0, c.id
    LIMIT %({depth_param})s
)"""
        # The HNSW index holds indexed chunks only (its predicate says so, and the query must repeat
        # it for the planner to use it); the backlog is ranked exactly.
        return f"""
sem_ann AS (
    SELECT c.id, {_cosine_sql(d)} AS sim
    FROM knowledge_chunk c
    WHERE {tenant} = %(tenant)s AND {filters} AND c.indexed
    {order}, c.id
    LIMIT %({depth_param})s
),
sem_backlog AS (
    SELECT c.id, {_cosine_sql(d)} AS sim
    FROM knowledge_chunk c
    WHERE c.tenant_id = %(tenant)s AND {filters} AND NOT c.indexed
    ORDER BY sim DESC, c.id
    LIMIT %({depth_param})s
),
sem AS (
    SELECT id, sim FROM (SELECT * FROM sem_ann UNION ALL SELECT * FROM sem_backlog) merged
    ORDER BY sim DESC, id
    LIMIT %({depth_param})s
)"""
    return f"""
sem AS (
    SELECT c.id, (SELECT sum(a * b) FROM unnest(c.embedding, %(vec)s::float8[]) AS t(a, b)) AS sim
    FROM knowledge_chunk c
    WHERE c.tenant_id = %(tenant)s AND c.embedding_model = %(model)s AND array_length(c.embedding, 1) = %(dim)s {where}
    ORDER BY sim DESC, c.id
    LIMIT %({depth_param})s
)"""


CHUNK_COLUMNS = "c.chunk_id, d.external_id, c.text, c.title, c.uri, c.metadata, c.start_char, c.end_char"


def keyword_search_sql(where: str, *, exact: bool = False) -> str:
    return f"""WITH {KEYWORD_PRELUDE}, {keyword_leg_sql(where, 'limit', exact=exact)}
SELECT {CHUNK_COLUMNS}, kw.score, kw.score AS keyword_score, NULL::float8 AS sim, NULL::float8 AS rrf, NULL::int AS rrf_rank, 0 AS sem_count,
       count(*) OVER () AS kw_count
FROM kw JOIN knowledge_chunk c ON c.id = kw.id JOIN knowledge_document d ON d.id = c.document_id
WHERE %(min_score)s::float8 IS NULL OR kw.score >= %(min_score)s
ORDER BY kw.score DESC, c.id"""


def _ann_checked(dimension: int, depth_param: str) -> str:
    """CTEs ``kw_missed`` and ``sem_checked``: the ANN list ``sem`` with the keyword hits it missed.

    An HNSW walk can stall on a plateau of near-identical vectors (one large repetitive document)
    and never reach the passage that answers (seen: cosine 0.82 missed while 0.50s came back). A
    keyword hit outside ``sem`` whose own cosine beats ``sem``'s last entry is such a miss, so it takes
    its true place in the list. On a correct list no such hit exists (it would be in it), so this
    changes nothing there; it costs the cosine of at most ``depth`` keyword hits.
    """
    return f"""
kw_missed AS (
    SELECT k.id, {_sim_expr(dimension)} AS sim
    FROM kw k JOIN knowledge_chunk c ON c.id = k.id
    WHERE NOT EXISTS (SELECT 1 FROM sem WHERE sem.id = k.id)
),
sem_checked AS (
    SELECT id, sim FROM (
        SELECT id, sim FROM sem
        UNION ALL
        SELECT id, sim FROM kw_missed WHERE sim > (SELECT min(sim) FROM sem)
    ) checked
    ORDER BY sim DESC, id
    LIMIT %({depth_param})s
)"""


def semantic_search_sql(where: str, dimension: int | None, *, exact: bool = False) -> str:
    """Semantic search; on the ANN path the keyword leg's hits are its safety net (``_ann_checked``)."""
    if dimension is not None and not exact:
        prelude = (f"{KEYWORD_PRELUDE}, {keyword_leg_sql(where, 'limit')}, {semantic_leg_sql(where, 'limit', dimension)},"
                   f"{_ann_checked(dimension, 'limit')}")
        listed = "sem_checked"
    else:
        prelude, listed = semantic_leg_sql(where, "limit", dimension, exact=exact), "sem"
    return f"""WITH {prelude}
SELECT {CHUNK_COLUMNS}, sem.sim AS score, NULL::float8 AS keyword_score, sem.sim, NULL::float8 AS rrf, NULL::int AS rrf_rank,
       (SELECT count(*) FROM sem) AS sem_count
FROM {listed} sem JOIN knowledge_chunk c ON c.id = sem.id JOIN knowledge_document d ON d.id = c.document_id
WHERE %(min_score)s::float8 IS NULL OR sem.sim >= %(min_score)s
ORDER BY sem.sim DESC, c.id"""


def hybrid_search_sql(
    where: str, dimension: int | None, rerank: bool = False, *, exact_keyword: bool = False, exact_semantic: bool = False,
    fusion: str = "rrf",
) -> str:
    """Both legs and their fusion in one statement (one round trip).

    Every row carries its RRF score and rank (``rrf``, ``rrf_rank``) and the parts of the
    normalised score fusion (``kw_norm``, ``sem_norm``, 0 when the chunk is not in that leg's
    list) and its score ``fused``, exactly as ``knowledge.rag.fusion.score_fusion`` computes
    them: ``kw_norm + %(fusion_weight)s * sem_norm``, the keyword leg normalised against 0 when
    its list is shorter than the depth, the semantic leg with a range of at least
    ``SEMANTIC_SPREAD_FLOOR``, and each leg's first hits kept within the places of
    ``LEG_PLACES`` (their ``fused`` raised to the score of the first hit they pass). ``fusion``
    ("rrf" or "score") says which one scores and orders the page; ties fall back to the RRF
    rank. With ``rerank``, the fused candidates are re-ordered by cosine similarity and scored by
    it (the seed's optional second stage).
    """
    if fusion not in ("rrf", "score"):
        raise ValueError(f"fusion must be 'rrf' or 'score', got {fusion!r}")
    fused_order = "rrf_rank" if fusion == "rrf" else "fused DESC, raised DESC, rrf_rank"
    score = "sim" if rerank else ("rrf" if fusion == "rrf" else "fused")
    order = f"sim DESC NULLS LAST, {fused_order}" if rerank else fused_order

    # On the ANN path the keyword leg's hits are the semantic list's safety net (see _ann_checked).
    checked = dimension is not None and not exact_semantic
    rescue = f"{_ann_checked(dimension, 'depth')}," if checked and dimension is not None else ""
    semantic_list = "sem_checked" if checked else "sem"
    # Every hit carries its cosine: a keyword-only hit's was computed by kw_missed already on that path.
    keyword_only_sim = "coalesce(r.sim, km.sim)" if checked else f"coalesce(r.sim, {_sim_expr(dimension)})"
    missed_join = " LEFT JOIN kw_missed km ON km.id = r.id" if checked else ""
    return f"""WITH {KEYWORD_PRELUDE}, {keyword_leg_sql(where, 'depth', exact=exact_keyword)}, {semantic_leg_sql(where, 'depth', dimension, exact=exact_semantic)},{rescue}
kw_ranked AS (SELECT id, score, row_number() OVER (ORDER BY score DESC, id) AS r,
              {_leg_norm("score", anchor_zero="count(*) OVER () < %(depth)s")} AS norm FROM kw),
sem_ranked AS (SELECT id, sim, row_number() OVER (ORDER BY sim DESC, id) AS r,
               {_leg_norm("sim", spread_floor=SEMANTIC_SPREAD_FLOOR)} AS norm FROM {semantic_list}),
fused AS (
    SELECT coalesce(k.id, s.id) AS id, k.score AS keyword_score, s.sim, k.r AS kw_r, s.r AS sem_r,
           coalesce(1.0 / (%(rrf_k)s + k.r), 0) + coalesce(1.0 / (%(rrf_k)s + s.r), 0) AS rrf,
           coalesce(k.norm, 0)::float8 AS kw_norm, coalesce(s.norm, 0)::float8 AS sem_norm
    FROM kw_ranked k FULL OUTER JOIN sem_ranked s ON s.id = k.id
),
ranked0 AS (
    SELECT *, kw_norm + %(fusion_weight)s::float8 * sem_norm AS fused, false AS raised,
           row_number() OVER (ORDER BY rrf DESC, id) AS rrf_rank
    FROM fused
),{_kept_places()}
SELECT * FROM (
    SELECT {CHUNK_COLUMNS}, r.keyword_score, {keyword_only_sim} AS sim, r.rrf,
           r.rrf_rank::int AS rrf_rank, r.kw_norm, r.sem_norm, r.fused, r.raised,
           (SELECT count(*) FROM sem) AS sem_count, (SELECT count(*) FROM kw) AS kw_count
    FROM ranked r JOIN knowledge_chunk c ON c.id = r.id JOIN knowledge_document d ON d.id = c.document_id{missed_join}
) h
WHERE {score} IS NOT NULL AND (%(min_score)s::float8 IS NULL OR {score} >= %(min_score)s)
ORDER BY {order}
LIMIT %(limit)s"""


def _leg_norm(column: str, *, anchor_zero: str = "false", spread_floor: float = 0.0) -> str:
    """``fusion.leg_norms`` as a window expression: 0..1 against the list's minimum (or 0 where
    ``anchor_zero`` holds), over a range of at least ``spread_floor``; 1 when there is no range."""
    low = f"least(CASE WHEN {anchor_zero} THEN 0 ELSE min({column}) OVER () END, max({column}) OVER ())"
    spread = f"greatest(max({column}) OVER () - {low}, {float(spread_floor)!r})"
    return f"coalesce(({column} - {low}) / nullif({spread}, 0), 1.0)"


def _kept_places() -> str:
    """CTEs ``ranked1`` ... ``ranked``: ``fusion.score_fusion``'s places, widest first, one pair of steps each.

    For a place (n, m): ``kept`` are each leg's first n; the others are numbered in fused order,
    and the fused score of the one at m - (number kept) + 1, the first other left out of the
    first m, is the least a kept hit scores.
    """
    steps = []
    places = sorted(LEG_PLACES, key=lambda place: -place[1])
    for step, (count, within) in enumerate(places, start=1):
        before, name = f"ranked{step - 1}", ("ranked" if step == len(places) else f"ranked{step}")
        steps.append(f"""
numbered{step} AS (
    SELECT *, count(*) FILTER (WHERE kept) OVER () AS kept_count,
           row_number() OVER (PARTITION BY kept ORDER BY fused DESC, raised DESC, rrf_rank) AS place
    FROM (SELECT *, coalesce(kw_r <= {int(count)}, false) OR coalesce(sem_r <= {int(count)}, false) AS kept FROM {before}) marked
),
floored{step} AS (
    SELECT *, max(fused) FILTER (WHERE NOT kept AND place = {int(within)} - kept_count + 1 AND kept_count <= {int(within)}) OVER () AS floor
    FROM numbered{step}
),
{name} AS (
    SELECT id, keyword_score, sim, kw_r, sem_r, rrf, kw_norm, sem_norm, rrf_rank,
           CASE WHEN kept AND fused < floor THEN floor ELSE fused END AS fused,
           raised OR (kept AND fused < floor) AS raised
    FROM floored{step}
)""")
    return ",".join(steps) if steps else "\nranked AS (SELECT * FROM ranked0)"


def _sim_expr(dimension: int | None) -> str:
    """Cosine similarity of a keyword-only hit, so every hybrid hit carries semantic_similarity."""
    if dimension is not None:
        d = int(dimension)
        return f"CASE WHEN vector_dims(c.{HALF_COLUMN}) = {d} AND c.embedding_model = %(model)s THEN {_cosine_sql(d)} END"
    return (
        "CASE WHEN array_length(c.embedding, 1) = %(dim)s AND c.embedding_model = %(model)s "
        "THEN (SELECT sum(a * b) FROM unnest(c.embedding, %(vec)s::float8[]) AS t(a, b)) END"
    )
