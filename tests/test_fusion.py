"""Hybrid fusion: RRF and normalised score fusion on a tiny corpus where they disagree, in both
backends, and the validation of the fusion fields (typed API and REST)."""

from __future__ import annotations

import math
from collections.abc import Sequence

import pytest
from asgiref.sync import async_to_sync

from knowledge import rag
from knowledge.rag.fusion import leg_norms, min_max, score_fusion
from tests.conftest import World
from tests.factories import make_tenant

QUERY = "apple banana"
# Keyword leg: "strong" matches both query terms twice, "weak" one term once, "dense" none.
# Semantic leg (cosine with the query vector): dense 0.9, weak 0.89, strong 0.1.
TEXTS = {
    "strong": "apple banana apple banana cherry",
    "weak": "apple date elderberry fig grape",
    "dense": "kiwi lemon mango nectarine papaya",
}
COSINES = {"strong": 0.1, "weak": 0.89, "dense": 0.9}


def _unit(cosine: float) -> list[float]:
    return [cosine, math.sqrt(1 - cosine * cosine), 0.0]


class TableEmbedder:
    """Vectors chosen per text: the query is (1, 0, 0), each document at its cosine from it."""

    model_id = "test/fusion-table"
    dimension = 3

    async def embed(self, texts: Sequence[str], *, kind: str = "document") -> list[list[float]]:
        table = {text: _unit(COSINES[name]) for name, text in TEXTS.items()}
        return [[1.0, 0.0, 0.0] if text == QUERY else table[text] for text in texts]


DOCUMENTS = [rag.RAGDocument(name, text) for name, text in TEXTS.items()]


def test_min_max_maps_each_list_to_0_1_and_a_flat_list_to_1() -> None:
    assert min_max([4.0, 2.0, 3.0]) == [1.0, 0.0, 0.5]
    assert min_max([0.7]) == [1.0] and min_max([2.0, 2.0]) == [1.0, 1.0] and min_max([]) == []


def test_leg_norms_anchor_a_complete_list_at_zero_and_do_not_stretch_a_plateau() -> None:
    # A keyword list holding every match: its last match keeps its share of the best (8.81 of 17.62), not 0.
    assert leg_norms([17.62, 8.81], anchor_zero=True) == [1.0, 0.5]
    # Cosines 0.632-0.636 are one plateau: with a floor of 0.1 they spread over 0..0.04, not 0..1.
    plateau = leg_norms([0.636, 0.634, 0.632], spread_floor=0.1)
    assert [round(v, 9) for v in plateau] == [0.04, 0.02, 0.0]
    assert leg_norms([0.9, 0.5, 0.1], spread_floor=0.1) == min_max([0.9, 0.5, 0.1])  # a real spread is untouched


def test_score_fusion_sums_normalised_legs_with_missing_as_zero() -> None:
    # The keyword list is shorter than the fusion depth, so it is normalised against 0.
    fused = score_fusion([("a", 10.0), ("b", 4.0), ("c", 6.0)], [("c", 0.8), ("d", 0.4)], weight=2.0)
    parts = {i: (round(f, 9), k, s) for i, f, k, s in fused}
    assert parts == {"a": (1.0, 1.0, 0.0), "b": (0.4, 0.4, 0.0), "c": (2.6, 0.6, 1.0), "d": (0.0, 0.0, 0.0)}
    assert [i for i, *_ in fused] == ["c", "a", "b", "d"]
    # A full list (as deep as the fusion reads) is normalised against its last score, as before.
    full = score_fusion([("a", 10.0), ("b", 4.0), ("c", 6.0)], [("c", 0.8), ("d", 0.4)], weight=2.0, depth=3)
    assert {i: k for i, _, k, _ in full} == {"a": 1.0, "b": 0.0, "c": 1 / 3, "d": 0.0}


def test_each_legs_best_hit_is_kept_within_the_first_three_with_a_score_in_order() -> None:
    """The harbour question: the only real keyword match, outside the semantic list, under 40
    hits the semantic leg ranks well; fusion keeps it 3rd at worst, and scores stay in order."""
    semantic = [(f"log{n}", 0.9 - 0.01 * n) for n in range(40)]
    keyword = [("memo", 38.8), ("log39", 7.6)] + [(f"other{n}", 7.0 - 0.01 * n) for n in range(98)]
    fused = score_fusion(keyword, semantic, weight=1.5)
    order = [i for i, *_ in fused]
    assert "memo" in order[:3] and order[0] == "log0"
    scores = [f for _, f, _, _ in fused]
    assert scores == sorted(scores, reverse=True)
    # Its parts are what they were: the place raised only its score.
    memo = next(row for row in fused if row[0] == "memo")
    assert (memo[2], memo[3]) == (1.0, 0.0) and memo[1] > 1.0
    # And each leg's first three stay in the first 20.
    assert {"memo", "log39", "other0", "log0", "log1", "log2"} <= set(order[:20])
    # Without places (what the release before did) the memo ranks below every log line scoring over 1/1.5.
    unkept = [i for i, *_ in score_fusion(keyword, semantic, weight=1.5, places=())]
    assert unkept.index("memo") > 10


def expected_orders(svc: rag.RAGService) -> None:
    """RRF puts the strong keyword match first; score fusion (weight 1.5) the semantic ones, the one
    that also matches a word first."""
    rrf = async_to_sync(svc.search)(QUERY, mode="hybrid", limit=3)
    assert [h.chunk.document_id for h in rrf] == ["strong", "weak", "dense"]
    assert [h.rrf_rank for h in rrf] == [1, 2, 3]
    assert all(h.keyword_norm is None and h.semantic_norm is None for h in rrf)

    fused = async_to_sync(svc.search)(QUERY, mode="hybrid", limit=3, fusion="score", fusion_weight=1.5)
    assert [h.chunk.document_id for h in fused] == ["weak", "dense", "strong"]
    by_id = {h.chunk.document_id: h for h in fused}
    # The parts: strong tops the keyword list (1); the list holds every match, so weak keeps its
    # share of strong's BM25; dense is not in it (0).
    share = by_id["weak"].keyword_score / by_id["strong"].keyword_score
    assert 0 < share < 1
    # weak's semantic part is its cosine's place between strong's (0) and dense's (1): (0.89 - 0.1) / 0.8 as
    # written, from the cosines the hits report (a halfvec stores the vectors to about 3 decimals).
    sims = {d: h.semantic_similarity for d, h in by_id.items()}
    assert sims["weak"] == pytest.approx(0.89, abs=1e-3)
    weak_part = (sims["weak"] - sims["strong"]) / (sims["dense"] - sims["strong"])  # type: ignore[operator]
    assert {d: (round(h.keyword_norm, 6), round(h.semantic_norm, 6)) for d, h in by_id.items()} == {
        "dense": (0.0, 1.0), "weak": (round(share, 6), round(weak_part, 6)), "strong": (1.0, 0.0),
    }
    assert weak_part == pytest.approx((0.89 - 0.1) / 0.8, abs=1e-3)
    for hit in fused:
        assert math.isclose(hit.score, hit.keyword_norm + 1.5 * hit.semantic_norm, abs_tol=1e-9)
    # Hybrid hits keep their RRF rank and cosine whichever fusion ordered the page.
    assert {d: h.rrf_rank for d, h in by_id.items()} == {"strong": 1, "weak": 2, "dense": 3}
    assert math.isclose(by_id["dense"].semantic_similarity, 0.9, abs_tol=1e-3)  # to the halfvec's precision
    assert by_id["dense"].keyword_score is None and by_id["strong"].keyword_score > by_id["weak"].keyword_score > 0

    # Weight 0: the keyword order, with what it misses after.
    keyword_first = async_to_sync(svc.search)(QUERY, mode="hybrid", limit=3, fusion="score", fusion_weight=0)
    assert keyword_first[0].chunk.document_id == "strong"


def test_memory_backend_orders_by_each_fusion() -> None:
    svc = rag.memory(TableEmbedder(), namespace="acme")
    async_to_sync(svc.ingest)(DOCUMENTS)
    expected_orders(svc)


def test_postgres_orders_by_each_fusion_in_sql(db: None) -> None:
    make_tenant("acme")
    svc = rag.postgres(TableEmbedder(), namespace="acme")
    async_to_sync(svc.ingest)(DOCUMENTS)
    expected_orders(svc)


def test_a_service_default_fusion_applies_when_a_search_names_none() -> None:
    svc = rag.memory(TableEmbedder(), namespace="acme", fusion="score", fusion_weight=1.5)
    async_to_sync(svc.ingest)(DOCUMENTS)
    assert async_to_sync(svc.search)(QUERY, mode="hybrid", limit=1)[0].chunk.document_id == "weak"
    assert async_to_sync(svc.search)(QUERY, mode="hybrid", limit=1, fusion="rrf")[0].chunk.document_id == "strong"


def test_min_score_applies_to_the_fused_score() -> None:
    svc = rag.memory(TableEmbedder(), namespace="acme")
    async_to_sync(svc.ingest)(DOCUMENTS)
    hits = async_to_sync(svc.search)(QUERY, mode="hybrid", limit=3, fusion="score", fusion_weight=1.5, min_score=1.2)
    assert [h.chunk.document_id for h in hits] == ["weak", "dense"]


# --- validation ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("options", "error", "field", "phrase"),
    [
        ({"fusion": "borda"}, rag.RAGValidationError, "fusion", "must be one of rrf, score"),
        ({"fusion_weight": -0.5}, rag.RAGValidationError, "fusion_weight", "between 0 and 100"),
        ({"fusion_weight": 101}, rag.RAGValidationError, "fusion_weight", "between 0 and 100"),
        ({"fusion_weight": float("nan")}, rag.RAGValidationError, "fusion_weight", "between 0 and 100"),
        ({"fusion_weight": True}, rag.RAGTypeError, "fusion_weight", "must be a number"),
        ({"fusion_weight": "1.5"}, rag.RAGTypeError, "fusion_weight", "must be a number"),
    ],
)
def test_rag_query_names_the_bad_fusion_field(options: dict[str, object], error: type[Exception], field: str, phrase: str) -> None:
    with pytest.raises(error) as caught:
        rag.RAGQuery(QUERY, "acme", vector=(1.0, 0.0, 0.0), **options)  # type: ignore[arg-type]
    assert caught.value.field == field and phrase in caught.value.message  # type: ignore[attr-defined]


def test_rag_query_parses_the_fusion_name() -> None:
    query = rag.RAGQuery(QUERY, "acme", vector=(1.0, 0.0, 0.0), fusion="score", fusion_weight=2)
    assert query.fusion is rag.Fusion.SCORE and query.fusion_weight == 2.0 and isinstance(query.fusion_weight, float)


def test_service_validates_fusion_before_embedding() -> None:
    class Refusing(TableEmbedder):
        async def embed(self, texts: Sequence[str], *, kind: str = "document") -> list[list[float]]:
            raise AssertionError("must not embed an invalid request")

    svc = rag.memory(Refusing(), namespace="acme")
    with pytest.raises(rag.RAGValidationError) as caught:
        async_to_sync(svc.search)(QUERY, fusion="nope")
    assert caught.value.field == "fusion"
    with pytest.raises(rag.RAGValidationError) as caught:
        async_to_sync(svc.search)(QUERY, fusion_weight=-1)
    assert caught.value.field == "fusion_weight"


@pytest.fixture
def indexed(world: World) -> World:
    async_to_sync(rag.postgres(TableEmbedder(), namespace="acme").ingest)(DOCUMENTS)
    return world


def test_rest_search_takes_score_fusion_and_returns_its_parts(indexed: World, settings: object) -> None:
    settings.QUARRY_EMBEDDER = {"CLASS": "tests.test_fusion.TableEmbedder"}  # type: ignore[attr-defined]
    client = indexed.client(indexed.teammate)
    body = client.post("/v1/search", {"query": QUERY, "fusion": "score", "fusion_weight": 1.5, "limit": 3}, format="json").json()
    assert [h["document_id"] for h in body["hits"]] == ["weak", "dense", "strong"]
    top, dense = body["hits"][0], body["hits"][1]
    assert (dense["keyword_norm"], dense["semantic_norm"], dense["rrf_rank"]) == (0.0, 1.0, 3)
    assert 0 < top["keyword_norm"] < 1 and top["rrf_rank"] == 2
    rrf = client.post("/v1/search", {"query": QUERY, "fusion": "rrf", "limit": 3}, format="json").json()["hits"]
    assert [h["document_id"] for h in rrf] == ["strong", "weak", "dense"] and "keyword_norm" not in rrf[0]
    # A request that names no fusion gets the deployment's default, score fusion (QUARRY_HYBRID_FUSION).
    default = client.post("/v1/search", {"query": QUERY, "limit": 3}, format="json").json()["hits"]
    assert [h["document_id"] for h in default] == ["weak", "dense", "strong"] and "keyword_norm" in default[0]


@pytest.mark.parametrize(
    ("body", "field", "phrase"),
    [
        ({"fusion": "borda"}, "fusion", "not a valid choice"),
        ({"fusion": "score", "fusion_weight": -1}, "fusion_weight", "greater than or equal to 0"),
        ({"fusion": "score", "fusion_weight": 1000}, "fusion_weight", "less than or equal to 100"),
        ({"fusion": "score", "fusion_weight": "2"}, "fusion_weight", "valid number"),
        ({"fusion": "score", "mode": "keyword"}, "fusion", "cannot be used with mode keyword"),
        ({"fusion_weight": 2, "mode": "semantic"}, "fusion_weight", "cannot be used with mode semantic"),
        ({"fusion": "rrf", "fusion_weight": 2}, "fusion_weight", "applies to score fusion"),
    ],
)
def test_rest_fusion_errors_name_the_field(indexed: World, body: dict[str, object], field: str, phrase: str) -> None:
    response = indexed.client(indexed.teammate).post("/v1/search", {"query": QUERY, **body}, format="json")
    assert response.status_code == 400, response.content
    fields = response.json()["fields"]
    assert field in fields and phrase in " ".join(fields[field])


def test_openapi_documents_the_fusion_fields(db: None) -> None:
    from rest_framework.test import APIClient

    schema = APIClient().get("/v1/schema", HTTP_ACCEPT="application/json").json()
    operation = schema["paths"]["/v1/search"]["post"]
    ref = operation["requestBody"]["content"]["application/json"]["schema"]["$ref"].rsplit("/", 1)[1]
    request = schema["components"]["schemas"][ref]["properties"]
    assert "rrf" in str(request["fusion"]) and "score" in str(request["fusion"])
    assert request["fusion_weight"]["maximum"] == 100 and request["fusion_weight"]["minimum"] == 0
    out = operation["responses"]["200"]["content"]["application/json"]["schema"]["$ref"].rsplit("/", 1)[1]
    hit_ref = schema["components"]["schemas"][out]["properties"]["hits"]["items"]["$ref"].rsplit("/", 1)[1]
    assert {"keyword_norm", "semantic_norm", "rrf_rank", "semantic_similarity"} <= set(schema["components"]["schemas"][hit_ref]["properties"])


def test_chat_retrieval_passes_the_fusion_on(indexed: World, settings: object) -> None:
    from chat.retrieval import RetrievalOptions, retrieve

    settings.QUARRY_EMBEDDER = {"CLASS": "tests.test_fusion.TableEmbedder"}  # type: ignore[attr-defined]
    by_rrf, _ = async_to_sync(retrieve)(tenant=indexed.acme, prompt=QUERY, options=RetrievalOptions(fusion="rrf"))
    by_score, _ = async_to_sync(retrieve)(tenant=indexed.acme, prompt=QUERY, options=RetrievalOptions(fusion="score", fusion_weight=1.5))
    assert by_rrf[0].chunk.document_id == "strong" and by_score[0].chunk.document_id == "weak"


def test_agent_and_mcp_hit_details_carry_the_fused_parts_only_under_score_fusion() -> None:
    from chat.agent.tools import hit_details

    svc = rag.memory(TableEmbedder(), namespace="acme")
    async_to_sync(svc.ingest)(DOCUMENTS)
    (scored,) = async_to_sync(svc.search)(QUERY, limit=1, fusion="score", fusion_weight=1.5)
    assert scored.chunk.document_id == "weak"
    assert math.isclose(hit_details(scored)["semantic_norm"], (0.89 - 0.1) / 0.8) and 0 < hit_details(scored)["keyword_norm"] < 1
    (ranked,) = async_to_sync(svc.search)(QUERY, limit=1)
    assert "keyword_norm" not in hit_details(ranked) and hit_details(ranked)["rrf_rank"] == 1
