"""The seed's samples, run as its text says they behave, over every backend.

Sections: Quick start, Supply an embedder, Index and replace documents, Search, Fetch exact
chunks, Delete documents, Use metadata filters, Customize chunking, Isolate users and
tenants, Use the memory backend.
"""

from __future__ import annotations

import pytest

from knowledge.models import Chunk, Document
from knowledge.rag import RAGChunk, RAGDocument, RAGService, SearchMode, rag
from knowledge.rag.wrappers import RetryingEmbedder
from tests.embedders import BagOfWordsEmbedder
from tests.seed.conftest import Store, run
from tests.seed.host import context, lifecycle
from tests.seed.samples import Embeddings, MarkdownSections, index_manual, search_knowledge

MANUAL = {
    "document_id": "manual-2026", "title": "Product manual", "uri": "https://docs.example.com/manual",
    "text": "PostgreSQL-backed product knowledge...",
}
DERIVED_ID = "tests.seed.samples.Embeddings/64"


# --- Public API ---------------------------------------------------------------------------------


def test_the_seeds_public_names_import_from_knowledge_rag() -> None:
    # The seed's imports (harnest.extensions.rag -> knowledge.rag); a missing name fails here.
    from knowledge.rag import RAGChunk, RAGDocument, RAGHit, RAGQuery, RAGService as Service_, SearchMode, rag as rag_  # noqa: F401
    from knowledge.rag import Chunker, Embedder, FilterValue, FixedSizeChunker, MemoryBackend, PostgresBackend, RAGBackend, Scalar  # noqa: F401
    import knowledge.rag

    from knowledge import rag as module

    assert rag_ is module is knowledge.rag, "one object for both import styles"
    assert (rag_.postgres, rag_.memory, rag_.service) == (module.postgres, module.memory, module.service)
    assert callable(rag_.tenant_service) and callable(rag_.default_embedder)
    assert isinstance(rag_.memory(namespace="t"), Service_) and isinstance(rag_.memory(namespace="t").backend, MemoryBackend)
    assert isinstance(PostgresBackend(), RAGBackend) and isinstance(MemoryBackend(), RAGBackend)
    assert isinstance(FixedSizeChunker(), Chunker) and isinstance(Embeddings(None), Embedder)


# --- Quick start ------------------------------------------------------------------------------


def test_quick_start_resource_serves_the_search_tool_per_user(store: Store, embeddings: Embeddings) -> None:
    # lifecycle/knowledge.py, over the backend under test (the seed: rag.postgres(os.environ["DATABASE_URL"], table=...)).
    knowledge = store(
        embedder=embeddings,
        namespace=lambda: context.current().user_id,
    )

    @lifecycle.resource
    @context.provider("knowledge")
    async def knowledge_resource():
        async with knowledge:
            yield knowledge

    async def scenario() -> tuple[int, list[dict], list[dict]]:
        async with context.running("knowledge"):
            with context.invocation("alice"):
                count = await index_manual(context.resource("knowledge", RAGService))
                mine = await search_knowledge("product knowledge")
            with context.invocation("bob"):
                theirs = await search_knowledge("product knowledge")
        return count, mine, theirs

    count, mine, theirs = run(scenario)
    assert count == 1
    assert [{k: v for k, v in hit.items() if k != "score"} for hit in mine] == [MANUAL]
    assert isinstance(mine[0]["score"], float)
    assert theirs == [], "another user's invocation sees nothing of alice's namespace"
    if store.kind == "custom":
        assert store.custom.calls[0] == "start" and store.custom.calls[-1] == "close"


# --- Supply an embedder ------------------------------------------------------------------------


def test_an_embedder_with_only_embed_indexes_and_answers_semantic_search(store: Store, client: BagOfWordsEmbedder) -> None:
    knowledge = store(embedder=Embeddings(client), namespace="tenant")
    assert run(index_manual, knowledge) == 1
    assert client.calls == [["Product manual\n\nPostgreSQL-backed product knowledge..."]], "one call, texts only"
    for mode in (SearchMode.SEMANTIC, SearchMode.HYBRID):
        hits = run(knowledge.search, "product knowledge", mode=mode)
        assert [h.chunk.chunk_id for h in hits] == ["manual-2026:0"]
    assert client.calls[1:] == [["product knowledge"], ["product knowledge"]]
    if store.kind == "postgres":
        # No model_id: the id stored with the vectors is derived from the class and the dimension.
        assert Chunk.objects.get().embedding_model == DERIVED_ID and Document.objects.get().embedding_model == DERIVED_ID


def test_unchanged_chunks_reuse_their_vectors_when_the_backend_can_say_which_it_holds(store: Store, client: BagOfWordsEmbedder) -> None:
    knowledge = store(embedder=Embeddings(client), namespace="tenant")
    run(index_manual, knowledge)
    run(index_manual, knowledge)
    # Quarry's backends have the optional known_embeddings; the seed's custom backend does not.
    assert client.texts_embedded == (2 if store.kind == "custom" else 1)


def test_a_wrapped_embedder_shares_the_derived_id_of_what_it_wraps(store: Store, client: BagOfWordsEmbedder) -> None:
    # The document pipeline wraps the configured embedder in RetryingEmbedder; search does not.
    writer = store(embedder=RetryingEmbedder(Embeddings(client), retries=1, delay_seconds=0), namespace="tenant")
    run(index_manual, writer)
    reader = store(embedder=Embeddings(client), namespace="tenant")
    assert [h.chunk.chunk_id for h in run(reader.search, "product knowledge", mode="semantic")] == ["manual-2026:0"]


def test_vectors_of_another_dimension_are_refused(store: Store) -> None:
    class Growing:
        def __init__(self) -> None:
            self.size = 8

        async def embed(self, texts):  # type: ignore[no-untyped-def]
            self.size += 1
            return [[1.0] * self.size for _ in texts]

    knowledge = store(embedder=Growing(), namespace="tenant")
    run(index_manual, knowledge)
    with pytest.raises(rag.EmbedderError, match=r"dimension \[10\], expected one dimension \(9\)"):
        run(knowledge.search, "product", mode="semantic")


# --- Index and replace documents --------------------------------------------------------------------


def test_ingest_replaces_documents_completely_and_rejects_duplicate_ids(store: Store, embeddings: Embeddings) -> None:
    knowledge = store(embedder=embeddings, namespace="tenant", chunker=rag.FixedSizeChunker(size=100, overlap=0))
    long_text = " ".join(f"paragraph {i} of the long manual." for i in range(40))
    first = run(knowledge.ingest, (RAGDocument(id="manual-2026", text=long_text),), trigger="agent")
    assert first > 3
    assert run(index_manual, knowledge) == 1  # a shorter re-index removes the obsolete chunks
    chunks = run(knowledge.fetch, tuple(f"manual-2026:{i}" for i in range(first)))
    assert [c.text for c in chunks] == [MANUAL["text"]]
    assert run(knowledge.search, "paragraph long", mode="keyword") == ()
    with pytest.raises(rag.RAGValidationError, match="unique ids"):
        run(knowledge.ingest, (RAGDocument(id="x", text="one"), RAGDocument(id="x", text="two")))
    assert run(knowledge.fetch, ("x:0",)) == ()


# --- Search, Use metadata filters ----------------------------------------------------------------------


def _catalog(knowledge: RAGService) -> None:
    run(knowledge.ingest, (
        RAGDocument(id="manual-4", text="How to upgrade authentication in version 4.", metadata={"kind": "manual", "published": True, "major_version": 4}),
        RAGDocument(id="notes-4", text="Release notes: upgrade authentication tokens.", metadata={"kind": "release-note", "published": True, "major_version": 4}),
        RAGDocument(id="draft-4", text="Draft: upgrade authentication, unpublished.", metadata={"kind": "manual", "published": False, "major_version": 4}),
        RAGDocument(id="manual-3", text="Upgrade authentication in version 3.", metadata={"kind": "manual", "published": True, "major_version": 3}),
        RAGDocument(id="blog", text="A blog post about how we upgrade authentication.", metadata={"kind": "blog", "published": True, "major_version": 4}),
    ))


def test_search_tool_sample_filters_by_membership(store: Store, embeddings: Embeddings) -> None:
    knowledge = store(embedder=embeddings, namespace="tenant")
    _catalog(knowledge)

    async def scenario() -> list[dict]:
        context.provider("knowledge")(_serve(knowledge))
        async with context.running("knowledge"):
            return await search_knowledge("upgrade authentication", limit=6)

    found = run(scenario)
    assert {hit["document_id"] for hit in found} == {"manual-4", "notes-4", "draft-4", "manual-3"}
    assert [hit["score"] for hit in found] == sorted((hit["score"] for hit in found), reverse=True)


def _serve(knowledge: RAGService):  # type: ignore[no-untyped-def]
    async def knowledge_resource():  # type: ignore[no-untyped-def]
        async with knowledge:
            yield knowledge

    return knowledge_resource


@pytest.mark.parametrize("mode", list(SearchMode))
def test_metadata_filters_combine_fields_with_and_members_with_or(store: Store, embeddings: Embeddings, mode: SearchMode) -> None:
    knowledge = store(embedder=embeddings, namespace="tenant")
    _catalog(knowledge)

    async def scenario():  # type: ignore[no-untyped-def]
        hits = await knowledge.search(
            "upgrade authentication",
            filters={
                "kind": ("manual", "release-note"),
                "published": True,
                "major_version": 4,
            },
        )
        return hits

    hits = run(scenario)
    assert isinstance(hits, tuple)
    assert {h.chunk.document_id for h in hits} == {"manual-4", "notes-4"}
    assert run(knowledge.search, "upgrade authentication", mode=mode, filters={"major_version": "4"}) == (), "a string never equals a number"
    assert run(knowledge.search, "upgrade authentication", mode=mode, filters={"published": 1}) == (), "a number never equals a boolean"


def test_min_score_keeps_only_hits_at_or_above_it(store: Store, embeddings: Embeddings) -> None:
    knowledge = store(embedder=embeddings, namespace="tenant")
    _catalog(knowledge)
    everything = run(knowledge.search, "upgrade authentication version", mode="keyword")
    assert len({h.score for h in everything}) >= 2
    threshold = (everything[0].score + everything[-1].score) / 2
    kept = run(knowledge.search, "upgrade authentication version", mode="keyword", min_score=threshold)
    assert 0 < len(kept) < len(everything) and all(h.score >= threshold for h in kept)
    assert kept == everything[: len(kept)]


# --- Fetch exact chunks --------------------------------------------------------------------------


def test_fetch_keeps_the_requested_order_and_omits_missing_ids(store: Store, embeddings: Embeddings) -> None:
    knowledge = store(embedder=embeddings, namespace="tenant")
    run(index_manual, knowledge)
    _catalog(knowledge)

    async def scenario():  # type: ignore[no-untyped-def]
        chunks = await knowledge.fetch(("manual-2026:0", "manual-2026:3"))
        return chunks

    chunks = run(scenario)
    assert [c.chunk_id for c in chunks] == ["manual-2026:0"]
    hits = run(knowledge.search, "product knowledge", mode="keyword")
    assert chunks == (hits[0].chunk,), "a fetched chunk equals the same chunk in a hit"
    assert run(knowledge.fetch, ("manual-2026:3",)) == ()
    ordered = run(knowledge.fetch, ("notes-4:0", "missing:0", "blog:0", "manual-4:0", "notes-4:0"))
    assert [c.chunk_id for c in ordered] == ["notes-4:0", "blog:0", "manual-4:0"]


def test_a_chunk_written_by_the_caller_equals_the_fetched_one(store: Store) -> None:
    knowledge = store(namespace="tenant")
    run(knowledge.ingest, (RAGDocument(id="manual", text="current"),))
    fetched = run(knowledge.fetch, ("manual:0",))
    expected = RAGChunk("manual:0", "manual", "tenant", "current")
    assert fetched == (expected,)
    assert {expected} == set(fetched), "equal chunks hash alike"
    assert (fetched[0].start_char, fetched[0].end_char) == (0, 7), "offsets are kept, outside equality"


# --- Delete documents ------------------------------------------------------------------------------


def test_delete_removes_whole_documents_of_the_active_namespace_only(store: Store, embeddings: Embeddings) -> None:
    knowledge = store(embedder=embeddings, namespace="tenant")
    neighbour = store(embedder=embeddings, namespace="customer-a")
    run(index_manual, knowledge)
    run(index_manual, neighbour)
    run(knowledge.ingest, (RAGDocument(id="manual-2025", text="Last year's product manual."),))

    async def scenario() -> None:
        await knowledge.delete(("manual-2025",), trigger="user")

    run(scenario)
    assert [c.chunk_id for c in run(knowledge.fetch, ("manual-2025:0", "manual-2026:0"))] == ["manual-2026:0"]
    run(knowledge.delete, ("manual-2026",), trigger="agent")
    assert run(knowledge.fetch, ("manual-2026:0",)) == ()
    assert [c.namespace for c in run(neighbour.fetch, ("manual-2026:0",))] == ["customer-a"]


# --- Customize chunking ------------------------------------------------------------------------------


GUIDE = "# Guide\nIntro text.\n## Install\nRun the installer.\n## Configure\nSet the namespace.\n"


def test_markdown_sections_chunker(store: Store, embeddings: Embeddings) -> None:
    # The seed: rag.postgres(os.environ["DATABASE_URL"], embedder=embeddings, chunker=MarkdownSections()).
    knowledge = store(
        embedder=embeddings,
        chunker=MarkdownSections(),
        namespace="tenant",
    )
    assert run(knowledge.ingest, (RAGDocument(id="guide", text=GUIDE),)) == 3
    chunks = run(knowledge.fetch, ("guide:0", "guide:1", "guide:2"))
    assert [c.text for c in chunks] == ["# Guide\nIntro text.", "Install\nRun the installer.", "Configure\nSet the namespace."]
    assert all(GUIDE[c.start_char : c.end_char] == c.text for c in chunks), "stripped sections are slices of the text"
    assert [h.chunk.chunk_id for h in run(knowledge.search, "installer", mode="keyword")] == ["guide:1"]


class Summaries:
    """A chunker whose passages are not part of the document's text."""

    def split(self, document: RAGDocument) -> list[str]:
        return [f"SUMMARY OF {document.id}: {len(document.text.split())} words", document.text.upper()]


def test_a_chunker_may_return_any_non_empty_strings(store: Store, embeddings: Embeddings) -> None:
    knowledge = store(embedder=embeddings, chunker=Summaries(), namespace="tenant")
    assert run(knowledge.ingest, (RAGDocument(id="memo", text="quiet otters swim"),)) == 2
    chunks = run(knowledge.fetch, ("memo:0", "memo:1"))
    assert [c.text for c in chunks] == ["SUMMARY OF memo: 3 words", "QUIET OTTERS SWIM"]
    assert all((c.start_char, c.end_char) == (None, None) for c in chunks), "not slices: no offsets"
    assert [h.chunk.chunk_id for h in run(knowledge.search, "otters", mode="keyword")] == ["memo:1"]
    if store.kind == "postgres":
        assert list(Chunk.objects.order_by("ordinal").values_list("start_char", "end_char")) == [(None, None), (None, None)]


@pytest.mark.parametrize(
    ("output", "error", "message"),
    [
        ((), rag.RAGValidationError, "has no text to index"),
        (("fine", "  "), rag.RAGValidationError, r"documents\[memo\]\.chunks\[1\]: a chunker returned an empty chunk"),
        (("fine", 7), rag.RAGTypeError, r"documents\[memo\]\.chunks\[1\]: a chunker must return strings, got int"),
        ("just a string", rag.RAGTypeError, "a chunker must return a sequence of strings, got str"),
        (("nul\x00byte",), rag.RAGValidationError, "NUL"),
    ],
)
def test_a_chunker_returning_anything_else_is_refused_before_embedding(store: Store, client: BagOfWordsEmbedder, output, error, message) -> None:  # type: ignore[no-untyped-def]
    class Fixed:
        def split(self, document: RAGDocument):  # type: ignore[no-untyped-def]
            return output

    knowledge = store(embedder=Embeddings(client), chunker=Fixed(), namespace="tenant")
    with pytest.raises(error, match=message):
        run(knowledge.ingest, (RAGDocument(id="memo", text="quiet otters swim"),))
    assert client.calls == []
    assert run(store(namespace="tenant").fetch, ("memo:0",)) == ()


# --- Isolate users and tenants --------------------------------------------------------------------------


def test_a_callable_namespace_is_resolved_for_every_operation(store: Store, embeddings: Embeddings) -> None:
    knowledge = store(
        embedder=embeddings,
        namespace=lambda: context.current().user_id,
    )

    async def scenario() -> tuple:  # type: ignore[type-arg]
        with context.invocation("alice"):
            await index_manual(knowledge)
            mine = await knowledge.fetch(("manual-2026:0",))
        with context.invocation("bob"):
            theirs = await knowledge.fetch(("manual-2026:0",))
            searched = await knowledge.search("product knowledge")
            await knowledge.delete(("manual-2026",))
        with context.invocation("alice"):
            still = await knowledge.fetch(("manual-2026:0",))
        return mine, theirs, searched, still

    mine, theirs, searched, still = run(scenario)
    assert [c.namespace for c in mine] == ["alice"] and theirs == () and searched == ()
    assert still == mine, "bob's delete cannot cross into alice's namespace"


# --- Use the memory backend -------------------------------------------------------------------------------


def test_memory_backend_sample_is_bounded(embeddings: Embeddings) -> None:
    knowledge = rag.memory(
        embedder=embeddings,
        namespace="test-tenant",
        max_chunks=500,
    )
    chunker_docs = tuple(RAGDocument(id=f"d{i}", text=f"document number {i}") for i in range(500))
    assert run(knowledge.ingest, chunker_docs) == 500
    with pytest.raises(rag.CapacityError, match="at most 500 chunks"):
        run(knowledge.ingest, (RAGDocument(id="one-more", text="does not fit"),))
    assert run(knowledge.ingest, (RAGDocument(id="d0", text="replacing a document does not grow the store"),)) == 1
