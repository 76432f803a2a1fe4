"""Maintenance of a tenant's index: plain functions the services call (``knowledge.services.{indexing,
reembedding,text_search,graphing}``), each given the backend whose options (database alias, the chunk
index hook) it works with. Not part of the seed's backend contract: ``configured()`` says whether
the product's backend is this one.

- the indexing backlog: ``backlog``, ``index_backlog``;
- moving a tenant to another embedding model: ``chunk_count``, ``reembed_pending``, ``reembed_stage``,
  ``reembed_discard``, ``reembed_switch``, ``ensure_vector_index``;
- search languages and statistics: ``search_config``, ``apply_search_language``, ``rebuild_statistics``;
- the graph: ``rebuild_graph``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from django.db import connections, transaction

from knowledge.models import search_config_name
from knowledge.rag import factory
from knowledge.rag.backends.postgres import sql as q
from knowledge.rag.backends.postgres import writes
from knowledge.rag.backends.postgres.facade import INDEX_BATCH_CHUNKS, PostgresBackend
from knowledge.rag.backends.postgres.namespaces import tenant_id as known_tenant_id
from knowledge.rag.errors import BackendContractError
from knowledge.rag.types import Vector, embedding_input


def configured() -> PostgresBackend | None:
    """The process's backend (``QUARRY_RAG_BACKEND``) when it is this PostgreSQL backend, else None
    (a backend of the seed's contract alone indexes as it stores and has nothing to maintain)."""
    backend = factory.backend()
    return backend if isinstance(backend, PostgresBackend) else None


# --- the indexing backlog --------------------------------------------------------------------


def backlog(backend: PostgresBackend, namespace: str) -> int:
    """How many of the namespace's chunks still await postings and their HNSW entry."""
    tenant_id = known_tenant_id(backend.using, namespace)
    with connections[backend.using].cursor() as cursor:
        cursor.execute("SELECT count(*) FROM knowledge_chunk WHERE tenant_id = %s AND NOT indexed", [tenant_id])
        return int(cursor.fetchone()[0])


def index_backlog(backend: PostgresBackend, namespace: str, *, limit: int = INDEX_BATCH_CHUNKS) -> int:
    """Index up to ``limit`` of the namespace's backlog in one transaction; returns how many
    (with ``backend.extract_graph``, as many were extracted into the graph).

    Safe to run in any number of processes at once: each takes chunks no one else
    holds (``SKIP LOCKED``), and an ingestion replacing a chunk waits for its indexer.
    0 means the backlog was empty or every chunk in it was busy.
    """
    if limit < 1:
        raise ValueError("limit must be at least 1")
    tenant_id = known_tenant_id(backend.using, namespace)
    with transaction.atomic(using=backend.using), connections[backend.using].cursor() as cursor:
        writes.plan_for_keyed_writes(cursor)
        cursor.execute(
            "SELECT id FROM knowledge_chunk WHERE tenant_id = %s AND NOT indexed ORDER BY id LIMIT %s FOR UPDATE SKIP LOCKED",
            [tenant_id, limit],
        )
        ids = [row[0] for row in cursor.fetchall()]
        if ids:
            # Extraction runs in a thread while the database writes postings and HNSW entries.
            hook = backend.index_hook if backend.extract_graph else None
            prepared = hook.prepare(cursor, tenant_id, ids) if hook is not None else None
            writes.post(cursor, tenant_id, "c.id = ANY(%s)", [ids])  # ids of this tenant's, just locked
            cursor.execute("UPDATE knowledge_chunk SET indexed = true WHERE id = ANY(%s)", [ids])
            if hook is not None:
                hook.apply(cursor, tenant_id, prepared=prepared)
    return len(ids)


# --- moving a namespace to another embedding model -------------------------------------------


def chunk_count(backend: PostgresBackend, namespace: str, *, after: int = 0) -> int:
    """How many chunks the namespace holds (with a pk above ``after``)."""
    tenant_id = known_tenant_id(backend.using, namespace)
    with connections[backend.using].cursor() as cursor:
        cursor.execute("SELECT count(*) FROM knowledge_chunk WHERE tenant_id = %s AND id > %s", [tenant_id, after])
        return int(cursor.fetchone()[0])


def reembed_pending(backend: PostgresBackend, namespace: str, model_id: str, *, after: int = 0,
                    limit: int = 256) -> list[tuple[int, str, str]]:
    """Up to ``limit`` chunks after chunk pk ``after`` (in pk order) that still need a vector of
    ``model_id``: ``(pk, content hash, text to embed)``. A chunk needs one unless it holds it or
    the embedding cache does (keyed by content hash, so a resumed run skips what it stored)."""
    tenant_id = known_tenant_id(backend.using, namespace)
    with connections[backend.using].cursor() as cursor:
        cursor.execute(
            f"""
            SELECT c.id, c.content_hash, c.title, c.text FROM knowledge_chunk c
            WHERE c.tenant_id = %(tenant)s AND c.id > %(after)s
              AND (NOT {q.has_vector_sql(backend.has_pgvector())} OR c.embedding_model <> %(model)s)
              AND NOT EXISTS (SELECT 1 FROM knowledge_embeddingcache e
                              WHERE e.tenant_id = %(tenant)s AND e.model_id = %(model)s AND e.content_hash = c.content_hash)
            ORDER BY c.id LIMIT %(limit)s
            """,
            {"tenant": tenant_id, "after": after, "model": model_id, "limit": limit},
        )
        return [(pk, digest, embedding_input(title, text)) for pk, digest, title, text in cursor.fetchall()]


def reembed_stage(backend: PostgresBackend, namespace: str, model_id: str, vectors: Mapping[str, Vector]) -> None:
    """Stage vectors of ``model_id`` by content hash until ``reembed_switch`` (the embedding cache)."""
    writes.cache_embeddings(backend.using, namespace, model_id, vectors)


def reembed_discard(backend: PostgresBackend, namespace: str, model_id: str) -> int:
    """Drop the vectors of ``model_id`` staged for the namespace (a cancelled move); returns how many."""
    tenant_id = known_tenant_id(backend.using, namespace)
    with connections[backend.using].cursor() as cursor:
        cursor.execute("DELETE FROM knowledge_embeddingcache WHERE tenant_id = %s AND model_id = %s", [tenant_id, model_id])
        return cursor.rowcount


def reembed_switch(backend: PostgresBackend, namespace: str, model_id: str, embed: Callable[[list[str]], list[Vector]], *,
                   batch: int = 256) -> int:
    """Give every chunk of the namespace its vector of ``model_id`` and make it the namespace's model,
    in one transaction; returns how many chunks changed.

    The statistics row is locked FOR UPDATE first: ingests and deletions of the tenant wait for the
    commit (other tenants do not), so no chunk lands in between. Chunks still without a staged
    vector (those that landed while the staging ran) are embedded here with ``embed(texts)``.
    Searches see every old vector until the commit and every new one after it (MVCC); the staged
    copies are dropped with it.
    """
    tenant_id = known_tenant_id(backend.using, namespace)
    with transaction.atomic(using=backend.using), connections[backend.using].cursor() as cursor:
        writes.locked_search_config(cursor, tenant_id, "UPDATE")
        after = 0
        while pending := reembed_pending(backend, namespace, model_id, after=after, limit=batch):
            texts = {digest: text for _, digest, text in pending}
            vectors = embed(list(texts.values()))
            writes.cache_embeddings(backend.using, namespace, model_id, dict(zip(texts, vectors, strict=True)))
            after = pending[-1][0]
        writes.plan_for_keyed_writes(cursor)
        has_vector = q.has_vector_sql(backend.has_pgvector())
        # Where pgvector is installed the chunk's trigger moves the written array into embedding_half.
        cursor.execute(
            f"""
            UPDATE knowledge_chunk c SET embedding = e.embedding, embedding_model = e.model_id
            FROM knowledge_embeddingcache e
            WHERE c.tenant_id = %(tenant)s AND e.tenant_id = %(tenant)s AND e.model_id = %(model)s
              AND e.content_hash = c.content_hash AND (NOT {has_vector} OR c.embedding_model <> %(model)s)
            """,
            {"tenant": tenant_id, "model": model_id},
        )
        changed = cursor.rowcount
        cursor.execute(
            f"SELECT count(*) FROM knowledge_chunk c WHERE c.tenant_id = %s AND (NOT {has_vector} OR c.embedding_model <> %s)",
            [tenant_id, model_id],
        )
        left = int(cursor.fetchone()[0])
        if left:  # cannot happen under the lock; never switch a tenant half-way
            raise BackendContractError(f"{left} chunks of {namespace!r} have no staged vector of {model_id}; nothing switched")
        cursor.execute("UPDATE knowledge_document SET embedding_model = %s WHERE tenant_id = %s AND chunk_count > 0", [model_id, tenant_id])
        cursor.execute("UPDATE knowledge_corpusstat SET embedding_model = %s WHERE tenant_id = %s", [model_id, tenant_id])
        cursor.execute("DELETE FROM knowledge_embeddingcache WHERE tenant_id = %s AND model_id = %s", [tenant_id, model_id])
    return changed


def ensure_vector_index(backend: PostgresBackend, dimension: int) -> bool:
    """Create the HNSW index of ``dimension`` unless it exists, where pgvector is installed (and the
    dimension within its 2,000 limit); returns whether the index is there. Outside a transaction it
    is built CONCURRENTLY, so other tenants' writes go on meanwhile."""
    if not backend.has_pgvector() or not 1 <= dimension <= 2000:
        return False  # semantic search of that dimension stays exact, in plain SQL
    with connections[backend.using].cursor() as cursor:
        cursor.execute("SELECT 1 FROM pg_class WHERE relname = %s AND relkind = 'i'", [q.hnsw_index_name(dimension)])
        if cursor.fetchone() is not None:
            return True
    statement = q.create_hnsw_index_sql(dimension)
    if not connections[backend.using].in_atomic_block:
        statement = statement.replace("CREATE INDEX IF NOT EXISTS", "CREATE INDEX CONCURRENTLY IF NOT EXISTS", 1)
        with connections[backend.using].cursor() as cursor:
            cursor.execute(statement)
        return True
    # Inside a caller's transaction: PostgreSQL builds no index on a table with deferred
    # constraint checks pending, so run them now; a savepoint keeps a failure from poisoning it.
    with transaction.atomic(using=backend.using), connections[backend.using].cursor() as cursor:
        cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
        cursor.execute(statement)
    return True


# --- search languages and statistics ---------------------------------------------------------


def search_config(backend: PostgresBackend, namespace: str) -> str:
    """The name of the text search configuration the namespace's index and queries use now."""
    tenant_id = known_tenant_id(backend.using, namespace)
    with connections[backend.using].cursor() as cursor:
        cursor.execute(f"SELECT ({q.tenant_config_sql('%s')})::text", [tenant_id])
        return str(cursor.fetchone()[0]).rsplit(".", 1)[-1]


def apply_search_language(backend: PostgresBackend, namespace: str, language: str) -> bool:
    """Re-tokenize all of the namespace's chunks with ``language``'s configuration, in one transaction.

    The chunks' tsvectors, the term statistics, the postings and the configuration queries use
    change together at commit: until then every search sees the old index, complete, and after
    it the new one (MVCC), never a mix. Ingests and deletions of the tenant wait for the commit
    (they take the statistics row this locks first); other tenants are not touched. Returns
    False when the index already uses ``language``. The caller runs it in the background: it
    costs about what re-ingesting the tenant's chunks without embedding them costs.
    """
    config = search_config_name(language)
    tenant_id = known_tenant_id(backend.using, namespace)
    with transaction.atomic(using=backend.using), connections[backend.using].cursor() as cursor:
        current = writes.locked_search_config(cursor, tenant_id, "UPDATE")
        cursor.execute("SELECT %s::regconfig::oid", [config])
        wanted = int(cursor.fetchone()[0])
        if current == wanted:
            return False
        writes.plan_for_keyed_writes(cursor)
        cursor.execute("UPDATE knowledge_chunk SET search_config = %s::oid::regconfig WHERE tenant_id = %s", [wanted, tenant_id])
        cursor.execute("UPDATE knowledge_corpusstat SET search_config = %s::oid::regconfig WHERE tenant_id = %s", [wanted, tenant_id])
        writes.rebuild_keyword_index(cursor, tenant_id)
    return True


def rebuild_statistics(backend: PostgresBackend, namespace: str) -> None:
    """Recompute the namespace's BM25 statistics, postings and graph from its chunks (repair or after an upgrade)."""
    tenant_id = known_tenant_id(backend.using, namespace)
    with transaction.atomic(using=backend.using), connections[backend.using].cursor() as cursor:
        writes.locked_search_config(cursor, tenant_id, "UPDATE")
        writes.rebuild_keyword_index(cursor, tenant_id)
        if backend.index_hook is not None:
            backend.index_hook.rebuild(cursor, tenant_id)


# --- the graph ---------------------------------------------------------------------------------


def rebuild_graph(backend: PostgresBackend, namespace: str, *, on_progress: Callable[[int, int], None] | None = None) -> int:
    """Recompute the namespace's knowledge graph from its indexed chunks, in one transaction;
    returns the chunks read. ``on_progress(done, total)`` after every batch."""
    tenant_id = known_tenant_id(backend.using, namespace)
    if backend.index_hook is None:
        return 0  # no graph to rebuild (QUARRY_CHUNK_INDEX_HOOK is None)
    with transaction.atomic(using=backend.using), connections[backend.using].cursor() as cursor:
        return backend.index_hook.rebuild(cursor, tenant_id, on_progress=on_progress)
