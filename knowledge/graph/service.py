"""The knowledge graph's reads, a service over the RAG API: hybrid search with the graph leg fused in,
triplets, neighbours and pictures (``knowledge.rag.hooks.GraphReads``).

``RAGService`` validates the request and embeds the query, then hands it here with its backend; this
module runs the backend's own hybrid plan and the graph's SQL (``knowledge.graph.search``) on the
backend's database. ``QUARRY_GRAPH_READS`` names ``PostgresGraphReads``; ``knowledge.rag.factory``
builds it, so ``knowledge.rag`` never imports the graph.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from asgiref.sync import sync_to_async
from django.db import connections, transaction

from knowledge.graph import search as graph_sql
from knowledge.graph.search import GraphParams
from knowledge.rag.backends.postgres import plan
from knowledge.rag.backends.postgres import sql as q
from knowledge.rag.backends.postgres.facade import PostgresBackend
from knowledge.rag.backends.postgres.namespaces import find_tenant_id
from knowledge.rag.graph_types import GraphLeg, Neighborhood, Picture, Triplet
from knowledge.rag.types import Fusion, GraphSearchResult, RAGHit, RAGQuery, Reader


class PostgresGraphReads:
    """Graph reads over ``PostgresBackend`` (the tables its hook, ``GraphIndexHook``, keeps).

    The graph leg's parameters are the backend's ``graph`` option (``GraphParams``' fields), so one
    backend setting tunes a deployment's retrieval as a whole.
    """

    def serves(self, backend: object) -> bool:
        """Whether ``backend`` keeps a knowledge graph these reads can use."""
        return isinstance(backend, PostgresBackend)

    async def search(self, backend: PostgresBackend, query: RAGQuery) -> GraphSearchResult:
        """Hybrid search (fused as ``query.fusion`` says) with the graph leg's best candidates placed in it."""
        return await sync_to_async(lambda: graph_search(backend, query, _tenant_id(backend, query)), thread_sensitive=True)()

    async def triplets(self, backend: PostgresBackend, query: RAGQuery) -> list[Triplet]:
        """Relations relevant to ``query.text`` (at most ``query.limit``), each with the chunk that states it."""
        return await sync_to_async(lambda: graph_triplets(backend, query, _tenant_id(backend, query)), thread_sensitive=True)()

    async def neighbors(self, backend: PostgresBackend, namespace: str, entity: str, *, limit: int,
                        reader: Reader | None = None) -> Neighborhood:
        """The entity called ``entity`` (or whose name starts so), the chunks about it, and its neighbours
        (``reader``: as far as chunks they may read tell)."""
        return await sync_to_async(self._neighbors, thread_sensitive=True)(backend, namespace, entity, limit, reader)

    def _neighbors(self, backend: PostgresBackend, namespace: str, entity: str, limit: int, reader: Reader | None) -> Neighborhood:
        return graph_neighbors(backend, find_tenant_id(backend.using, namespace), entity, limit, reader=reader)

    async def picture(self, backend: PostgresBackend, namespace: str, chunk_ids: Sequence[str], *, expand: bool = False,
                      reader: Reader | None = None) -> Picture:
        """How these chunks connect through entities (``expand``: and to other documents' chunks; ``reader``:
        only chunks they may read)."""
        return await sync_to_async(self._picture, thread_sensitive=True)(backend, namespace, chunk_ids, expand, reader)

    def _picture(self, backend: PostgresBackend, namespace: str, chunk_ids: Sequence[str], expand: bool, reader: Reader | None) -> Picture:
        return graph_picture(backend, find_tenant_id(backend.using, namespace), chunk_ids, expand, reader=reader)


def _tenant_id(backend: PostgresBackend, query: RAGQuery) -> int | None:
    """The query's tenant: as the request resolved it (no round trip), else looked up by slug."""
    return query.resolved.tenant_id if query.resolved is not None else find_tenant_id(backend.using, query.namespace)


def params_of(backend: PostgresBackend) -> GraphParams:
    """The graph leg's parameters of ``backend`` (its ``graph`` option: ``GraphParams`` or its fields)."""
    return backend.graph if isinstance(backend.graph, GraphParams) else GraphParams(**dict(backend.graph))


def graph_search(backend: PostgresBackend, query: RAGQuery, tenant_id: int | None) -> GraphSearchResult:
    """Hybrid search (fused as ``query.fusion`` says) with the graph leg's best candidates placed in it."""
    if tenant_id is None:
        return GraphSearchResult([], GraphLeg())
    # The hybrid list as deep as the graph's fusion reads it (its RRF scores down to rank 100 are the
    # agreement evidence, see GraphParams), unfiltered by score: fusion decides the page.
    tuned = params_of(backend)
    depth = min(100, max(query.limit, tuned.protect, tuned.seeds, tuned.hybrid_depth))
    hybrid = plan.search(backend, dataclasses.replace(query, graph=False, limit=depth, min_score=None), tenant_id)
    clauses, params = plan.where(query)
    dimension = plan.dimension(backend, query)
    with transaction.atomic(using=backend.using), connections[backend.using].cursor() as cursor:
        leg = graph_sql.graph_leg(
            cursor, tenant_id=tenant_id, text=query.text, seeds=[h.chunk.chunk_id for h in hybrid], params=tuned,
            where=clauses, where_params=params, vector=query.vector, model=query.embedding_model or "", dimension=dimension,
            readable=_readable(query.reader),
        )
        known = {h.chunk.chunk_id: h for h in hybrid}
        by_rrf = query.fusion is Fusion.RRF
        fused = graph_sql.fuse(
            [(h.chunk.chunk_id, float((h.rrf_score if by_rrf else h.score) or 0.0)) for h in hybrid], leg.candidates, tuned,
            rrf_scores=None if by_rrf else {h.chunk.chunk_id: float(h.rrf_score or 0.0) for h in hybrid},
        )
        missing = [cid for cid, _, found in fused if found is not None and cid not in known]
        extra = _rows_by_id(cursor, tenant_id, missing, query, dimension) if missing else {}
    hits: list[RAGHit] = []
    for cid, score, found in fused:
        if query.min_score is not None and score < query.min_score:
            continue
        base = known.get(cid) or extra.get(cid)
        if base is None:
            continue  # a candidate whose row went away meanwhile
        # Under RRF the page's score is its RRF score and rank; under score fusion a hit keeps its
        # own RRF score and rank (as plain hybrid hits do), and one only the graph found has none.
        rrf = {"rrf_score": score, "rrf_rank": len(hits) + 1} if by_rrf else {}
        hits.append(dataclasses.replace(
            base, score=score, **rrf, graph_score=found.score if found else None, graph_path=found.path if found else None,
        ))
        if len(hits) == query.limit:
            break
    return GraphSearchResult(hits, leg)


def _rows_by_id(cursor: Any, tenant_id: int, chunk_ids: list[str], query: RAGQuery, dimension: int | None) -> dict[str, RAGHit]:
    """Hits for chunks only the graph leg found (no keyword score; their cosine similarity when there is a vector)."""
    access, access_params = q.access_sql(query.reader)
    params: dict[str, Any] = {"tenant": tenant_id, "ids": chunk_ids, "model": query.embedding_model or "", **plan.vector_params(query),
                              **access_params}
    similarity = graph_sql.similarity_sql(dimension, query.vector is not None) if query.vector is not None else "NULL::float8"
    cursor.execute(
        f"SELECT {q.CHUNK_COLUMNS}, {similarity} AS sim FROM knowledge_chunk c JOIN knowledge_document d ON d.id = c.document_id "
        f"WHERE c.tenant_id = %(tenant)s AND c.chunk_id = ANY(%(ids)s) {access}",
        params,
    )
    out = {}
    for row in cursor.fetchall():
        chunk = plan.chunk_from_row(query.namespace, row[:8])
        out[chunk.chunk_id] = RAGHit(chunk, 0.0, semantic_similarity=float(row[8]) if row[8] is not None else None)
    return out


def graph_triplets(backend: PostgresBackend, query: RAGQuery, tenant_id: int | None) -> list[Triplet]:
    """Relations relevant to ``query.text`` (at most ``query.limit``), each with the chunk that states it."""
    if tenant_id is None:
        return []
    tuned = params_of(backend)
    seeds = plan.search(backend, dataclasses.replace(query, graph=False, limit=tuned.seeds, min_score=None), tenant_id)
    clauses, params = plan.where(query)
    with transaction.atomic(using=backend.using), connections[backend.using].cursor() as cursor:
        return graph_sql.graph_triplets(
            cursor, tenant_id=tenant_id, text=query.text, seeds=[h.chunk.chunk_id for h in seeds], limit=query.limit,
            where=clauses, where_params=params, params=tuned, readable=_readable(query.reader),
        )


def graph_neighbors(backend: PostgresBackend, tenant_id: int | None, entity: str, limit: int, *, reader: Reader | None = None) -> Neighborhood:
    """The entity called ``entity`` (or whose name starts so), the chunks about it, and its neighbours."""
    if tenant_id is None:
        return Neighborhood(None)
    with transaction.atomic(using=backend.using), connections[backend.using].cursor() as cursor:
        return graph_sql.graph_neighbors(cursor, tenant_id=tenant_id, name=entity, limit=limit, readable=_readable(reader))


def graph_picture(backend: PostgresBackend, tenant_id: int | None, chunk_ids: Sequence[str], expand: bool, *,
                  reader: Reader | None = None) -> Picture:
    """How these chunks connect through entities (``expand``: and to other documents' chunks)."""
    if tenant_id is None:
        return Picture()
    with transaction.atomic(using=backend.using), connections[backend.using].cursor() as cursor:
        return graph_sql.graph_picture(cursor, tenant_id=tenant_id, chunk_ids=chunk_ids, expand=expand, readable=_readable(reader))


def _readable(reader: Reader | None) -> list[str] | None:
    """The reader's principals for the graph's SQL (None: trusted code, no access test)."""
    return None if reader is None else reader.principals
