"""The optional LLM extractor, against the fake OpenAI-compatible server through the chat catalog:
its triples join the graph, answers are cached by chunk text, model and prompt version, the
per-tenant token budget bounds the pass, and it is off unless configured."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from django_q.models import OrmQ

from knowledge import rag
from knowledge.graph.llm import PROMPT_VERSION, parse_triples
from knowledge.models import Entity, GraphExtraction, GraphTokenUsage, Mention, Relation
from knowledge.rag.backends.postgres import PostgresBackend, maintenance
from knowledge.services.documents import document_ingest
from knowledge.services.graphing import LLM_TASK, llm_budget_left, llm_extract_pending
from tests.chat_support import write_catalog
from tests.conftest import World, backend_setting
from tests.embedders import BagOfWordsEmbedder
from tests.fake_openai import FakeOpenAI
from tests.test_graph import snapshot

TEXTS = {
    "snow": ("Hank Snow", "Hank Snow moved to Nashville in 1949 and joined the Grand Ole Opry."),
    "opry": ("Grand Ole Opry", "The Grand Ole Opry is a weekly country music stage concert in Nashville."),
}


def answer(messages: list[dict[str, Any]]) -> str:
    """The fake model's extraction: a triple per passage it knows."""
    text = messages[-1]["content"]
    if "moved to Nashville" in text:
        triples = [{"subject": "Hank Snow", "subject_type": "person", "predicate": "moved to", "object": "Nashville", "object_type": "place"}]
    elif "stage concert" in text:
        triples = [{"subject": "Grand Ole Opry", "subject_type": "event", "predicate": "is held in", "object": "Nashville", "object_type": "place"}]
    else:
        triples = []
    return "```json\n" + json.dumps({"triples": triples}) + "\n```"


@pytest.fixture
def llm(world: World, fake: FakeOpenAI, tmp_path: Path, settings: Any) -> FakeOpenAI:
    settings.QUARRY_MODEL_CONFIG_PATH = write_catalog(tmp_path / "models.yaml", fake.base_url)
    settings.QUARRY_GRAPH_EXTRACTOR = {"CLASS": "chat.llm.extraction.CatalogCompleter", "OPTIONS": {"model": "chat"}}
    settings.QUARRY_RAG_BACKEND = backend_setting(graph_llm_model="catalog/chat")
    fake.chat_reply = answer
    return fake


def ingest(world: World, *keys: str) -> None:
    document_ingest(tenant=world.acme, actor="editor", embedder=BagOfWordsEmbedder(),
                    documents=[rag.RAGDocument(k, TEXTS[k][1], title=TEXTS[k][0]) for k in keys])


def model_calls(fake: FakeOpenAI) -> int:
    return len(fake.received("/v1/chat/completions"))


def test_llm_triples_join_the_graph_and_answers_are_cached_per_text(llm: FakeOpenAI, world: World, django_capture_on_commit_callbacks: Any) -> None:
    with django_capture_on_commit_callbacks(execute=True):
        ingest(world, "snow", "opry")
    assert any(q.func() == LLM_TASK for q in OrmQ.objects.all())  # queued on commit
    assert not Relation.objects.filter(tenant=world.acme, extractor="llm").exists()  # nothing before the pass
    assert llm_extract_pending(namespace="acme") == 2 and model_calls(llm) == 2
    stated = set(Relation.objects.filter(tenant=world.acme, extractor="llm").values_list("subject__name", "predicate", "object__name"))
    assert stated == {("Hank Snow", "moved to", "Nashville"), ("Grand Ole Opry", "is held in", "Nashville")}
    nashville = Entity.objects.get(tenant=world.acme, normalized="nashville")
    assert nashville.type == "place" and nashville.chunk_count == 2  # a one-word name only the model found
    assert set(Mention.objects.filter(entity=nashville).values_list("extractor", flat=True)) == {"llm"}
    assert GraphExtraction.objects.filter(tenant=world.acme, model="catalog/chat", prompt_version=PROMPT_VERSION).count() == 2
    used = GraphTokenUsage.objects.get(tenant=world.acme).tokens
    assert used > 0

    # Nothing left to answer; re-ingesting the same texts reuses the answers without a call.
    assert llm_extract_pending(namespace="acme") == 0
    ingest(world, "snow")
    assert model_calls(llm) == 2
    assert ("Hank Snow", "moved to", "Nashville") in set(
        Relation.objects.filter(tenant=world.acme, extractor="llm").values_list("subject__name", "predicate", "object__name"))
    # The graph (with the cached answers) equals a rebuild, and the budget went down by what was spent.
    before = snapshot("default", world.acme)
    maintenance.rebuild_graph(PostgresBackend(graph_llm_model="catalog/chat"), "acme")
    assert snapshot("default", world.acme) == before
    assert GraphTokenUsage.objects.get(tenant=world.acme).tokens == used


def test_the_token_budget_stops_the_pass_and_the_extractor_is_off_unless_configured(llm: FakeOpenAI, world: World, settings: Any) -> None:
    settings.QUARRY_GRAPH_LLM_TOKEN_BUDGET = 1
    ingest(world, "snow", "opry")
    assert llm_extract_pending(namespace="acme") >= 1  # the first round may overspend once
    calls = model_calls(llm)
    assert llm_budget_left(tenant=world.acme) == 0
    assert llm_extract_pending(namespace="acme") == 0 and model_calls(llm) == calls

    settings.QUARRY_GRAPH_EXTRACTOR = None
    settings.QUARRY_GRAPH_LLM_TOKEN_BUDGET = 10**6
    assert llm_extract_pending(namespace="acme") == 0 and model_calls(llm) == calls


def test_bad_model_answers_cost_only_their_triples() -> None:
    assert parse_triples("not json at all") == []
    assert parse_triples('{"triples": [{"subject": "A B", "predicate": "is", "object": "A B"}, 7, {"subject": ""}]}') == []
    good = parse_triples('Sure! {"triples": [{"subject": "Hank Snow", "subject_type": "Person!!", "predicate": "Moved  To", "object": "Nashville"}]}')
    assert good == [["Hank Snow", "entity", "moved to", "Nashville", "entity"]]
