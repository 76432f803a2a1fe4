"""The search plan: which statement answers a query (exact or ANN, postings or tsvectors), and the fallback.

One round trip per search (both legs and their fusion in one statement, the HNSW settings sent
with it), a second only when the fast plan came back short. A tenant of at most the
backend's ``exact_max_chunks`` chunks is ranked by exact cosine over its own rows (found through
its b-tree, no ANN), so its results never depend on the shared HNSW index's state, which other
tenants' churn degrades. Above it, with pgvector, semantic ordering uses the HNSW index over the
chunks' halfvecs (``embedding_half::halfvec(d)``) with iterative scans, its list (``hnsw.ef_search``)
wider in a larger tenant (``sql.hnsw_ef_search``); a page that comes back short after filtering is
recomputed exactly, so filters never cost results. Until a chunk is indexed, search scores it
exactly (BM25 from its tsvector, cosine from its vector) and merges it into the same ranking.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from django.db import connections

from knowledge.rag.backends.postgres import sql as q
from knowledge.rag.types import Fusion, RAGChunk, RAGHit, RAGQuery, SearchMode

if TYPE_CHECKING:
    from knowledge.rag.backends.postgres.facade import PostgresBackend


def search(backend: PostgresBackend, query: RAGQuery, tenant_id: int) -> list[RAGHit]:
    """The query's hits in the tenant (no graph leg): the fast plan, then the exact one where it came back short."""
    # A small tenant skips the ANN index altogether: exact costs it a few milliseconds, and its
    # ranking then cannot suffer from the shared index's state (deleted entries left by another
    # tenant's churn leave newly inserted ones badly connected: issue 22 measured -0.12 nDCG@10).
    # A filtered search of a large tenant does the same when its filters leave few candidates.
    parsed = q.parse_query(query.text)  # once per search: the plan, the refinements and the keyword text use it
    # A reader's access test filters like metadata does: the fast paths may come back short of it, unless
    # the tenant restricts nothing (then the test, still in the statement, passes every chunk).
    restricted = query.reader is not None and (query.resolved is None or query.resolved.restricted)
    filtered = bool(query.filters) or bool(parsed.phrases or parsed.negated) or restricted
    dim = dimension(backend, query)
    # Counting the candidates pays for selective metadata filters and refinements, not for a reader's access
    # test alone: most readers read most of a tenant, the count cannot stop early on the access column's
    # index (everyone's chunks share "*"), and a reader who may read little is caught by the short-page check.
    selective = bool(query.filters) or bool(parsed.phrases or parsed.negated)
    ranked = dim is not None and query.mode is not SearchMode.KEYWORD
    # The tenant's size decides both exact-or-ANN and, on the ANN path, how wide the HNSW walk's list is.
    chunks = _tenant_chunks(backend, query, tenant_id) if ranked else 0
    small = ranked and (
        (backend.exact_max_chunks > 0 and chunks <= backend.exact_max_chunks)
        or (selective and _few_candidates(backend, query, parsed, tenant_id))
    )
    rows = _run(backend, query, parsed, tenant_id, exact_semantic=small, tenant_chunks=chunks)
    # The fast paths (postings, HNSW) can come back short once filters apply;
    # the exact plans cannot. Only a filtered query, or an ANN one, can be short.
    wanted = query.limit if query.mode is not SearchMode.HYBRID else max(backend.hybrid_depth, query.limit)
    first = rows[0] if rows else {}
    exact_keyword = query.mode is not SearchMode.SEMANTIC and filtered and first.get("kw_count", 0) < wanted
    exact_semantic = not small and query.mode is not SearchMode.KEYWORD and dim is not None and first.get("sem_count", 0) < wanted
    if exact_keyword or exact_semantic:
        rows = _run(backend, query, parsed, tenant_id, exact_keyword=exact_keyword, exact_semantic=exact_semantic or small,
                    tenant_chunks=chunks)
    return [_hit(query, row) for row in rows]


def dimension(backend: PostgresBackend, query: RAGQuery) -> int | None:
    """The query vector's dimension where pgvector can rank it (None: plain SQL, or no vector)."""
    if query.vector is None or not backend.has_pgvector():
        return None
    return len(query.vector)


def vector_params(query: RAGQuery) -> dict[str, Any]:
    """The query vector as the statements' parameters (array, dimension, pgvector's text form)."""
    if query.vector is None:
        return {}
    return {"vec": list(query.vector), "dim": len(query.vector), "vec_text": "[" + ",".join(map(repr, query.vector)) + "]"}


def where(query: RAGQuery, parsed: q.ParsedQuery | None = None) -> tuple[str, dict[str, Any]]:
    """The query's reader's access test, metadata filters and phrase / -word refinements (``parsed``: its
    text, parsed already) as SQL on alias ``c``, with named parameters. Every leg of every plan (and
    the graph's) applies it, so it is THE place a reader's access list enters a search."""
    access, access_params = q.access_sql(query.reader)
    filters, filter_params = q.filter_sql(query.filters)
    refinements, refinement_params = q.keyword_match_sql(parsed or q.parse_query(query.text))
    filters_named, named = _name_params(filters, filter_params, "flt")
    refinements_named, named_refinements = _name_params(refinements, refinement_params, "ref")
    return access + filters_named + refinements_named, {**access_params, **named, **named_refinements}


def chunk_from_row(namespace: str, row: Sequence[Any]) -> RAGChunk:
    """A chunk from the columns of ``sql.CHUNK_COLUMNS`` (no vector: vectors stay in the datastore)."""
    chunk_id, document_id, text, title, uri, metadata, start, end = row
    if isinstance(metadata, str):
        metadata = json.loads(metadata)  # Django's psycopg loader leaves jsonb as text
    return RAGChunk(chunk_id, document_id, namespace, text, title or None, uri or None, metadata or {}, start_char=start, end_char=end)


def _tenant_chunks(backend: PostgresBackend, query: RAGQuery, tenant_id: int) -> int:
    """How many chunks the tenant holds (its statistics row counts every chunk, indexed or not, and
    changes in the transaction that changes the chunks: one key lookup, none when the request
    resolved the namespace with its size)."""
    if query.resolved is not None:
        return query.resolved.chunks
    with connections[backend.using].cursor() as cursor:
        cursor.execute("SELECT chunk_count FROM knowledge_corpusstat WHERE tenant_id = %s", [tenant_id])
        row = cursor.fetchone()
    return int(row[0]) if row else 0


def _few_candidates(backend: PostgresBackend, query: RAGQuery, parsed: q.ParsedQuery, tenant_id: int) -> bool:
    """Whether the query's filters leave at most ``exact_max_chunks`` of the tenant's chunks with
    the query's model. Counts at most one row past the bound: cheap when the filters keep many
    (it stops early), and when they keep few the metadata and text GIN indexes find them."""
    if backend.exact_max_chunks == 0:
        return False
    clauses, params = where(query, parsed)
    params.update(tenant=tenant_id, model=query.embedding_model or "", cap=backend.exact_max_chunks + 1)
    with connections[backend.using].cursor() as cursor:
        cursor.execute(
            f"SELECT count(*) FROM (SELECT 1 FROM knowledge_chunk c WHERE c.tenant_id = %(tenant)s "
            f"AND c.embedding_model = %(model)s {clauses} LIMIT %(cap)s) candidates",
            params,
        )
        return int(cursor.fetchone()[0]) <= backend.exact_max_chunks


def _postings_per_term(backend: PostgresBackend, query: RAGQuery) -> int:
    """Postings keyword search reads per query term. Never fewer than results wanted: then an
    unfiltered page can only be short when fewer chunks match at all. Semantic search reads the
    keyword leg only as its safety net (its best page, not its exact order), so fewer."""
    if query.mode is SearchMode.SEMANTIC:
        return max(min(backend.postings_per_term, q.NET_POSTINGS_PER_TERM), query.limit)
    return max(backend.postings_per_term, query.limit, backend.hybrid_depth if query.mode is SearchMode.HYBRID else 0)


def _run(backend: PostgresBackend, query: RAGQuery, parsed: q.ParsedQuery, tenant_id: int, *, exact_keyword: bool = False,
         exact_semantic: bool = False, tenant_chunks: int = 0) -> list[dict[str, Any]]:
    """The rows of one search statement; the HNSW path's settings travel with it, in the same round trip.
    ``tenant_chunks`` (the tenant's size) sets the ANN path's ``hnsw.ef_search`` (``sql.hnsw_ef_search``)."""
    dim = dimension(backend, query)
    params: dict[str, Any] = {
        "tenant": tenant_id, "limit": query.limit, "depth": max(backend.hybrid_depth, query.limit),
        "min_score": query.min_score, "rrf_k": query.rrf_k, "model": query.embedding_model or "",
        "fusion_weight": query.fusion_weight,
        "kw_text": parsed.positive, "bm25_k1": backend.k1, "bm25_b": backend.b,
        "per_term": _postings_per_term(backend, query), **vector_params(query),
    }
    # Named and positional parameters cannot mix: the filter values are inlined as named ones.
    # Phrases and -words refine every leg: a hit never contains an excluded word.
    clauses, extra = where(query, parsed)
    params.update(extra)
    if query.mode is SearchMode.KEYWORD:
        statement = q.keyword_search_sql(clauses, exact=exact_keyword)
    elif query.mode is SearchMode.SEMANTIC:
        statement = q.semantic_search_sql(clauses, dim, exact=exact_semantic)
    else:
        statement = q.hybrid_search_sql(clauses, dim, query.rerank, exact_keyword=exact_keyword, exact_semantic=exact_semantic,
                                        fusion=query.fusion.value)
    ann = dim is not None and not exact_semantic
    settings = []
    if query.mode is not SearchMode.SEMANTIC:
        # The keyword leg's hash aggregate over a million chunks' postings spilled to disk at the default
        # work_mem (sql.SEARCH_WORK_MEM); local to this search, like the HNSW settings.
        settings.append("set_config('work_mem', %(work_mem)s, true)")
        params["work_mem"] = q.SEARCH_WORK_MEM
    if ann:
        # The walk's list grows with the tenant (recall falls otherwise: sql.hnsw_ef_search) unless the backend
        # fixes it, and must be well above the rows wanted (limit 100 at ef 100: -0.005 nDCG).
        wanted = params["depth"] if query.mode is SearchMode.HYBRID else query.limit
        ef = backend.ef_search if backend.ef_search is not None else q.hnsw_ef_search(tenant_chunks)
        params["ef_search"] = str(min(q.EF_SEARCH_MAX, max(ef, 2 * wanted)))
        settings.append(_HNSW_SETTINGS)
    if settings:
        # One round trip: Django's client-side binding cursor sends these statements as one query, which
        # PostgreSQL runs as one transaction (outside an atomic block too), so the settings, local to
        # it, reach the search and end with it.
        statement = f"SELECT {', '.join(settings)}; {statement}"
    with connections[backend.using].cursor() as cursor:
        cursor.execute(statement, params)
        if settings:
            cursor.nextset()  # past the settings' row to the search's rows
        names = [col.name for col in cursor.description]
        return [dict(zip(names, row)) for row in cursor.fetchall()]


_CHUNK_KEYS = ("chunk_id", "external_id", "text", "title", "uri", "metadata", "start_char", "end_char")  # sql.CHUNK_COLUMNS' names
_HNSW_SETTINGS = "set_config('hnsw.ef_search', %(ef_search)s, true), set_config('hnsw.iterative_scan', 'relaxed_order', true)"


def _hit(query: RAGQuery, row: dict[str, Any]) -> RAGHit:
    chunk = chunk_from_row(query.namespace, [row[k] for k in _CHUNK_KEYS])
    sim = row.get("sim")
    if query.mode is not SearchMode.HYBRID:
        score = row["score"]
    else:
        score = row["sim"] if query.rerank else (row["fused"] if query.fusion is Fusion.SCORE else row["rrf"])
    by_score = query.mode is SearchMode.HYBRID and query.fusion is Fusion.SCORE
    return RAGHit(
        chunk, float(score),
        rrf_score=float(row["rrf"]) if row.get("rrf") is not None else None,
        rrf_rank=row.get("rrf_rank"),
        semantic_similarity=float(sim) if sim is not None else None,
        keyword_score=float(row["keyword_score"]) if row.get("keyword_score") is not None else None,
        keyword_norm=float(row["kw_norm"]) if by_score else None,
        semantic_norm=float(row["sem_norm"]) if by_score else None,
    )


def _name_params(statement: str, params: list[object], prefix: str) -> tuple[str, dict[str, object]]:
    """``statement``'s ``%s`` placeholders as named ones (``%(<prefix><n>)s``), with their values."""
    named: dict[str, object] = {}
    parts = statement.split("%s")
    out = parts[0]
    for index, part in enumerate(parts[1:]):
        key = f"{prefix}{index}"
        named[key] = params[index]
        out += f"%({key})s" + part
    return out, named
