"""The vector's layout where pgvector is installed (migration 0022, issue 35): a ``halfvec`` column and an HNSW
index over it, its list widened with the tenant; servers without pgvector keep the float8[] array."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path

import pytest
from asgiref.sync import async_to_sync
from django.db import connection, connections
from django.db.migrations.executor import MigrationExecutor
from django.test.utils import CaptureQueriesContext

from accounts.models import Tenant
from knowledge import rag
from knowledge.models import Chunk
from knowledge.rag.backends.postgres import PostgresBackend
from knowledge.rag.backends.postgres import sql as q
from tests.conftest import STOCK_AVAILABLE
from tests.embedders import BagOfWordsEmbedder
from tests.factories import chunk_vectors, make_tenant

needs_stock = pytest.mark.skipif(not STOCK_AVAILABLE, reason="no PostgreSQL at 127.0.0.1:5432 (this machine kind provides one)")
DATABASES = ["default", pytest.param("stock", marks=needs_stock)]
SCIFACT = Path(__file__).resolve().parent.parent.parent / "shared" / "data" / "scifact"
# The vector's share of a chunk (its column plus its entry in the HNSW index): 776 + about 1,170 at 384
# dimensions, against 3,096 + 2,048 = 5,144 for the float8[] and its index over ::vector before 0022.
VECTOR_BYTES_PER_CHUNK = 2100
DOCS = [
    rag.RAGDocument("granite", "Granite is quarried in large blocks and polished for counters."),
    rag.RAGDocument("slate", "Slate splits into thin sheets that make durable roof tiles."),
    rag.RAGDocument("basalt", "Basalt columns form when lava cools slowly and cracks."),
]


def run(fn: Callable[..., object], *args: object, **kwargs: object) -> object:
    return async_to_sync(fn)(*args, **kwargs)  # type: ignore[arg-type]


def has_column(using: str, name: str) -> bool:
    with connections[using].cursor() as cursor:
        cursor.execute("SELECT 1 FROM pg_attribute WHERE attrelid = 'knowledge_chunk'::regclass AND attname = %s AND NOT attisdropped",
                       [name])
        return cursor.fetchone() is not None


@pytest.mark.django_db(databases=["default", "stock"] if STOCK_AVAILABLE else ["default"])
@pytest.mark.parametrize("using", DATABASES)
def test_a_stored_vector_is_a_halfvec_with_pgvector_and_the_array_without(using: str) -> None:
    Tenant.objects.using(using).create(slug="acme", name="acme")
    embedder = BagOfWordsEmbedder(dimension=384)
    run(rag.service(PostgresBackend(using, index_hook=None), embedder, namespace="acme").ingest, DOCS)  # type: ignore[arg-type]
    pgvector = using == "default"
    assert has_column(using, "embedding_half") is pgvector
    with connections[using].cursor() as cursor:
        if pgvector:
            cursor.execute("SELECT count(*) FILTER (WHERE embedding IS NULL), count(*) FILTER (WHERE vector_dims(embedding_half) = 384), "
                           "max(pg_column_size(embedding_half)), max(coalesce(pg_column_size(embedding), 0)) FROM knowledge_chunk")
            nulls, halves, half_bytes, array_bytes = cursor.fetchone()
            assert (nulls, halves, array_bytes) == (3, 3, 0)
            assert half_bytes == 8 + 2 * 384  # 776, against 3,096 for the float8[] it replaces
        else:
            cursor.execute("SELECT count(*) FILTER (WHERE array_length(embedding, 1) = 384), max(pg_column_size(embedding)) FROM knowledge_chunk")
            assert cursor.fetchone() == (3, 8 * 384 + 24)
    # Read back, the vector is the embedder's to half precision (exactly, without pgvector).
    for doc in DOCS:
        [got] = chunk_vectors(Chunk.objects.using(using).filter(chunk_id=f"{doc.id}:0"))
        want = embedder.vector(rag.types.embedding_input(doc.title, doc.text))
        assert got is not None and got == pytest.approx(want, abs=1e-3 if pgvector else 1e-12)


@pytest.mark.django_db(databases=["default", "stock"] if STOCK_AVAILABLE else ["default"])
@pytest.mark.parametrize("using", DATABASES)
def test_re_ingesting_reuses_the_stored_vectors_and_a_changed_chunk_gets_a_new_one(using: str) -> None:
    Tenant.objects.using(using).create(slug="acme", name="acme")
    embedder = BagOfWordsEmbedder(dimension=64)
    service = rag.service(PostgresBackend(using, index_hook=None), embedder, namespace="acme")  # type: ignore[arg-type]
    run(service.ingest, DOCS)
    first = embedder.texts_embedded
    before = chunk_vectors(Chunk.objects.using(using).filter(chunk_id__in=["granite:0", "slate:0"]))
    changed = rag.RAGDocument("basalt", "Basalt is dark volcanic rock, crushed for railway ballast.")
    run(service.ingest, [*DOCS[:2], changed])
    assert embedder.texts_embedded == first + 1  # only the changed chunk was embedded again
    assert chunk_vectors(Chunk.objects.using(using).filter(chunk_id__in=["granite:0", "slate:0"])) == before
    [basalt] = chunk_vectors(Chunk.objects.using(using).filter(chunk_id="basalt:0"))
    assert basalt == pytest.approx(embedder.vector(rag.types.embedding_input(None, changed.text)), abs=1e-3)
    hits = run(service.search, "volcanic rock ballast", mode="semantic", limit=1)
    assert [h.chunk.document_id for h in hits] == ["basalt"]  # type: ignore[union-attr]


def test_the_hnsw_list_grows_with_the_tenant_within_its_bounds() -> None:
    assert q.hnsw_ef_search(0) == q.hnsw_ef_search(20_000) == q.HNSW_EF_SEARCH
    assert q.hnsw_ef_search(100_000) == math.ceil(q.EF_SEARCH_PER_SQRT * math.sqrt(100_000)) > q.HNSW_EF_SEARCH
    assert q.hnsw_ef_search(1_000_000) == 700
    assert q.hnsw_ef_search(10**9) == q.EF_SEARCH_MAX


@pytest.mark.django_db
def test_a_search_sets_the_walks_list_from_the_tenants_size_and_a_keyword_leg_gets_its_work_mem() -> None:
    """The settings travel with the statement: ``hnsw.ef_search`` from the tenant's chunk count (its statistics
    row), unless the backend fixes it, and ``work_mem`` wherever a keyword leg aggregates postings."""
    make_tenant("acme")
    embedder = BagOfWordsEmbedder(dimension=384)
    run(rag.postgres(embedder, namespace="acme").ingest, DOCS)  # type: ignore[arg-type]
    with connection.cursor() as cursor:  # as if the tenant held a million chunks
        cursor.execute("UPDATE knowledge_corpusstat SET chunk_count = 1000000 WHERE tenant_id = (SELECT id FROM accounts_tenant WHERE slug = 'acme')")

    def sent(backend: PostgresBackend, mode: str) -> str:
        with CaptureQueriesContext(connection) as captured:
            hits = run(rag.service(backend, embedder, namespace="acme").search, "thin sheets roof tiles", mode=mode, limit=3)  # type: ignore[arg-type]
        assert hits and hits[0].chunk.document_id == "slate"  # type: ignore[index, union-attr]
        # The first search statement: the one the plan sent (a short page may add the exact one after it).
        return next(c["sql"] for c in captured.captured_queries if "sem_count" in c["sql"] or "kw_count" in c["sql"])

    grown = sent(PostgresBackend(exact_max_chunks=0, index_hook=None), "semantic")
    assert "set_config('hnsw.ef_search', '700', true)" in grown and "work_mem" not in grown
    fixed = sent(PostgresBackend(exact_max_chunks=0, index_hook=None, ef_search=150), "hybrid")
    assert "set_config('hnsw.ef_search', '200', true)" in fixed  # never below twice hybrid's depth of 100
    assert f"set_config('work_mem', '{q.SEARCH_WORK_MEM}', true)" in fixed
    keyword = sent(PostgresBackend(exact_max_chunks=0, index_hook=None), "keyword")
    assert "work_mem" in keyword and "hnsw.ef_search" not in keyword


@pytest.mark.skipif(not (SCIFACT / "corpus.jsonl").exists(), reason="SciFact is not under ../shared/data")
@pytest.mark.django_db
def test_ann_over_real_embeddings_finds_what_exact_search_finds_in_a_vector_share_of_at_most_1536_bytes() -> None:
    """2,000 SciFact titles and 30 of its claims, embedded by the local model: the HNSW index over the
    halfvecs gives the exact top 10 (recall@10 against exact search over the same halfvecs)."""
    with (SCIFACT / "corpus.jsonl").open(encoding="utf-8") as fh:
        titles = [json.loads(line)["title"] for _, line in zip(range(2000), fh, strict=False)]
    with (SCIFACT / "queries.jsonl").open(encoding="utf-8") as fh:
        claims = [json.loads(line)["text"] for _, line in zip(range(30), fh, strict=False)]
    make_tenant("acme")
    embedder = rag.default_embedder()
    writer = rag.postgres(embedder, namespace="acme")
    for start in range(0, len(titles), 500):
        run(writer.ingest, [rag.RAGDocument(f"t{start + i}", title) for i, title in enumerate(titles[start:start + 500])])
    ann = rag.service(PostgresBackend(exact_max_chunks=0, index_hook=None), embedder, namespace="acme")  # type: ignore[arg-type]
    exact = rag.service(PostgresBackend(exact_max_chunks=10_000, index_hook=None), embedder, namespace="acme")  # type: ignore[arg-type]
    recalls = []
    for claim in claims:
        truth = {h.chunk.chunk_id for h in run(exact.search, claim, mode="semantic", limit=10)}  # type: ignore[union-attr]
        with CaptureQueriesContext(connection) as captured:
            found = {h.chunk.chunk_id for h in run(ann.search, claim, mode="semantic", limit=10)}  # type: ignore[union-attr]
        searches = [s["sql"] for s in captured.captured_queries if "sem_count" in s["sql"]]
        # One statement, on the ANN path: no short page sent it to the exact plan.
        assert len(searches) == 1 and "hnsw.ef_search" in searches[0] and "+ 0, c.id" not in searches[0], [x[-300:] for x in searches]
        recalls.append(len(truth & found) / len(truth))
    assert sum(recalls) / len(recalls) >= 0.95, recalls

    with connection.cursor() as cursor:
        cursor.execute(f"REINDEX INDEX {q.hnsw_index_name(384)}")  # this tenant's entries only, none left by other tests
        cursor.execute(f"EXPLAIN SELECT 1 FROM knowledge_chunk c WHERE c.indexed AND vector_dims(c.embedding_half) = 384 "
                       f"ORDER BY (c.embedding_half::halfvec(384)) <=> '[{','.join(['1'] * 384)}]'::halfvec(384) LIMIT 5")
        assert q.hnsw_index_name(384) in "\n".join(row[0] for row in cursor.fetchall())
        cursor.execute(f"SELECT pg_relation_size('{q.hnsw_index_name(384)}'), count(*), avg(pg_column_size(embedding_half)), "
                       "count(embedding) FROM knowledge_chunk")
        index_bytes, chunks, column_bytes, arrays = cursor.fetchone()
    assert chunks == 2000 and arrays == 0
    per_chunk = float(column_bytes) + index_bytes / chunks
    assert per_chunk <= VECTOR_BYTES_PER_CHUNK, (column_bytes, index_bytes / chunks)


@pytest.mark.django_db(transaction=True)
def test_the_migration_moves_vectors_written_the_old_way_and_back() -> None:
    """Rows written before 0022 (the array, its HNSW over ``::vector(d)``) end with a halfvec and its index; reversed, the array."""
    assert has_column("default", "embedding_half")
    before, after = [("knowledge", "0021_chunk_key_covers_access")], [("knowledge", "0022_chunk_halfvec")]
    MigrationExecutor(connection).migrate(before)
    try:
        assert not has_column("default", "embedding_half")
        make_tenant("acme")
        embedder = BagOfWordsEmbedder(dimension=384)
        # A fresh backend sees no halfvec column: it writes and reads the array, as the code before 0022 did.
        old = rag.service(PostgresBackend(index_hook=None), embedder, namespace="acme")  # type: ignore[arg-type]
        assert not old.backend.has_pgvector()  # type: ignore[attr-defined]
        run(old.ingest, DOCS)
        arrays = dict(Chunk.objects.values_list("chunk_id", "embedding"))
        assert len(arrays) == len(DOCS) and all(a is not None and len(a) == 384 for a in arrays.values())
        with connection.cursor() as cursor:
            cursor.execute("SELECT indexdef FROM pg_indexes WHERE indexname = 'chunk_embedding_hnsw_384'")
            assert "vector_cosine_ops" in cursor.fetchone()[0]
        MigrationExecutor(connection).migrate(after)

        with connection.cursor() as cursor:
            cursor.execute("SELECT indexdef FROM pg_indexes WHERE indexname = 'chunk_embedding_hnsw_384'")
            definition = cursor.fetchone()[0]
            cursor.execute("SELECT count(*) FILTER (WHERE embedding IS NULL AND embedding_half IS NOT NULL) FROM knowledge_chunk")
            moved = cursor.fetchone()[0]
        assert "(embedding_half)::halfvec(384)" in definition and "halfvec_cosine_ops" in definition
        assert moved == len(DOCS)
        for chunk_id, want in arrays.items():
            assert chunk_vectors(Chunk.objects.filter(chunk_id=chunk_id)) == [pytest.approx(want, abs=1e-3)]
        new = rag.service(PostgresBackend(index_hook=None, exact_max_chunks=0), embedder, namespace="acme")  # type: ignore[arg-type]
        hits = run(new.search, "thin sheets roof tiles", mode="semantic", limit=1)
        assert [h.chunk.document_id for h in hits] == ["slate"]  # type: ignore[union-attr]
        # A write after the migration lands in the halfvec through the trigger.
        run(new.ingest, [rag.RAGDocument("marble", "Marble is metamorphosed limestone.")])
        assert None not in chunk_vectors(Chunk.objects.all())
        assert not Chunk.objects.filter(embedding__isnull=False).exists()

        MigrationExecutor(connection).migrate(before)  # and back: the array again
        assert not has_column("default", "embedding_half")
        restored = dict(Chunk.objects.values_list("chunk_id", "embedding"))
        assert restored["slate:0"] == pytest.approx(arrays["slate:0"], abs=1e-3) and len(restored) == len(DOCS) + 1
    finally:
        MigrationExecutor(connection).migrate(after)
