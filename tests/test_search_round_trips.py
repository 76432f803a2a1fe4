"""A search resolves its tenant once and costs a bounded number of database round trips (issue 32, item 5).

Counted from the selector down (the request has resolved its ``Tenant``, as every surface does): the
RAG service resolves the namespace once (tenant id, model, size: one statement) and hands it to the
backend, whose plan then sends its search. Each statement Django sends is one round trip; the HNSW path's settings travel in the
same one as its search.
"""

from __future__ import annotations

import pytest
from asgiref.sync import async_to_sync
from django.db import connection
from django.test.utils import CaptureQueriesContext

from knowledge import rag
from knowledge.selectors import chunk_search
from tests.chat_support import index_world
from tests.conftest import World, backend_setting

# The bounds: keyword or semantic search at most 2 round trips, hybrid at most 3.
BOUNDS = {"keyword": 2, "semantic": 2, "hybrid": 3}


# Committed and flushed (not rolled back): the VACUUM below needs its own transaction.
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("path", ["exact", "ann"])
@pytest.mark.parametrize("mode", sorted(BOUNDS))
def test_a_search_costs_a_bounded_number_of_round_trips_and_finds_its_tenant_once(settings, world: World, mode: str, path: str) -> None:  # type: ignore[no-untyped-def]
    if path == "ann":
        settings.QUARRY_RAG_BACKEND = backend_setting(exact_max_chunks=0)  # every tenant through the HNSW index
        # The suite's earlier tests leave dead entries in the shared HNSW index (rolled-back inserts) until a
        # vacuum. An iterative scan walking enough of them stops short of this tenant's rows, and the plan
        # rightly searches again exactly: a third statement that depends on what ran before. Production has
        # autovacuum; here the index starts as it would after one.
        with connection.cursor() as cursor:
            cursor.execute("VACUUM knowledge_chunk")
    index_world(world)
    # More chunks than a page, so the HNSW path's page comes back full (a short one is searched again, exactly).
    async_to_sync(rag.tenant_service("acme").ingest)(
        [rag.RAGDocument(f"note-{i}", f"Note {i}: keyword search ranks passages with BM25 over their words.") for i in range(12)]
    )
    chunk_search(tenant=world.acme, reader=None, query="warm up the embedder and the pgvector probe", mode=mode)
    with CaptureQueriesContext(connection) as statements:
        hits = chunk_search(tenant=world.acme, reader=None, query="how does keyword search rank", mode=mode, limit=3)
    sent = [q["sql"] for q in statements.captured_queries]
    assert hits and {h.chunk.namespace for h in hits} == {"acme"}
    assert len(sent) <= BOUNDS[mode], "\n".join(s[:160] for s in sent)
    assert sum("accounts_tenant" in s for s in sent) == 1  # the namespace is resolved once, then handed down
    assert sum("hnsw.ef_search" in s for s in sent) == (path == "ann" and mode != "keyword")
