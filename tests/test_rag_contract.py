"""The knowledge.rag contract, run against both backends (PostgreSQL and memory)."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import pytest
from asgiref.sync import async_to_sync
from django.db import transaction

from accounts.models import Tenant
from knowledge import rag
from knowledge.models import AuditEvent, Chunk, CorpusStat, Document, Posting, TermStat
from knowledge.rag import RAGDocument, SearchMode
from knowledge.rag.backends.memory import MemoryBackend
from knowledge.rag.backends.postgres import PostgresBackend
from knowledge.rag.backends.postgres.bm25 import TITLE_WEIGHT
from knowledge.rag.chunking import PassageChunker
from knowledge.rag.types import embedding_input
from tests.embedders import BagOfWordsEmbedder, BrokenEmbedder
from tests.conftest import STOCK_AVAILABLE
from tests.factories import chunk_vectors, make_tenant

needs_stock = pytest.mark.skipif(not STOCK_AVAILABLE, reason="no PostgreSQL at 127.0.0.1:5432 (this machine kind provides one)")
# "postgres": the embedded server, with pgvector; "stock": PostgreSQL 15 without it.
# "backlog": the embedded server with every ingestion left to the indexer, so the whole
# contract also holds for chunks that have no postings or HNSW entry yet. Test tenants are
# small, so "postgres" ranks them exactly (issue 22); "ann" and "backlog" keep the ANN path
# (``exact_max_chunks=0``) that larger tenants take.
BACKENDS = ["postgres", "ann", "backlog", pytest.param("stock", marks=needs_stock), "memory"]
pytestmark = pytest.mark.django_db(databases=["default", "stock"] if STOCK_AVAILABLE else ["default"])


@pytest.fixture(params=BACKENDS)
def make_service(request: pytest.FixtureRequest) -> Callable[..., rag.RAGService]:
    """``make_service(namespace="acme", embedder=..., **kw)``; services of one test share one store."""
    using = "stock" if request.param == "stock" else "default"
    for slug in ("acme", "globex"):
        Tenant.objects.using(using).get_or_create(slug=slug, defaults={"name": slug})
    shared_memory = MemoryBackend(max_chunks=50_000)

    def factory(namespace: str = "acme", embedder: object = "default", chunker: object = None, **kw: object) -> rag.RAGService:
        emb = BagOfWordsEmbedder() if embedder == "default" else embedder
        if request.param in ("postgres", "stock"):
            return rag.postgres(emb, chunker, namespace=namespace, using=using, **kw)  # type: ignore[arg-type]
        if request.param == "ann":
            return rag.service(PostgresBackend(using, exact_max_chunks=0), emb, chunker, namespace=namespace, **kw)  # type: ignore[arg-type]
        if request.param == "backlog":
            backend = PostgresBackend(using, inline_index_max_chunks=0, exact_max_chunks=0)
            return rag.service(backend, emb, chunker, namespace=namespace, **kw)  # type: ignore[arg-type]
        return rag.service(shared_memory, emb, chunker, namespace=namespace, **kw)  # type: ignore[arg-type]

    factory.kind = request.param  # type: ignore[attr-defined]
    return factory


def run(fn: Callable[..., object], *args: object, **kwargs: object) -> object:
    return async_to_sync(fn)(*args, **kwargs)  # type: ignore[arg-type]


DOCS = [
    RAGDocument("guide", "Editors upload files in the admin. Uploading a PDF queues background work.", title="Upload guide",
                metadata={"lang": "en", "kind": "guide", "year": 2024, "public": True}),
    RAGDocument("modes", "Keyword search ranks with BM25. Semantic search compares embeddings by cosine similarity.",
                title="Search modes", metadata={"lang": "en", "kind": "reference", "year": 2025, "public": False}),
    RAGDocument("hallo", "Dokumente werden im Admin hochgeladen und durchsucht.", title="Anleitung",
                metadata={"lang": "de", "kind": "guide", "year": 2025, "public": True}),
]


# --- ingestion -----------------------------------------------------------------------


def test_ingest_returns_chunk_count_and_chunks_are_fetchable(make_service) -> None:
    service = make_service()
    assert run(service.ingest, DOCS) == 3
    chunks = run(service.fetch, ["modes:0", "guide:0"])
    assert [c.chunk_id for c in chunks] == ["modes:0", "guide:0"]
    assert chunks[1].title == "Upload guide" and chunks[1].document_id == "guide" and chunks[1].namespace == "acme"
    assert dict(chunks[1].metadata) == {"lang": "en", "kind": "guide", "year": 2024, "public": True}


def test_chunk_ids_are_stable_and_in_source_order(make_service) -> None:
    text = " ".join(f"sentence number {i} about quarry." for i in range(200))
    service = make_service(chunker=rag.FixedSizeChunker(size=300, overlap=50))
    n = run(service.ingest, [RAGDocument("long", text)])
    assert n > 5
    ids = [f"long:{i}" for i in range(n)]
    first = run(service.fetch, ids)
    assert [c.chunk_id for c in first] == ids
    assert all(text[c.start_char : c.end_char] == c.text for c in first)
    assert [c.start_char for c in first] == sorted(c.start_char for c in first)
    run(service.ingest, [RAGDocument("long", text)])
    assert [(c.chunk_id, c.text) for c in run(service.fetch, ids)] == [(c.chunk_id, c.text) for c in first]


def test_a_passage_chunker_keeps_each_passage_a_chunk_and_cuts_only_a_long_one(make_service) -> None:
    long = " ".join(f"row {i} of the long slide." for i in range(30))
    passages = ["Slide 1: Safety\nHelmets.", f"Slide 2: Log\n{long}", "Slide 3: Contacts\nGate office."]
    text = "\n\n".join(passages)
    inner = rag.FixedSizeChunker(size=100, overlap=0)
    service = make_service(chunker=PassageChunker(inner, {"deck": passages}))
    n = run(service.ingest, [RAGDocument("deck", text)])
    chunks = run(service.fetch, [f"deck:{i}" for i in range(n)])
    assert (chunks[0].text, chunks[-1].text) == (passages[0], passages[2])
    assert n > 4 and all(len(c.text) <= 100 and c.text in passages[1] for c in chunks[1:-1])
    assert all(text[c.start_char : c.end_char] == c.text for c in chunks)
    # Passages the text does not hold in that order, or another document: the inner chunker alone.
    plain = inner.split(RAGDocument("deck", text))
    assert PassageChunker(inner, {"deck": passages[::-1]}).split(RAGDocument("deck", text)) == plain
    assert PassageChunker(inner, {"other": passages}).split(RAGDocument("deck", text)) == plain


def test_reingest_replaces_the_document_completely(make_service) -> None:
    service = make_service(chunker=rag.FixedSizeChunker(size=100, overlap=0))
    long_text = " ".join(["alpha bravo charlie delta echo"] * 20)
    first = run(service.ingest, [RAGDocument("doc", long_text)])
    assert first > 2
    assert run(service.ingest, [RAGDocument("doc", "zulu only now")]) == 1
    assert [c.text for c in run(service.fetch, [f"doc:{i}" for i in range(first)])] == ["zulu only now"]
    assert run(service.search, "alpha", mode="keyword") == ()
    assert [h.chunk.chunk_id for h in run(service.search, "zulu", mode="keyword")] == ["doc:0"]


def test_unchanged_chunks_are_not_embedded_again(make_service) -> None:
    embedder = BagOfWordsEmbedder()
    service = make_service(embedder=embedder, chunker=rag.FixedSizeChunker(size=100, overlap=0))
    parts = [f"paragraph {i} talks about topic {i} in some detail here, at length." for i in range(1450)]
    assert run(service.ingest, [RAGDocument("doc", "\n".join(parts))]) >= 1000
    first = embedder.texts_embedded
    run(service.ingest, [RAGDocument("doc", "\n".join(parts))])
    assert embedder.texts_embedded == first, "an unchanged 1,000-chunk document costs no embedding"
    calls = len(embedder.calls)
    parts[-1] = "a brand new final paragraph."
    run(service.ingest, [RAGDocument("doc", "\n".join(parts))])
    assert 1 <= embedder.texts_embedded - first <= 2, "only the changed chunk is embedded"
    assert len(embedder.calls) == calls + 1


class SeedEmbeddings:
    """An embedder as the seed's "Supply an embedder" writes one: ``embed(texts)`` over a client, no
    model id, no dimension (its vectors' id is derived from its class and their dimension)."""

    def __init__(self) -> None:
        self._client = BagOfWordsEmbedder()
        self.calls = self._client.calls

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        return await self._client.embed(texts)


@pytest.mark.parametrize("declared", [True, False], ids=["model-id", "embed-only"])
def test_an_ingest_embeds_all_its_documents_in_one_call(make_service, declared: bool) -> None:
    """The seed's journey: two documents ingested, then one search, are two embedder calls."""
    embedder = BagOfWordsEmbedder() if declared else SeedEmbeddings()
    run(make_service(embedder=embedder).ingest, DOCS[:2])
    assert embedder.calls == [[embedding_input(d.title, d.text) for d in DOCS[:2]]]
    hits = run(make_service(embedder=embedder).search, "cosine similarity of embeddings", mode="semantic")
    assert hits[0].chunk.document_id == "modes" and len(embedder.calls) == 2
    # Another process (a fresh service and embedder) re-ingesting both, one of them edited: the
    # unchanged one is not embedded again, the edited one is, in one call.
    later = BagOfWordsEmbedder() if declared else SeedEmbeddings()
    edited = RAGDocument("modes", "Semantic search compares embeddings.", title="Search modes")
    run(make_service(embedder=later).ingest, [DOCS[0], edited])
    assert later.calls == [[embedding_input(edited.title, edited.text)]]
    assert [h.chunk.chunk_id for h in run(make_service(embedder=later).search, "upload files admin", mode="semantic")][:1] == ["guide:0"]


def test_an_embed_only_embedder_whose_dimension_changed_never_mixes_dimensions(make_service) -> None:
    class Sized(SeedEmbeddings):
        def __init__(self, dimension: int) -> None:
            self._client = BagOfWordsEmbedder(dimension)
            self.calls = self._client.calls

    run(make_service(embedder=Sized(32)).ingest, DOCS[:2])
    wider = Sized(64)
    edited = RAGDocument("modes", "Semantic search compares embeddings.", title="Search modes")
    run(make_service(embedder=wider).ingest, [DOCS[0], edited])
    # The stored vectors' id said 32 dimensions; the first new vector has 64: nothing is reused then.
    assert wider.calls == [[embedding_input(edited.title, edited.text)], [embedding_input(d.title, d.text) for d in (DOCS[0], edited)]]
    hits = run(make_service(embedder=wider).search, "upload files admin", mode="semantic")
    assert [h.chunk.chunk_id for h in hits] == ["guide:0", "modes:0"]


def test_an_ingest_fills_embedding_calls_up_to_the_batch_bound_across_documents(make_service) -> None:
    embedder = SeedEmbeddings()
    service = make_service(embedder=embedder, chunker=Lines())
    docs = [RAGDocument(f"d{n}", "\n".join(f"line {i} of document {n}" for i in range(400))) for n in range(3)]
    assert run(service.ingest, docs) == 1200
    assert [len(call) for call in embedder.calls] == [1000, 200]


def test_a_new_embedding_model_re_embeds(make_service) -> None:
    run(make_service(embedder=BagOfWordsEmbedder(model_id="m1")).ingest, [DOCS[0]])
    other = BagOfWordsEmbedder(model_id="m2")
    run(make_service(embedder=other).ingest, [DOCS[0]])
    assert other.texts_embedded == 1


def test_duplicate_ids_in_one_request_are_rejected(make_service) -> None:
    embedder = BagOfWordsEmbedder()
    service = make_service(embedder=embedder)
    with pytest.raises(rag.RAGValidationError, match="unique ids"):
        run(service.ingest, [RAGDocument("x", "one"), RAGDocument("x", "two")])
    assert embedder.calls == []


@pytest.mark.parametrize("fault", ["raise", "short", "nan", "dims", "zero"])
def test_failing_embedder_leaves_previous_chunks_intact(make_service, fault: str) -> None:
    run(make_service().ingest, [RAGDocument("doc", "the original text about otters")])
    broken = make_service(embedder=BrokenEmbedder(fault), chunker=rag.FixedSizeChunker(size=60, overlap=0))
    with pytest.raises(rag.EmbedderError):
        run(broken.ingest, [RAGDocument("doc", "replacement text about beavers " * 6)])
    service = make_service()
    assert [c.text for c in run(service.fetch, ["doc:0", "doc:1"])] == ["the original text about otters"]
    assert [h.chunk.chunk_id for h in run(service.search, "otters", mode="keyword")] == ["doc:0"]


def test_keyword_search_works_without_an_embedder_and_semantic_is_a_clear_error(make_service) -> None:
    service = make_service(embedder=None)
    run(service.ingest, DOCS)
    assert run(service.search, "BM25", mode="keyword")[0].chunk.chunk_id == "modes:0"
    with pytest.raises(rag.ConfigurationError, match="semantic search needs an embedder"):
        run(service.search, "BM25", mode="semantic")
    with pytest.raises(rag.ConfigurationError, match="hybrid search needs an embedder"):
        run(service.search, "BM25")


def test_delete_removes_documents_and_chunks(make_service) -> None:
    service = make_service()
    run(service.ingest, DOCS)
    assert run(service.delete, ["guide", "missing"]) == 1
    assert run(service.fetch, ["guide:0", "modes:0"])[0].chunk_id == "modes:0"
    assert all(h.chunk.document_id != "guide" for h in run(service.search, "upload admin files"))
    assert run(service.delete, ["guide"]) == 0


# --- search --------------------------------------------------------------------------


@pytest.mark.parametrize("mode", list(SearchMode))
def test_every_mode_ranks_descending_within_limit(make_service, mode: SearchMode) -> None:
    service = make_service()
    run(service.ingest, DOCS)
    hits = run(service.search, "upload files in the admin", mode=mode, limit=2)
    assert 1 <= len(hits) <= 2
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    assert hits[0].chunk.document_id == "guide"


def test_hybrid_hits_carry_rrf_fields(make_service) -> None:
    service = make_service()
    run(service.ingest, DOCS)
    hits = run(service.search, "semantic search embeddings", mode="hybrid")
    assert [h.rrf_rank for h in hits] == list(range(1, len(hits) + 1))
    top = hits[0]
    assert top.chunk.document_id == "modes"
    # Ranked first by both legs with k = 60: 1/61 + 1/61.
    assert math.isclose(top.rrf_score, 2 / 61) and top.score == top.rrf_score
    assert all(h.semantic_similarity is not None for h in hits)


def test_rrf_k_is_configurable(make_service) -> None:
    service = make_service(rrf_k=10)
    run(service.ingest, DOCS)
    assert math.isclose(run(service.search, "semantic search embeddings")[0].score, 2 / 11)


def test_min_score_is_applied(make_service) -> None:
    service = make_service()
    run(service.ingest, DOCS)
    all_hits = run(service.search, "admin upload", mode="keyword")
    assert len(all_hits) >= 2
    threshold = (all_hits[0].score + all_hits[-1].score) / 2
    kept = run(service.search, "admin upload", mode="keyword", min_score=threshold)
    assert kept and len(kept) < len(all_hits) and all(h.score >= threshold for h in kept)


@pytest.mark.parametrize("mode", list(SearchMode))
def test_filters_equality_membership_and_across_fields(make_service, mode: SearchMode) -> None:
    service = make_service()
    run(service.ingest, DOCS)

    def docs(**filters: object) -> set[str]:
        return {h.chunk.document_id for h in run(service.search, "admin upload search documents hochgeladen", mode=mode, limit=10, filters=filters)}

    assert docs(lang="de") <= {"hallo"}
    assert docs(kind="guide", lang="en") <= {"guide"}
    assert docs(year=(2024, 2030)) - {"guide"} == set()
    assert docs(public=True) <= {"guide", "hallo"}
    assert docs(public=False) <= {"modes"}
    assert docs(year="2024") == set(), "a string never equals a number"
    assert docs(public=1) == set(), "a number never equals a boolean"
    assert docs(missing="x") == set()
    if mode is SearchMode.SEMANTIC:
        assert docs(kind="guide") == {"guide", "hallo"}


def test_stop_words_only_query_returns_nothing(make_service) -> None:
    service = make_service()
    run(service.ingest, DOCS)
    assert run(service.search, "the of and to", mode="keyword") == ()
    assert run(service.search, "?!.,", mode="keyword") == ()


def test_namespaces_are_isolated_even_with_the_same_document_ids(make_service) -> None:
    acme, globex = make_service("acme"), make_service("globex")
    run(acme.ingest, [RAGDocument("shared-id", "acme secret roadmap about rockets")])
    run(globex.ingest, [RAGDocument("shared-id", "globex public brochure about gardens")])
    for mode in SearchMode:
        assert all(h.chunk.namespace == "globex" for h in run(globex.search, "secret roadmap rockets", mode=mode))
        assert "rockets" not in " ".join(h.chunk.text for h in run(globex.search, "secret roadmap rockets", mode=mode))
    assert run(globex.fetch, ["shared-id:0"])[0].text == "globex public brochure about gardens"
    run(globex.delete, ["shared-id"])
    assert run(acme.fetch, ["shared-id:0"])[0].text == "acme secret roadmap about rockets"


def test_namespace_callable_is_resolved_on_every_call(make_service) -> None:
    current = {"ns": "acme"}
    service = make_service(namespace=lambda: current["ns"])
    run(service.ingest, [RAGDocument("d", "written into acme")])
    current["ns"] = "globex"
    assert run(service.fetch, ["d:0"]) == ()


def test_fetch_keeps_requested_order_and_omits_missing(make_service) -> None:
    service = make_service()
    run(service.ingest, DOCS)
    got = run(service.fetch, ["hallo:0", "nope:0", "guide:0", "hallo:0"])
    assert [c.chunk_id for c in got] == ["hallo:0", "guide:0"]


class Lines:
    """A chunker: one chunk per line."""

    def split(self, document: RAGDocument) -> list[str]:
        return document.text.split("\n")


def test_fetch_omits_missing_ids_of_any_safe_shape(make_service) -> None:
    """Missing ids are omitted, whatever their shape: ids are safe, bounded identifiers, not the
    default chunker's '<document id>:<n>' (custom chunkers and backends need not follow it)."""
    service = make_service(chunker=Lines())
    run(service.ingest, [RAGDocument("m", "first line\nsecond line\nthird line")])
    assert [c.chunk_id for c in run(service.fetch, ("m:2", "m:0", "nope"))] == ["m:2", "m:0"]
    assert run(service.fetch, ("nope", "a.b", "x:y:z", "doc/part@2", "m:99999999", "m" * 207)) == ()
    for unsafe in ("has space", "../m:0", "", ":0", "m" * 208, "m:0\n"):
        with pytest.raises(rag.RAGValidationError, match="not a valid chunk id"):
            run(service.fetch, ("m:0", unsafe))


HARBOUR_QUESTION = "Where is the harbour master's spare key for the pilot boat?"
HARBOUR_MEMO = "Memo: the harbour master keeps the spare key for the pilot boat in the blue cabinet by the slipway."


class PlateauEmbedder:
    """A long repetitive log as an English embedder sees it: every log line at cosine 0.632-0.636 to
    the question (a plateau), the memo that answers it at 0.5, below the whole semantic top 100."""

    model_id = "test/plateau"
    dimension = 3

    @staticmethod
    def _at(cosine: float, angle: float) -> list[float]:
        rest = math.sqrt(1 - cosine * cosine)
        return [cosine, rest * math.cos(angle), rest * math.sin(angle)]

    async def embed(self, texts: Sequence[str], *, kind: str = "document") -> list[list[float]]:
        out = []
        for text in texts:
            if text == HARBOUR_QUESTION:
                out.append([1.0, 0.0, 0.0])
            elif text.startswith("Memo"):
                out.append(self._at(0.5, 0.0))
            else:
                n = int(text.split()[2].rstrip(":"))
                out.append(self._at(0.632 + 0.004 * n / 149, n / 10))
        return out


def test_default_hybrid_keeps_the_only_real_keyword_match_first_under_a_semantic_plateau(make_service) -> None:
    """Issue 30: min-max stretched the log's plateau to 0..1 and ranked the memo 8th or lower."""
    service = make_service(embedder=PlateauEmbedder(), fusion="score", fusion_weight=1.5)
    log = [RAGDocument(f"log-{n}", f"Harbour log {n}: vessel moored at berth {n % 7}, tide {n % 5} m, weather fair.")
           for n in range(150)]
    run(service.ingest, [*log, RAGDocument("memo", HARBOUR_MEMO)])
    keyword = run(service.search, HARBOUR_QUESTION, mode="keyword", limit=3)
    assert keyword[0].chunk.document_id == "memo" and keyword[0].score > 3 * keyword[1].score
    hits = run(service.search, HARBOUR_QUESTION, mode="hybrid", limit=10)
    assert hits[0].chunk.document_id == "memo", [h.chunk.document_id for h in hits]
    # The plateau is not stretched into a ranking: no log line gets more than a sliver of the semantic leg.
    assert max(h.semantic_norm for h in hits if h.chunk.document_id != "memo") < 0.05


# --- bounds ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        (lambda s: s.search("x", limit=0, mode="keyword"), ValueError, "between 1 and 100"),
        (lambda s: s.search("x", limit=101, mode="keyword"), ValueError, "between 1 and 100"),
        (lambda s: s.search("", mode="keyword"), ValueError, "must not be empty"),
        (lambda s: s.search("x" * 16_385, mode="keyword"), ValueError, "at most 16384 characters"),
        (lambda s: s.search("x", mode="fuzzy"), ValueError, "must be one of keyword, semantic, hybrid"),
        (lambda s: s.search("x", mode="keyword", filters={"a": {"b": 1}}), TypeError, "nested"),
        (lambda s: s.search("x", mode="keyword", filters={f"f{i}": 1 for i in range(65)}), ValueError, "at most 64 fields"),
        (lambda s: s.search("x", mode="keyword", filters={"a": list(range(101))}), ValueError, "at most 100 values"),
        (lambda s: s.search("x", mode="keyword", filters={"a": []}), ValueError, "at least 1 value"),
        (lambda s: s.search("x", mode="keyword", filters={"bad field": 1}), ValueError, "not a valid field name"),
        (lambda s: s.search("x", mode="keyword", filters={"a": float("nan")}), ValueError, "finite"),
        (lambda s: s.search("x", mode="keyword", min_score=float("inf")), ValueError, "finite"),
        (lambda s: s.ingest([]), ValueError, "at least 1 document"),
        (lambda s: s.ingest([RAGDocument(f"d{i}", "t") for i in range(1001)]), ValueError, "at most 1000 documents"),
        (lambda s: s.ingest([RAGDocument(f"d{i}", "word " * 800_000) for i in range(6)]), ValueError, "at most 10000 chunks"),
        (lambda s: s.fetch([]), ValueError, "at least 1 id"),
        (lambda s: s.fetch(["no ordinal"]), ValueError, "not a valid chunk id"),
        (lambda s: s.fetch([f"d:{i}" for i in range(1001)]), ValueError, "at most 1000 ids"),
        (lambda s: s.delete(["bad id!"]), ValueError, "not a valid document id"),
        (lambda s: s.ingest([RAGDocument("d", "t")], trigger="robot"), ValueError, "'user' or 'agent'"),
    ],
)
def test_bounds_are_enforced_before_the_embedder_runs(make_service, call, error, message) -> None:  # type: ignore[no-untyped-def]
    embedder = BagOfWordsEmbedder()
    service = make_service(embedder=embedder)
    with pytest.raises(error, match=message):
        run(_await, call(service))
    assert embedder.calls == []


async def _await(coroutine):  # type: ignore[no-untyped-def]
    return await coroutine


@pytest.mark.parametrize(
    ("build", "error", "message"),
    [
        (lambda: RAGDocument("d", "t", metadata={"a": {"b": 1}}), TypeError, "nested"),
        (lambda: RAGDocument("d", "t", metadata={"a": [1]}), TypeError, "nested"),
        (lambda: RAGDocument("d", ""), ValueError, "must not be empty"),
        (lambda: RAGDocument("d", "x" * 10_000_001), ValueError, "at most 10000000 characters"),
        (lambda: RAGDocument("", "t"), ValueError, "not a valid document id"),
        (lambda: RAGDocument("a" * 201, "t"), ValueError, "not a valid document id"),
        (lambda: RAGDocument("d", "t", metadata={f"f{i}": 1 for i in range(65)}), ValueError, "at most 64 fields"),
        (lambda: rag.RAGQuery("q", "acme", mode="semantic"), ValueError, "needs a query vector"),
        (lambda: rag.RAGQuery("q", "acme", mode="keyword", vector=[True, 1.0]), TypeError, "numbers"),
        (lambda: rag.RAGQuery("q", "acme", mode="keyword", vector=[0.0] * 65_537), ValueError, "65536 dimensions"),
        (lambda: rag.RAGQuery("q", "bad namespace", mode="keyword"), ValueError, "not a valid namespace"),
        (lambda: rag.RAGChunk("d:0", "d", "acme", "t", embedding=[float("inf")]), ValueError, "finite"),
    ],
)
def test_value_types_validate_on_construction(build, error, message) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(error, match=message):
        build()


def test_rag_chunk_equality_and_hash_are_the_seeds_eight_fields() -> None:
    with_offsets = rag.RAGChunk("d:0", "d", "acme", "text", "T", None, {"k": 1}, (1.0,), start_char=3, end_char=7)
    plain = rag.RAGChunk("d:0", "d", "acme", "text", "T", None, {"k": 1}, (1.0,))
    assert with_offsets == plain and hash(with_offsets) == hash(plain) and len({with_offsets, plain}) == 1
    assert plain != rag.RAGChunk("d:0", "d", "acme", "text", "T", None, {"k": 2}, (1.0,))
    assert plain != rag.RAGChunk("d:0", "d", "acme", "text", "T", None, {"k": 1}, (0.5,))
    with pytest.raises(ValueError, match="0 <= start_char < end_char"):
        rag.RAGChunk("d:0", "d", "acme", "text", start_char=7, end_char=3)
    with pytest.raises(TypeError, match="both be integers or both be null"):
        rag.RAGChunk("d:0", "d", "acme", "text", start_char=0)


class RoleAwareEmbedder:
    """Declares a model id and takes ``kind``: queries and passages are embedded in their roles."""

    model_id = "test/roles"

    def __init__(self) -> None:
        self.kinds: list[str] = []

    async def embed(self, texts, *, kind: str = "document"):  # type: ignore[no-untyped-def]
        self.kinds.append(kind)
        return [[1.0, float(len(t) % 7), 0.5] for t in texts]


class PlainEmbedder:
    """The seed's embedder: ``embed(texts)`` and nothing else (a ``kind=`` would be a TypeError)."""

    async def embed(self, texts):  # type: ignore[no-untyped-def]
        return [[1.0, float(len(t) % 7), 0.5] for t in texts]


def test_embedders_get_kind_only_when_their_embed_takes_it(make_service) -> None:
    roles = RoleAwareEmbedder()
    service = make_service(embedder=roles)
    run(service.ingest, DOCS)
    assert run(service.search, "upload files", mode="semantic")
    assert roles.kinds == ["document", "query"]
    plain = make_service(embedder=PlainEmbedder(), namespace="globex")
    assert run(plain.ingest, DOCS) == 3
    assert {h.chunk.document_id for h in run(plain.search, "upload files", mode="hybrid")} <= {"guide", "modes", "hallo"}


def test_anonymous_embedders_keep_their_vectors_apart_from_named_ones(make_service) -> None:
    """Vectors carry the derived id ``<module>.<class>/<dimension>``; a semantic search with another
    embedder (another id) does not rank them, exactly as for two named models."""
    run(make_service(embedder=PlainEmbedder()).ingest, DOCS)
    assert len(run(make_service(embedder=PlainEmbedder()).search, "upload", mode="semantic")) == 3
    assert run(make_service(embedder=RoleAwareEmbedder()).search, "upload", mode="semantic") == ()


def test_rag_chunk_positional_order() -> None:
    chunk = rag.RAGChunk("d:1", "d", "acme", "text", "Title", "https://x", {"k": 1}, [1.0, 0.0])
    assert (chunk.title, chunk.uri, dict(chunk.metadata), chunk.embedding) == ("Title", "https://x", {"k": 1}, (1.0, 0.0))
    assert chunk.ordinal == 1


def test_total_characters_per_ingest_are_bounded(make_service) -> None:
    embedder = BagOfWordsEmbedder()
    service = make_service(embedder=embedder)
    big = [RAGDocument(f"d{i}", "x " * 4_500_000) for i in range(6)]  # 54 M characters
    with pytest.raises(ValueError, match="at most 50000000 characters per ingestion request"):
        run(service.ingest, big)
    assert embedder.calls == []


# --- the service re-checks backends ----------------------------------------------------------


class LyingBackend(MemoryBackend):
    def __init__(self, lie: str) -> None:
        super().__init__()
        self.lie = lie

    async def search(self, query):  # type: ignore[no-untyped-def]
        hits = await super().search(query)
        if self.lie == "namespace":
            c = hits[0].chunk
            hits[0] = rag.RAGHit(rag.RAGChunk(c.chunk_id, c.document_id, "globex", c.text), hits[0].score)
        elif self.lie == "order":
            hits.reverse()
        elif self.lie == "count":
            hits = hits * 10
        elif self.lie == "min_score":
            hits.append(rag.RAGHit(hits[0].chunk, -5.0))
        elif self.lie == "type":
            hits = [{"chunk": "x"}]
        return hits


@pytest.mark.parametrize("lie", ["namespace", "order", "count", "min_score", "type"])
def test_service_rejects_a_backend_that_breaks_the_contract(lie: str) -> None:
    service = rag.service(LyingBackend(lie), BagOfWordsEmbedder(), namespace="acme")
    run(service.ingest, DOCS)
    with pytest.raises(rag.BackendContractError):
        run(service.search, "admin upload search", mode="keyword", limit=3, min_score=0.0 if lie == "min_score" else None)


def test_memory_backend_refuses_to_grow_past_max_chunks() -> None:
    service = rag.memory(BagOfWordsEmbedder(), namespace="acme", max_chunks=2)
    run(service.ingest, DOCS[:2])
    with pytest.raises(rag.CapacityError, match="at most 2 chunks"):
        run(service.ingest, DOCS[2:])
    run(service.ingest, [RAGDocument("guide", "replacing an existing document does not grow the store")])


def test_service_works_as_async_context_manager() -> None:
    async def scenario() -> list[str]:
        async with rag.memory(BagOfWordsEmbedder(), namespace="acme") as service:
            await service.ingest(DOCS)
            return [h.chunk.document_id for h in await service.search("BM25 cosine")]

    assert async_to_sync(scenario)()[0] == "modes"


# --- PostgreSQL specifics ----------------------------------------------------------------


def test_postgres_ingest_and_delete_are_audited(db: None) -> None:
    make_tenant("acme")
    service = rag.postgres(BagOfWordsEmbedder(), namespace="acme")
    run(service.ingest, DOCS, actor="user:7")
    run(service.delete, ["guide"], trigger="agent", actor="agent:run-1")
    events = list(AuditEvent.objects.order_by("at", "id").values("action", "actor", "trigger", "document_ids", "chunk_count"))
    assert events == [
        {"action": "ingest", "actor": "user:7", "trigger": "user", "document_ids": ["guide", "modes", "hallo"], "chunk_count": 3},
        {"action": "delete", "actor": "agent:run-1", "trigger": "agent", "document_ids": ["guide"], "chunk_count": 1},
    ]


def test_postgres_term_statistics_follow_ingest_and_delete(db: None) -> None:
    tenant = make_tenant("acme")
    service = rag.postgres(None, namespace="acme")

    def stats() -> tuple[int, int, dict[str, int]]:
        corpus = CorpusStat.objects.get(tenant=tenant)
        terms = dict(TermStat.objects.filter(tenant=tenant, lexeme__in=["otter", "beaver", "river"]).values_list("lexeme", "df"))
        return corpus.chunk_count, corpus.token_count, terms

    run(service.ingest, [RAGDocument("a", "otters swim in the river"), RAGDocument("b", "beavers build in the river")])
    assert stats() == (2, 6, {"otter": 1, "beaver": 1, "river": 2})
    assert Posting.objects.filter(tenant=tenant).count() == 6
    run(service.ingest, [RAGDocument("a", "otters otters everywhere")])  # length = distinct lexemes
    assert stats() == (2, 5, {"otter": 1, "beaver": 1, "river": 1})
    assert Posting.objects.get(tenant=tenant, lexeme="otter").tf == 2
    run(service.delete, ["b"])
    assert stats() == (1, 2, {"otter": 1})
    assert Chunk.objects.count() == 1 and Document.objects.get().version == 2
    assert sorted(Posting.objects.filter(tenant=tenant).values_list("lexeme", flat=True)) == ["everywher", "otter"]


def test_postgres_title_occurrences_count_title_weight_times_on_both_keyword_paths(db: None) -> None:
    docs = [RAGDocument("a", "The otter swims.", title="Otter facts"), RAGDocument("b", "An otter, another otter, one more otter.")]
    make_tenant("acme"), make_tenant("backlog")
    run(rag.postgres(None, namespace="acme").ingest, docs)
    assert Posting.objects.get(tenant__slug="acme", chunk__chunk_id="a:0", lexeme="otter").tf == 1 + TITLE_WEIGHT
    assert Posting.objects.get(tenant__slug="acme", chunk__chunk_id="b:0", lexeme="otter").tf == 3
    assert Posting.objects.get(tenant__slug="acme", chunk__chunk_id="a:0", lexeme="fact").tf == TITLE_WEIGHT
    # The same documents left to the indexer are scored from their tsvectors: the same scores.
    deferred = rag.service(PostgresBackend(inline_index_max_chunks=0), None, namespace="backlog")
    run(deferred.ingest, docs)
    assert not Posting.objects.filter(tenant__slug="backlog").exists()
    indexed = run(rag.postgres(None, namespace="acme").search, "otter facts", mode="keyword")
    exact = run(deferred.search, "otter facts", mode="keyword")
    assert [(h.chunk.chunk_id, h.score) for h in exact] == [(h.chunk.chunk_id, h.score) for h in indexed]
    assert [h.chunk.chunk_id for h in indexed] == ["a:0", "b:0"]


def test_postgres_document_row_describes_current_chunks(db: None) -> None:
    make_tenant("acme")
    run(rag.postgres(BagOfWordsEmbedder(), namespace="acme").ingest, [DOCS[0]])
    doc = Document.objects.get(external_id="guide")
    assert (doc.status, doc.chunk_count, doc.version, doc.title, doc.embedding_model) == ("ready", 1, 1, "Upload guide", "test/bag-of-words")
    [vector] = chunk_vectors(Chunk.objects.all())
    # Unit length (to half precision where pgvector stores it as a halfvec).
    assert vector is not None and len(vector) == 64 and math.isclose(sum(x * x for x in vector), 1.0, abs_tol=2e-3)


def test_postgres_typed_api_creates_a_namespace_on_its_first_write_and_reads_of_unknown_ones_find_nothing(db: None) -> None:
    knowledge = rag.postgres(embedder=BagOfWordsEmbedder(), namespace="hidden-a")
    assert run(knowledge.search, "secret plan") == ()
    assert run(knowledge.fetch, ("plan:0", "nope")) == ()
    assert run(knowledge.delete, ["plan"]) == 0
    assert not Tenant.objects.filter(slug="hidden-a").exists(), "reads and deletions create nothing"
    assert run(knowledge.ingest, [RAGDocument("plan", "The secret plan.")], trigger="agent", actor="nightly-job") == 1
    tenant = Tenant.objects.get(slug="hidden-a")
    assert (tenant.name, tenant.private_to) == ("hidden-a", None)
    events = AuditEvent.objects.filter(tenant=tenant).order_by("id")
    assert list(events.values_list("action", "trigger", "actor", "document_ids", "chunk_count")) == [
        ("create_namespace", "agent", "nightly-job", [], 0), ("ingest", "agent", "nightly-job", ["plan"], 1)]
    assert [c.chunk_id for c in run(knowledge.fetch, ("plan:0", "nope"))] == ["plan:0"]
    assert [h.chunk.chunk_id for h in run(knowledge.search, "secret plan")] == ["plan:0"]
    # The seed's quick start: one service following the current user.
    current = {"user": "user-17"}
    per_user = rag.postgres(embedder=None, namespace=lambda: current["user"])
    run(per_user.ingest, [RAGDocument("note", "My own note.")])
    current["user"] = "user-18"
    assert run(per_user.search, "note", mode="keyword") == () and run(per_user.fetch, ["note:0"]) == ()
    assert list(Tenant.objects.filter(slug__startswith="user-").values_list("slug", flat=True)) == ["user-17"]


def test_a_failed_first_write_leaves_no_namespace_behind(db: None) -> None:
    service = rag.service(PostgresBackend(create_namespaces=True), None, namespace="hidden-b")
    plan = run(service.prepare_ingest, [DOCS[0]])
    with pytest.raises(RuntimeError, match="disk full"), transaction.atomic():
        assert service.write_ingest(plan).chunks == 1  # on this thread's connection: part of the caller's transaction
        raise RuntimeError("disk full")  # what the caller does next, in its transaction, fails
    assert not Tenant.objects.filter(slug="hidden-b").exists()
    assert not AuditEvent.objects.exists()


def test_the_products_backend_never_creates_a_namespace(db: None) -> None:
    """The configured backend (every HTTP, MCP and web request's) refuses writes to unknown tenants."""
    with pytest.raises(rag.NamespaceNotFound, match="no tenant"):
        run(rag.tenant_service("ghost", embedder=None).ingest, [DOCS[0]])
    with pytest.raises(rag.NamespaceNotFound, match="no tenant"):
        run(rag.tenant_service("ghost", embedder=None).delete, ["guide"])
    assert run(rag.tenant_service("ghost", embedder=None).fetch, ["guide:0"]) == ()
    assert not Tenant.objects.filter(slug="ghost").exists()


@pytest.mark.parametrize("using", ["default", pytest.param("stock", marks=needs_stock)])
def test_postgres_keyword_fast_path_falls_back_to_exact_under_selective_filters(using: str) -> None:
    """With 3 postings read per term, a filter keeping 1 in 10 chunks would leave the page short."""

    Tenant.objects.using(using).get_or_create(slug="acme")
    docs = [RAGDocument(f"d{i}", f"common words appear in document {i}", metadata={"keep": i % 10 == 0}) for i in range(100)]
    run(rag.service(PostgresBackend(using), None, namespace="acme").ingest, docs)
    tight = rag.service(PostgresBackend(using, postings_per_term=3), None, namespace="acme")
    hits = run(tight.search, "common words", mode="keyword", limit=10, filters={"keep": True})
    assert sorted(h.chunk.document_id for h in hits) == sorted(f"d{i}" for i in range(0, 100, 10))
    unfiltered = run(tight.search, "common words", mode="keyword", limit=10)
    assert len(unfiltered) == 10


@pytest.mark.parametrize("using", ["default", pytest.param("stock", marks=needs_stock)])
def test_postgres_keyword_fast_path_completes_the_scores_of_terms_whose_postings_it_cut(using: str) -> None:
    """With 4 postings read per term, "river" (in 14 chunks) is cut: the otter chunks that also say
    "river", far down its list, get that part of their score back before the page is cut."""

    Tenant.objects.using(using).get_or_create(slug="acme")
    docs = [RAGDocument(f"r{i}", "river " * (1 + i % 3) + f"bank number {i}") for i in range(12)]
    docs += [RAGDocument(f"f{i}", f"gravel and sand for road number {i}") for i in range(30)]
    docs += [RAGDocument(f"o{i}", f"an otter {'swims in the river' if i % 2 else 'sleeps in the reeds'} at dusk, long after the rain {i}")
             for i in range(4)]
    run(rag.service(PostgresBackend(using), None, namespace="acme").ingest, docs)
    exact = run(rag.service(PostgresBackend(using), None, namespace="acme").search, "otter river", mode="keyword", limit=6)
    tight = run(rag.service(PostgresBackend(using, postings_per_term=4), None, namespace="acme").search,
                "otter river", mode="keyword", limit=6)
    assert [h.chunk.document_id for h in exact][:2] == ["o1", "o3"]  # both words beat either alone
    assert [(h.chunk.document_id, h.score) for h in tight] == [(h.chunk.document_id, h.score) for h in exact]
