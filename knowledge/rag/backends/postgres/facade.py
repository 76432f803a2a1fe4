"""``PostgresBackend``: the seed's six methods over the Django models, and the optional capabilities
``RAGService`` looks for (audited whole-document writes, stored-vector reuse, the embedding cache,
the namespace's resolution, re-ranking). Each method finds the tenant and hands the work to the module
that answers it: ``writes``, ``plan`` (search). The graph's reads are ``knowledge.graph.service``'s, over
this backend; its writes are the ``index_hook``'s, inside this backend's transactions.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from asgiref.sync import sync_to_async
from django.db import connections, transaction

from common import replicas
from knowledge.rag import factory
from knowledge.rag.backends.chunks import documents_from_chunks
from knowledge.rag.backends.postgres import plan, writes
from knowledge.rag.backends.postgres import sql as q
from knowledge.rag.backends.postgres.bm25 import BM25_B, BM25_K1
from knowledge.rag.backends.postgres.namespaces import find_tenant_id, resolve
from knowledge.rag.hooks import ChunkIndexHook
from knowledge.rag.types import PreparedDocument, RAGChunk, RAGHit, RAGQuery, Reader, ResolvedNamespace, Stored, Trigger, Vector

# Ingestions of up to this many chunks index them in their own transaction; larger ones
# leave it to the indexer (``maintenance.index_backlog``). One editor upload stays well under it.
INLINE_INDEX_MAX_CHUNKS = 500
# Chunks per indexer transaction: long enough to amortize, short enough to hold few locks.
INDEX_BATCH_CHUNKS = 2000
# Tenants of up to this many chunks are searched by exact cosine instead of the shared HNSW index.
# Exact cost grows with the tenant (a per-row cast of each float8[] to a vector): bench/exact_search.py
# on this 2-core machine under load measured p50 31 / 56 / 113 / 200 ms at 1k / 2k / 5k / 10k chunks
# against 9-12 ms for HNSW. 2,000 covers a typical small tenant (issue 22's 1,890-chunk corpus) for a
# few times HNSW's latency; past it, the ANN index wins and its health is watched (index_health).
EXACT_MAX_CHUNKS = 2000


class PostgresBackend:
    """Chunks in ``knowledge_chunk``; namespaces are tenant slugs.

    Reads (``search``, ``fetch``) of a namespace without a tenant find nothing. Writes to one
    raise ``NamespaceNotFound``, unless ``create_namespaces``: then the first write creates it.
    Maintenance (the backlog, model moves, languages, statistics, graph rebuilds) is in
    ``maintenance``, as functions of a backend.
    """

    supports_rerank = True
    # Search, fetch and the graph filter by ``RAGQuery.reader`` / ``fetch(..., reader=)`` in SQL (issue 34).
    supports_readers = True

    def __init__(
        self, using: str = "default", *, hybrid_depth: int = q.HYBRID_DEPTH, ef_search: int | None = None,
        postings_per_term: int = q.POSTINGS_PER_TERM, k1: float = BM25_K1, b: float = BM25_B,
        inline_index_max_chunks: int = INLINE_INDEX_MAX_CHUNKS,
        graph: Mapping[str, Any] | None = None, graph_llm_model: str | None = None, extract_graph: bool = True,
        exact_max_chunks: int = EXACT_MAX_CHUNKS, create_namespaces: bool = False,
        index_hook: ChunkIndexHook | None | Literal["default"] = factory.DEFAULT,
    ) -> None:
        """``inline_index_max_chunks``: larger ingestions go to the backlog (``Stored.backlog`` says so;
        the caller queues the indexer, ``maintenance.index_backlog``; search stays exact meanwhile).

        ``graph``: the graph leg's parameters (``knowledge.graph.search.GraphParams``' fields, or one),
        kept for the graph's reads (``knowledge.graph.service``), which run on this backend. ``index_hook``: what keeps
        the knowledge graph in step with the chunks inside every write transaction (default: the one
        ``QUARRY_CHUNK_INDEX_HOOK`` names, built for ``using``; None: no graph). ``graph_llm_model``: the
        LLM extractor's model id handed to the default hook, whose cached triples extraction merges in
        (None: offline only; ``Stored.extracted`` tells the caller when the LLM pass may have work). ``extract_graph=False``: chunks get no graph (removals still
        take theirs out, so nothing names a chunk that is gone); ``bench/ingest.py`` measures with it.

        ``ef_search``: the HNSW walk's list (``hnsw.ef_search``) on the ANN path; None (the default) widens
        it with the tenant's size (``sql.hnsw_ef_search``). Never below twice the rows a search wants.

        ``exact_max_chunks``: a tenant with at most this many chunks gets exact cosine ranking (0: never,
        every tenant uses HNSW where pgvector is installed). Without pgvector every search is exact anyway.

        ``create_namespaces``: an ingest into a namespace without a tenant creates the tenant (slug and
        name the namespace), audited ``create_namespace``, in the ingest's transaction; a deletion there
        deletes nothing. For trusted application code (``rag.postgres`` sets it, as the seed's namespaces
        are any safe identity). The product's own backend (``QUARRY_RAG_BACKEND``) leaves it off: every
        request resolves an existing tenant first, and a write to a tenant deleted meanwhile must fail,
        not bring it back."""
        if inline_index_max_chunks < 0:
            raise ValueError("inline_index_max_chunks must be 0 or more")
        if exact_max_chunks < 0:
            raise ValueError("exact_max_chunks must be 0 or more")
        self.exact_max_chunks = exact_max_chunks
        self.create_namespaces = create_namespaces
        self.graph: Mapping[str, Any] = graph if graph is not None else {}
        self.index_hook = (
            factory.chunk_index_hook(using=using, llm_model=graph_llm_model) if index_hook == factory.DEFAULT else index_hook
        )
        self.extract_graph = extract_graph
        self.using = using
        self.inline_index_max_chunks = inline_index_max_chunks
        self.hybrid_depth = hybrid_depth
        self.ef_search = ef_search
        self.postings_per_term = postings_per_term
        self.k1 = float(k1)
        self.b = float(b)
        self._pgvector: bool | None = None
        self._readers: dict[str, PostgresBackend] = {}

    def _on(self, alias: str) -> PostgresBackend:
        """This backend reading through ``alias`` (a replica of its database: same schema, same extensions)."""
        if alias == self.using:
            return self
        reader = self._readers.get(alias)
        if reader is None:
            reader = copy.copy(self)
            reader.using, reader._readers = alias, {}
            self._readers[alias] = reader
        return reader

    def has_pgvector(self) -> bool:
        """Whether the database has pgvector and the chunks' halfvec column (migration 0022 adds it where the
        extension is installed), so vectors are read from ``embedding_half`` (asked once per backend)."""
        if self._pgvector is None:
            with connections[self.using].cursor() as cursor:
                cursor.execute(
                    "SELECT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'vector') AND EXISTS (SELECT 1 FROM pg_attribute "
                    "WHERE attrelid = 'knowledge_chunk'::regclass AND attname = %s AND NOT attisdropped)",
                    [q.HALF_COLUMN],
                )
                self._pgvector = bool(cursor.fetchone()[0])
        return self._pgvector

    def _find_tenant_id(self, namespace: str) -> int | None:
        return find_tenant_id(self.using, namespace)

    def _query_tenant_id(self, query: RAGQuery) -> int | None:
        """The query's tenant: as the request resolved it (no round trip), else looked up by slug."""
        return query.resolved.tenant_id if query.resolved is not None else self._find_tenant_id(query.namespace)

    # --- the seed's six methods ------------------------------------------------------------------

    async def start(self) -> None:
        return None

    async def close(self) -> None:
        return None

    async def replace(self, namespace: str, document_ids: Sequence[str], chunks: Sequence[RAGChunk]) -> None:
        """The seed's replacement: ``chunks`` become the documents' only chunks (see ``documents_from_chunks``
        for the document rows this stores); documents without chunks are deleted. One transaction, audited
        with no actor and trigger ``user``."""
        documents, emptied = documents_from_chunks(namespace, document_ids, chunks)
        replicas.note_write()
        await sync_to_async(self._replace_chunks, thread_sensitive=True)(namespace, documents, emptied)

    def _replace_chunks(self, namespace: str, documents: Sequence[PreparedDocument], emptied: Sequence[str]) -> None:
        with transaction.atomic(using=self.using):
            if documents:
                writes.replace(self, namespace, documents, None, "user")
            if emptied:
                writes.delete(self, namespace, emptied, None, "user")

    async def delete(self, namespace: str, document_ids: Sequence[str]) -> None:
        """The seed's deletion (audited with no actor and trigger ``user``)."""
        replicas.note_write()
        await sync_to_async(writes.delete, thread_sensitive=True)(self, namespace, list(document_ids), None, "user")

    async def fetch(self, namespace: str, chunk_ids: Sequence[str], *, reader: Reader | None = None) -> list[RAGChunk]:
        """The seed's fetch; with ``reader``, chunks it may not read are omitted as missing ones are."""
        return await sync_to_async(self._fetch, thread_sensitive=True)(namespace, chunk_ids, reader)

    def _fetch(self, namespace: str, chunk_ids: Sequence[str], reader: Reader | None = None) -> list[RAGChunk]:
        # A read that need not see the caller's own latest write: a replica's when the request has one.
        return replicas.replica_read(lambda alias: self._on(alias)._fetch_here(namespace, chunk_ids, reader),
                                     tenant=namespace, primary=self.using)

    def _fetch_here(self, namespace: str, chunk_ids: Sequence[str], reader: Reader | None = None) -> list[RAGChunk]:
        tenant_id = self._find_tenant_id(namespace)
        if tenant_id is None:
            return []  # an unknown namespace holds nothing (as search says)
        access, access_params = q.access_sql(reader)
        with connections[self.using].cursor() as cursor:
            # Projected like search: no vectors (they stay in the datastore), so a fetched chunk equals a hit's.
            cursor.execute(
                f"SELECT {q.CHUNK_COLUMNS} FROM knowledge_chunk c JOIN knowledge_document d ON d.id = c.document_id "
                f"WHERE c.tenant_id = %(tenant)s AND c.chunk_id = ANY(%(ids)s) {access}",
                {"tenant": tenant_id, "ids": list(chunk_ids), **access_params},
            )
            found = {row[0]: plan.chunk_from_row(namespace, row) for row in cursor.fetchall()}
        return [found[i] for i in dict.fromkeys(chunk_ids) if i in found]

    async def search(self, query: RAGQuery) -> list[RAGHit]:
        return await sync_to_async(self._search, thread_sensitive=True)(query)

    def _search(self, query: RAGQuery) -> list[RAGHit]:
        # On the request's replica when it has one (common.replicas: none after its own write or the tenant's
        # access change, none lagging).
        return replicas.replica_read(lambda alias: self._on(alias)._search_here(query), tenant=query.namespace, primary=self.using)

    def _search_here(self, query: RAGQuery) -> list[RAGHit]:
        tenant_id = self._query_tenant_id(query)
        if tenant_id is None:
            return []  # an unknown namespace holds nothing
        return plan.search(self, query, tenant_id)

    # --- audited whole-document writes (DocumentStore, SyncDocumentStore) ---------------------------

    async def replace_documents(
        self, namespace: str, documents: Sequence[PreparedDocument], *, actor: str | None, trigger: Trigger,
    ) -> Stored:
        return await sync_to_async(self.replace_documents_sync, thread_sensitive=True)(namespace, documents, actor=actor, trigger=trigger)

    def replace_documents_sync(
        self, namespace: str, documents: Sequence[PreparedDocument], *, actor: str | None, trigger: Trigger,
    ) -> Stored:
        """``replace_documents`` on the calling thread's connection (``SyncDocumentStore``): inside the
        caller's transaction on ``using`` it is part of it (its own is then a savepoint)."""
        # The caller reads its own write from the primary, and is pinned there (common.replicas).
        replicas.note_write()
        return writes.replace(self, namespace, documents, actor, trigger)

    async def delete_documents(self, namespace: str, document_ids: Sequence[str], *, actor: str | None, trigger: Trigger) -> int:
        replicas.note_write()
        return await sync_to_async(writes.delete, thread_sensitive=True)(self, namespace, document_ids, actor, trigger)

    # --- the namespace's resolution; vectors: stored ones to reuse, the cache of computed ones -------

    async def resolve_namespace(self, namespace: str) -> ResolvedNamespace | None:
        """The namespace's tenant, the model of its vectors and its size, in one statement (None: no such tenant).
        ``RAGService`` asks once and hands the answer back in every ``RAGQuery.resolved``."""
        return await sync_to_async(resolve, thread_sensitive=True)(self.using, namespace)

    async def known_embeddings(self, namespace: str, document_ids: Sequence[str], model_id: str) -> dict[tuple[str, str], Vector]:
        return await sync_to_async(self._known_embeddings, thread_sensitive=True)(namespace, document_ids, model_id)

    def _known_embeddings(self, namespace: str, document_ids: Sequence[str], model_id: str) -> dict[tuple[str, str], Vector]:
        tenant_id = self._find_tenant_id(namespace)
        if tenant_id is None:
            return {}  # a new namespace: nothing to reuse (the write decides whether it may exist)
        with transaction.atomic(using=self.using), connections[self.using].cursor() as cursor:
            writes.plan_for_keyed_writes(cursor)
            cursor.execute(
                "SELECT id FROM knowledge_document WHERE tenant_id = %s AND external_id = ANY(%s)", [tenant_id, list(document_ids)]
            )
            doc_pks = [row[0] for row in cursor.fetchall()]
            if not doc_pks:
                return {}  # all new: nothing to reuse
            # Two steps, so each uses its own index whatever the planner thinks of the tenant (see writes.OF_DOCUMENTS).
            cursor.execute(
                f"SELECT c.chunk_id, c.content_hash, {q.stored_vector_sql(self.has_pgvector())} FROM knowledge_chunk c "
                f"WHERE {writes.OF_DOCUMENTS} AND c.embedding_model = %s AND {q.has_vector_sql(self.has_pgvector())}",
                [tenant_id, doc_pks, model_id],
            )
            return {(chunk_id, digest): tuple(vector) for chunk_id, digest, vector in cursor.fetchall()}

    async def cached_embeddings(self, namespace: str, model_id: str, digests: Sequence[str]) -> dict[str, Vector]:
        """Vectors of ``model_id`` for these content hashes that a previous, unfinished run stored."""
        return await sync_to_async(self._cached_embeddings, thread_sensitive=True)(namespace, model_id, digests)

    def _cached_embeddings(self, namespace: str, model_id: str, digests: Sequence[str]) -> dict[str, Vector]:
        tenant_id = self._find_tenant_id(namespace) if digests else None
        if tenant_id is None:
            return {}
        with connections[self.using].cursor() as cursor:
            cursor.execute(
                "SELECT content_hash, embedding FROM knowledge_embeddingcache "
                "WHERE tenant_id = %s AND model_id = %s AND content_hash = ANY(%s)",
                [tenant_id, model_id, list(digests)],
            )
            return {digest: tuple(vector) for digest, vector in cursor.fetchall()}

    async def cache_embeddings(self, namespace: str, model_id: str, vectors: Mapping[str, Vector]) -> None:
        """Keep these freshly computed vectors (by content hash) until the chunks holding them land."""
        await sync_to_async(writes.cache_embeddings, thread_sensitive=True)(self.using, namespace, model_id, vectors)

    async def embedding_models(self, namespace: str, document_ids: Sequence[str]) -> set[str]:
        """The model ids of the vectors these documents' chunks hold (found through the documents' unique key)."""
        return await sync_to_async(self._embedding_models, thread_sensitive=True)(namespace, document_ids)

    def _embedding_models(self, namespace: str, document_ids: Sequence[str]) -> set[str]:
        with connections[self.using].cursor() as cursor:
            cursor.execute(
                f"SELECT DISTINCT c.embedding_model FROM accounts_tenant t "
                "JOIN knowledge_document d ON d.tenant_id = t.id AND d.external_id = ANY(%s) "
                "JOIN knowledge_chunk c ON c.document_id = d.id "
                f"WHERE t.slug = %s AND {q.has_vector_sql(self.has_pgvector())} AND c.embedding_model <> ''",
                [list(document_ids), namespace],
            )
            return {row[0] for row in cursor.fetchall()}
