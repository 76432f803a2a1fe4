"""Ranking behaviour with the real local model, and filtered HNSW search returning full pages."""

from __future__ import annotations

import random

import numpy as np
import pytest
from asgiref.sync import async_to_sync
from django.db import connection

from knowledge import rag
from knowledge.rag.backends.postgres.sql import hnsw_index_name
from tests.embedders import BagOfWordsEmbedder
from tests.factories import make_tenant

CORPUS = [
    rag.RAGDocument("mi", "Physicians treat myocardial infarction with aspirin, stents and clot-dissolving drugs.", title="Cardiology"),
    rag.RAGDocument("stocks", "The stock market fell sharply after the central bank raised interest rates.", title="Markets"),
    rag.RAGDocument("garden", "Tomatoes need full sun, regular watering and support stakes as they grow.", title="Gardening"),
    rag.RAGDocument("volcano", "Volcanic eruptions release ash and sulfur dioxide into the stratosphere.", title="Geology"),
]


@pytest.fixture
def service(db: None) -> rag.RAGService:
    make_tenant("acme")
    svc = rag.postgres(rag.default_embedder(), namespace="acme")
    async_to_sync(svc.ingest)(CORPUS)
    return svc


def search(svc: rag.RAGService, text: str, mode: str, **kw: object) -> list[str]:
    return [h.chunk.document_id for h in async_to_sync(svc.search)(text, mode=mode, **kw)]


def test_exact_term_wins_in_keyword_mode(service: rag.RAGService) -> None:
    assert search(service, "myocardial infarction", "keyword") == ["mi"]


def test_paraphrase_is_found_in_semantic_mode_but_not_keyword(service: rag.RAGService) -> None:
    assert search(service, "heart attack remedies", "keyword") == []
    assert search(service, "heart attack remedies", "semantic")[0] == "mi"


def test_hybrid_finds_what_either_leg_finds(service: rag.RAGService) -> None:
    paraphrase = search(service, "heart attack remedies", "hybrid")
    assert paraphrase[0] == "mi"
    exact = search(service, "sulfur dioxide", "hybrid")
    assert exact[0] == "volcano"


def test_quoted_phrase_and_excluded_word(service: rag.RAGService) -> None:
    assert search(service, '"interest rates" tomatoes', "keyword") == ["stocks"]
    assert search(service, "tomatoes sun -watering", "keyword") == []
    assert "garden" not in search(service, "tomatoes sun -watering", "hybrid")
    assert set(search(service, "tomatoes or volcanic", "keyword")) == {"garden", "volcano"}


@pytest.mark.django_db(transaction=False)
def test_selective_filter_with_hnsw_still_returns_the_true_top_page(db: None) -> None:
    """1% of 3,000 chunks match the filter; HNSW alone would come back short."""
    make_tenant("acme")
    with connection.cursor() as cursor:
        cursor.execute("SELECT indexname FROM pg_indexes WHERE indexname = %s", [hnsw_index_name(384)])
        assert cursor.fetchone() is not None, "the embedded server has pgvector and the HNSW index"
    embedder = BagOfWordsEmbedder(dimension=384)
    rng = random.Random(7)
    words = [f"w{i}" for i in range(400)]
    docs = [
        rag.RAGDocument(f"d{i}", " ".join(rng.choices(words, k=12)), metadata={"rare": i % 100 == 0})
        for i in range(3000)
    ]
    svc = rag.postgres(embedder, namespace="acme")
    for start in range(0, len(docs), 1000):
        async_to_sync(svc.ingest)(docs[start : start + 1000])
    query = " ".join(rng.choices(words, k=6))
    hits = async_to_sync(svc.search)(query, mode="semantic", limit=20, filters={"rare": True})
    assert len(hits) == 20, "a full page although only 30 chunks match"
    qv = np.array(embedder.vector(query))
    rare = [d for d in docs if d.metadata["rare"]]
    exact = sorted(rare, key=lambda d: -float(np.dot(qv, embedder.vector(d.text))))[:20]
    assert [h.chunk.document_id for h in hits] == [d.id for d in exact]
    hybrid = async_to_sync(svc.search)(query, mode="hybrid", limit=20, filters={"rare": True})
    assert len(hybrid) == 20 and all(h.chunk.document_id in {d.id for d in rare} for h in hybrid)


def test_a_passage_the_hnsw_walk_misses_on_a_plateau_is_found_through_its_keyword_hit(db: None) -> None:
    """One large repetitive document makes a plateau of near-identical vectors where an HNSW walk stalls
    (seen in use: a 6 MB log beside one memo, the memo's cosine 0.82 missed, 0.50s returned). The keyword
    leg finds the memo; its own cosine then puts it in the semantic list, in semantic and hybrid search alike."""
    from knowledge.rag.backends.postgres import PostgresBackend

    make_tenant("acme")
    embedder = BagOfWordsEmbedder(dimension=384)
    plateau = [rag.RAGDocument(f"log-{i}", f"gravel sand crushed stone delivered to the road depot batch {i % 5}") for i in range(1500)]
    memo = rag.RAGDocument("memo", "The otter swims in the river at dusk near the old mill.")
    writer = rag.postgres(embedder, namespace="acme")
    for start in range(0, len(plateau), 500):
        async_to_sync(writer.ingest)(plateau[start:start + 500])
    async_to_sync(writer.ingest)([memo])
    # The ANN path whatever the tenant's size, with the narrowest walk the backend allows.
    ann = rag.service(PostgresBackend(exact_max_chunks=0, ef_search=1), embedder, namespace="acme")  # type: ignore[arg-type]
    question = "otter in the river"
    for mode in ("semantic", "hybrid"):
        hits = async_to_sync(ann.search)(question, mode=mode, limit=1)
        assert [h.chunk.document_id for h in hits] == ["memo"], mode
    semantic = async_to_sync(ann.search)(question, mode="semantic", limit=3)
    assert semantic[0].semantic_similarity == pytest.approx(float(np.dot(embedder.vector(question), embedder.vector(memo.text))), abs=1e-5)
    assert [h.score for h in semantic] == sorted((h.score for h in semantic), reverse=True)
