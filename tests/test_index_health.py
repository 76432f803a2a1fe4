"""Issue 22: one tenant's churn never costs another tenant search quality.

Small tenants are ranked by exact cosine over their own chunks, never through the shared
HNSW index (so its state cannot matter to them); the shared indexes' bloat is reported and
repaired with REINDEX INDEX CONCURRENTLY while searches and ingestion go on.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Sequence
from io import StringIO

import numpy as np
import pytest
from asgiref.sync import async_to_sync
from django.core.management import CommandError, call_command
from django.db import connection, connections
from django.test.utils import CaptureQueriesContext
from django_q.models import Schedule

from accounts.models import Tenant
from knowledge import rag, tasks
from knowledge.models import IndexRebuild
from knowledge.rag import RAGDocument
from knowledge.rag.backends.postgres import PostgresBackend
from knowledge.services import index_health
from tests.conftest import STOCK_AVAILABLE

DIM = 384  # the dimension migration 0003 gave an HNSW index
MODEL = "test/clustered"
needs_stock = pytest.mark.skipif(not STOCK_AVAILABLE, reason="no PostgreSQL at 127.0.0.1:5432 (this machine kind provides one)")


class TableEmbedder:
    """Vectors looked up by text: the test decides the geometry."""

    model_id = MODEL
    dimension = DIM

    def __init__(self, table: dict[str, np.ndarray]) -> None:
        self.table = table

    async def embed(self, texts: Sequence[str], *, kind: str = "document") -> list[list[float]]:
        return [self.table[t].tolist() for t in texts]


def unit(v: np.ndarray) -> np.ndarray:
    return v / np.linalg.norm(v)


def clustered(count: int, *, seed: int, prefix: str, clusters: int = 20) -> tuple[list[RAGDocument], dict[str, np.ndarray], np.ndarray]:
    """``count`` documents whose vectors sit around ``clusters`` centres (no ties), and the centres."""
    rng = np.random.default_rng(seed)
    centres = np.array([unit(rng.normal(size=DIM)) for _ in range(clusters)])
    docs, table = [], {}
    for i in range(count):
        text = f"{prefix} passage {i} about topic {i % clusters}."
        table[text] = unit(centres[i % clusters] + rng.normal(0, 0.04, DIM))
        docs.append(RAGDocument(f"{prefix}-{i}", text, metadata={"part": i % 2}))
    return docs, table, centres


def run(fn: Callable[..., object], *args: object, **kwargs: object) -> object:
    return async_to_sync(fn)(*args, **kwargs)  # type: ignore[arg-type]


def ingest(using: str, namespace: str, docs: list[RAGDocument], table: dict[str, np.ndarray]) -> None:
    backend = PostgresBackend(using, inline_index_max_chunks=10_000)  # every chunk indexed at once: into the HNSW graph
    service = rag.service(backend, TableEmbedder(table), namespace=namespace)  # type: ignore[arg-type]
    for start in range(0, len(docs), 1000):  # the API's bound per ingestion
        run(service.ingest, docs[start:start + 1000])


def semantic(backend: PostgresBackend, namespace: str, vector: np.ndarray, limit: int = 10, **filters: object) -> list[str]:
    query = rag.RAGQuery("topic", namespace, mode=rag.SearchMode.SEMANTIC, limit=limit, vector=tuple(float(x) for x in vector),
                         embedding_model=MODEL, filters=filters)  # type: ignore[arg-type]
    return [h.chunk.document_id for h in run(backend.search, query)]  # type: ignore[union-attr]


def brute_force(docs: list[RAGDocument], table: dict[str, np.ndarray], vector: np.ndarray, limit: int = 10,
                keep: Callable[[RAGDocument], bool] = lambda d: True) -> list[str]:
    # pgvector compares in single precision: rank the same way, so only true near-ties could differ (there are none).
    kept = [d for d in docs if keep(d)]
    scores = [float(np.dot(table[d.text].astype(np.float32), vector.astype(np.float32))) for d in kept]
    order = sorted(range(len(kept)), key=lambda i: -scores[i])
    return [kept[i].id for i in order[:limit]]


def plans_of(using: str, queries: list[dict[str, str]]) -> str:
    """EXPLAIN of every SELECT captured (the statement run with the parameters psycopg bound)."""
    plans = []
    with connections[using].cursor() as cursor:
        for q in queries:
            # The HNSW path sends its settings in the same round trip: explain the search under them.
            settings, _, statement = q["sql"].partition("; ") if q["sql"].startswith("SELECT set_config(") else ("", "", q["sql"])
            if statement.lstrip().upper().startswith("WITH"):
                cursor.execute(f"{settings}; EXPLAIN {statement}" if settings else f"EXPLAIN {statement}")
                if settings:
                    cursor.nextset()
                plans.append("\n".join(r[0] for r in cursor.fetchall()))
    return "\n".join(plans)


def churn(using: str, count: int = 600) -> None:
    """Another tenant's re-import: ``count`` chunks into the shared index, then all deleted."""
    Tenant.objects.using(using).create(slug="globex", name="globex")
    docs, table, _ = clustered(count, seed=7, prefix="globex")
    ingest(using, "globex", docs, table)
    for start in range(0, len(docs), 1000):
        run(PostgresBackend(using).delete, "globex", [d.id for d in docs[start:start + 1000]])


# --- exact search for small tenants ----------------------------------------------------------


@pytest.mark.django_db
def test_small_tenant_gets_the_brute_force_ranking_without_touching_the_hnsw_index() -> None:
    Tenant.objects.create(slug="acme", name="acme")
    churn("default")
    docs, table, centres = clustered(300, seed=1, prefix="acme")
    ingest("default", "acme", docs, table)
    backend = PostgresBackend()
    assert backend.exact_max_chunks >= 300
    rng = np.random.default_rng(3)
    for k in range(5):
        vector = unit(centres[k] + rng.normal(0, 0.05, DIM))
        with CaptureQueriesContext(connection) as captured:
            found = semantic(backend, "acme", vector)
        assert found == brute_force(docs, table, vector)
        assert "chunk_embedding_hnsw_384" not in plans_of("default", captured.captured_queries)
    # The same question, filtered: still exact, still the tenant's own rows.
    vector = unit(centres[0])
    assert semantic(backend, "acme", vector, part=1) == brute_force(docs, table, vector, keep=lambda d: d.metadata["part"] == 1)


@pytest.mark.django_db
def test_a_tenant_above_the_threshold_uses_the_hnsw_index() -> None:
    """The other side of the threshold, so the test above could fail: the plan does name the index."""
    Tenant.objects.create(slug="acme", name="acme")
    docs, table, centres = clustered(300, seed=1, prefix="acme")
    ingest("default", "acme", docs, table)
    with CaptureQueriesContext(connection) as captured:
        semantic(PostgresBackend(exact_max_chunks=299), "acme", unit(centres[0]))
    assert "chunk_embedding_hnsw_384" in plans_of("default", captured.captured_queries)


@pytest.mark.django_db
def test_a_filter_that_leaves_few_candidates_of_a_large_tenant_is_searched_exactly() -> None:
    """Above the threshold, a filter keeping at most ``exact_max_chunks`` chunks skips the index;
    one keeping more does not (so the first half could fail)."""
    Tenant.objects.create(slug="acme", name="acme")
    docs, table, centres = clustered(300, seed=6, prefix="acme")
    docs = [RAGDocument(d.id, d.text, metadata={**d.metadata, "shelf": "rare" if i % 15 == 0 else "common"}) for i, d in enumerate(docs)]
    ingest("default", "acme", docs, table)
    backend = PostgresBackend(exact_max_chunks=100)  # acme's 300 chunks are above it
    vector = unit(centres[0])
    with CaptureQueriesContext(connection) as captured:
        found = semantic(backend, "acme", vector, shelf="rare")  # 20 candidates
    assert found == brute_force(docs, table, vector, keep=lambda d: d.metadata["shelf"] == "rare")
    assert "chunk_embedding_hnsw_384" not in plans_of("default", captured.captured_queries)
    with CaptureQueriesContext(connection) as captured:
        semantic(backend, "acme", vector, part=1)  # 150 candidates
    assert "chunk_embedding_hnsw_384" in plans_of("default", captured.captured_queries)


@pytest.mark.django_db
def test_exact_and_ann_paths_return_the_same_top_10_on_a_small_tenant() -> None:
    Tenant.objects.create(slug="acme", name="acme")
    docs, table, centres = clustered(300, seed=2, prefix="acme")
    ingest("default", "acme", docs, table)
    exact, ann = PostgresBackend(exact_max_chunks=10_000), PostgresBackend(exact_max_chunks=0)
    for k in range(5):
        assert semantic(exact, "acme", centres[k]) == semantic(ann, "acme", centres[k]) == brute_force(docs, table, centres[k])


@pytest.mark.django_db
@pytest.mark.parametrize("threshold", [10_000, 0], ids=["exact", "ann"])
def test_tenant_isolation_holds_on_both_paths(threshold: int) -> None:
    """globex holds the very same vectors (closer ones, even): acme never sees them."""
    Tenant.objects.create(slug="acme", name="acme")
    Tenant.objects.create(slug="globex", name="globex")
    docs, table, centres = clustered(100, seed=4, prefix="acme")
    ingest("default", "acme", docs, table)
    theirs = [RAGDocument(f"globex-{i}", f"globex copy {i}") for i in range(100)]
    ingest("default", "globex", theirs, {f"globex copy {i}": unit(centres[i % 20]) for i in range(100)})
    found = semantic(PostgresBackend(exact_max_chunks=threshold), "acme", centres[0], limit=50)
    assert len(found) == 50 and all(d.startswith("acme-") for d in found)


@pytest.mark.skipif(not STOCK_AVAILABLE, reason="no PostgreSQL at 127.0.0.1:5432")
@pytest.mark.django_db(databases=["default", "stock"])
@pytest.mark.parametrize("threshold", [10_000, 0], ids=["small", "large"])
def test_without_pgvector_every_tenant_is_searched_exactly(threshold: int) -> None:
    Tenant.objects.using("stock").create(slug="acme", name="acme")
    churn("stock", count=200)
    docs, table, centres = clustered(150, seed=5, prefix="acme")
    ingest("stock", "acme", docs, table)
    backend = PostgresBackend("stock", exact_max_chunks=threshold)
    assert not backend.has_pgvector()
    for k in range(3):
        assert semantic(backend, "acme", centres[k]) == brute_force(docs, table, centres[k])


def test_the_threshold_must_not_be_negative() -> None:
    with pytest.raises(ValueError, match="exact_max_chunks"):
        PostgresBackend(exact_max_chunks=-1)


# --- index health and repair ----------------------------------------------------------------


def health_json(*args: str) -> dict[str, object]:
    out = StringIO()
    call_command("index_health", *args, stdout=out)
    return json.loads(out.getvalue())


@pytest.mark.django_db(transaction=True)
def test_health_reports_bloat_after_churn_and_the_rebuild_repairs_it() -> None:
    Tenant.objects.create(slug="acme", name="acme")
    docs, table, _ = clustered(100, seed=1, prefix="acme")
    ingest("default", "acme", docs, table)
    churn("default", count=1500)
    with connection.cursor() as cursor:
        cursor.execute("VACUUM knowledge_chunk")  # what autovacuum does soon after: marks the entries free, keeps the pages
    report = {i["name"]: i for i in health_json()["indexes"]}  # type: ignore[union-attr]
    assert set(report) == {"chunk_embedding_hnsw_384", "chunk_search_vector_gin", "posting_term_impact"}
    hnsw = report["chunk_embedding_hnsw_384"]
    assert hnsw["live_rows"] == 100 and hnsw["method"] == "hnsw" and hnsw["valid"]
    assert hnsw["bloat"] > 5, hnsw  # 1,600 chunks' pages for 100 live ones
    assert hnsw["last_rebuild"] is None
    # The postings and GIN indexes are measured too, against an estimate until their first rebuild.
    assert report["posting_term_impact"]["bloat"] is not None and report["chunk_search_vector_gin"]["bloat"] is not None

    result = health_json("--reindex", "chunk_embedding_hnsw_384")
    (rebuilt,) = result["rebuilt"]  # type: ignore[misc]
    assert rebuilt["size_after"] < rebuilt["size_before"] / 5
    after = {i["name"]: i for i in result["indexes"]}["chunk_embedding_hnsw_384"]  # type: ignore[union-attr]
    assert after["last_rebuild"] is not None and after["size_bytes"] == rebuilt["size_after"]
    assert after["bloat"] == 1.0  # the fresh size per row is now this rebuild's own
    record = IndexRebuild.objects.get()
    assert (record.index_name, record.trigger, record.error, record.live_rows) == ("chunk_embedding_hnsw_384", "command", "", 100)
    # Search still works through the rebuilt index.
    assert len(semantic(PostgresBackend(exact_max_chunks=0), "acme", table[docs[0].text])) == 10


@pytest.mark.django_db(transaction=True)
def test_the_scheduled_repair_rebuilds_only_past_the_bound(settings: object) -> None:
    Tenant.objects.create(slug="acme", name="acme")
    docs, table, _ = clustered(100, seed=1, prefix="acme")
    ingest("default", "acme", docs, table)
    settings.QUARRY_INDEX_REBUILD_MIN_BYTES = 0  # type: ignore[attr-defined]
    settings.QUARRY_INDEX_REBUILD_BLOAT = 1000.0  # type: ignore[attr-defined]
    assert tasks.repair_indexes()["rebuilt"] is None
    churn("default", count=1500)
    with connection.cursor() as cursor:
        cursor.execute("VACUUM knowledge_chunk")
    settings.QUARRY_INDEX_REBUILD_BLOAT = 3.0  # type: ignore[attr-defined]
    before = {h.name: h for h in index_health.index_health_report()}
    assert before["chunk_embedding_hnsw_384"].needs_rebuild
    rebuilt: list[str] = []
    for _ in range(4):  # one rebuild a run, the worst first, until nothing is due
        result = tasks.repair_indexes()
        if result["rebuilt"] is None:
            break
        assert result["rebuilt"]["error"] is None, result  # type: ignore[index]
        rebuilt.append(result["rebuilt"]["index"])  # type: ignore[index]
    # The runs go on, one rebuild each, until nothing is due. Which indexes are due is measured again at
    # every run: rebuilding one updates the table's statistics, which can make another due (seen: the
    # postings index) or no longer due (seen: the text GIN index, once in a full run).
    assert "chunk_embedding_hnsw_384" in rebuilt and len(rebuilt) == len(set(rebuilt))
    assert tasks.repair_indexes()["rebuilt"] is None  # repaired: nothing due any more


@pytest.mark.django_db(transaction=True)
def test_rebuild_runs_while_searches_and_ingestion_go_on() -> None:
    Tenant.objects.create(slug="acme", name="acme")
    Tenant.objects.create(slug="initech", name="initech")
    docs, table, centres = clustered(400, seed=1, prefix="acme")
    ingest("default", "acme", docs, table)
    expected = {k: brute_force(docs, table, centres[k]) for k in range(3)}
    stop = threading.Event()
    errors: list[BaseException] = []
    counts = {"searches": 0, "ingests": 0}

    def searching() -> None:
        try:
            exact, ann = PostgresBackend(), PostgresBackend(exact_max_chunks=0)
            while not stop.is_set():
                for k in range(3):
                    assert semantic(exact, "acme", centres[k]) == expected[k]
                    assert len(semantic(ann, "acme", centres[k])) == 10
                    counts["searches"] += 2
        except BaseException as exc:  # noqa: BLE001 - surfaced below
            errors.append(exc)
        finally:
            connection.close()

    def ingesting() -> None:
        try:
            n = 0
            while not stop.is_set():
                more, more_table, _ = clustered(20, seed=100 + n, prefix=f"initech{n}")
                ingest("default", "initech", more, more_table)
                counts["ingests"] += 1
                n += 1
        except BaseException as exc:  # noqa: BLE001 - surfaced below
            errors.append(exc)
        finally:
            connection.close()

    workers = [threading.Thread(target=searching), threading.Thread(target=ingesting)]
    for w in workers:
        w.start()
    try:
        for _ in range(3):
            record = index_health.index_rebuild(name="chunk_embedding_hnsw_384", trigger="command")
            assert record is not None and record.error == "", record and record.error
    finally:
        stop.set()
        for w in workers:
            w.join(timeout=120)
    assert errors == []
    assert counts["searches"] > 0 and counts["ingests"] > 0
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid WHERE i.relname LIKE 'chunk_embedding_hnsw_384%'")
        assert cursor.fetchone()[0] == 1  # no _ccnew copy left behind


@pytest.mark.django_db(transaction=True)
def test_an_interrupted_rebuilds_leftover_is_dropped_first() -> None:
    with connection.cursor() as cursor:
        # What a worker killed mid-REINDEX leaves: an invalid copy beside the index.
        cursor.execute("CREATE INDEX chunk_embedding_hnsw_384_ccnew ON knowledge_chunk (id)")
        cursor.execute("UPDATE pg_index SET indisvalid = false WHERE indexrelid = 'chunk_embedding_hnsw_384_ccnew'::regclass")
    record = index_health.index_rebuild(name="chunk_embedding_hnsw_384", trigger="command")
    assert record is not None and record.error == ""
    with connection.cursor() as cursor:
        cursor.execute("SELECT to_regclass('chunk_embedding_hnsw_384_ccnew')")
        assert cursor.fetchone()[0] is None


@pytest.mark.django_db
def test_only_watched_indexes_can_be_rebuilt() -> None:
    with pytest.raises(CommandError, match="not a watched search index"):
        call_command("index_health", "--reindex", "accounts_tenant_pkey", stdout=StringIO())


@pytest.mark.django_db
def test_a_rebuild_inside_a_transaction_is_refused() -> None:
    with pytest.raises(RuntimeError, match="inside a transaction"):
        index_health.index_rebuild(name="chunk_embedding_hnsw_384", trigger="command")


@pytest.mark.django_db
def test_the_repair_schedule_is_put_back_when_missing() -> None:
    Schedule.objects.filter(name=index_health.REPAIR_SCHEDULE_NAME).delete()
    index_health.repair_schedule_ensure()
    index_health.repair_schedule_ensure()
    (schedule,) = Schedule.objects.filter(name=index_health.REPAIR_SCHEDULE_NAME)
    assert (schedule.func, schedule.minutes) == (index_health.REPAIR_TASK, index_health.REPAIR_SCHEDULE_MINUTES)
