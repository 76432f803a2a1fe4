"""The PostgreSQL backend, built on the Django models (storage comes from Django's settings).

Writes: one transaction per ``replace`` call. Each document row is upserted
first, which locks it, so concurrent re-ingestions of the same document queue
behind each other and every reader sees either the old chunks or the new ones,
never a mix. Term statistics (BM25's IDF and average length) change in the
same transaction as the chunks they describe.

Indexing: a chunk is searchable the moment its transaction commits, but its
postings and its HNSW entry can come later. A small ingestion (up to
``inline_index_max_chunks`` chunks, which is every upload an editor makes)
writes them in the same transaction. A larger one stores the chunks with
``indexed = false`` and leaves that work to ``index_backlog``, which the
workers run in the background: bulk loads then cost what storing costs, and
the index work runs in batches. Until a chunk is indexed, search scores it
exactly (BM25 from its tsvector, cosine from its vector) and merges it into
the same ranking, so results do not depend on how far the indexer has got.

Reads: one SQL statement per search (both legs and RRF included). A tenant of
at most ``exact_max_chunks`` chunks is ranked by exact cosine over its own rows
(found through its b-tree, no ANN), so its results never depend on the shared
HNSW index's state, which other tenants' churn degrades. Above it, with
pgvector, semantic ordering uses the HNSW index over ``embedding::vector(d)``
with iterative scans; a page that comes back short after filtering is
recomputed exactly, so filters never cost results.
"""

from __future__ import annotations

import dataclasses
import json
import struct
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from asgiref.sync import sync_to_async
from django.db import connections, transaction
from django.utils.module_loading import import_string
from psycopg.adapt import Dumper
from psycopg.pq import Format

from accounts.models import Tenant
from knowledge.graph import search as graph_sql
from knowledge.graph.llm import LlmSpec
from knowledge.graph.search import GraphParams
from knowledge.graph.store import GraphWriter, prepare_extraction
from knowledge.graph.types import GraphLeg, Neighborhood, Picture, Triplet
from knowledge.models import DEFAULT_SEARCH_CONFIG, search_config_name
from knowledge.rag.backends import postgres_sql as q
from knowledge.rag.backends.chunks import documents_from_chunks
from knowledge.rag.errors import BackendContractError, EmbeddingModelChanged, NamespaceNotFound
from knowledge.rag.types import (
    Fusion, GraphSearchResult, PreparedDocument, RAGChunk, RAGHit, RAGQuery, SearchMode, Trigger, Vector, embedding_input,
)


# The chunks of given documents (document primary keys, already known to be the tenant's).
# The tenant test is written so no index serves it: with per-tenant statistics still stale
# (a new tenant's first bulk load) the planner otherwise walks all of the tenant's chunks
# through a tenant-leading index on every request, instead of the document index.
_OF_DOCUMENTS = "(c.tenant_id + 0) = %s AND c.document_id = ANY(%s::bigint[])"



def _plan_for_keyed_writes(cursor: Any) -> None:
    """Set up a transaction whose statements all look rows up by key (document, chunk or backlog ids).

    Before a new table or tenant has statistics (autovacuum's first ANALYZE), the planner
    can estimate a 1,000-key lookup at thousands of rows and scan the whole table instead
    (255 ms a request on a fresh 20,000-chunk table, PostgreSQL 15). No sequential scan is
    right in these statements, and JIT-compiling them (on by default in PostgreSQL 15) only adds time.
    """
    cursor.execute("SET LOCAL enable_seqscan = off")
    cursor.execute("SET LOCAL jit = off")


def _vectors_of_documents(tenant_id: int, doc_pks: Sequence[int]) -> str:
    """The query ``ts_stat`` runs for these documents' chunks (it takes SQL text, so the
    integers are formatted in; they are ints we hold). ts_stat counts each lexeme's chunks
    in C, about three times faster than unnest and GROUP BY."""
    ids = ",".join(str(int(pk)) for pk in doc_pks)
    return (
        f"SELECT c.search_vector FROM knowledge_chunk c "
        f"WHERE (c.tenant_id + 0) = {int(tenant_id)} AND c.document_id = ANY('{{{ids}}}'::bigint[])"
    )


# Ingestions of up to this many chunks index them in their own transaction; larger ones
# leave it to the indexer (``index_backlog``). One editor upload stays well under it.
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

    The seed's six methods, plus Quarry's optional capabilities: audited whole-document
    writes (``replace_documents``, ``delete_documents``), ``known_embeddings``,
    ``embedding_models``, re-ranking, and the indexing backlog (``backlog``, ``index_backlog``).

    Reads (``search``, ``fetch``) of a namespace without a tenant find nothing. Writes to one
    raise ``NamespaceNotFound``, unless ``create_namespaces``: then the first write creates it.
    """

    supports_rerank = True

    def __init__(
        self, using: str = "default", *, hybrid_depth: int = q.HYBRID_DEPTH, ef_search: int = q.HNSW_EF_SEARCH,
        postings_per_term: int = q.POSTINGS_PER_TERM, k1: float = q.BM25_K1, b: float = q.BM25_B,
        inline_index_max_chunks: int = INLINE_INDEX_MAX_CHUNKS, on_backlog: Callable[[str], None] | str | None = None,
        graph: GraphParams | Mapping[str, Any] | None = None, graph_llm_model: str | None = None,
        on_graph_indexed: Callable[[str], None] | str | None = None, extract_graph: bool = True,
        exact_max_chunks: int = EXACT_MAX_CHUNKS, create_namespaces: bool = False,
    ) -> None:
        """``inline_index_max_chunks``: larger ingestions go to the backlog. ``on_backlog(namespace)``
        is called inside the transaction that left chunks un-indexed (schedule the indexer there,
        on commit); a dotted path names such a function (settings do, so that this layer never
        imports the services above it). Without it, the backlog waits for ``index_backlog``
        (search stays exact meanwhile).

        ``graph``: the graph leg's parameters (``GraphParams`` or its fields). ``graph_llm_model``:
        the LLM extractor's model id, whose cached triples extraction merges in (None: offline only);
        ``on_graph_indexed(namespace)`` is called in every transaction that extracted chunks (the
        LLM pass is scheduled there). ``extract_graph=False``: chunks get no graph (removals still
        take theirs out, so nothing names a chunk that is gone); ``bench/ingest.py`` measures with it.

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
        self.graph = graph if isinstance(graph, GraphParams) else GraphParams(**dict(graph or {}))
        self.graph_llm = LlmSpec(graph_llm_model) if graph_llm_model else None
        self.on_graph_indexed = on_graph_indexed
        self.extract_graph = extract_graph
        self.using = using
        self.inline_index_max_chunks = inline_index_max_chunks
        self.on_backlog = on_backlog
        self.hybrid_depth = hybrid_depth
        self.ef_search = ef_search
        self.postings_per_term = postings_per_term
        self.k1 = float(k1)
        self.b = float(b)
        self._pgvector: bool | None = None

    async def start(self) -> None:
        return None

    async def close(self) -> None:
        return None

    # --- helpers ---------------------------------------------------------------

    def _tenant_id(self, namespace: str) -> int:
        tenant_id = self._find_tenant_id(namespace)
        if tenant_id is None:
            raise NamespaceNotFound(f"namespace {namespace!r}: no tenant with that slug")
        return tenant_id

    def _find_tenant_id(self, namespace: str) -> int | None:
        """The tenant of the namespace, or None: reads of a namespace that does not exist find nothing."""
        return Tenant.objects.using(self.using).filter(slug=namespace).values_list("id", flat=True).first()

    def _written_tenant_id(self, cursor: Any, namespace: str, actor: str | None, trigger: Trigger) -> int:
        """The tenant an ingest writes into; with ``create_namespaces``, created (and audited) when missing.

        Runs inside the ingest's transaction, so an ingest that fails leaves no tenant behind. Two first
        ingests into one new namespace race on the slug's unique index: the second waits for the first
        to commit, and ``get_or_create`` then finds its row (inside a savepoint, so the ingest goes on).
        """
        if not self.create_namespaces:
            return self._tenant_id(namespace)
        # The ORM, not accounts.services.tenant_create (a layer above this one), with the same row:
        # name = slug. The namespace already matches the slug's pattern (limits.NAMESPACE_RE).
        tenant, created = Tenant.objects.using(self.using).get_or_create(slug=namespace, defaults={"name": namespace})
        if created:
            self._audit(cursor, tenant.pk, actor, trigger, "create_namespace", [], 0)
        return tenant.pk

    def has_pgvector(self) -> bool:
        if self._pgvector is None:
            with connections[self.using].cursor() as cursor:
                cursor.execute("SELECT 1 FROM pg_extension WHERE extname = 'vector'")
                self._pgvector = cursor.fetchone() is not None
        return self._pgvector

    # --- writes ----------------------------------------------------------------

    async def replace(self, namespace: str, document_ids: Sequence[str], chunks: Sequence[RAGChunk]) -> None:
        """The seed's replacement: ``chunks`` become the documents' only chunks (see ``documents_from_chunks``
        for the document rows this stores); documents without chunks are deleted. One transaction, audited
        with no actor and trigger ``user``."""
        documents, emptied = documents_from_chunks(namespace, document_ids, chunks)
        await sync_to_async(self._replace_chunks, thread_sensitive=True)(namespace, documents, emptied)

    def _replace_chunks(self, namespace: str, documents: Sequence[PreparedDocument], emptied: Sequence[str]) -> None:
        with transaction.atomic(using=self.using):
            if documents:
                self._replace(namespace, documents, None, "user")
            if emptied:
                self._delete(namespace, emptied, None, "user")

    async def delete(self, namespace: str, document_ids: Sequence[str]) -> None:
        """The seed's deletion (audited with no actor and trigger ``user``)."""
        await sync_to_async(self._delete, thread_sensitive=True)(namespace, list(document_ids), None, "user")

    async def replace_documents(self, namespace: str, documents: Sequence[PreparedDocument], *, actor: str | None, trigger: Trigger) -> int:
        return await sync_to_async(self._replace, thread_sensitive=True)(namespace, documents, actor, trigger)

    def _replace(self, namespace: str, documents: Sequence[PreparedDocument], actor: str | None, trigger: Trigger) -> int:
        # A fixed lock order (by id) keeps two multi-document ingests from deadlocking.
        ordered = sorted(documents, key=lambda p: p.document.id)
        total = sum(len(p.chunks) for p in ordered)
        inline = total <= self.inline_index_max_chunks
        with transaction.atomic(using=self.using), connections[self.using].cursor() as cursor:
            tenant_id = self._written_tenant_id(cursor, namespace, actor, trigger)
            _plan_for_keyed_writes(cursor)
            config = self._share_search_config(cursor, tenant_id)
            self._claim_embedding_model(cursor, namespace, tenant_id, ordered)
            doc_pks = self._upsert_documents(cursor, tenant_id, ordered)
            pks = list(doc_pks.values())
            old_chunks = self._stats_remove(cursor, tenant_id, pks)
            cursor.execute(f"DELETE FROM knowledge_chunk c WHERE {_OF_DOCUMENTS}", [tenant_id, pks])
            self._copy_chunks(cursor, tenant_id, ordered, doc_pks, indexed=inline, config=config)
            prepared = None
            if inline and self.extract_graph:
                # Extraction runs in a thread while the statistics, postings and HNSW entries are written.
                cursor.execute(f"SELECT c.id FROM knowledge_chunk c WHERE {_OF_DOCUMENTS} ORDER BY c.id", [tenant_id, pks])
                prepared = prepare_extraction(cursor, tenant_id, [row[0] for row in cursor.fetchall()], using=self.using)
            # The chunks hold these vectors now: the cache entries of an earlier, interrupted run go.
            cursor.execute(
                "DELETE FROM knowledge_embeddingcache e USING knowledge_chunk c "
                f"WHERE {_OF_DOCUMENTS} AND e.tenant_id = %s AND e.model_id = c.embedding_model AND e.content_hash = c.content_hash",
                [tenant_id, pks, tenant_id],
            )
            self._stats_add(cursor, tenant_id, pks)
            if inline:
                self._post(cursor, tenant_id, _OF_DOCUMENTS, [tenant_id, pks])
            elif self.on_backlog is not None:
                if isinstance(self.on_backlog, str):
                    self.on_backlog = import_string(self.on_backlog)
                self.on_backlog(namespace)
            self._audit(cursor, tenant_id, actor, trigger, "ingest", [p.document.id for p in documents], total)
            # Last: the graph lock comes after every row lock this transaction takes (see knowledge.graph.store).
            graph = GraphWriter(cursor, tenant_id, using=self.using, llm=self.graph_llm)
            graph.remove(old_chunks)
            if prepared is not None:
                graph.index([row[0] for row in prepared.rows], prepared=prepared)
                self._graph_indexed(namespace)
            graph.finish()
        return total

    def _claim_embedding_model(self, cursor: Any, namespace: str, tenant_id: int, documents: Sequence[PreparedDocument]) -> None:
        """Check that the landing vectors are of the tenant's model (the first ones set it).

        The caller holds the tenant's statistics row FOR KEY SHARE, which ``reembed_switch`` takes
        FOR UPDATE: the model cannot change between this check and the commit. Raises
        ``EmbeddingModelChanged`` (nothing written) for vectors of any other model when the service
        follows the tenant's model (``PreparedDocument.namespace_model`` set): it embeds again.
        """
        written = {c.embedding_model for p in documents for c in p.chunks if c.embedding is not None and c.embedding_model}
        if not written:
            return
        cursor.execute("SELECT embedding_model FROM knowledge_corpusstat WHERE tenant_id = %s", [tenant_id])
        current = cursor.fetchone()[0]
        if not current and len(written) == 1:
            # RETURNING the value that won: of two first ingests with different models, one is refused.
            cursor.execute(
                "UPDATE knowledge_corpusstat SET embedding_model = CASE WHEN embedding_model = '' THEN %s ELSE embedding_model END "
                "WHERE tenant_id = %s RETURNING embedding_model",
                [next(iter(written)), tenant_id],
            )
            current = cursor.fetchone()[0]
        following = any(p.namespace_model is not None for p in documents)
        if written != {current} and following:
            raise EmbeddingModelChanged(namespace, current=current or "no model", written=", ".join(sorted(written - {current})))
        # A caller that chose its embedder (the seed's API) writes what it embedded; the tenant keeps
        # its model, and the editors' list marks such documents "re-index needed".

    async def namespace_embedding_model(self, namespace: str) -> str:
        """The model id of the namespace's vectors ("" before the first ones land)."""
        return await sync_to_async(self._namespace_embedding_model, thread_sensitive=True)(namespace)

    def _namespace_embedding_model(self, namespace: str) -> str:
        connection = connections[self.using]
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT s.embedding_model FROM accounts_tenant t JOIN knowledge_corpusstat s ON s.tenant_id = t.id WHERE t.slug = %s",
                [namespace],
            )
            row = cursor.fetchone()
        if not connection.in_atomic_block and connection.pool is not None:
            # A search embeds its query next (CPU: the longest step under load). A pooled connection
            # goes back meanwhile, as the API's views give theirs back before searching, so a slow
            # embedding model cannot exhaust the pool; the search's SQL takes one again.
            connection.close()
        return row[0] if row else ""

    # --- moving a namespace to another embedding model (knowledge.services.reembedding) ---------

    def reembed_pending(self, namespace: str, model_id: str, *, after: int = 0, limit: int = 256) -> list[tuple[int, str, str]]:
        """Up to ``limit`` chunks after chunk pk ``after`` (in pk order) that still need a vector of
        ``model_id``: ``(pk, content hash, text to embed)``. A chunk needs one unless it holds it or
        the embedding cache does (keyed by content hash, so a resumed run skips what it stored)."""
        tenant_id = self._tenant_id(namespace)
        with connections[self.using].cursor() as cursor:
            cursor.execute(
                """
                SELECT c.id, c.content_hash, c.title, c.text FROM knowledge_chunk c
                WHERE c.tenant_id = %(tenant)s AND c.id > %(after)s
                  AND (c.embedding IS NULL OR c.embedding_model <> %(model)s)
                  AND NOT EXISTS (SELECT 1 FROM knowledge_embeddingcache e
                                  WHERE e.tenant_id = %(tenant)s AND e.model_id = %(model)s AND e.content_hash = c.content_hash)
                ORDER BY c.id LIMIT %(limit)s
                """,
                {"tenant": tenant_id, "after": after, "model": model_id, "limit": limit},
            )
            return [(pk, digest, embedding_input(title, text)) for pk, digest, title, text in cursor.fetchall()]

    def chunk_count(self, namespace: str, *, after: int = 0) -> int:
        """How many chunks the namespace holds (with a pk above ``after``)."""
        tenant_id = self._tenant_id(namespace)
        with connections[self.using].cursor() as cursor:
            cursor.execute("SELECT count(*) FROM knowledge_chunk WHERE tenant_id = %s AND id > %s", [tenant_id, after])
            return int(cursor.fetchone()[0])

    def reembed_switch(self, namespace: str, model_id: str, embed: Callable[[list[str]], list[Vector]], *, batch: int = 256) -> int:
        """Give every chunk of the namespace its vector of ``model_id`` and make it the namespace's model,
        in one transaction; returns how many chunks changed.

        The statistics row is locked FOR UPDATE first: ingests and deletions of the tenant wait for the
        commit (other tenants do not), so no chunk lands in between. Chunks still without a staged
        vector (those that landed while the staging ran) are embedded here with ``embed(texts)``.
        Searches see every old vector until the commit and every new one after it (MVCC); the staged
        copies are dropped with it.
        """
        tenant_id = self._tenant_id(namespace)
        with transaction.atomic(using=self.using), connections[self.using].cursor() as cursor:
            self._lock_search_config(cursor, tenant_id)
            after = 0
            while pending := self.reembed_pending(namespace, model_id, after=after, limit=batch):
                texts = {digest: text for _, digest, text in pending}
                vectors = embed(list(texts.values()))
                self._cache_embeddings(namespace, model_id, dict(zip(texts, vectors, strict=True)))
                after = pending[-1][0]
            _plan_for_keyed_writes(cursor)
            cursor.execute(
                """
                UPDATE knowledge_chunk c SET embedding = e.embedding, embedding_model = e.model_id
                FROM knowledge_embeddingcache e
                WHERE c.tenant_id = %(tenant)s AND e.tenant_id = %(tenant)s AND e.model_id = %(model)s
                  AND e.content_hash = c.content_hash AND (c.embedding IS NULL OR c.embedding_model <> %(model)s)
                """,
                {"tenant": tenant_id, "model": model_id},
            )
            changed = cursor.rowcount
            cursor.execute(
                "SELECT count(*) FROM knowledge_chunk WHERE tenant_id = %s AND (embedding IS NULL OR embedding_model <> %s)",
                [tenant_id, model_id],
            )
            left = int(cursor.fetchone()[0])
            if left:  # cannot happen under the lock; never switch a tenant half-way
                raise BackendContractError(f"{left} chunks of {namespace!r} have no staged vector of {model_id}; nothing switched")
            cursor.execute(
                "UPDATE knowledge_document SET embedding_model = %s WHERE tenant_id = %s AND chunk_count > 0", [model_id, tenant_id]
            )
            cursor.execute("UPDATE knowledge_corpusstat SET embedding_model = %s WHERE tenant_id = %s", [model_id, tenant_id])
            cursor.execute("DELETE FROM knowledge_embeddingcache WHERE tenant_id = %s AND model_id = %s", [tenant_id, model_id])
        return changed

    def ensure_vector_index(self, dimension: int) -> bool:
        """Create the HNSW index of ``dimension`` unless it exists, where pgvector is installed (and the
        dimension within its 2,000 limit); returns whether the index is there. Outside a transaction it
        is built CONCURRENTLY, so other tenants' writes go on meanwhile."""
        if not self.has_pgvector() or not 1 <= dimension <= 2000:
            return False  # semantic search of that dimension stays exact, in plain SQL
        with connections[self.using].cursor() as cursor:
            cursor.execute("SELECT 1 FROM pg_class WHERE relname = %s AND relkind = 'i'", [q.hnsw_index_name(dimension)])
            if cursor.fetchone() is not None:
                return True
        sql = q.create_hnsw_index_sql(dimension)
        if not connections[self.using].in_atomic_block:
            sql = sql.replace("CREATE INDEX IF NOT EXISTS", "CREATE INDEX CONCURRENTLY IF NOT EXISTS", 1)
            with connections[self.using].cursor() as cursor:
                cursor.execute(sql)
            return True
        # Inside a caller's transaction: PostgreSQL builds no index on a table with deferred
        # constraint checks pending, so run them now; a savepoint keeps a failure from poisoning it.
        with transaction.atomic(using=self.using), connections[self.using].cursor() as cursor:
            cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
            cursor.execute(sql)
        return True

    def reembed_stage(self, namespace: str, model_id: str, vectors: Mapping[str, Vector]) -> None:
        """Stage vectors of ``model_id`` by content hash until ``reembed_switch`` (the embedding cache)."""
        self._cache_embeddings(namespace, model_id, vectors)

    def reembed_discard(self, namespace: str, model_id: str) -> int:
        """Drop the vectors of ``model_id`` staged for the namespace (a cancelled move); returns how many."""
        tenant_id = self._tenant_id(namespace)
        with connections[self.using].cursor() as cursor:
            cursor.execute("DELETE FROM knowledge_embeddingcache WHERE tenant_id = %s AND model_id = %s", [tenant_id, model_id])
            return cursor.rowcount

    def _graph_indexed(self, namespace: str) -> None:
        if self.on_graph_indexed is not None:
            if isinstance(self.on_graph_indexed, str):
                self.on_graph_indexed = import_string(self.on_graph_indexed)
            self.on_graph_indexed(namespace)

    def _share_search_config(self, cursor: Any, tenant_id: int) -> int:
        """The OID of the tenant's text search configuration, held (FOR KEY SHARE) until commit.

        Taken before anything else: a language change (``apply_search_language``) locks the row
        FOR UPDATE first, so it waits for ingests writing with the old configuration and they
        wait for it, and no chunk lands with a configuration other than the tenant's. Concurrent
        ingests do not block each other here (the statistics upsert later is compatible with it).
        """
        return self._locked_search_config(cursor, tenant_id, "KEY SHARE")

    def _locked_search_config(self, cursor: Any, tenant_id: int, mode: str) -> int:
        """Lock the tenant's statistics row ``FOR <mode>`` and return its configuration's OID.

        A tenant without the row gets it first, in the language it asked for (``SearchLanguage``),
        if any: a tenant that chose French before its first document starts in French."""
        cursor.execute(
            f"""
            INSERT INTO knowledge_corpusstat (tenant_id, chunk_count, token_count, search_config)
            SELECT %s, 0, 0, coalesce(
                (SELECT c.oid::regconfig FROM knowledge_searchlanguage l JOIN pg_ts_config c ON c.cfgname = 'quarry_' || l.language
                 WHERE l.tenant_id = %s LIMIT 1),
                '{DEFAULT_SEARCH_CONFIG}'::regconfig)
            ON CONFLICT (tenant_id) DO NOTHING
            """,
            [tenant_id, tenant_id],
        )
        cursor.execute(f"SELECT search_config::oid FROM knowledge_corpusstat WHERE tenant_id = %s FOR {mode}", [tenant_id])
        return int(cursor.fetchone()[0])

    def _upsert_documents(self, cursor: Any, tenant_id: int, documents: Sequence[PreparedDocument]) -> dict[str, int]:
        """Insert or update every document row in one statement; the upsert locks each row.

        Rows are taken in ``external_id`` order, the lock order every ingest uses.
        """
        columns: dict[str, list[object]] = {k: [] for k in ("ids", "titles", "uris", "texts", "metadata", "hashes", "counts", "models")}
        for prepared in documents:
            doc = prepared.document
            columns["ids"].append(doc.id)
            columns["titles"].append(doc.title or "")
            columns["uris"].append(doc.uri or "")
            columns["texts"].append(doc.text)
            columns["metadata"].append(json.dumps(dict(doc.metadata)))
            columns["hashes"].append(prepared.content_hash)
            columns["counts"].append(len(prepared.chunks))
            columns["models"].append(next((c.embedding_model for c in prepared.chunks if c.embedding_model), None) or "")
        cursor.execute(
            """
            INSERT INTO knowledge_document
                (tenant_id, external_id, title, uri, text, metadata, content_hash, source_file, source_name,
                 status, error, progress, chunk_count, embedding_model, version, created_at, updated_at)
            SELECT %s, d.external_id, d.title, d.uri, d.text, d.metadata::jsonb, d.content_hash, '', '',
                   'ready', '', 1, d.chunk_count, d.embedding_model, 1, now(), now()
            FROM unnest(%s::text[], %s::text[], %s::text[], %s::text[], %s::text[], %s::text[], %s::int[], %s::text[])
                 AS d(external_id, title, uri, text, metadata, content_hash, chunk_count, embedding_model)
            ORDER BY d.external_id
            ON CONFLICT (tenant_id, external_id) DO UPDATE SET
                title = EXCLUDED.title, uri = EXCLUDED.uri, text = EXCLUDED.text, metadata = EXCLUDED.metadata,
                content_hash = EXCLUDED.content_hash, status = 'ready', error = '', progress = 1,
                chunk_count = EXCLUDED.chunk_count, embedding_model = EXCLUDED.embedding_model,
                version = knowledge_document.version + 1, updated_at = now()
            RETURNING external_id, id
            """,
            [tenant_id, *columns.values()],
        )
        return dict(cursor.fetchall())

    def _copy_chunks(
        self, cursor: Any, tenant_id: int, documents: Sequence[PreparedDocument], doc_pks: dict[str, int], *, indexed: bool,
        config: int,
    ) -> None:
        """Insert the chunks; ``config`` is the OID of their text search configuration (regconfig's binary form)."""
        columns = ("tenant_id, document_id, chunk_id, ordinal, text, title, uri, metadata, start_char, end_char, "
                   "content_hash, embedding, embedding_model, indexed, search_config")
        raw = cursor.cursor  # the psycopg cursor under Django's wrapper: COPY is the fast path for bulk rows
        # Binary COPY, with vectors packed by numpy: formatting 384 floats as text took ~0.15 ms
        # a chunk (and psycopg's generic list dumper ~0.7 ms), most of the client's ingest time.
        raw.adapters.register_dumper(_PackedVector, _PackedVectorDumper)
        with raw.copy(f"COPY knowledge_chunk ({columns}) FROM STDIN (FORMAT BINARY)") as copy:
            copy.set_types(_COPY_TYPES)
            for prepared in documents:
                doc = prepared.document
                doc_pk, title, uri, metadata = doc_pks[doc.id], doc.title or "", doc.uri or "", dict(doc.metadata)
                for c in prepared.chunks:
                    copy.write_row((
                        tenant_id, doc_pk, c.chunk_id, c.ordinal, c.text, title, uri, metadata, c.start_char, c.end_char,
                        c.content_hash, None if c.embedding is None else _pack_vector(c.embedding), c.embedding_model or "", indexed,
                        config,
                    ))

    def _stats_add(self, cursor: Any, tenant_id: int, doc_pks: list[int]) -> None:
        """Add these documents' chunks to the term and corpus statistics (indexed or not: BM25 counts every chunk)."""
        # Sorted upserts: concurrent ingests lock term rows in the same order (no deadlock).
        cursor.execute(
            f"""
            WITH terms AS (
                SELECT word AS lexeme, ndoc AS df, ndoc AS tokens FROM ts_stat(%s)
            ), upsert AS (
                INSERT INTO knowledge_termstat (tenant_id, lexeme, df)
                SELECT %s, lexeme, df FROM terms ORDER BY lexeme
                ON CONFLICT (tenant_id, lexeme) DO UPDATE SET df = knowledge_termstat.df + EXCLUDED.df
            )
            INSERT INTO knowledge_corpusstat (tenant_id, chunk_count, token_count)
            SELECT %s, (SELECT count(*) FROM knowledge_chunk c WHERE {_OF_DOCUMENTS}),
                   coalesce((SELECT sum(tokens) FROM terms), 0)
            ON CONFLICT (tenant_id) DO UPDATE SET
                chunk_count = knowledge_corpusstat.chunk_count + EXCLUDED.chunk_count,
                token_count = knowledge_corpusstat.token_count + EXCLUDED.token_count
            """,
            [_vectors_of_documents(tenant_id, doc_pks), tenant_id, tenant_id, tenant_id, doc_pks],
        )

    def _post(self, cursor: Any, tenant_id: int, where: str, params: list[object]) -> None:
        """Write the postings of the chunks matching ``where`` (on alias ``c``; it names the tenant).

        The frequency counts a title occurrence ``TITLE_WEIGHT`` times; impact is normalized by the
        average length as it now stands.
        """
        cursor.execute(
            f"""
            INSERT INTO knowledge_posting (chunk_id, lexeme, tenant_id, tf, dl, impact)
            SELECT c.id, u.lexeme, c.tenant_id, x.tf, length(c.search_vector),
                   x.tf::float8 / (x.tf + {q.BM25_K1} * (1 - {q.BM25_B} + {q.BM25_B} * length(c.search_vector) / s.avgdl))
            FROM knowledge_chunk c
            CROSS JOIN (
                SELECT greatest(coalesce(token_count::float8 / nullif(chunk_count, 0), 1), 1) AS avgdl
                FROM knowledge_corpusstat WHERE tenant_id = %s
            ) s
            CROSS JOIN LATERAL unnest(c.search_vector) u
            CROSS JOIN LATERAL (SELECT {q.WEIGHTED_TF} AS tf) x
            WHERE {where}
            """,
            [tenant_id, *params],
        )

    def _stats_remove(self, cursor: Any, tenant_id: int, doc_pks: list[int]) -> list[int]:
        """Take these documents' chunks out of postings and statistics (before they are deleted);
        returns their primary keys."""
        # Lock the chunks first: an indexer working on them commits their postings
        # before we read which postings to delete, so none are left behind.
        cursor.execute(f"SELECT c.id FROM knowledge_chunk c WHERE {_OF_DOCUMENTS} ORDER BY c.id FOR UPDATE", [tenant_id, doc_pks])
        chunk_pks = [row[0] for row in cursor.fetchall()]
        if not chunk_pks:
            return []  # new documents: nothing to take out
        cursor.execute("DELETE FROM knowledge_posting WHERE chunk_id = ANY(%s)", [chunk_pks])
        cursor.execute(
            """
            WITH terms AS (
                SELECT word AS lexeme, ndoc AS df, ndoc AS tokens FROM ts_stat(%s)
            ), dec AS (
                UPDATE knowledge_termstat t SET df = t.df - terms.df
                FROM terms WHERE t.tenant_id = %s AND t.lexeme = terms.lexeme
            )
            UPDATE knowledge_corpusstat SET
                chunk_count = chunk_count - %s,
                token_count = token_count - coalesce((SELECT sum(tokens) FROM terms), 0)
            WHERE tenant_id = %s
            """,
            [_vectors_of_documents(tenant_id, doc_pks), tenant_id, len(chunk_pks), tenant_id],
        )
        cursor.execute("DELETE FROM knowledge_termstat WHERE tenant_id = %s AND df <= 0", [tenant_id])
        return chunk_pks

    def _audit(self, cursor: Any, tenant_id: int, actor: str | None, trigger: Trigger, action: str, document_ids: list[str], chunks: int) -> None:
        cursor.execute(
            "INSERT INTO knowledge_auditevent (tenant_id, actor, trigger, action, document_ids, chunk_count, at) "
            "VALUES (%s, %s, %s, %s, %s, %s, now())",
            [tenant_id, actor or "", trigger, action, document_ids, chunks],
        )

    def rebuild_statistics(self, namespace: str) -> None:
        """Recompute the namespace's BM25 statistics from its chunks (repair or after an upgrade)."""
        tenant_id = self._tenant_id(namespace)
        with transaction.atomic(using=self.using), connections[self.using].cursor() as cursor:
            self._lock_search_config(cursor, tenant_id)
            self._rebuild_keyword_index(cursor, tenant_id)
            GraphWriter(cursor, tenant_id, using=self.using, llm=self.graph_llm).rebuild()

    def _lock_search_config(self, cursor: Any, tenant_id: int) -> int:
        """Lock the tenant's statistics row FOR UPDATE: no ingest or deletion of the tenant runs
        until commit. Returns its text search configuration's OID."""
        return self._locked_search_config(cursor, tenant_id, "UPDATE")

    def _rebuild_keyword_index(self, cursor: Any, tenant_id: int) -> None:
        """Recompute the tenant's term statistics and postings from its tsvectors, and mark every
        chunk indexed (the caller holds the statistics row FOR UPDATE)."""
        cursor.execute("DELETE FROM knowledge_termstat WHERE tenant_id = %s", [tenant_id])
        cursor.execute("UPDATE knowledge_corpusstat SET chunk_count = 0, token_count = 0 WHERE tenant_id = %s", [tenant_id])
        cursor.execute("DELETE FROM knowledge_posting WHERE tenant_id = %s", [tenant_id])
        cursor.execute("SELECT DISTINCT document_id FROM knowledge_chunk WHERE tenant_id = %s", [tenant_id])
        pks = [row[0] for row in cursor.fetchall()]
        self._stats_add(cursor, tenant_id, pks)
        self._post(cursor, tenant_id, "c.tenant_id = %s", [tenant_id])
        cursor.execute("UPDATE knowledge_chunk SET indexed = true WHERE tenant_id = %s AND NOT indexed", [tenant_id])

    def search_config(self, namespace: str) -> str:
        """The name of the text search configuration the namespace's index and queries use now."""
        tenant_id = self._tenant_id(namespace)
        with connections[self.using].cursor() as cursor:
            cursor.execute(f"SELECT ({q.tenant_config_sql('%s')})::text", [tenant_id])
            return str(cursor.fetchone()[0]).rsplit(".", 1)[-1]

    def apply_search_language(self, namespace: str, language: str) -> bool:
        """Re-tokenize all of the namespace's chunks with ``language``'s configuration, in one transaction.

        The chunks' tsvectors, the term statistics, the postings and the configuration queries use
        change together at commit: until then every search sees the old index, complete, and after
        it the new one (MVCC), never a mix. Ingests and deletions of the tenant wait for the commit
        (they take the statistics row this locks first); other tenants are not touched. Returns
        False when the index already uses ``language``. The caller runs it in the background: it
        costs about what re-ingesting the tenant's chunks without embedding them costs.
        """
        config = search_config_name(language)
        tenant_id = self._tenant_id(namespace)
        with transaction.atomic(using=self.using), connections[self.using].cursor() as cursor:
            current = self._lock_search_config(cursor, tenant_id)
            cursor.execute("SELECT %s::regconfig::oid", [config])
            wanted = int(cursor.fetchone()[0])
            if current == wanted:
                return False
            _plan_for_keyed_writes(cursor)
            cursor.execute("UPDATE knowledge_chunk SET search_config = %s::oid::regconfig WHERE tenant_id = %s", [wanted, tenant_id])
            cursor.execute("UPDATE knowledge_corpusstat SET search_config = %s::oid::regconfig WHERE tenant_id = %s", [wanted, tenant_id])
            self._rebuild_keyword_index(cursor, tenant_id)
        return True

    def rebuild_graph(self, namespace: str, *, on_progress: Callable[[int, int], None] | None = None) -> int:
        """Recompute the namespace's knowledge graph from its indexed chunks, in one transaction;
        returns the chunks read. ``on_progress(done, total)`` after every batch."""
        tenant_id = self._tenant_id(namespace)
        with transaction.atomic(using=self.using), connections[self.using].cursor() as cursor:
            count = GraphWriter(cursor, tenant_id, using=self.using, llm=self.graph_llm).rebuild(on_progress=on_progress)
            if count:
                self._graph_indexed(namespace)
        return count

    # --- the indexing backlog --------------------------------------------------

    def backlog(self, namespace: str) -> int:
        """How many of the namespace's chunks still await postings and their HNSW entry."""
        tenant_id = self._tenant_id(namespace)
        with connections[self.using].cursor() as cursor:
            cursor.execute("SELECT count(*) FROM knowledge_chunk WHERE tenant_id = %s AND NOT indexed", [tenant_id])
            return int(cursor.fetchone()[0])

    def index_backlog(self, namespace: str, *, limit: int = INDEX_BATCH_CHUNKS) -> int:
        """Index up to ``limit`` of the namespace's backlog in one transaction; returns how many.

        Safe to run in any number of processes at once: each takes chunks no one else
        holds (``SKIP LOCKED``), and an ingestion replacing a chunk waits for its indexer.
        0 means the backlog was empty or every chunk in it was busy.
        """
        if limit < 1:
            raise ValueError("limit must be at least 1")
        tenant_id = self._tenant_id(namespace)
        with transaction.atomic(using=self.using), connections[self.using].cursor() as cursor:
            _plan_for_keyed_writes(cursor)
            cursor.execute(
                "SELECT id FROM knowledge_chunk WHERE tenant_id = %s AND NOT indexed ORDER BY id LIMIT %s FOR UPDATE SKIP LOCKED",
                [tenant_id, limit],
            )
            ids = [row[0] for row in cursor.fetchall()]
            if ids:
                # Extraction runs in a thread while the database writes postings and HNSW entries.
                prepared = prepare_extraction(cursor, tenant_id, ids, using=self.using) if self.extract_graph else None
                self._post(cursor, tenant_id, "c.id = ANY(%s)", [ids])  # ids of this tenant's, just locked
                cursor.execute("UPDATE knowledge_chunk SET indexed = true WHERE id = ANY(%s)", [ids])
                if self.extract_graph:
                    graph = GraphWriter(cursor, tenant_id, using=self.using, llm=self.graph_llm)
                    graph.index(ids, prepared=prepared)
                    graph.finish()
                    self._graph_indexed(namespace)
        return len(ids)

    async def delete_documents(self, namespace: str, document_ids: Sequence[str], *, actor: str | None, trigger: Trigger) -> int:
        return await sync_to_async(self._delete, thread_sensitive=True)(namespace, document_ids, actor, trigger)

    def _delete(self, namespace: str, document_ids: Sequence[str], actor: str | None, trigger: Trigger) -> int:
        found = self._find_tenant_id(namespace)
        if found is None and self.create_namespaces:
            return 0  # a namespace nothing was written to holds nothing to delete (and is not created for it)
        tenant_id = self._tenant_id(namespace)
        with transaction.atomic(using=self.using), connections[self.using].cursor() as cursor:
            _plan_for_keyed_writes(cursor)
            # First, as in an ingest: a language change holding it must not wait for our chunk locks.
            self._share_search_config(cursor, tenant_id)
            cursor.execute(
                "SELECT id, external_id FROM knowledge_document WHERE tenant_id = %s AND external_id = ANY(%s) "
                "ORDER BY external_id FOR UPDATE",
                [tenant_id, list(document_ids)],
            )
            rows = cursor.fetchall()
            pks = [r[0] for r in rows]
            old_chunks: list[int] = []
            if pks:
                old_chunks = self._stats_remove(cursor, tenant_id, pks)
                cursor.execute(f"DELETE FROM knowledge_chunk c WHERE {_OF_DOCUMENTS}", [tenant_id, pks])
                cursor.execute("DELETE FROM knowledge_document WHERE tenant_id = %s AND id = ANY(%s)", [tenant_id, pks])
            self._audit(cursor, tenant_id, actor, trigger, "delete", [r[1] for r in rows], len(old_chunks))
            if old_chunks:
                graph = GraphWriter(cursor, tenant_id, using=self.using, llm=self.graph_llm)
                graph.remove(old_chunks)
                graph.finish()
        return len(pks)

    # --- reads -----------------------------------------------------------------

    async def known_embeddings(self, namespace: str, document_ids: Sequence[str], model_id: str) -> dict[tuple[str, str], Vector]:
        return await sync_to_async(self._known_embeddings, thread_sensitive=True)(namespace, document_ids, model_id)

    def _known_embeddings(self, namespace: str, document_ids: Sequence[str], model_id: str) -> dict[tuple[str, str], Vector]:
        tenant_id = self._find_tenant_id(namespace)
        if tenant_id is None:
            return {}  # a new namespace: nothing to reuse (the write decides whether it may exist)
        with transaction.atomic(using=self.using), connections[self.using].cursor() as cursor:
            _plan_for_keyed_writes(cursor)
            cursor.execute(
                "SELECT id FROM knowledge_document WHERE tenant_id = %s AND external_id = ANY(%s)", [tenant_id, list(document_ids)]
            )
            doc_pks = [row[0] for row in cursor.fetchall()]
            if not doc_pks:
                return {}  # all new: nothing to reuse
            # Two steps, so each uses its own index whatever the planner thinks of the tenant (see _OF_DOCUMENTS).
            cursor.execute(
                f"SELECT c.chunk_id, c.content_hash, c.embedding FROM knowledge_chunk c "
                f"WHERE {_OF_DOCUMENTS} AND c.embedding_model = %s AND c.embedding IS NOT NULL",
                [tenant_id, doc_pks, model_id],
            )
            return {(chunk_id, digest): tuple(vector) for chunk_id, digest, vector in cursor.fetchall()}

    # --- the embedding cache: vectors stored as they are computed -----------------

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
        await sync_to_async(self._cache_embeddings, thread_sensitive=True)(namespace, model_id, vectors)

    def _cache_embeddings(self, namespace: str, model_id: str, vectors: Mapping[str, Vector]) -> None:
        tenant_id = self._find_tenant_id(namespace) if vectors else None
        if tenant_id is None:
            return  # nothing to keep, or a namespace its ingest has not created yet: no run to resume there
        digests = sorted(vectors)  # a fixed order: two runs upserting overlapping keys cannot deadlock
        # Its own transaction even inside an outer one: what is computed is kept whatever happens next.
        with transaction.atomic(using=self.using), connections[self.using].cursor() as cursor:
            cursor.execute(
                "INSERT INTO knowledge_embeddingcache (tenant_id, model_id, content_hash, embedding) "
                "SELECT %s, %s, d, string_to_array(v, ',')::double precision[] FROM unnest(%s::text[], %s::text[]) AS u(d, v) "
                "ON CONFLICT (tenant_id, model_id, content_hash) DO NOTHING",
                [tenant_id, model_id, digests, [",".join(map(repr, vectors[d])) for d in digests]],
            )

    async def embedding_models(self, namespace: str, document_ids: Sequence[str]) -> set[str]:
        """The model ids of the vectors these documents' chunks hold (found through the documents' unique key)."""
        return await sync_to_async(self._embedding_models, thread_sensitive=True)(namespace, document_ids)

    def _embedding_models(self, namespace: str, document_ids: Sequence[str]) -> set[str]:
        with connections[self.using].cursor() as cursor:
            cursor.execute(
                "SELECT DISTINCT c.embedding_model FROM accounts_tenant t "
                "JOIN knowledge_document d ON d.tenant_id = t.id AND d.external_id = ANY(%s) "
                "JOIN knowledge_chunk c ON c.document_id = d.id "
                "WHERE t.slug = %s AND c.embedding IS NOT NULL AND c.embedding_model <> ''",
                [list(document_ids), namespace],
            )
            return {row[0] for row in cursor.fetchall()}

    async def fetch(self, namespace: str, chunk_ids: Sequence[str]) -> list[RAGChunk]:
        return await sync_to_async(self._fetch, thread_sensitive=True)(namespace, chunk_ids)

    def _fetch(self, namespace: str, chunk_ids: Sequence[str]) -> list[RAGChunk]:
        tenant_id = self._find_tenant_id(namespace)
        if tenant_id is None:
            return []  # an unknown namespace holds nothing (as search says)
        with connections[self.using].cursor() as cursor:
            # Projected like search: no vectors (they stay in the datastore), so a fetched chunk equals a hit's.
            cursor.execute(
                f"SELECT {q.CHUNK_COLUMNS} FROM knowledge_chunk c JOIN knowledge_document d ON d.id = c.document_id "
                "WHERE c.tenant_id = %s AND c.chunk_id = ANY(%s)",
                [tenant_id, list(chunk_ids)],
            )
            found = {row[0]: self._chunk(namespace, row) for row in cursor.fetchall()}
        return [found[i] for i in dict.fromkeys(chunk_ids) if i in found]

    @staticmethod
    def _chunk(namespace: str, row: Sequence[Any]) -> RAGChunk:
        chunk_id, document_id, text, title, uri, metadata, start, end = row
        if isinstance(metadata, str):
            metadata = json.loads(metadata)  # Django's psycopg loader leaves jsonb as text
        return RAGChunk(chunk_id, document_id, namespace, text, title or None, uri or None, metadata or {}, start_char=start, end_char=end)

    async def search(self, query: RAGQuery) -> list[RAGHit]:
        return await sync_to_async(self._search, thread_sensitive=True)(query)

    def _search(self, query: RAGQuery) -> list[RAGHit]:
        if query.graph:
            return self._graph_search(query).hits
        tenant_id = self._find_tenant_id(query.namespace)
        if tenant_id is None:
            return []  # an unknown namespace holds nothing
        # A small tenant skips the ANN index altogether: exact costs it a few milliseconds, and its
        # ranking then cannot suffer from the shared index's state (deleted entries left by another
        # tenant's churn leave newly inserted ones badly connected: issue 22 measured -0.12 nDCG@10).
        # A filtered search of a large tenant does the same when its filters leave few candidates.
        filtered = bool(query.filters) or _has_refinements(query.text)
        small = self._dimension(query) is not None and query.mode is not SearchMode.KEYWORD and (
            self._is_small(tenant_id) or (filtered and self._few_candidates(query, tenant_id))
        )
        rows = self._run_search(query, tenant_id, exact_semantic=small)
        # The fast paths (postings, HNSW) can come back short once filters apply;
        # the exact plans cannot. Only a filtered query, or an ANN one, can be short.
        wanted = query.limit if query.mode is not SearchMode.HYBRID else max(self.hybrid_depth, query.limit)
        first = rows[0] if rows else {}
        exact_keyword = query.mode is not SearchMode.SEMANTIC and filtered and first.get("kw_count", 0) < wanted
        exact_semantic = (
            not small and query.mode is not SearchMode.KEYWORD and self._dimension(query) is not None
            and first.get("sem_count", 0) < wanted
        )
        if exact_keyword or exact_semantic:
            rows = self._run_search(query, tenant_id, exact_keyword=exact_keyword, exact_semantic=exact_semantic or small)
        return [self._hit(query, row) for row in rows]

    def _is_small(self, tenant_id: int) -> bool:
        """Whether the tenant has at most ``exact_max_chunks`` chunks (its statistics row counts every
        chunk, indexed or not, and changes in the transaction that changes the chunks: one key lookup)."""
        if self.exact_max_chunks == 0:
            return False
        with connections[self.using].cursor() as cursor:
            cursor.execute("SELECT chunk_count FROM knowledge_corpusstat WHERE tenant_id = %s", [tenant_id])
            row = cursor.fetchone()
        return (row[0] if row else 0) <= self.exact_max_chunks

    def _few_candidates(self, query: RAGQuery, tenant_id: int) -> bool:
        """Whether the query's filters leave at most ``exact_max_chunks`` of the tenant's chunks with
        the query's model. Counts at most one row past the bound: cheap when the filters keep many
        (it stops early), and when they keep few the metadata and text GIN indexes find them."""
        if self.exact_max_chunks == 0:
            return False
        where, params = self._where(query)
        params.update(tenant=tenant_id, model=query.embedding_model or "", cap=self.exact_max_chunks + 1)
        with transaction.atomic(using=self.using), connections[self.using].cursor() as cursor:
            cursor.execute(
                f"SELECT count(*) FROM (SELECT 1 FROM knowledge_chunk c WHERE c.tenant_id = %(tenant)s "
                f"AND c.embedding_model = %(model)s {where} LIMIT %(cap)s) candidates",
                params,
            )
            return int(cursor.fetchone()[0]) <= self.exact_max_chunks

    # --- the knowledge graph (knowledge.graph) ------------------------------------------

    async def graph_search(self, query: RAGQuery) -> GraphSearchResult:
        """Hybrid search (fused as ``query.fusion`` says) with the graph leg's best candidates placed in it (``query.graph``)."""
        return await sync_to_async(self._graph_search, thread_sensitive=True)(query)

    def _graph_search(self, query: RAGQuery) -> GraphSearchResult:
        tenant_id = self._find_tenant_id(query.namespace)
        if tenant_id is None:
            return GraphSearchResult([], GraphLeg())
        # The hybrid list as deep as the graph's fusion reads it (its RRF scores down to rank 100 are the
        # agreement evidence, see GraphParams), unfiltered by score: fusion decides the page.
        depth = min(100, max(query.limit, self.graph.protect, self.graph.seeds, self.graph.hybrid_depth))
        hybrid = self._search(dataclasses.replace(query, graph=False, limit=depth, min_score=None))
        where, params = self._where(query)
        dimension = self._dimension(query)
        with transaction.atomic(using=self.using), connections[self.using].cursor() as cursor:
            leg = graph_sql.graph_leg(
                cursor, tenant_id=tenant_id, text=query.text, seeds=[h.chunk.chunk_id for h in hybrid], params=self.graph,
                where=where, where_params=params, vector=query.vector, model=query.embedding_model or "", dimension=dimension,
            )
            known = {h.chunk.chunk_id: h for h in hybrid}
            by_rrf = query.fusion is Fusion.RRF
            fused = graph_sql.fuse(
                [(h.chunk.chunk_id, float((h.rrf_score if by_rrf else h.score) or 0.0)) for h in hybrid], leg.candidates, self.graph,
                rrf_scores=None if by_rrf else {h.chunk.chunk_id: float(h.rrf_score or 0.0) for h in hybrid},
            )
            missing = [cid for cid, _, found in fused if found is not None and cid not in known]
            extra = self._rows_by_id(cursor, tenant_id, missing, query, dimension) if missing else {}
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

    def _rows_by_id(self, cursor: Any, tenant_id: int, chunk_ids: list[str], query: RAGQuery, dimension: int | None) -> dict[str, RAGHit]:
        """Hits for chunks only the graph leg found (no keyword score; their cosine similarity when there is a vector)."""
        params: dict[str, Any] = {"tenant": tenant_id, "ids": chunk_ids, "model": query.embedding_model or ""}
        if query.vector is not None:
            params.update(vec=list(query.vector), dim=len(query.vector), vec_text="[" + ",".join(map(repr, query.vector)) + "]")
        similarity = graph_sql.similarity_sql(dimension, query.vector is not None) if query.vector is not None else "NULL::float8"
        cursor.execute(
            f"SELECT {q.CHUNK_COLUMNS}, {similarity} AS sim FROM knowledge_chunk c JOIN knowledge_document d ON d.id = c.document_id "
            "WHERE c.tenant_id = %(tenant)s AND c.chunk_id = ANY(%(ids)s)",
            params,
        )
        out = {}
        for row in cursor.fetchall():
            chunk = self._chunk(query.namespace, row[:8])
            out[chunk.chunk_id] = RAGHit(chunk, 0.0, semantic_similarity=float(row[8]) if row[8] is not None else None)
        return out

    def _where(self, query: RAGQuery) -> tuple[str, dict[str, Any]]:
        """The query's metadata filters and phrase / -word refinements as SQL on alias ``c``, with named parameters."""
        where, where_params = q.filter_sql(query.filters)
        kw_where, kw_params = q.keyword_match_sql(q.parse_query(query.text))
        where_named, extra = _name_params(where, where_params, "flt")
        kw_named, extra_kw = _name_params(kw_where, kw_params, "ref")
        return where_named + kw_named, {**extra, **extra_kw}

    async def graph_triplets(self, query: RAGQuery) -> list[Triplet]:
        """Relations relevant to ``query.text`` (at most ``query.limit``), each with the chunk that states it."""
        return await sync_to_async(self._graph_triplets, thread_sensitive=True)(query)

    def _graph_triplets(self, query: RAGQuery) -> list[Triplet]:
        tenant_id = self._find_tenant_id(query.namespace)
        if tenant_id is None:
            return []
        seeds = self._search(dataclasses.replace(query, graph=False, limit=self.graph.seeds, min_score=None))
        where, params = self._where(query)
        with transaction.atomic(using=self.using), connections[self.using].cursor() as cursor:
            return graph_sql.graph_triplets(
                cursor, tenant_id=tenant_id, text=query.text, seeds=[h.chunk.chunk_id for h in seeds], limit=query.limit,
                where=where, where_params=params, params=self.graph,
            )

    async def graph_neighbors(self, namespace: str, entity: str, *, limit: int) -> Neighborhood:
        """The entity called ``entity`` (or whose name starts so), the chunks about it, and its neighbours."""
        return await sync_to_async(self._graph_neighbors, thread_sensitive=True)(namespace, entity, limit)

    def _graph_neighbors(self, namespace: str, entity: str, limit: int) -> Neighborhood:
        tenant_id = self._find_tenant_id(namespace)
        if tenant_id is None:
            return Neighborhood(None)
        with transaction.atomic(using=self.using), connections[self.using].cursor() as cursor:
            return graph_sql.graph_neighbors(cursor, tenant_id=tenant_id, name=entity, limit=limit)

    async def graph_picture(self, namespace: str, chunk_ids: Sequence[str], *, expand: bool = False) -> Picture:
        """How these chunks connect through entities (``expand``: and to other documents' chunks)."""
        return await sync_to_async(self._graph_picture, thread_sensitive=True)(namespace, chunk_ids, expand)

    def _graph_picture(self, namespace: str, chunk_ids: Sequence[str], expand: bool) -> Picture:
        tenant_id = self._find_tenant_id(namespace)
        if tenant_id is None:
            return Picture()
        with transaction.atomic(using=self.using), connections[self.using].cursor() as cursor:
            return graph_sql.graph_picture(cursor, tenant_id=tenant_id, chunk_ids=chunk_ids, expand=expand)

    def _dimension(self, query: RAGQuery) -> int | None:
        if query.vector is None or not self.has_pgvector():
            return None
        return len(query.vector)

    def _postings_per_term(self, query: RAGQuery) -> int:
        """Postings keyword search reads per query term. Never fewer than results wanted: then an
        unfiltered page can only be short when fewer chunks match at all. Semantic search reads the
        keyword leg only as its safety net (its best page, not its exact order), so fewer."""
        if query.mode is SearchMode.SEMANTIC:
            return max(min(self.postings_per_term, q.NET_POSTINGS_PER_TERM), query.limit)
        return max(self.postings_per_term, query.limit, self.hybrid_depth if query.mode is SearchMode.HYBRID else 0)

    def _run_search(self, query: RAGQuery, tenant_id: int, *, exact_keyword: bool = False, exact_semantic: bool = False) -> list[dict[str, Any]]:
        parsed = q.parse_query(query.text)
        dimension = self._dimension(query)
        params: dict[str, Any] = {
            "tenant": tenant_id, "limit": query.limit, "depth": max(self.hybrid_depth, query.limit),
            "min_score": query.min_score, "rrf_k": query.rrf_k, "model": query.embedding_model or "",
            "fusion_weight": query.fusion_weight,
            "kw_text": parsed.positive, "bm25_k1": self.k1, "bm25_b": self.b,
            "per_term": self._postings_per_term(query),
        }
        if query.vector is not None:
            params.update(vec=list(query.vector), dim=len(query.vector), vec_text="[" + ",".join(map(repr, query.vector)) + "]")
        # Named and positional parameters cannot mix: inline the filter values as named ones.
        # Phrases and -words refine every leg: a hit never contains an excluded word.
        where_all, extra = self._where(query)
        params.update(extra)
        if query.mode is SearchMode.KEYWORD:
            sql = q.keyword_search_sql(where_all, exact=exact_keyword)
        elif query.mode is SearchMode.SEMANTIC:
            sql = q.semantic_search_sql(where_all, dimension, exact=exact_semantic)
        else:
            sql = q.hybrid_search_sql(where_all, dimension, query.rerank, exact_keyword=exact_keyword, exact_semantic=exact_semantic,
                                      fusion=query.fusion.value)
        with transaction.atomic(using=self.using), connections[self.using].cursor() as cursor:
            if dimension is not None and not exact_semantic:
                # The candidate list must be well above the rows wanted, or recall drops (limit 100 at ef 100: -0.005 nDCG).
                wanted = params["depth"] if query.mode is SearchMode.HYBRID else query.limit
                cursor.execute("SELECT set_config('hnsw.ef_search', %s, true)", [str(min(1000, max(self.ef_search, 2 * wanted)))])
                cursor.execute("SELECT set_config('hnsw.iterative_scan', 'relaxed_order', true)")
            cursor.execute(sql, params)
            names = [col.name for col in cursor.description]
            return [dict(zip(names, row)) for row in cursor.fetchall()]

    def _hit(self, query: RAGQuery, row: dict[str, Any]) -> RAGHit:
        chunk = self._chunk(query.namespace, [row[k] for k in ("chunk_id", "external_id", "text", "title", "uri", "metadata", "start_char", "end_char")])
        sim = row.get("sim")
        if query.mode is SearchMode.KEYWORD:
            score = row["score"]
        elif query.mode is SearchMode.SEMANTIC:
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


# knowledge_chunk's columns as _copy_chunks sends them; binary COPY needs each exact type.
_COPY_TYPES = ["int8", "int8", "text", "int4", "text", "text", "text", "jsonb", "int4", "int4", "text", "float8[]", "text", "bool", "oid"]
_FLOAT8_OID = 701
_FLOAT8_ARRAY_OID = 1022
_BINARY_FLOAT8 = np.dtype([("length", ">i4"), ("value", ">f8")])


class _PackedVector(bytes):
    """A one-dimensional float8[] already in PostgreSQL's binary array format."""


class _PackedVectorDumper(Dumper):
    format = Format.BINARY
    oid = _FLOAT8_ARRAY_OID

    def dump(self, obj: _PackedVector) -> bytes:
        return obj


def _pack_vector(values: Sequence[float]) -> _PackedVector:
    """``values`` as float8[] in binary: a header (1 dimension, no NULLs, float8, length, lower
    bound 1), then every element as its byte length (8) and its big-endian IEEE double."""
    body = np.empty(len(values), dtype=_BINARY_FLOAT8)
    body["length"] = 8
    body["value"] = values
    return _PackedVector(struct.pack("!iiIii", 1, 0, _FLOAT8_OID, len(values), 1) + body.tobytes())


def _has_refinements(text: str) -> bool:
    parsed = q.parse_query(text)
    return bool(parsed.phrases or parsed.negated)


def _name_params(sql: str, params: list[object], prefix: str) -> tuple[str, dict[str, object]]:
    named: dict[str, object] = {}
    parts = sql.split("%s")
    out = parts[0]
    for index, part in enumerate(parts[1:]):
        key = f"{prefix}{index}"
        named[key] = params[index]
        out += f"%({key})s" + part
    return out, named
