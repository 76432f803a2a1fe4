"""Ranking behaviour with the real local model, and filtered HNSW search returning full pages."""

from __future__ import annotations

import random

import numpy as np
import pytest
from asgiref.sync import async_to_sync
from django.db import connection

from knowledge import rag
from knowledge.rag.backends.postgres_sql import hnsw_index_name
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
