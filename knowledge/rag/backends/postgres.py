"""The PostgreSQL backend, built on the Django models (storage comes from Django's settings).

Writes: one transaction per ``replace`` call. Each document row is upserted
first, which locks it, so concurrent re-ingestions of the same document queue
behind each other and every reader sees either the old chunks or the new ones,
never a mix. Term statistics (BM25's IDF and average length) change in the
same transaction as the chunks they describe.

Reads: one SQL statement per search (both legs and RRF included). With
pgvector, semantic ordering uses the HNSW index over ``embedding::vector(d)``
with iterative scans; a page that comes back short after filtering is
recomputed exactly, so filters never cost results.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from asgiref.sync import sync_to_async
from django.db import connections, transaction

from accounts.models import Tenant
from knowledge.rag.backends import postgres_sql as q
from knowledge.rag.errors import NamespaceNotFound
from knowledge.rag.types import PreparedDocument, RAGChunk, RAGHit, RAGQuery, SearchMode, Trigger, Vector


class PostgresBackend:
    """Chunks in ``knowledge_chunk``; namespaces are tenant slugs."""

    def __init__(
        self, using: str = "default", *, hybrid_depth: int = q.HYBRID_DEPTH, ef_search: int = q.HNSW_EF_SEARCH,
        postings_per_term: int = q.POSTINGS_PER_TERM, k1: float = q.BM25_K1, b: float = q.BM25_B,
    ) -> None:
        self.using = using
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
        tenant_id = Tenant.objects.using(self.using).filter(slug=namespace).values_list("id", flat=True).first()
        if tenant_id is None:
            raise NamespaceNotFound(f"namespace {namespace!r}: no tenant with that slug")
        return tenant_id

    def has_pgvector(self) -> bool:
        if self._pgvector is None:
            with connections[self.using].cursor() as cursor:
                cursor.execute("SELECT 1 FROM pg_extension WHERE extname = 'vector'")
                self._pgvector = cursor.fetchone() is not None
        return self._pgvector

    # --- writes ----------------------------------------------------------------

    async def replace(self, namespace: str, documents: Sequence[PreparedDocument], *, actor: str | None, trigger: Trigger) -> int:
        return await sync_to_async(self._replace, thread_sensitive=True)(namespace, documents, actor, trigger)

    def _replace(self, namespace: str, documents: Sequence[PreparedDocument], actor: str | None, trigger: Trigger) -> int:
        tenant_id = self._tenant_id(namespace)
        # A fixed lock order (by id) keeps two multi-document ingests from deadlocking.
        ordered = sorted(documents, key=lambda p: p.document.id)
        with transaction.atomic(using=self.using), connections[self.using].cursor() as cursor:
            doc_pks = self._upsert_documents(cursor, tenant_id, ordered)
            pks = list(doc_pks.values())
            self._stats_remove(cursor, tenant_id, "document_id = ANY(%s)", [pks])
            cursor.execute("DELETE FROM knowledge_chunk WHERE tenant_id = %s AND document_id = ANY(%s)", [tenant_id, pks])
            self._copy_chunks(cursor, tenant_id, ordered, doc_pks)
            self._stats_add(cursor, tenant_id, pks)
            total = sum(len(p.chunks) for p in ordered)
            self._audit(cursor, tenant_id, actor, trigger, "ingest", [p.document.id for p in documents], total)
        return total

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

    def _copy_chunks(self, cursor: Any, tenant_id: int, documents: Sequence[PreparedDocument], doc_pks: dict[str, int]) -> None:
        columns = ("tenant_id, document_id, chunk_id, ordinal, text, title, uri, metadata, start_char, end_char, "
                   "content_hash, embedding, embedding_model")
        raw = cursor.cursor  # the psycopg cursor under Django's wrapper: COPY is the fast path for bulk rows
        # Rows are formatted here in COPY's text format: psycopg's generic list
        # dumper costs ~0.7 ms per 384-float vector, which capped ingestion.
        with raw.copy(f"COPY knowledge_chunk ({columns}) FROM STDIN") as copy:
            for prepared in documents:
                doc = prepared.document
                head = f"{tenant_id}\t{doc_pks[doc.id]}\t"
                tail_meta = f"{_copy_text(doc.title or '')}\t{_copy_text(doc.uri or '')}\t{_copy_text(json.dumps(dict(doc.metadata)))}"
                lines = []
                for c in prepared.chunks:
                    vector = "{" + ",".join(map(repr, c.embedding)) + "}" if c.embedding is not None else "\\N"
                    lines.append(
                        f"{head}{_copy_text(c.chunk_id)}\t{c.ordinal}\t{_copy_text(c.text)}\t{tail_meta}\t"
                        f"{c.start_char}\t{c.end_char}\t{c.content_hash}\t{vector}\t{_copy_text(c.embedding_model or '')}\n"
                    )
                copy.write("".join(lines))

    def _stats_add(self, cursor: Any, tenant_id: int, doc_pks: list[int]) -> None:
        # Sorted upserts: concurrent ingests lock term rows in the same order (no deadlock).
        cursor.execute(
            """
            WITH terms AS (
                SELECT u.lexeme, count(*) AS df, count(*) AS tokens
                FROM knowledge_chunk c, unnest(c.search_vector) u
                WHERE c.tenant_id = %s AND c.document_id = ANY(%s)
                GROUP BY u.lexeme
            ), upsert AS (
                INSERT INTO knowledge_termstat (tenant_id, lexeme, df)
                SELECT %s, lexeme, df FROM terms ORDER BY lexeme
                ON CONFLICT (tenant_id, lexeme) DO UPDATE SET df = knowledge_termstat.df + EXCLUDED.df
            )
            INSERT INTO knowledge_corpusstat (tenant_id, chunk_count, token_count)
            SELECT %s, (SELECT count(*) FROM knowledge_chunk WHERE tenant_id = %s AND document_id = ANY(%s)),
                   coalesce((SELECT sum(tokens) FROM terms), 0)
            ON CONFLICT (tenant_id) DO UPDATE SET
                chunk_count = knowledge_corpusstat.chunk_count + EXCLUDED.chunk_count,
                token_count = knowledge_corpusstat.token_count + EXCLUDED.token_count
            """,
            [tenant_id, doc_pks, tenant_id, tenant_id, tenant_id, doc_pks],
        )
        # Postings, with impact normalized by the average length as it now stands.
        cursor.execute(
            f"""
            INSERT INTO knowledge_posting (chunk_id, lexeme, tenant_id, tf, dl, impact)
            SELECT c.id, u.lexeme, c.tenant_id, coalesce(array_length(u.positions, 1), 1), length(c.search_vector),
                   coalesce(array_length(u.positions, 1), 1)::float8
                   / (coalesce(array_length(u.positions, 1), 1)
                      + {q.BM25_K1} * (1 - {q.BM25_B} + {q.BM25_B} * length(c.search_vector) / s.avgdl))
            FROM knowledge_chunk c
            CROSS JOIN (
                SELECT greatest(coalesce(token_count::float8 / nullif(chunk_count, 0), 1), 1) AS avgdl
                FROM knowledge_corpusstat WHERE tenant_id = %s
            ) s
            CROSS JOIN LATERAL unnest(c.search_vector) u
            WHERE c.tenant_id = %s AND c.document_id = ANY(%s)
            """,
            [tenant_id, tenant_id, doc_pks],
        )

    def _stats_remove(self, cursor: Any, tenant_id: int, where: str, params: list[object]) -> None:
        cursor.execute(
            f"DELETE FROM knowledge_posting WHERE chunk_id IN (SELECT c.id FROM knowledge_chunk c WHERE c.tenant_id = %s AND c.{where})",
            [tenant_id, *params],
        )
        cursor.execute(
            f"""
            WITH gone AS (
                SELECT c.search_vector FROM knowledge_chunk c WHERE c.tenant_id = %s AND c.{where}
            ), terms AS (
                SELECT u.lexeme, count(*) AS df, count(*) AS tokens
                FROM gone, unnest(gone.search_vector) u GROUP BY u.lexeme
            ), dec AS (
                UPDATE knowledge_termstat t SET df = t.df - terms.df
                FROM terms WHERE t.tenant_id = %s AND t.lexeme = terms.lexeme
            )
            UPDATE knowledge_corpusstat SET
                chunk_count = chunk_count - (SELECT count(*) FROM gone),
                token_count = token_count - coalesce((SELECT sum(tokens) FROM terms), 0)
            WHERE tenant_id = %s
            """,
            [tenant_id, *params, tenant_id, tenant_id],
        )
        cursor.execute("DELETE FROM knowledge_termstat WHERE tenant_id = %s AND df <= 0", [tenant_id])

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
            cursor.execute("DELETE FROM knowledge_termstat WHERE tenant_id = %s", [tenant_id])
            cursor.execute("DELETE FROM knowledge_corpusstat WHERE tenant_id = %s", [tenant_id])
            cursor.execute("DELETE FROM knowledge_posting WHERE tenant_id = %s", [tenant_id])
            cursor.execute("SELECT DISTINCT document_id FROM knowledge_chunk WHERE tenant_id = %s", [tenant_id])
            self._stats_add(cursor, tenant_id, [row[0] for row in cursor.fetchall()])

    async def delete(self, namespace: str, document_ids: Sequence[str], *, actor: str | None, trigger: Trigger) -> int:
        return await sync_to_async(self._delete, thread_sensitive=True)(namespace, document_ids, actor, trigger)

    def _delete(self, namespace: str, document_ids: Sequence[str], actor: str | None, trigger: Trigger) -> int:
        tenant_id = self._tenant_id(namespace)
        with transaction.atomic(using=self.using), connections[self.using].cursor() as cursor:
            cursor.execute(
                "SELECT id, external_id FROM knowledge_document WHERE tenant_id = %s AND external_id = ANY(%s) "
                "ORDER BY external_id FOR UPDATE",
                [tenant_id, list(document_ids)],
            )
            rows = cursor.fetchall()
            pks = [r[0] for r in rows]
            chunks = 0
            if pks:
                cursor.execute("SELECT count(*) FROM knowledge_chunk WHERE tenant_id = %s AND document_id = ANY(%s)", [tenant_id, pks])
                chunks = cursor.fetchone()[0]
                self._stats_remove(cursor, tenant_id, "document_id = ANY(%s)", [pks])
                cursor.execute("DELETE FROM knowledge_chunk WHERE tenant_id = %s AND document_id = ANY(%s)", [tenant_id, pks])
                cursor.execute("DELETE FROM knowledge_document WHERE tenant_id = %s AND id = ANY(%s)", [tenant_id, pks])
            self._audit(cursor, tenant_id, actor, trigger, "delete", [r[1] for r in rows], chunks)
        return len(pks)

    # --- reads -----------------------------------------------------------------

    async def known_embeddings(self, namespace: str, document_ids: Sequence[str], model_id: str) -> dict[tuple[str, str], Vector]:
        return await sync_to_async(self._known_embeddings, thread_sensitive=True)(namespace, document_ids, model_id)

    def _known_embeddings(self, namespace: str, document_ids: Sequence[str], model_id: str) -> dict[tuple[str, str], Vector]:
        tenant_id = self._tenant_id(namespace)
        with connections[self.using].cursor() as cursor:
            cursor.execute(
                "SELECT c.chunk_id, c.content_hash, c.embedding FROM knowledge_chunk c "
                "JOIN knowledge_document d ON d.id = c.document_id "
                "WHERE c.tenant_id = %s AND d.external_id = ANY(%s) AND c.embedding_model = %s AND c.embedding IS NOT NULL",
                [tenant_id, list(document_ids), model_id],
            )
            return {(chunk_id, digest): tuple(vector) for chunk_id, digest, vector in cursor.fetchall()}

    async def fetch(self, namespace: str, chunk_ids: Sequence[str]) -> list[RAGChunk]:
        return await sync_to_async(self._fetch, thread_sensitive=True)(namespace, chunk_ids)

    def _fetch(self, namespace: str, chunk_ids: Sequence[str]) -> list[RAGChunk]:
        tenant_id = self._tenant_id(namespace)
        with connections[self.using].cursor() as cursor:
            cursor.execute(
                f"SELECT {q.CHUNK_COLUMNS}, c.embedding FROM knowledge_chunk c JOIN knowledge_document d ON d.id = c.document_id "
                "WHERE c.tenant_id = %s AND c.chunk_id = ANY(%s)",
                [tenant_id, list(chunk_ids)],
            )
            found = {row[0]: self._chunk(namespace, row[:8], embedding=row[8]) for row in cursor.fetchall()}
        return [found[i] for i in dict.fromkeys(chunk_ids) if i in found]

    @staticmethod
    def _chunk(namespace: str, row: Sequence[Any], embedding: Sequence[float] | None = None) -> RAGChunk:
        chunk_id, document_id, text, title, uri, metadata, start, end = row
        if isinstance(metadata, str):
            metadata = json.loads(metadata)  # Django's psycopg loader leaves jsonb as text
        return RAGChunk(
            chunk_id, document_id, namespace, text, title or None, uri or None, metadata or {},
            tuple(embedding) if embedding is not None else None, start_char=start, end_char=end,
        )

    async def search(self, query: RAGQuery) -> list[RAGHit]:
        return await sync_to_async(self._search, thread_sensitive=True)(query)

    def _search(self, query: RAGQuery) -> list[RAGHit]:
        tenant_id = Tenant.objects.using(self.using).filter(slug=query.namespace).values_list("id", flat=True).first()
        if tenant_id is None:
            return []  # an unknown namespace holds nothing
        rows = self._run_search(query, tenant_id)
        # The fast paths (postings, HNSW) can come back short once filters apply;
        # the exact plans cannot. Only a filtered query, or an ANN one, can be short.
        wanted = query.limit if query.mode is not SearchMode.HYBRID else max(self.hybrid_depth, query.limit)
        filtered = bool(query.filters) or _has_refinements(query.text)
        first = rows[0] if rows else {}
        exact_keyword = query.mode is not SearchMode.SEMANTIC and filtered and first.get("kw_count", 0) < wanted
        exact_semantic = (
            query.mode is not SearchMode.KEYWORD and self._dimension(query) is not None and first.get("sem_count", 0) < wanted
        )
        if exact_keyword or exact_semantic:
            rows = self._run_search(query, tenant_id, exact_keyword=exact_keyword, exact_semantic=exact_semantic)
        return [self._hit(query, row) for row in rows]

    def _dimension(self, query: RAGQuery) -> int | None:
        if query.vector is None or not self.has_pgvector():
            return None
        return len(query.vector)

    def _run_search(self, query: RAGQuery, tenant_id: int, *, exact_keyword: bool = False, exact_semantic: bool = False) -> list[dict[str, Any]]:
        where, where_params = q.filter_sql(query.filters)
        parsed = q.parse_query(query.text)
        kw_where, kw_params = q.keyword_match_sql(parsed)
        dimension = self._dimension(query)
        params: dict[str, Any] = {
            "tenant": tenant_id, "limit": query.limit, "depth": max(self.hybrid_depth, query.limit),
            "min_score": query.min_score, "rrf_k": query.rrf_k, "model": query.embedding_model or "",
            "kw_text": parsed.positive, "bm25_k1": self.k1, "bm25_b": self.b,
            # Never fewer postings per term than results wanted: then an unfiltered
            # page can only be short when fewer chunks match at all.
            "per_term": max(self.postings_per_term, query.limit, self.hybrid_depth if query.mode is SearchMode.HYBRID else 0),
        }
        if query.vector is not None:
            params.update(vec=list(query.vector), dim=len(query.vector), vec_text="[" + ",".join(map(repr, query.vector)) + "]")
        # Named and positional parameters cannot mix: inline the filter values as named ones.
        where_named, extra = _name_params(where, where_params, "flt")
        kw_named, extra_kw = _name_params(kw_where, kw_params, "ref")
        params.update(extra)
        params.update(extra_kw)
        # Phrases and -words refine every leg: a hit never contains an excluded word.
        where_all = where_named + kw_named
        if query.mode is SearchMode.KEYWORD:
            sql = q.keyword_search_sql(where_all, exact=exact_keyword)
        elif query.mode is SearchMode.SEMANTIC:
            sql = q.semantic_search_sql(where_all, dimension, exact=exact_semantic)
        else:
            sql = q.hybrid_search_sql(where_all, dimension, query.rerank, exact_keyword=exact_keyword, exact_semantic=exact_semantic)
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
            score = row["sim"] if query.rerank else row["rrf"]
        return RAGHit(
            chunk, float(score),
            rrf_score=float(row["rrf"]) if row.get("rrf") is not None else None,
            rrf_rank=row.get("rrf_rank"),
            semantic_similarity=float(sim) if sim is not None else None,
            keyword_score=float(row["keyword_score"]) if row.get("keyword_score") is not None else None,
        )


_COPY_ESCAPES = str.maketrans({"\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r"})


def _copy_text(value: str) -> str:
    """A value in COPY's text format (backslash, tab, newline and carriage return escaped)."""
    return value.translate(_COPY_ESCAPES)


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
