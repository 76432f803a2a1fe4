"""The indexing backlog: large ingestions are stored at once and indexed later, and search
gives the same answers before and after the indexer has run (PostgreSQL backend).

The whole RAG contract also runs with every chunk in the backlog (the "backlog" backend
of tests/test_rag_contract.py); these tests cover what is particular to it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest
from asgiref.sync import async_to_sync
from django.core.management import call_command
from django.db import connection, connections, transaction
from django.test.utils import CaptureQueriesContext
from django_q.models import OrmQ

from accounts.models import Tenant
from knowledge import rag, tasks
from knowledge.services import indexing
from knowledge.models import Chunk, CorpusStat, Posting, TermStat
from knowledge.rag import RAGDocument
from knowledge.rag.backends.postgres import PostgresBackend, maintenance
from knowledge.rag.backends.postgres.sql import create_hnsw_index_sql, hnsw_index_name
from tests.conftest import STOCK_AVAILABLE, backend_setting
from tests.embedders import BagOfWordsEmbedder
from tests.factories import make_tenant
from tests.test_knowledge_commands import write_beir

needs_stock = pytest.mark.skipif(not STOCK_AVAILABLE, reason="no PostgreSQL at 127.0.0.1:5432 (this machine kind provides one)")
DATABASES = ["default", pytest.param("stock", marks=needs_stock)]

WORDS = ["granite", "marble", "slate", "basalt", "quarry", "drill", "blast", "crusher", "permit", "safety", "dust", "water"]
QUERIES = ["granite drill", "marble dust safety", "quarry permit water", "basalt crusher", "blast"]


def corpus(count: int, tag: str = "") -> list[RAGDocument]:
    """Documents of varied length and term mix (deterministic)."""
    docs = []
    for i in range(count):
        words = [WORDS[(i * 7 + k * k) % len(WORDS)] for k in range(3 + i % 9)]
        docs.append(RAGDocument(f"doc-{i}", f"{tag} Note {i}: " + " ".join(words) + ".", metadata={"group": i % 3}))
    return docs


def run(fn: Callable[..., object], *args: object, **kwargs: object) -> object:
    return async_to_sync(fn)(*args, **kwargs)  # type: ignore[arg-type]


def service(using: str, *, inline: int, namespace: str = "acme", **kw: object) -> rag.RAGService:
    return rag.service(PostgresBackend(using, inline_index_max_chunks=inline, **kw), BagOfWordsEmbedder(), namespace=namespace)  # type: ignore[arg-type]


def drain(backend: PostgresBackend, namespace: str = "acme", limit: int = 7) -> int:
    done = 0
    while batch := maintenance.index_backlog(backend, namespace, limit=limit):
        done += batch
    return done


def answers(svc: rag.RAGService) -> list[list[tuple[str, float]]]:
    """Every query in every mode, with and without a filter: ids and scores."""
    out = []
    for query in QUERIES:
        for mode in ("keyword", "semantic", "hybrid"):
            for filters in ({}, {"group": 1}):
                hits = run(svc.search, query, mode=mode, limit=10, filters=filters)
                out.append([(h.chunk.chunk_id, round(h.score, 9)) for h in hits])  # type: ignore[union-attr]
    return out


def orphan_postings(using: str) -> int:
    return Posting.objects.using(using).exclude(chunk_id__in=Chunk.objects.using(using).values("id")).count()


def statistics(using: str, tenant: Tenant) -> tuple[object, ...]:
    terms = sorted(TermStat.objects.using(using).filter(tenant=tenant).values_list("lexeme", "df"))
    corpus_row = CorpusStat.objects.using(using).filter(tenant=tenant).values_list("chunk_count", "token_count").first()
    postings = sorted(Posting.objects.using(using).filter(tenant=tenant).values_list("chunk_id", "lexeme", "tf", "dl"))
    return terms, corpus_row, postings


@pytest.mark.django_db(databases=["default", "stock"] if STOCK_AVAILABLE else ["default"])
@pytest.mark.parametrize("using", DATABASES)
def test_search_answers_the_same_before_and_after_the_backlog_is_indexed(using: str) -> None:
    Tenant.objects.using(using).create(slug="acme", name="acme")
    if using == "default":  # with pgvector: the ANN leg runs on a real HNSW index
        with connections[using].cursor() as cursor:
            cursor.execute(create_hnsw_index_sql(BagOfWordsEmbedder().dimension))
    docs = corpus(60)
    run(service(using, inline=500).ingest, docs[:20])  # small: indexed in its own transaction
    deferred = service(using, inline=0)
    run(deferred.ingest, docs[20:])
    backend: PostgresBackend = deferred.backend  # type: ignore[assignment]
    assert maintenance.backlog(backend, "acme") == 40
    assert Posting.objects.using(using).filter(chunk_id__in=Chunk.objects.using(using).filter(indexed=False).values("id")).count() == 0

    before = answers(deferred)
    assert all(before[i] for i in range(0, len(before), 2)), "every unfiltered query finds something"
    assert any(hit[0].startswith(("doc-2", "doc-3", "doc-4", "doc-5")) for page in before for hit in page), "the backlog is found"
    assert drain(backend) == 40
    assert maintenance.backlog(backend, "acme") == 0
    assert answers(deferred) == before


@pytest.mark.django_db
def test_the_ann_leg_can_use_the_partial_hnsw_index() -> None:
    """The query repeats the index predicate (indexed AND dimension); without it the planner cannot use the index."""
    make_tenant("acme")
    dimension = BagOfWordsEmbedder().dimension
    with connection.cursor() as cursor:
        cursor.execute(create_hnsw_index_sql(dimension))
    svc = service("default", inline=500, exact_max_chunks=0)  # the ANN path, which a tenant this small skips by default
    run(svc.ingest, corpus(30))
    with CaptureQueriesContext(connection) as captured:
        run(svc.search, "granite drill", mode="semantic", limit=5)
    sql = next(q["sql"] for q in captured.captured_queries if "sem_ann" in q["sql"])
    sql = sql.partition("; ")[2]  # the search, without the HNSW settings sent in the same round trip
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")
        cursor.execute("SET LOCAL enable_sort = off")
        cursor.execute("EXPLAIN " + sql)
        plan = "\n".join(row[0] for row in cursor.fetchall())
    assert hnsw_index_name(dimension) in plan, plan


@pytest.mark.django_db(databases=["default", "stock"] if STOCK_AVAILABLE else ["default"])
@pytest.mark.parametrize("using", DATABASES)
def test_the_indexer_writes_what_an_inline_ingestion_writes(using: str) -> None:
    acme = Tenant.objects.using(using).create(slug="acme", name="acme")
    globex = Tenant.objects.using(using).create(slug="globex", name="globex")
    docs = corpus(40)
    run(service(using, inline=500, namespace="acme").ingest, docs)
    deferred = service(using, inline=0, namespace="globex")
    run(deferred.ingest, docs)
    drain(deferred.backend, "globex")  # type: ignore[arg-type]

    def comparable(tenant: Tenant) -> tuple[object, ...]:
        terms, corpus_row, postings = statistics(using, tenant)
        ids = dict(Chunk.objects.using(using).filter(tenant=tenant).values_list("id", "chunk_id"))
        return terms, corpus_row, sorted((ids[chunk], lexeme, tf, dl) for chunk, lexeme, tf, dl in postings)  # type: ignore[index]

    assert comparable(acme) == comparable(globex)
    assert not Chunk.objects.using(using).filter(indexed=False).exists()


@pytest.mark.django_db(databases=["default", "stock"] if STOCK_AVAILABLE else ["default"])
@pytest.mark.parametrize("using", DATABASES)
def test_replacing_and_deleting_backlog_chunks_leaves_nothing_behind(using: str) -> None:
    tenant = Tenant.objects.using(using).create(slug="acme", name="acme")
    deferred = service(using, inline=0)
    backend: PostgresBackend = deferred.backend  # type: ignore[assignment]
    run(deferred.ingest, corpus(30))
    assert maintenance.index_backlog(backend, "acme", limit=10) == 10  # a third indexed, the rest waiting
    # New versions of indexed and waiting documents, stored both ways; deletions of both kinds.
    run(deferred.ingest, [RAGDocument(f"doc-{i}", f"Replaced {i}: obsidian only.") for i in (0, 1, 15, 16)])
    run(service(using, inline=500).ingest, [RAGDocument(f"doc-{i}", f"Replaced {i}: obsidian only.") for i in (2, 17)])
    assert run(deferred.delete, ["doc-3", "doc-18", "doc-29"]) == 3
    assert orphan_postings(using) == 0
    drain(backend)
    assert orphan_postings(using) == 0 and maintenance.backlog(backend, "acme") == 0
    assert Chunk.objects.using(using).filter(tenant=tenant).count() == 27

    hits = run(deferred.search, "obsidian", mode="keyword", limit=20)
    assert sorted(h.chunk.document_id for h in hits) == sorted(f"doc-{i}" for i in (0, 1, 2, 15, 16, 17))  # type: ignore[union-attr]
    # The running statistics equal those recomputed from scratch.
    kept = statistics(using, tenant)
    maintenance.rebuild_statistics(backend, "acme")
    assert statistics(using, tenant)[:2] == kept[:2]
    assert len(statistics(using, tenant)[2]) == len(kept[2])


@pytest.mark.django_db
def test_only_large_ingestions_report_a_backlog_and_the_backend_queues_nothing(django_capture_on_commit_callbacks) -> None:  # type: ignore[no-untyped-def]
    make_tenant("acme")
    svc = rag.service(PostgresBackend(inline_index_max_chunks=3), None, namespace="acme")
    with django_capture_on_commit_callbacks() as queued:
        small = run(svc.ingest_documents, corpus(3))
        large = run(svc.ingest_documents, corpus(4))
    assert small == rag.Stored(3, backlog=False, extracted=True) and large == rag.Stored(4, backlog=True, extracted=False)
    assert Chunk.objects.filter(indexed=False).count() == 4
    assert queued == []  # what to queue is the caller's business (knowledge.services.indexing.after_write)
    with pytest.raises(ValueError, match="limit must be at least 1"):
        maintenance.index_backlog(svc.backend, "acme", limit=0)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="0 or more"):
        PostgresBackend(inline_index_max_chunks=-1)


@pytest.mark.django_db
def test_product_ingestions_queue_the_indexer_and_reclaim_finds_a_lost_backlog(settings, django_capture_on_commit_callbacks) -> None:  # type: ignore[no-untyped-def]
    from knowledge.services.documents import document_ingest

    settings.QUARRY_RAG_BACKEND = backend_setting(inline_index_max_chunks=5)
    tenant = make_tenant("acme")
    with django_capture_on_commit_callbacks(execute=True):
        document_ingest(tenant=tenant, documents=corpus(4), actor="editor", embedder=None)
    assert not OrmQ.objects.exists()
    with django_capture_on_commit_callbacks(execute=True):
        document_ingest(tenant=tenant, documents=corpus(8, tag="v2"), actor="editor", embedder=None)
    queued = [(task.func(), task.args()) for task in OrmQ.objects.all()]
    assert queued == [(indexing.INDEX_TASK, ("acme",))]

    OrmQ.objects.all().delete()  # the task was lost
    assert tasks.reclaim_documents()["backlogs_queued"] == 1
    assert [(task.func(), task.args()) for task in OrmQ.objects.all()] == [(indexing.INDEX_TASK, ("acme",))]
    assert tasks.index_backlog("acme") == 8
    assert tasks.reclaim_documents()["backlogs_queued"] == 0
    assert tasks.index_backlog("deleted-meanwhile") == 0  # a task outliving its tenant ends quietly
    assert orphan_postings("default") == 0


@pytest.mark.django_db
def test_ingest_beir_leaves_no_backlog(settings, tmp_path) -> None:  # type: ignore[no-untyped-def]
    import io

    settings.QUARRY_RAG_BACKEND = backend_setting(inline_index_max_chunks=0)
    make_tenant("beir")
    write_beir(tmp_path)
    call_command("ingest_beir", str(tmp_path), "--tenant", "beir", stdout=io.StringIO(), stderr=io.StringIO())
    assert Chunk.objects.filter(tenant__slug="beir").count() == 3
    assert not Chunk.objects.filter(indexed=False).exists()
    assert Posting.objects.filter(tenant__slug="beir").values("chunk_id").distinct().count() == 3


@pytest.mark.django_db(transaction=True)
def test_replacing_a_document_waits_for_an_indexer_working_on_its_chunks() -> None:
    make_tenant("acme")
    text = " ".join(f"old-{i} words for the chunker." for i in range(60))
    chunker = rag.FixedSizeChunker(size=200, overlap=0)
    run(rag.service(PostgresBackend(inline_index_max_chunks=0), None, chunker, namespace="acme").ingest, [RAGDocument("doc", text)])
    posted, release = threading.Event(), threading.Event()
    errors: list[BaseException] = []

    def index() -> None:
        """An indexer held inside its transaction, postings written, until released (an outer
        transaction around it keeps its row locks and postings uncommitted meanwhile)."""
        try:
            with transaction.atomic():
                assert maintenance.index_backlog(PostgresBackend(), "acme") > 0
                posted.set()
                release.wait(60)
        except BaseException as exc:  # noqa: BLE001 - surfaced below
            errors.append(exc)
        finally:
            connection.close()

    def replace() -> None:
        try:
            svc = rag.service(PostgresBackend(inline_index_max_chunks=0), None, chunker, namespace="acme")
            run(svc.ingest, [RAGDocument("doc", "The new version: one chunk.")])
        except BaseException as exc:  # noqa: BLE001 - surfaced below
            errors.append(exc)
        finally:
            connection.close()

    indexing = threading.Thread(target=index)
    indexing.start()
    try:
        assert posted.wait(60), "the indexer never reached its postings"
        replacing = threading.Thread(target=replace)
        replacing.start()
        replacing.join(timeout=1.0)
        assert replacing.is_alive(), "the replacement did not wait for the indexer's row locks"
    finally:
        release.set()
        indexing.join(timeout=60)
    replacing.join(timeout=60)
    assert errors == []
    assert list(Chunk.objects.values_list("text", flat=True)) == ["The new version: one chunk."]
    assert orphan_postings("default") == 0
    assert Posting.objects.count() == 0  # the new version waits in the backlog


@pytest.mark.django_db(databases=["default", "stock"] if STOCK_AVAILABLE else ["default"])
@pytest.mark.parametrize("using", DATABASES)
def test_chunk_tables_are_vacuumed_after_two_percent_of_changes(using: str) -> None:
    """Dead HNSW entries (a deleted tenant, a re-indexed backlog) should not wait for 20% of the table."""
    with connections[using].cursor() as cursor:
        cursor.execute("SELECT relname, reloptions FROM pg_class WHERE relname IN ('knowledge_chunk', 'knowledge_posting')")
        options = {name: set(opts or []) for name, opts in cursor.fetchall()}
    expected = {"autovacuum_vacuum_scale_factor=0.02", "autovacuum_analyze_scale_factor=0.02"}
    assert expected <= options["knowledge_chunk"] and expected <= options["knowledge_posting"], options
