"""The seed's "Validation and safety bounds", one test per bound, named with the seed's words.

Each bound raises its typed error with a message naming it, and nothing reaches the
embedder or the datastore first: the embedding client records no call, PostgreSQL sees no
query, the custom backend records no method. Where one request breaks several bounds,
the first in the seed's list is the one reported; everything else comes after.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from knowledge.rag import RAGChunk, RAGDocument, RAGQuery, rag
from knowledge.rag import limits
from tests.embedders import BagOfWordsEmbedder
from tests.seed.conftest import Store, run
from tests.seed.samples import Embeddings


class Passages:
    """A chunker returning ``count`` passages of its own (not slices of the document)."""

    def __init__(self, count: int, size: int = 12, odd: dict[int, object] | None = None) -> None:
        self.count, self.size, self.odd = count, size, odd or {}

    def split(self, document: RAGDocument) -> list[object]:
        return [self.odd.get(i, f"passage {i:07d} ".ljust(self.size, "x")) for i in range(self.count)]


@contextlib.contextmanager
def untouched(store: Store, client: BagOfWordsEmbedder) -> Iterator[None]:
    """The block reaches neither the embedding client nor the datastore."""
    with CaptureQueriesContext(connection) as queries:
        yield
    assert client.calls == [], "the embedder was called"
    if store.kind == "postgres":
        assert [q["sql"] for q in queries.captured_queries] == [], "the database was queried"
    if store.kind == "custom":
        assert store.custom.calls == [], "the backend was called"


def service(store: Store, client: BagOfWordsEmbedder, **options: Any) -> rag.RAGService:
    return store(embedder=Embeddings(client), namespace="tenant", **options)


def docs(n: int, text: str = "text") -> tuple[RAGDocument, ...]:
    return tuple(RAGDocument(id=f"d{i}", text=text) for i in range(n))


# (the seed's words, what to do with a service, error, message). Each call returns a coroutine.
SERVICE_BOUNDS: list[tuple[str, dict[str, Any], Callable[[rag.RAGService], Any], type[Exception], str]] = [
    ("1,000 documents per ingestion request", {}, lambda s: s.ingest(docs(1001)), rag.RAGValidationError,
     "documents: at most 1000 documents per ingestion request, got 1001"),
    ("50 million source characters per ingestion request", {}, lambda s: s.ingest(docs(6, "x " * 4_500_000)), rag.RAGValidationError,
     "documents: at most 50000000 characters per ingestion request, got 54000000"),
    ("1 million characters per chunk", {"chunker": Passages(2, size=1_000_001)}, lambda s: s.ingest(docs(1)), rag.RAGValidationError,
     r"documents\[d0\]\.chunks\[0\]: at most 1000000 characters per chunk, got 1000001"),
    ("10,000 generated chunks per ingestion request", {"chunker": Passages(10_001)}, lambda s: s.ingest(docs(1)), rag.RAGValidationError,
     "documents: at most 10000 chunks per ingestion request, got 10001"),
    ("10,000 generated chunks per ingestion request (from a generator)", {"chunker": type("Endless", (), {"split": lambda self, d: iter(lambda: "again", None)})()},
     lambda s: s.ingest(docs(1)), rag.RAGValidationError, "at most 10000 chunks per ingestion request, got more than 10000"),
    ("search limits from 1 to 100 (0)", {}, lambda s: s.search("x", limit=0), rag.RAGValidationError, "limit: must be between 1 and 100, got 0"),
    ("search limits from 1 to 100 (101)", {}, lambda s: s.search("x", limit=101), rag.RAGValidationError, "limit: must be between 1 and 100, got 101"),
    ("query text up to 16,384 characters", {}, lambda s: s.search("x" * 16_385), rag.RAGValidationError,
     "query: at most 16384 characters allowed, got 16385"),
    ("64 filter fields", {}, lambda s: s.search("x", filters={f"f{i}": 1 for i in range(65)}), rag.RAGValidationError,
     "filters: at most 64 fields allowed, got 65"),
    ("100 values per membership filter", {}, lambda s: s.search("x", filters={"kind": tuple(range(101))}), rag.RAGValidationError,
     r"filters\.kind: at most 100 values per membership filter, got 101"),
    # Safe and bounded, whatever the shape ("no-ordinal" is a fine id that is simply missing).
    ("safe chunk identifiers", {}, lambda s: s.fetch(("no-ordinal", "../manual:0")), rag.RAGValidationError, "not a valid chunk id"),
    ("bounded chunk identifiers", {}, lambda s: s.fetch(("m" * 208,)), rag.RAGValidationError, "not a valid chunk id"),
    ("safe, bounded document identifiers (delete)", {}, lambda s: s.delete(("bad id!",)), rag.RAGValidationError, "not a valid document id"),
    ("safe, bounded filter identifiers", {}, lambda s: s.search("x", filters={"bad field": 1}), rag.RAGValidationError, "not a valid field name"),
    ("bounded identifier lists", {}, lambda s: s.fetch(tuple(f"d:{i}" for i in range(1001))), rag.RAGValidationError, "at most 1000 ids per request"),
    ("empty text (search)", {}, lambda s: s.search("   "), rag.RAGValidationError, "query: must not be empty"),
    ("empty text (chunk)", {"chunker": Passages(3, odd={1: " "})}, lambda s: s.ingest(docs(1)), rag.RAGValidationError,
     r"documents\[d0\]\.chunks\[1\]: a chunker returned an empty chunk"),
    ("duplicate identities", {}, lambda s: s.ingest((RAGDocument(id="x", text="one"), RAGDocument(id="x", text="two"))), rag.RAGValidationError,
     "document ids must be unique ids within one request; repeated: x"),
    ("nested metadata (filters)", {}, lambda s: s.search("x", filters={"a": {"b": 1}}), rag.RAGTypeError, "nested values are not allowed"),
    ("NaN or infinite numeric values (filters)", {}, lambda s: s.search("x", filters={"a": float("inf")}), rag.RAGValidationError,
     "must be a finite number"),
    ("NaN or infinite numeric values (min_score)", {}, lambda s: s.search("x", min_score=float("nan")), rag.RAGValidationError, "min_score: must be finite"),
    ("an unknown search mode", {}, lambda s: s.search("x", mode="fuzzy"), rag.RAGValidationError, "must be one of keyword, semantic, hybrid"),
    ("an unknown trigger", {}, lambda s: s.ingest(docs(1), trigger="robot"), rag.RAGValidationError, "trigger: must be 'user' or 'agent'"),
]


@pytest.mark.parametrize(("bound", "options", "call", "error", "message"), SERVICE_BOUNDS, ids=[b[0] for b in SERVICE_BOUNDS])
def test_service_bound(store: Store, client: BagOfWordsEmbedder, bound: str, options: dict[str, Any], call: Callable[[rag.RAGService], Any],
                       error: type[Exception], message: str) -> None:
    knowledge = service(store, client, **options)
    with untouched(store, client), pytest.raises(error, match=message):
        run(_await, call(knowledge))


def test_safe_bounded_namespace_identifiers(store: Store, client: BagOfWordsEmbedder) -> None:
    knowledge = store(embedder=Embeddings(client), namespace=lambda: "not a namespace!")
    with untouched(store, client):
        for call in (lambda: knowledge.ingest(docs(1)), lambda: knowledge.search("x"), lambda: knowledge.fetch(("d0:0",)), lambda: knowledge.delete(("d0",))):
            with pytest.raises(rag.RAGValidationError, match="namespace: 'not a namespace!' is not a valid namespace"):
                run(_await, call())


async def _await(coroutine: Any) -> Any:
    return await coroutine


# --- bounds of the value types: checked on construction, before any service sees them ----------------------

VALUE_BOUNDS: list[tuple[str, Callable[[], object], type[Exception], str]] = [
    ("10 million characters per document", lambda: RAGDocument("d", "x" * 10_000_001), rag.RAGValidationError,
     r"documents\[d\]\.text: at most 10000000 characters per document, got 10000001"),
    ("1 million characters per chunk", lambda: RAGChunk("d:0", "d", "tenant", "x" * 1_000_001), rag.RAGValidationError,
     "text: at most 1000000 characters per chunk, got 1000001"),
    ("vectors up to 65,536 dimensions", lambda: RAGQuery("q", "tenant", mode="semantic", vector=[0.5] * 65_537), rag.RAGValidationError,
     "vector: at most 65536 dimensions allowed, got 65537"),
    ("64 metadata fields", lambda: RAGDocument("d", "t", metadata={f"f{i}": 1 for i in range(65)}), rag.RAGValidationError,
     "metadata: at most 64 fields allowed, got 65"),
    ("safe, bounded document identifiers", lambda: RAGDocument("a" * 201, "t"), rag.RAGValidationError, "not a valid document id"),
    ("safe, bounded namespace identifiers", lambda: RAGQuery("q", "bad namespace", mode="keyword"), rag.RAGValidationError, "not a valid namespace"),
    ("empty text", lambda: RAGDocument("d", " \n "), rag.RAGValidationError, r"documents\[d\]\.text: must not be empty"),
    ("nested metadata", lambda: RAGDocument("d", "t", metadata={"a": {"b": 1}}), rag.RAGTypeError, "nested values are not allowed"),
    ("nested metadata (a list)", lambda: RAGDocument("d", "t", metadata={"a": [1]}), rag.RAGTypeError, "nested values are not allowed"),
    ("boolean vector values", lambda: RAGChunk("d:0", "d", "tenant", "t", embedding=[True, 1.0]), rag.RAGTypeError, "values must be numbers, got bool"),
    ("NaN or infinite numeric values (metadata)", lambda: RAGDocument("d", "t", metadata={"a": float("nan")}), rag.RAGValidationError, "finite"),
    ("NaN or infinite numeric values (vectors)", lambda: RAGChunk("d:0", "d", "tenant", "t", embedding=[float("inf")]), rag.RAGValidationError, "finite"),
]


@pytest.mark.parametrize(("bound", "build", "error", "message"), VALUE_BOUNDS, ids=[b[0] for b in VALUE_BOUNDS])
def test_value_bound(bound: str, build: Callable[[], object], error: type[Exception], message: str) -> None:
    with pytest.raises(error, match=message):
        build()


# --- what an embedder returns is checked too; a bad answer writes nothing --------------------------------


class Answering:
    """An embedding client returning ``vector`` for every text."""

    def __init__(self, vector: list[object]) -> None:
        self.vector = vector

    async def embed(self, texts: list[str]) -> list[list[object]]:
        return [list(self.vector) for _ in texts]


@pytest.mark.parametrize(
    ("bound", "vector", "message"),
    [
        ("vectors up to 65,536 dimensions", [0.5] * 65_537, "at most 65536 dimensions allowed, got 65537"),
        ("boolean vector values", [True, 0.5], "values must be numbers, got bool"),
        ("NaN or infinite numeric values", [float("nan"), 0.5], "values must be finite"),
        ("non-empty vectors", [], "must not be empty"),
    ],
)
def test_embedder_answers_out_of_bounds_write_nothing(store: Store, bound: str, vector: list[object], message: str) -> None:
    knowledge = store(embedder=Embeddings(Answering(vector)), namespace="tenant")
    with pytest.raises(rag.EmbedderError, match=message):
        run(knowledge.ingest, docs(1))
    assert run(store(namespace="tenant").fetch, ("d0:0",)) == ()


def test_embedding_batches_from_1_to_1000(store: Store, client: BagOfWordsEmbedder) -> None:
    knowledge = service(store, client, chunker=Passages(2_500))
    assert run(knowledge.ingest, docs(1)) == 2_500
    sizes = [len(call) for call in client.calls]
    assert all(1 <= size <= limits.MAX_EMBED_BATCH for size in sizes) and sum(sizes) >= 2_500
    assert max(sizes) == limits.MAX_EMBED_BATCH


# --- the order of the checks -------------------------------------------------------------------------------


def test_more_chunks_than_allowed_is_reported_before_anything_about_the_chunks_themselves(store: Store, client: BagOfWordsEmbedder) -> None:
    # 10,001 passages, none a slice of the document, one empty, one not even a string, in a
    # request that also repeats a document id: the bound comes first.
    knowledge = service(store, client, chunker=Passages(5_001, odd={7: "", 8: 42}))
    with untouched(store, client), pytest.raises(rag.RAGValidationError, match="at most 10000 chunks per ingestion request, got 10002"):
        run(knowledge.ingest, (RAGDocument(id="x", text="one"), RAGDocument(id="x", text="two")))


def test_the_seed_list_orders_the_bounds(store: Store, client: BagOfWordsEmbedder) -> None:
    many = service(store, client, chunker=Passages(20))
    with untouched(store, client), pytest.raises(rag.RAGValidationError, match="at most 1000 documents"):
        run(many.ingest, docs(1001))  # 20,020 chunks too: documents come first
    oversized = service(store, client, chunker=Passages(10_001, odd={3: "y" * 1_000_001}))
    with untouched(store, client), pytest.raises(rag.RAGValidationError, match="at most 1000000 characters per chunk"):
        run(oversized.ingest, docs(1))  # characters per chunk come before chunks per request in the seed's list
    with untouched(store, client), pytest.raises(rag.RAGValidationError, match="limit: must be between 1 and 100"):
        run(many.search, "x" * 16_385, limit=0, filters={"bad field": 1})
    nowhere = store(embedder=Embeddings(client), namespace="no such namespace!")  # identifiers come last
    with untouched(store, client), pytest.raises(rag.RAGValidationError, match="limit: must be between 1 and 100"):
        run(nowhere.search, "x", limit=0)
    with untouched(store, client), pytest.raises(rag.RAGValidationError, match="at most 1000 documents"):
        run(nowhere.ingest, docs(1001))


def test_a_dsn_or_table_is_refused_with_the_reason() -> None:
    with pytest.raises(rag.ConfigurationError, match="no DSN or table: Quarry keeps chunks in Django's database"):
        rag.postgres("postgresql://localhost/knowledge", namespace="tenant")  # type: ignore[arg-type]
    with pytest.raises(rag.ConfigurationError, match="no DSN or table"):
        rag.postgres(table="product_knowledge", namespace="tenant")
