"""The seed's "Build another backend": a backend of the six methods, returning tuples, under ``rag.service``.

The service needs nothing more of it, detects the optional capabilities it lacks, and
still re-checks every result: another namespace's chunk, an unsorted page, too many hits
or a non-hit raise ``BackendContractError`` instead of reaching the caller.
"""

from __future__ import annotations

import pytest

from knowledge.rag import RAGBackend, RAGChunk, RAGDocument, RAGService, SearchMode, rag
from knowledge.rag.backends.memory import MemoryBackend
from knowledge.rag.backends.postgres import PostgresBackend
from knowledge.rag.wrappers import RetryingEmbedder
from tests.embedders import BagOfWordsEmbedder
from tests.factories import make_tenant
from tests.seed.company_search import CompanySearchBackend
from tests.seed.conftest import run
from tests.seed.samples import Embeddings, index_manual

pytestmark = pytest.mark.django_db


def test_a_six_method_backend_serves_the_whole_api(embeddings: Embeddings) -> None:
    backend = CompanySearchBackend()
    knowledge = rag.service(
        backend,
        embedder=embeddings,
        namespace="customer-a",
    )
    assert isinstance(backend, RAGBackend)
    assert run(index_manual, knowledge) == 1
    stored = backend.rows[("customer-a", "manual-2026:0")]
    assert stored.embedding is not None and len(stored.embedding) == 64, "the backend got the chunk with its vector"
    assert (stored.start_char, stored.end_char) == (0, 38)
    for mode in SearchMode:
        hits = run(knowledge.search, "product knowledge", mode=mode)
        assert isinstance(hits, tuple) and [h.chunk.chunk_id for h in hits] == ["manual-2026:0"]
    assert run(knowledge.fetch, ("manual-2026:0", "manual-2026:1")) == (stored,)
    assert run(knowledge.delete, ("manual-2026",)) is None, "a seed backend's delete reports no count"
    assert run(knowledge.fetch, ("manual-2026:0",)) == ()
    assert backend.calls == ["start", "replace", "search", "search", "search", "fetch", "delete", "fetch"]


def test_a_backend_may_name_its_chunks_its_own_way() -> None:
    """Chunk ids are safe, bounded identifiers; '<document id>:<n>' is only the default chunker's shape."""
    backend = CompanySearchBackend()
    section = RAGChunk("manual-2026.setup", "manual-2026", "customer-a", "Setting up the product.", "Product manual")
    knowledge = rag.service(backend, namespace="customer-a")
    run(knowledge.start)
    run(backend.replace, "customer-a", ("manual-2026",), (section,))
    assert run(knowledge.fetch, ("manual-2026:0", "manual-2026.setup", "nope")) == (section,)
    assert [h.chunk for h in run(knowledge.search, "setting up", mode="keyword")] == [section]


def test_results_may_be_lists_and_callers_may_treat_them_as_sequences(embeddings: Embeddings) -> None:
    class ListBackend(CompanySearchBackend):
        async def search(self, query):  # type: ignore[no-untyped-def]
            return list(await super().search(query))

        async def fetch(self, namespace, chunk_ids):  # type: ignore[no-untyped-def]
            return list(await super().fetch(namespace, chunk_ids))

    knowledge = rag.service(ListBackend(), embedder=embeddings, namespace="customer-a")
    run(index_manual, knowledge)
    hits = run(knowledge.search, "product knowledge", mode="keyword")
    chunks = run(knowledge.fetch, ("manual-2026:0",))
    assert isinstance(hits, tuple) and isinstance(chunks, tuple)
    # What product code does with results keeps working on tuples.
    assert [*hits, *hits][1] == hits[0] and sorted(hits, key=lambda h: h.score) == list(hits) and list(chunks) + [] == [chunks[0]]


@pytest.mark.parametrize("lie", ["namespace", "order", "count", "type", "min_score"])
def test_a_backend_breaking_the_search_contract_is_refused(embeddings: Embeddings, lie: str) -> None:
    knowledge = rag.service(CompanySearchBackend(lie), embedder=embeddings, namespace="customer-a")
    run(index_manual, knowledge)
    run(knowledge.ingest, (RAGDocument(id="notes", text="product knowledge notes"),))
    with pytest.raises(rag.BackendContractError) as raised:
        run(knowledge.search, "product knowledge", mode="keyword", limit=5, min_score=0.0 if lie == "min_score" else None)
    assert "PostgreSQL-backed" not in str(raised.value), "the error carries no chunk text"


@pytest.mark.parametrize("lie", ["namespace", "type"])
def test_a_backend_breaking_the_fetch_contract_is_refused(embeddings: Embeddings, lie: str) -> None:
    knowledge = rag.service(CompanySearchBackend(lie), embedder=embeddings, namespace="customer-a")
    run(index_manual, knowledge)
    with pytest.raises(rag.BackendContractError):
        run(knowledge.fetch, ("manual-2026:0",))


def test_an_object_lacking_a_contract_method_is_refused_at_construction() -> None:
    class Incomplete:
        async def start(self) -> None: ...

        async def search(self, query):  # type: ignore[no-untyped-def]
            return ()

    with pytest.raises(rag.ConfigurationError, match="lacks close, replace, delete, fetch"):
        rag.service(Incomplete(), namespace="customer-a")  # type: ignore[arg-type]
    with pytest.raises(rag.ConfigurationError, match="no async embed"):
        rag.service(CompanySearchBackend(), embedder=object(), namespace="customer-a")  # type: ignore[arg-type]


def test_a_retrying_embedder_has_exactly_the_capabilities_of_what_it_wraps(client: BagOfWordsEmbedder) -> None:
    plain = RetryingEmbedder(Embeddings(client), retries=0, delay_seconds=0)
    named = RetryingEmbedder(BagOfWordsEmbedder(), retries=0, delay_seconds=0)
    assert not hasattr(plain, "model_id") and not hasattr(plain, "dimension")
    assert (named.model_id, named.dimension) == ("test/bag-of-words", 64)


def test_a_seed_backend_takes_an_ingest_prepared_first_and_written_after(embeddings: Embeddings) -> None:
    """Prepare (chunk, embed) writes nothing; the synchronous write goes through the seed's ``replace``."""
    backend = CompanySearchBackend()
    assert not isinstance(backend, rag.SyncDocumentStore) and isinstance(PostgresBackend(), rag.SyncDocumentStore)
    knowledge = rag.service(backend, embedder=embeddings, namespace="customer-a")
    assert run(index_manual, knowledge) == 1
    plan = run(knowledge.prepare_ingest, (RAGDocument(id="manual-2026", text="A replacement about invoices."),))
    assert plan.total_chunks == 1 and len(plan.vectors) == 1
    assert [c.text for c in run(knowledge.fetch, ("manual-2026:0",))] == ["PostgreSQL-backed product knowledge..."]
    assert knowledge.write_ingest(plan) == rag.Stored(1)
    assert [c.text for c in run(knowledge.fetch, ("manual-2026:0",))] == ["A replacement about invoices."]
    assert [h.chunk.chunk_id for h in run(knowledge.search, "invoices")] == ["manual-2026:0"]


def test_quarry_backends_also_take_the_seeds_replace_and_delete(embeddings: Embeddings) -> None:
    """Quarry's backends implement the seed's six methods too, for code that calls a backend directly."""
    make_tenant("customer-a")
    for backend in (PostgresBackend(), rag.memory(namespace="customer-a").backend):
        chunks = (
            RAGChunk("guide:0", "guide", "customer-a", "Install the package.", "Guide", None, {"kind": "manual"}, (1.0, 0.0)),
            RAGChunk("guide:1", "guide", "customer-a", "Configure the namespace.", "Guide", None, {"kind": "manual"}, (0.0, 1.0)),
        )
        run(backend.replace, "customer-a", ("guide", "gone"), chunks)
        service = rag.service(backend, namespace="customer-a")
        fetched = run(service.fetch, ("guide:1", "guide:0"))
        assert fetched == tuple(RAGChunk(c.chunk_id, c.document_id, c.namespace, c.text, c.title, c.uri, c.metadata) for c in reversed(chunks))
        assert [h.chunk.chunk_id for h in run(service.search, "configure", mode="keyword")] == ["guide:1"]
        query = rag.RAGQuery("namespace", "customer-a", mode="semantic", vector=(0.0, 1.0))
        assert [h.chunk.chunk_id for h in run(backend.search, query)] == ["guide:1", "guide:0"]
        run(backend.replace, "customer-a", ("guide",), ())  # no chunks: the document goes
        assert run(service.fetch, ("guide:0",)) == ()
        with pytest.raises(rag.RAGValidationError, match="not being replaced"):
            run(backend.replace, "customer-a", ("other",), chunks)
        with pytest.raises(rag.RAGValidationError, match="namespace"):
            run(backend.replace, "globex", ("guide",), chunks)
        run(backend.replace, "customer-a", ("guide",), chunks)
        run(backend.delete, "customer-a", ("guide",))
        assert run(service.fetch, ("guide:0",)) == ()


def test_rerank_reaches_only_a_backend_that_supports_it(embeddings: Embeddings) -> None:
    seen: list[bool] = []

    class Recording(CompanySearchBackend):
        async def search(self, query):  # type: ignore[no-untyped-def]
            seen.append(query.rerank)
            return await super().search(query)

    class RecordingMemory(MemoryBackend):
        async def search(self, query):  # type: ignore[no-untyped-def]
            seen.append(query.rerank)
            return await super().search(query)

    for backend in (Recording(), RecordingMemory()):
        knowledge: RAGService = rag.service(backend, embedder=embeddings, namespace="customer-a", rerank=True)
        run(index_manual, knowledge)
        assert [h.chunk.chunk_id for h in run(knowledge.search, "product knowledge")] == ["manual-2026:0"]
    assert seen == [False, True]
