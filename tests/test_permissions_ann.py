"""Access inside a tenant on the fast paths (issue 34): the HNSW index and the postings, where a filter
could empty a page. A restricted document among many, ranking first: a reader outside its group still
gets a full page of readable results, exactly those an exact search over what they may read returns."""

from __future__ import annotations

import pytest
from asgiref.sync import async_to_sync

from accounts.models import Group
from knowledge import rag
from knowledge.models import Document
from knowledge.rag.backends.postgres import PostgresBackend
from knowledge.services.access import document_access_set
from tests.conftest import World
from tests.embedders import BagOfWordsEmbedder

COUNT = 120  # documents; every other one restricted


@pytest.fixture
def crowd(world: World) -> tuple[World, Group]:
    embedder = BagOfWordsEmbedder(dimension=64)
    writer = rag.service(PostgresBackend(), embedder, namespace="acme")
    docs = [rag.RAGDocument(f"memo-{n:03d}", f"Quarterly bonus memo {n}: the bonus pool for team {n % 7} is set. "
                            + ("bonus " * (COUNT - n) if n < 10 else "") + f"Filed under ledger {n}.") for n in range(COUNT)]
    async_to_sync(writer.ingest)(docs)
    group = Group.objects.create(tenant=world.acme, name="finance")
    restricted = Document.objects.filter(tenant=world.acme, external_id__in=[f"memo-{n:03d}" for n in range(0, COUNT, 2)])
    document_access_set(documents=restricted, principals=[f"g:{group.pk}"], actor="t")
    return world, group


def _service(reader: rag.Reader | None, *, exact: bool) -> rag.RAGService:
    # exact_max_chunks=0: every search takes the HNSW path (with pgvector), whatever the tenant's size.
    backend = PostgresBackend(exact_max_chunks=10**6 if exact else 0)
    return rag.service(backend, BagOfWordsEmbedder(dimension=64), namespace="acme", reader=reader)


@pytest.mark.parametrize("mode", ["semantic", "hybrid", "keyword"])
def test_a_restricted_first_hit_never_shortens_the_page(crowd: tuple[World, Group], mode: str) -> None:
    world, group = crowd
    outsider = rag.Reader(world.teammate.pk, ())
    member = rag.Reader(world.teammate.pk, (group.pk,))
    query = "bonus bonus bonus memo"
    full = [h.chunk.document_id for h in async_to_sync(_service(None, exact=False).search)(query, mode=mode, limit=10)]
    assert int(full[0][-3:]) % 2 == 0  # a restricted document would rank first
    page = [h.chunk.document_id for h in async_to_sync(_service(outsider, exact=False).search)(query, mode=mode, limit=10)]
    assert len(page) == 10 and all(int(d[-3:]) % 2 == 1 for d in page), page
    exact = [h.chunk.document_id for h in async_to_sync(_service(outsider, exact=True).search)(query, mode=mode, limit=10)]
    assert page == exact  # the restricted reader's ANN page is the exact search over what they may read
    assert [h.chunk.document_id for h in async_to_sync(_service(member, exact=False).search)(query, mode=mode, limit=10)] == full


def test_the_hnsw_statement_carries_the_access_test(crowd: tuple[World, Group], django_assert_max_num_queries: object) -> None:
    """The filter is part of the ANN statement (no Python post-filter): the search SQL names the access column."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    world, _ = crowd
    with CaptureQueriesContext(connection) as captured:
        async_to_sync(_service(rag.Reader(world.teammate.pk, ()), exact=False).search)("bonus memo", mode="semantic", limit=10)
    searches = [q["sql"] for q in captured.captured_queries if "<=>" in q["sql"]]
    assert searches and all("c.access &&" in sql for sql in searches)
    assert any("hnsw.iterative_scan" in q["sql"] for q in captured.captured_queries)


def test_the_resolution_says_whether_a_tenant_restricts_anything(crowd: tuple[World, Group]) -> None:
    from knowledge.rag.backends.postgres.namespaces import resolve

    world, _ = crowd
    assert resolve("default", "acme").restricted is True
    assert resolve("default", "globex").restricted is False
    document_access_set(documents=Document.objects.filter(tenant=world.acme), principals=["*"], actor="t")
    assert resolve("default", "acme").restricted is False
