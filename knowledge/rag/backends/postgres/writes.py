"""Writes: whole documents in, whole documents out, each in one transaction, with their statistics.

Each document row is upserted first, which locks it, so concurrent re-ingestions of the same
document queue behind each other and every reader sees either the old chunks or the new ones,
never a mix. Term statistics (BM25's IDF and average length) change in the same transaction as
the chunks they describe. Lock order, everywhere: the tenant's statistics row (its text search
configuration), then documents by external id, then chunks by id, the graph last.

A small ingestion (up to the backend's ``inline_index_max_chunks``) writes its postings, HNSW
entries and graph (the backend's ``index_hook``) in the same transaction; a larger one stores its chunks ``indexed = false``
for the indexer (``maintenance.index_backlog``). A write queues nothing: it returns what it left
for the background (``Stored``) and the service that called it queues that once it commits.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from django.db import connections, transaction

from accounts.models import Tenant
from knowledge.models import DEFAULT_SEARCH_CONFIG, Document, DocumentStatus
from knowledge.rag.backends.postgres.binary_copy import copy_chunks, copy_vectors
from knowledge.rag.backends.postgres.bm25 import WEIGHTED_TF, avgdl_sql, impact_sql
from knowledge.rag.backends.postgres.namespaces import find_tenant_id, tenant_id as known_tenant_id
from knowledge.rag.errors import EmbeddingModelChanged
from knowledge.rag.types import PreparedDocument, Stored, Trigger, Vector

if TYPE_CHECKING:
    from knowledge.rag.backends.postgres.facade import PostgresBackend

# The chunks of given documents (document primary keys, already known to be the tenant's).
# The tenant test is written so no index serves it: with per-tenant statistics still stale
# (a new tenant's first bulk load) the planner otherwise walks all of the tenant's chunks
# through a tenant-leading index on every request, instead of the document index.
OF_DOCUMENTS = "(c.tenant_id + 0) = %s AND c.document_id = ANY(%s::bigint[])"


def plan_for_keyed_writes(cursor: Any) -> None:
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


# --- the tenant's statistics row: its text search configuration, and the lock every write takes first ---


def locked_search_config(cursor: Any, tenant_id: int, mode: str) -> int:
    """Lock the tenant's statistics row ``FOR <mode>`` and return its configuration's OID.

    ``KEY SHARE`` for ingests and deletions: a language change (``maintenance.apply_search_language``)
    or a model switch locks the row ``UPDATE`` first, so it waits for writes with the old
    configuration and they wait for it; concurrent ingests do not block each other here.
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


# --- statistics and postings ---------------------------------------------------------------


def stats_add(cursor: Any, tenant_id: int, doc_pks: list[int]) -> None:
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
        SELECT %s, (SELECT count(*) FROM knowledge_chunk c WHERE {OF_DOCUMENTS}),
               coalesce((SELECT sum(tokens) FROM terms), 0)
        ON CONFLICT (tenant_id) DO UPDATE SET
            chunk_count = knowledge_corpusstat.chunk_count + EXCLUDED.chunk_count,
            token_count = knowledge_corpusstat.token_count + EXCLUDED.token_count
        """,
        [_vectors_of_documents(tenant_id, doc_pks), tenant_id, tenant_id, tenant_id, doc_pks],
    )


def post(cursor: Any, tenant_id: int, where: str, params: list[object]) -> None:
    """Write the postings of the chunks matching ``where`` (on alias ``c``; it names the tenant).

    The frequency counts a title occurrence ``TITLE_WEIGHT`` times; impact is normalized by the
    average length as it now stands.
    """
    cursor.execute(
        f"""
        INSERT INTO knowledge_posting (chunk_id, lexeme, tenant_id, tf, dl, impact)
        SELECT c.id, u.lexeme, c.tenant_id, x.tf, length(c.search_vector), {impact_sql("x.tf", "length(c.search_vector)", "s.avgdl")}
        FROM knowledge_chunk c
        CROSS JOIN (
            SELECT {avgdl_sql("token_count", "chunk_count")} AS avgdl FROM knowledge_corpusstat WHERE tenant_id = %s
        ) s
        CROSS JOIN LATERAL unnest(c.search_vector) u
        CROSS JOIN LATERAL (SELECT {WEIGHTED_TF} AS tf) x
        WHERE {where}
        """,
        [tenant_id, *params],
    )


def stats_remove(cursor: Any, tenant_id: int, doc_pks: list[int]) -> list[int]:
    """Take these documents' chunks out of postings and statistics (before they are deleted);
    returns their primary keys."""
    # Lock the chunks first: an indexer working on them commits their postings
    # before we read which postings to delete, so none are left behind.
    cursor.execute(f"SELECT c.id FROM knowledge_chunk c WHERE {OF_DOCUMENTS} ORDER BY c.id FOR UPDATE", [tenant_id, doc_pks])
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


def rebuild_keyword_index(cursor: Any, tenant_id: int) -> None:
    """Recompute the tenant's term statistics and postings from its tsvectors, and mark every
    chunk indexed (the caller holds the statistics row FOR UPDATE)."""
    cursor.execute("DELETE FROM knowledge_termstat WHERE tenant_id = %s", [tenant_id])
    cursor.execute("UPDATE knowledge_corpusstat SET chunk_count = 0, token_count = 0 WHERE tenant_id = %s", [tenant_id])
    cursor.execute("DELETE FROM knowledge_posting WHERE tenant_id = %s", [tenant_id])
    cursor.execute("SELECT DISTINCT document_id FROM knowledge_chunk WHERE tenant_id = %s", [tenant_id])
    stats_add(cursor, tenant_id, [row[0] for row in cursor.fetchall()])
    post(cursor, tenant_id, "c.tenant_id = %s", [tenant_id])
    cursor.execute("UPDATE knowledge_chunk SET indexed = true WHERE tenant_id = %s AND NOT indexed", [tenant_id])


def audit(cursor: Any, tenant_id: int, actor: str | None, trigger: Trigger, action: str, document_ids: list[str], chunks: int) -> None:
    cursor.execute(
        "INSERT INTO knowledge_auditevent (tenant_id, actor, trigger, action, document_ids, chunk_count, at) "
        "VALUES (%s, %s, %s, %s, %s, %s, now())",
        [tenant_id, actor or "", trigger, action, document_ids, chunks],
    )


# --- the write transactions ------------------------------------------------------------------


def _written_tenant_id(backend: PostgresBackend, cursor: Any, namespace: str, actor: str | None, trigger: Trigger) -> int:
    """The tenant an ingest writes into; with ``create_namespaces``, created (and audited) when missing.

    Runs inside the ingest's transaction, so an ingest that fails leaves no tenant behind. Two first
    ingests into one new namespace race on the slug's unique index: the second waits for the first
    to commit, and ``get_or_create`` then finds its row (inside a savepoint, so the ingest goes on).
    """
    if not backend.create_namespaces:
        return known_tenant_id(backend.using, namespace)
    # The ORM, not accounts.services.tenant_create (a layer above this one), with the same row:
    # name = slug. The namespace already matches the slug's pattern (limits.NAMESPACE_RE).
    tenant, created = Tenant.objects.using(backend.using).get_or_create(slug=namespace, defaults={"name": namespace})
    if created:
        audit(cursor, tenant.pk, actor, trigger, "create_namespace", [], 0)
    return tenant.pk


def replace(backend: PostgresBackend, namespace: str, documents: Sequence[PreparedDocument], actor: str | None, trigger: Trigger) -> Stored:
    """Make ``documents`` (with their chunks) the namespace's versions of them, in one transaction;
    returns what it stored and left to the indexer."""
    # A fixed lock order (by id) keeps two multi-document ingests from deadlocking.
    ordered = sorted(documents, key=lambda p: p.document.id)
    total = sum(len(p.chunks) for p in ordered)
    inline = total <= backend.inline_index_max_chunks
    with transaction.atomic(using=backend.using), connections[backend.using].cursor() as cursor:
        tenant_id = _written_tenant_id(backend, cursor, namespace, actor, trigger)
        plan_for_keyed_writes(cursor)
        config = locked_search_config(cursor, tenant_id, "KEY SHARE")
        _claim_embedding_model(cursor, namespace, tenant_id, ordered)
        doc_pks, access = _upsert_documents(cursor, tenant_id, ordered)
        pks = list(doc_pks.values())
        # The status is the lifecycle's to write, in this transaction: the new chunks below land with it.
        Document.objects.using(backend.using).filter(pk__in=pks).mark_ready()
        old_chunks = stats_remove(cursor, tenant_id, pks)
        cursor.execute(f"DELETE FROM knowledge_chunk c WHERE {OF_DOCUMENTS}", [tenant_id, pks])
        copy_chunks(cursor, tenant_id, ordered, doc_pks, indexed=inline, config=config, access=access)
        hook = backend.index_hook
        prepared = None
        if inline and backend.extract_graph and hook is not None:
            # Extraction runs in a thread while the statistics, postings and HNSW entries are written.
            cursor.execute(f"SELECT c.id FROM knowledge_chunk c WHERE {OF_DOCUMENTS} ORDER BY c.id", [tenant_id, pks])
            prepared = hook.prepare(cursor, tenant_id, [row[0] for row in cursor.fetchall()])
        # The chunks hold these vectors now: the cache entries of an earlier, interrupted run go.
        cursor.execute(
            "DELETE FROM knowledge_embeddingcache e USING knowledge_chunk c "
            f"WHERE {OF_DOCUMENTS} AND e.tenant_id = %s AND e.model_id = c.embedding_model AND e.content_hash = c.content_hash",
            [tenant_id, pks, tenant_id],
        )
        stats_add(cursor, tenant_id, pks)
        if inline:
            post(cursor, tenant_id, OF_DOCUMENTS, [tenant_id, pks])
        audit(cursor, tenant_id, actor, trigger, "ingest", [p.document.id for p in documents], total)
        # Last: the hook's lock (the graph's) comes after every row lock this transaction takes.
        extracted = hook.apply(cursor, tenant_id, removed=old_chunks, prepared=prepared) if hook is not None else 0
    return Stored(total, backlog=not inline and total > 0, extracted=extracted > 0)


def _claim_embedding_model(cursor: Any, namespace: str, tenant_id: int, documents: Sequence[PreparedDocument]) -> None:
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


def _upsert_documents(cursor: Any, tenant_id: int, documents: Sequence[PreparedDocument]) -> tuple[dict[str, int], dict[str, list[str]]]:
    """Insert or update every document row's content in one statement; the upsert locks each row.
    Returns the rows' primary keys and access lists by external id.

    Access is the document's, never the write's: a re-ingestion keeps it (a new row starts as the whole
    tenant's unless the write door created it restricted first). The row lock taken here keeps an access
    change (``knowledge.services.access``, which locks the row too) from slipping between this read and
    the chunks' copy of it.

    Rows are taken in ``external_id`` order, the lock order every ingest uses. Content only: a new
    row starts as ``Document``'s defaults (queued, no error, no progress) and its status is written
    by the lifecycle (``mark_ready``, the caller's next statement); ``version`` counts replacements.
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
               %s, '', 0, d.chunk_count, d.embedding_model, 1, now(), now()
        FROM unnest(%s::text[], %s::text[], %s::text[], %s::text[], %s::text[], %s::text[], %s::int[], %s::text[])
             AS d(external_id, title, uri, text, metadata, content_hash, chunk_count, embedding_model)
        ORDER BY d.external_id
        ON CONFLICT (tenant_id, external_id) DO UPDATE SET
            title = EXCLUDED.title, uri = EXCLUDED.uri, text = EXCLUDED.text, metadata = EXCLUDED.metadata,
            content_hash = EXCLUDED.content_hash,
            chunk_count = EXCLUDED.chunk_count, embedding_model = EXCLUDED.embedding_model,
            version = knowledge_document.version + 1, updated_at = now()
        RETURNING external_id, id, access
        """,
        [tenant_id, DocumentStatus.QUEUED.value, *columns.values()],
    )
    rows = cursor.fetchall()
    return {row[0]: row[1] for row in rows}, {row[0]: list(row[2]) for row in rows}


def delete(backend: PostgresBackend, namespace: str, document_ids: Sequence[str], actor: str | None, trigger: Trigger) -> int:
    """Delete these documents and their chunks in one transaction, audited; returns how many existed."""
    if backend.create_namespaces and find_tenant_id(backend.using, namespace) is None:
        return 0  # a namespace nothing was written to holds nothing to delete (and is not created for it)
    tenant_id = known_tenant_id(backend.using, namespace)
    with transaction.atomic(using=backend.using), connections[backend.using].cursor() as cursor:
        plan_for_keyed_writes(cursor)
        # First, as in an ingest: a language change holding it must not wait for our chunk locks.
        locked_search_config(cursor, tenant_id, "KEY SHARE")
        cursor.execute(
            "SELECT id, external_id FROM knowledge_document WHERE tenant_id = %s AND external_id = ANY(%s) "
            "ORDER BY external_id FOR UPDATE",
            [tenant_id, list(document_ids)],
        )
        rows = cursor.fetchall()
        pks = [r[0] for r in rows]
        old_chunks: list[int] = []
        if pks:
            old_chunks = stats_remove(cursor, tenant_id, pks)
            cursor.execute(f"DELETE FROM knowledge_chunk c WHERE {OF_DOCUMENTS}", [tenant_id, pks])
            cursor.execute("DELETE FROM knowledge_document WHERE tenant_id = %s AND id = ANY(%s)", [tenant_id, pks])
        audit(cursor, tenant_id, actor, trigger, "delete", [r[1] for r in rows], len(old_chunks))
        if old_chunks and backend.index_hook is not None:
            backend.index_hook.apply(cursor, tenant_id, removed=old_chunks)
    return len(pks)


def cache_embeddings(using: str, namespace: str, model_id: str, vectors: Mapping[str, Vector]) -> None:
    """Keep freshly computed vectors (by content hash) until the chunks holding them land (or a model switch uses them)."""
    tenant = find_tenant_id(using, namespace) if vectors else None
    if tenant is None:
        return  # nothing to keep, or a namespace its ingest has not created yet: no run to resume there
    digests = sorted(vectors)  # a fixed order: two runs upserting overlapping keys cannot deadlock
    # Its own transaction even inside an outer one: what is computed is kept whatever happens next.
    # The vectors travel by binary COPY into a scratch table, then one upsert: formatting them as text
    # and parsing that back cost about 2 ms a chunk, 40% of a bulk ingest that had its vectors already.
    # The scratch table lives until the transaction ends (no session state, so it suits a transaction
    # pooler); a second call inside one outer transaction finds it and empties it first.
    with transaction.atomic(using=using), connections[using].cursor() as cursor:
        cursor.execute(
            "CREATE TEMPORARY TABLE IF NOT EXISTS quarry_embedding_stage (content_hash text, embedding double precision[]) "
            "ON COMMIT DROP"
        )
        cursor.execute("DELETE FROM quarry_embedding_stage")
        copy_vectors(cursor, "quarry_embedding_stage", [(d, vectors[d]) for d in digests])
        cursor.execute(
            "INSERT INTO knowledge_embeddingcache (tenant_id, model_id, content_hash, embedding) "
            "SELECT %s, %s, content_hash, embedding FROM quarry_embedding_stage ORDER BY content_hash "
            "ON CONFLICT (tenant_id, model_id, content_hash) DO NOTHING",
            [tenant, model_id],
        )
