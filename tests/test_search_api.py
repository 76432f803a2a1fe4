"""POST /v1/search and /v1/chunks/fetch: roles, tenancy, bounds as 400s."""

from __future__ import annotations

import pytest
from asgiref.sync import async_to_sync

from accounts.models import Tenant
from knowledge import rag
from tests.conftest import World


@pytest.fixture
def indexed(world: World) -> World:
    """acme and globex each hold documents; they share a document id."""
    docs = [
        rag.RAGDocument("guide", "Editors upload files in the admin; uploads are processed in the background.",
                        title="Uploading", metadata={"team": "support", "year": 2024}),
        rag.RAGDocument("modes", "Keyword search uses BM25 while semantic search compares embeddings.",
                        title="Search modes", metadata={"team": "search", "year": 2025}),
    ]
    async_to_sync(rag.postgres(rag.default_embedder(), namespace="acme").ingest)(docs)
    async_to_sync(rag.postgres(rag.default_embedder(), namespace="globex").ingest)(
        [rag.RAGDocument("guide", "Globex confidential: quarterly upload numbers for the board.")]
    )
    return world


def test_reader_searches_in_hybrid_mode_by_default(indexed: World) -> None:
    response = indexed.client(indexed.teammate).post("/v1/search", {"query": "how do I upload files?"}, format="json")
    assert response.status_code == 200
    hits = response.json()["hits"]
    assert hits[0]["chunk_id"] == "guide:0" and hits[0]["document_id"] == "guide"
    assert set(hits[0]) == {"chunk_id", "document_id", "title", "uri", "text", "metadata", "start_char", "end_char",
                            "score", "rrf_rank", "semantic_similarity", "keyword_norm", "semantic_norm"}  # score fusion's parts
    assert hits[0]["rrf_rank"] == 1 and hits[0]["semantic_similarity"] > 0.3
    assert all("Globex" not in h["text"] for h in hits)


def test_search_modes_filters_and_limit(indexed: World) -> None:
    client = indexed.client(indexed.teammate)
    keyword = client.post("/v1/search", {"query": "BM25", "mode": "keyword"}, format="json").json()["hits"]
    assert [h["chunk_id"] for h in keyword] == ["modes:0"] and keyword[0]["rrf_rank"] is None
    filtered = client.post("/v1/search", {"query": "search upload", "filters": {"team": ["support"]}, "limit": 5}, format="json")
    assert [h["document_id"] for h in filtered.json()["hits"]] == ["guide"]


def test_outsider_cannot_search_our_tenant(indexed: World) -> None:
    response = indexed.client(indexed.outsider).post("/v1/search", {"query": "upload", "tenant": "acme"}, format="json")
    assert response.status_code == 404


def test_anonymous_search_is_401(indexed: World) -> None:
    from rest_framework.test import APIClient

    assert APIClient().post("/v1/search", {"query": "upload"}, format="json").status_code == 401


@pytest.mark.parametrize(
    ("body", "field", "phrase"),
    [
        ({"query": "x", "limit": 0}, "limit", "greater than or equal to 1"),
        ({"query": "x", "limit": 101}, "limit", "less than or equal to 100"),
        ({"query": ""}, "query", "may not be blank"),
        ({"query": "   "}, "query", "must not be empty"),
        ({"query": "x" * 16_385}, "query", "no more than 16384 characters"),
        ({"query": "x", "mode": "fuzzy"}, "mode", "not a valid choice"),
        ({"query": "x", "filters": {"a": {"b": 1}}}, "filters.a", "nested"),
        ({"query": "x", "filters": {f"f{i}": 1 for i in range(65)}}, "filters", "at most 64 fields"),
        ({"query": "x", "filters": {"a": list(range(101))}}, "filters.a", "at most 100 values"),
        ({"query": "x", "filters": "team=support"}, "filters", "Expected a dictionary"),
        ({"query": "x", "min_score": "high"}, "min_score", "valid number"),
        ({}, "query", "required"),
    ],
)
def test_every_bound_is_a_400_naming_the_field(indexed: World, body: dict[str, object], field: str, phrase: str) -> None:
    response = indexed.client(indexed.teammate).post("/v1/search", body, format="json")
    assert response.status_code == 400, response.content
    fields = response.json()["fields"]
    assert field in fields and phrase in " ".join(fields[field])


def test_malformed_json_search_is_400(indexed: World) -> None:
    response = indexed.client(indexed.teammate).generic("POST", "/v1/search", "{nope", content_type="application/json")
    assert response.status_code == 400 and response.json()["error"] == "parse_error"


def test_fetch_returns_requested_order_and_omits_missing_and_foreign(indexed: World) -> None:
    client = indexed.client(indexed.teammate)
    response = client.post("/v1/chunks/fetch", {"ids": ["modes:0", "ghost:0", "guide:0"]}, format="json")
    assert response.status_code == 200
    assert [c["chunk_id"] for c in response.json()["chunks"]] == ["modes:0", "guide:0"]
    assert "Globex" not in response.json()["chunks"][1]["text"]


def test_fetch_omits_a_missing_id_of_any_safe_shape(indexed: World) -> None:
    response = indexed.client(indexed.teammate).post("/v1/chunks/fetch", {"ids": ["nope", "guide:0", "a.b", "x:y:z"]}, format="json")
    assert response.status_code == 200
    assert [c["chunk_id"] for c in response.json()["chunks"]] == ["guide:0"]


def test_an_unknown_tenant_is_404_and_is_never_created(indexed: World) -> None:
    """Only the typed Python API creates namespaces; a request naming one that does not exist is a 404."""
    client = indexed.client(indexed.owner)
    for path, body in (
        ("/v1/search", {"query": "upload", "tenant": "hidden-c"}),
        ("/v1/chunks/fetch", {"ids": ["guide:0"], "tenant": "hidden-c"}),
        ("/v1/documents", {"documents": [{"id": "plan", "text": "The secret plan."}], "tenant": "hidden-c"}),
    ):
        response = client.post(path, body, format="json")
        assert response.status_code == 404, (path, response.content)
    assert not Tenant.objects.filter(slug="hidden-c").exists()


def test_chunks_that_are_not_slices_have_null_offsets_in_json(indexed: World) -> None:
    class Rephrasing:
        def split(self, document: rag.RAGDocument) -> list[str]:
            return [f"In short: {document.text.lower()}"]

    async_to_sync(rag.postgres(embedder=None, chunker=Rephrasing(), namespace="acme").ingest)([rag.RAGDocument("brief", "Otters Float")])
    client = indexed.client(indexed.teammate)
    fetched = client.post("/v1/chunks/fetch", {"ids": ["brief:0"]}, format="json").json()["chunks"]
    assert [(c["text"], c["start_char"], c["end_char"]) for c in fetched] == [("In short: otters float", None, None)]
    found = client.post("/v1/search", {"query": "otters", "mode": "keyword"}, format="json").json()["hits"]
    assert [(h["chunk_id"], h["start_char"], h["end_char"]) for h in found] == [("brief:0", None, None)]


@pytest.mark.parametrize(
    ("body", "field"),
    [({"ids": []}, "ids"), ({"ids": "guide:0"}, "ids"), ({"ids": ["no ordinal"]}, "ids"), ({"ids": [f"d:{i}" for i in range(1001)]}, "ids")],
)
def test_fetch_bounds_are_400(indexed: World, body: dict[str, object], field: str) -> None:
    response = indexed.client(indexed.teammate).post("/v1/chunks/fetch", body, format="json")
    assert response.status_code == 400 and field in response.json()["fields"]


# --- graph search and the graph picture ----------------------------------------------------------


@pytest.fixture
def linked(world: World, settings: object) -> World:
    """acme holds passages that name each other; the graph leg may add passages below the first hit."""
    from tests.conftest import backend_setting
    from tests.test_graph import ARTICLES, LOOSE, doc, filler

    settings.QUARRY_RAG_BACKEND = backend_setting(graph=LOOSE)  # type: ignore[attr-defined]
    async_to_sync(rag.postgres(rag.default_embedder(), namespace="acme").ingest)([doc(k) for k in ARTICLES] + [filler(n) for n in range(6)])
    async_to_sync(rag.postgres(rag.default_embedder(), namespace="globex").ingest)(
        [rag.RAGDocument("snow", "Hank Snow is Globex's code name for Project Tundra.", title="Hank Snow")]
    )
    return world


def test_graph_search_adds_passages_with_their_path_and_the_legs_diagnostics(linked: World) -> None:
    client = linked.client(linked.teammate)
    body = client.post("/v1/search", {"query": "What was the hometown of the singer of Hello Love?", "limit": 4,
                                      "graph_search": True}, format="json").json()
    by_id = {h["chunk_id"]: h for h in body["hits"]}
    assert by_id["snow:0"]["graph_path"] == ["Hank Snow"] and "graph_path" not in by_id["hello:0"]
    assert body["graph"]["used"] is True and body["graph"]["named"] == [{"name": "Hello Love", "type": "document"}]
    assert "Hank Snow" in {n["name"] for n in body["graph"]["nodes"]}
    assert all("Globex" not in h["text"] for h in body["hits"])
    plain = client.post("/v1/search", {"query": "What was the hometown of the singer of Hello Love?", "limit": 4}, format="json").json()
    assert "graph" not in plain and all("graph_path" not in h for h in plain["hits"])


def test_graph_search_outside_hybrid_mode_is_a_400_naming_the_field(linked: World) -> None:
    response = linked.client(linked.teammate).post("/v1/search", {"query": "Hank Snow", "mode": "keyword", "graph_search": True}, format="json")
    assert response.status_code == 400 and "graph_search" in response.json()["fields"]
    response = linked.client(linked.teammate).post("/v1/search", {"query": "Hank Snow", "graph_search": "maybe"}, format="json")
    assert response.status_code == 400 and "graph_search" in response.json()["fields"]


def test_graph_picture_connects_passages_through_shared_entities_in_the_tenant_only(linked: World) -> None:
    client = linked.client(linked.teammate)
    picture = client.post("/v1/graph/picture", {"ids": ["hello:0", "snow:0", "tn:0"]}, format="json").json()
    assert [p["chunk_id"] for p in picture["passages"]] == ["hello:0", "snow:0", "tn:0"]
    names = {e["id"]: e["name"] for e in picture["entities"]}
    hank = next(i for i, n in names.items() if n == "Hank Snow")
    assert {link["chunk_id"] for link in picture["links"] if link["entity"] == hank} == {"hello:0", "snow:0", "tn:0"}
    expanded = client.post("/v1/graph/picture", {"ids": ["hello:0"], "expand": True}, format="json").json()
    assert {p["chunk_id"] for p in expanded["passages"]} >= {"hello:0", "snow:0"}
    # Another tenant's reader sees only globex's passages under the same ids.
    theirs = linked.client(linked.outsider).post("/v1/graph/picture", {"ids": ["hello:0", "snow:0"]}, format="json").json()
    assert [p["chunk_id"] for p in theirs["passages"]] == ["snow:0"] and theirs["entities"] == []
    assert linked.client(linked.outsider).post("/v1/graph/picture", {"ids": ["snow:0"], "tenant": "acme"}, format="json").status_code == 404
    assert client.post("/v1/graph/picture", {"ids": []}, format="json").status_code == 400
    assert linked.client().post("/v1/graph/picture", {"ids": ["snow:0"]}, format="json").status_code == 401
