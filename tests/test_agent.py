"""The retrieval agent end to end, in process: POST /v1/agent/... through litellm's Router for real.

The model is tests/fake_openai.py on 127.0.0.1, scripted turn by turn per test
(``fake.chat_script``); the tools search the real PostgreSQL backend with the
local embedder. Each test asserts the HTTP response, the ``AgentRun`` row and
what the model was sent.
"""

from __future__ import annotations

import json
import logging
from contextlib import aclosing
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from django.test import Client
from django.utils import timezone

from chat.agent import RunNotResumable, agent_run_claim, agent_stream
from chat.events import GRAPH_NO_ENTITY
from chat.models import AgentRun, ChatSession, RunStatus, SessionKind, Turn
from chat.services import chat_exchange_record
from knowledge import rag
from knowledge.services import reembedding
from tests.conftest import World
from tests.fake_openai import FakeOpenAI, Scripted, ToolCall, failure, tool_calls
from tests.chat_support import SECRET_KEY_MARKER, UPLOAD_QUESTION, write_catalog

RESPONSE_KEYS = ["id", "run_id", "model", "provider", "provider_model", "message", "finish_reason", "stop_reason", "usage",
                 "turns", "tool_call_count", "tool_calls", "session_id", "citations"]
BASE_TOOLS = ["hybrid_search", "keyword_search", "semantic_search", "fetch_chunks"]


def new_session(world: World, user: Any) -> str:
    response = world.client(user).post("/v1/agent/sessions", {}, format="json")
    assert response.status_code == 201, response.content
    return response.json()["session_id"]


def ask(world: World, user: Any, **body: Any) -> Any:
    return world.client(user).post("/v1/agent/completions", body, format="json")


def resume(world: World, user: Any, run_id: str, **body: Any) -> Any:
    return world.client(user).post(f"/v1/agent/runs/{run_id}/resume", body, format="json")


def sent(fake: FakeOpenAI) -> list[dict[str, Any]]:
    """The chat requests the model received, in order."""
    return [r.json for r in fake.received("/v1/chat/completions")]


def tool_names(request: dict[str, Any]) -> list[str]:
    return [t["function"]["name"] for t in request.get("tools", [])]


def tool_results(request: dict[str, Any]) -> list[dict[str, Any]]:
    return [json.loads(m["content"]) for m in request["messages"] if m["role"] == "tool"]


def run_of(body: dict[str, Any]) -> AgentRun:
    return AgentRun.objects.get(public_id=body["run_id"])


def search(name: str, query: str, **more: Any) -> ToolCall:
    return ToolCall(name, {"query": query, **more})


# --- sessions -------------------------------------------------------------------------------------


def test_reader_creates_an_agent_session(model_world: World) -> None:
    response = model_world.client(model_world.teammate).post("/v1/agent/sessions", {"tenant": "acme"}, format="json")
    assert response.status_code == 201 and response["Cache-Control"] == "no-store"
    body = response.json()
    assert set(body) == {"session_id", "greeting"} and "acme" in body["greeting"]
    session = ChatSession.objects.get(public_id=body["session_id"])
    assert (session.kind, session.tenant, session.principal) == (SessionKind.AGENT, model_world.acme, f"user:{model_world.teammate.pk}")


# --- runs: steps, parallel calls, citations ---------------------------------------------------------


def test_multi_step_run_answers_with_citations_and_is_saved(model_world: World, fake: FakeOpenAI) -> None:
    fake.chat_script = [
        tool_calls(search("keyword_search", "upload")),
        tool_calls(ToolCall("fetch_chunks", {"ids": ["modes:0", "guide:7"]}), text="Let me read one more."),
        "Editors upload files in the admin [1]; keyword search uses BM25 [2]. Not [9], not [other:1].",
    ]
    session_id = new_session(model_world, model_world.teammate)
    response = ask(model_world, model_world.teammate, session_id=session_id, prompt=UPLOAD_QUESTION)
    assert response.status_code == 200, response.content
    assert response["Cache-Control"] == "no-store"
    body = response.json()
    assert list(body) == RESPONSE_KEYS
    assert body["message"]["content"].startswith("Editors upload files in the admin [1]")
    assert (body["model"], body["provider"], body["provider_model"]) == ("chat", "openai", "answer")
    assert (body["stop_reason"], body["finish_reason"], body["turns"], body["tool_call_count"]) == ("completed", "stop", 3, 2)
    assert body["tool_calls"] == [{"step": 1, "tool": "keyword_search", "ok": True}, {"step": 2, "tool": "fetch_chunks", "ok": True}]
    assert [(c["document_id"], c["chunk_id"]) for c in body["citations"]] == [("guide", "guide:0"), ("modes", "modes:0")]
    assert body["citations"][0]["score"] > 0 and body["citations"][1]["score"] == 0.0  # found by search / only fetched
    assert body["usage"]["total_tokens"] == sum(body["usage"][k] for k in ("prompt_tokens", "completion_tokens")) > 0

    first, second, third = sent(fake)
    assert tool_names(first) == BASE_TOOLS and "tool_choice" not in first
    assert [m["role"] for m in first["messages"]] == ["system", "user"]
    assert "Cite the source behind every statement" in first["messages"][0]["content"]
    assert first["messages"][1] == {"role": "user", "content": UPLOAD_QUESTION}
    assert [m["role"] for m in second["messages"]] == ["system", "user", "assistant", "tool"]
    assistant = second["messages"][2]
    assert assistant["tool_calls"][0]["function"] == {"name": "keyword_search", "arguments": '{"query": "upload"}'}
    assert second["messages"][3]["tool_call_id"] == assistant["tool_calls"][0]["id"]
    [found] = tool_results(second)
    assert found["ok"] is True
    assert [(r["source"], r["chunk_id"], r["title"]) for r in found["results"]] == [(1, "guide:0", "Uploading")]
    assert found["results"][0]["text"].startswith("Editors upload files in the admin.")
    fetched = tool_results(third)[1]
    assert [(r["source"], r["chunk_id"]) for r in fetched["results"]] == [(2, "modes:0")] and fetched["missing"] == ["guide:7"]
    assert "Globex" not in json.dumps(third)

    run = run_of(body)
    assert (run.status, run.stop_reason, run.prompt, run.answer) == (RunStatus.COMPLETED, "completed", UPLOAD_QUESTION, body["message"]["content"])
    assert run.session.public_id == session_id and run.tenant == model_world.acme
    assert [s["step"] for s in run.steps] == [1, 2]
    [fetch_call] = run.steps[1]["calls"]
    assert fetch_call == {"id": third["messages"][4]["tool_calls"][0]["id"], "tool": "fetch_chunks",
                          "arguments": {"ids": ["modes:0", "guide:7"]}, "ok": True, "chunk_ids": ["modes:0"]}
    assert third["messages"][4]["content"] == "Let me read one more."
    assert [s["chunk_id"] for s in run.sources] == ["guide:0", "modes:0"]
    assert [m["role"] for m in run.messages] == ["user", "assistant", "tool", "assistant", "tool", "assistant"]
    assert run.citations == body["citations"] and run.usage == body["usage"] and run.turns == 3
    assert not Turn.objects.exists()  # runs are the agent's transcript; chat turns stay chat's


def test_parallel_tool_calls_in_one_step_run_concurrently(model_world: World, fake: FakeOpenAI, settings: Any) -> None:
    # The configured embedding model: one whose queries take a while, like a model server's.
    settings.QUARRY_EMBEDDER = {"CLASS": "tests.embedders.GatedEmbedder", "OPTIONS": {"query_seconds": 0.3}}
    embedder = rag.default_embedder()
    # The tenant holds vectors of the default model: move it to this one, as an operator would.
    move = reembedding.reembed_start(tenant=model_world.acme, model="test/gated", queue=False)
    assert reembedding.reembed_run(move.pk, seconds=None) == "done"
    async_to_sync(rag.postgres(embedder, namespace="acme").ingest)([
        rag.RAGDocument("guide", "Editors upload files in the admin. Uploads are processed in the background by workers."),
        rag.RAGDocument("modes", "Keyword search uses BM25 while semantic search compares embeddings."),
    ])
    fake.chat_script = [
        tool_calls(search("semantic_search", "uploading files"), search("hybrid_search", "background workers"),
                   search("semantic_search", "embeddings", limit=1), search("keyword_search", "BM25")),
        "BM25 ranks keywords [2]; uploads run in the background [1] [7].",
    ]
    session_id = new_session(model_world, model_world.teammate)
    body = ask(model_world, model_world.teammate, session_id=session_id, prompt="How do uploads and BM25 work?").json()
    assert embedder.peak == 3  # the three calls that embed a query waited on the model together
    assert body["tool_calls"] == [{"step": 1, "tool": t, "ok": True}
                                  for t in ("semantic_search", "hybrid_search", "semantic_search", "keyword_search")]
    assert body["turns"] == 2 and body["stop_reason"] == "completed"
    second = sent(fake)[1]
    assistant = second["messages"][2]
    assert len(assistant["tool_calls"]) == 4
    tool_messages = [m for m in second["messages"] if m["role"] == "tool"]
    assert [m["tool_call_id"] for m in tool_messages] == [c["id"] for c in assistant["tool_calls"]]
    results = [json.loads(m["content"]) for m in tool_messages]
    assert [len(r["results"]) for r in results][2] == 1  # limit honoured
    assert results[3]["results"][0]["chunk_id"] == "modes:0"
    sources = {r["source"]: r["chunk_id"] for result in results for r in result["results"]}
    assert sorted(sources) == [1, 2] and sorted(sources.values()) == ["guide:0", "modes:0"]  # one number per chunk
    assert [c["chunk_id"] for c in body["citations"]] == [sources[2], sources[1]]  # in order of citation; [7] is nothing


# --- bounds -----------------------------------------------------------------------------------------


def test_max_steps_ends_with_a_turn_without_tools(model_world: World, fake: FakeOpenAI) -> None:
    fake.chat_script = [
        tool_calls(search("keyword_search", "upload")),
        tool_calls(search("keyword_search", "workers")),
        "Workers process uploads [1].",
    ]
    session_id = new_session(model_world, model_world.teammate)
    body = ask(model_world, model_world.teammate, session_id=session_id, prompt=UPLOAD_QUESTION, max_steps=2).json()
    assert (body["stop_reason"], body["turns"], body["tool_call_count"]) == ("max_steps", 3, 2)
    assert body["message"]["content"] == "Workers process uploads [1]." and [c["chunk_id"] for c in body["citations"]] == ["guide:0"]
    final = sent(fake)[2]
    assert "tools" not in final and "tool_choice" not in final
    assert final["messages"][-1]["role"] == "system" and "research steps of this run are used up" in final["messages"][-1]["content"]
    run = run_of(body)
    assert (run.status, run.stop_reason, run.answer) == (RunStatus.STOPPED, "max_steps", body["message"]["content"])
    assert run.messages[-1]["role"] == "tool"  # a resume continues the research, not the budget-spent answer


def test_repeated_identical_call_stops_the_research(model_world: World, fake: FakeOpenAI) -> None:
    fake.chat_script = [
        tool_calls(ToolCall("keyword_search", {"query": "upload", "limit": 3})),
        tool_calls(ToolCall("keyword_search", '{"limit": 3, "query": "upload"}'), search("keyword_search", "BM25")),
        "Editors upload in the admin [1].",
    ]
    session_id = new_session(model_world, model_world.teammate)
    body = ask(model_world, model_world.teammate, session_id=session_id, prompt=UPLOAD_QUESTION).json()
    assert body["stop_reason"] == "repeated_call" and body["turns"] == 3
    assert body["tool_calls"] == [{"step": 1, "tool": "keyword_search", "ok": True},
                                  {"step": 2, "tool": "keyword_search", "ok": False},
                                  {"step": 2, "tool": "keyword_search", "ok": True}]
    final = sent(fake)[2]
    assert "tools" not in final and "repeated an earlier one" in final["messages"][-1]["content"]
    repeated, fresh = tool_results(final)[1:]
    assert repeated == {"ok": False, "error": "This exact call was made before and did not run again; its result is above. "
                                              "The research ends here."}
    assert fresh["results"][0]["chunk_id"] == "modes:0"
    assert run_of(body).status == RunStatus.COMPLETED


def test_token_budget_stops_the_research(model_world: World, fake: FakeOpenAI, settings: Any) -> None:
    settings.QUARRY_AGENT_TOKEN_BUDGET = 500
    fake.chat_script = [tool_calls(search("keyword_search", "upload"), usage={"prompt_tokens": 480, "completion_tokens": 30}),
                        "Editors upload in the admin [1]."]
    session_id = new_session(model_world, model_world.teammate)
    body = ask(model_world, model_world.teammate, session_id=session_id, prompt=UPLOAD_QUESTION).json()
    assert body["stop_reason"] == "token_budget" and body["turns"] == 2
    assert body["usage"]["total_tokens"] > 510
    final = sent(fake)[1]
    assert "tools" not in final and "token budget of this run is used up" in final["messages"][-1]["content"]
    assert run_of(body).status == RunStatus.COMPLETED


def test_tool_failures_are_ok_false_results_not_errors(model_world: World, fake: FakeOpenAI) -> None:
    fake.chat_script = [
        tool_calls(
            search("keyword_search", "upload", limit=0),
            search("keyword_search", "upload", filters={"lang": {"nested": True}}),
            ToolCall("fetch_chunks", {"ids": ["not a chunk id"]}),
            ToolCall("hybrid_search", '{"query": "upl'),
            ToolCall("delete_documents", {"ids": ["guide"]}),
            search("keyword_search", "upload", colour="blue"),
            search("keyword_search", "upload", limit=500),
        ),
        "The knowledge base does not answer that.",
    ]
    session_id = new_session(model_world, model_world.teammate)
    response = ask(model_world, model_world.teammate, session_id=session_id, prompt=UPLOAD_QUESTION)
    assert response.status_code == 200, response.content
    body = response.json()
    assert [c["ok"] for c in body["tool_calls"]] == [False] * 7
    assert body["citations"] == [] and body["stop_reason"] == "completed"
    errors = [r.get("error", "") for r in tool_results(sent(fake)[1])]
    assert errors[0] == "limit: must be between 1 and 10 (QUARRY_AGENT_TOOL_MAX_RESULTS), got 0"
    assert errors[1].startswith("filters.lang: nested values are not allowed")
    assert "is not a valid chunk id" in errors[2]
    assert "not a JSON object" in errors[3]
    assert "no tool called 'delete_documents'" in errors[4] and "graph" not in errors[4]
    assert errors[5] == "unexpected argument(s) colour; this tool takes query, limit, filters, rerank"
    assert errors[6] == "limit: must be between 1 and 10 (QUARRY_AGENT_TOOL_MAX_RESULTS), got 500"  # refused, not capped
    run = run_of(body)
    assert run.steps[0]["calls"][3]["arguments"] == '{"query": "upl'  # kept as the model wrote it
    assert json.loads(sent(fake)[1]["messages"][2]["tool_calls"][3]["function"]["arguments"]) == {}
    assert run.steps[0]["calls"][0]["error"] == "limit: must be between 1 and 10 (QUARRY_AGENT_TOOL_MAX_RESULTS), got 0"


GRAPH_TOOLS = ["graph_triplet_search", "graph_neighbors"]


def test_graph_tools_only_with_graph_search(model_world: World, fake: FakeOpenAI) -> None:
    session_id = new_session(model_world, model_world.teammate)
    fake.chat_script = [tool_calls(search("graph_triplet_search", "uploads")), "No graph [1]."]
    body = ask(model_world, model_world.teammate, session_id=session_id, prompt=UPLOAD_QUESTION).json()
    assert tool_names(sent(fake)[0]) == BASE_TOOLS
    assert body["tool_calls"] == [{"step": 1, "tool": "graph_triplet_search", "ok": False}] and body["citations"] == []
    assert tool_results(sent(fake)[1])[0]["error"].startswith("There is no tool called 'graph_triplet_search'")

    fake.chat_script = [tool_calls(search("graph_triplet_search", "uploads"), ToolCall("graph_neighbors", {"entity": "nobody here"})),
                        "Nothing in the graph."]
    body = ask(model_world, model_world.teammate, session_id=session_id, prompt=UPLOAD_QUESTION, graph_search=True).json()
    assert tool_names(sent(fake)[2]) == BASE_TOOLS + GRAPH_TOOLS
    triplets, neighbors = tool_results(sent(fake)[3])
    assert triplets["ok"] is True and neighbors == {"ok": False, "error": GRAPH_NO_ENTITY.format(name="nobody here")}
    assert run_of(body).graph_search is True


def test_graph_tools_return_triplets_and_neighbours_citable_by_their_passages(model_world: World, fake: FakeOpenAI) -> None:
    from tests.test_graph import ARTICLES, doc

    async_to_sync(rag.postgres(rag.default_embedder(), namespace="acme").ingest)([doc(k) for k in ARTICLES])
    async_to_sync(rag.postgres(rag.default_embedder(), namespace="globex").ingest)(
        [rag.RAGDocument("tundra", "Hank Snow is Globex's code name for Project Tundra.", title="Project Tundra")]
    )
    session_id = new_session(model_world, model_world.teammate)
    fake.chat_script = [
        tool_calls(search("graph_triplet_search", "Hello Love Hank Snow"), ToolCall("graph_neighbors", {"entity": "hank snow", "limit": 3})),
        "Hank Snow sang Hello Love [1] and lived in Tennessee [2].",
    ]
    body = ask(model_world, model_world.teammate, session_id=session_id, prompt="Who sang Hello Love?", graph_search=True).json()
    triplets, neighbors = tool_results(sent(fake)[1])
    numbers = {r["source"]: r["chunk_id"] for r in triplets["results"] + neighbors["results"]}
    stated = {(t["subject"], t["predicate"], t["object"]): numbers[t["source"]] for t in triplets["triplets"]}
    assert stated[("Hank Snow", "co-occurs with", "Hello Love")] == "hello:0"
    assert all(t["source"] in numbers for t in triplets["triplets"])  # every triplet names a returned passage
    assert neighbors["entity"] == {"name": "Hank Snow", "type": "document"}
    assert numbers[neighbors["about"][0]["source"]] == "snow:0"
    assert len(neighbors["neighbors"]) <= 3 and all(set(n["sources"]) <= set(numbers) for n in neighbors["neighbors"])
    assert "Project Tundra" not in json.dumps(triplets) + json.dumps(neighbors)  # globex's graph stays in globex
    cited = [c["chunk_id"] for c in body["citations"]]
    assert cited == [numbers[1], numbers[2]] and set(cited) <= set(numbers.values())


def test_hybrid_search_with_the_graph_keeps_its_limit_of_hybrid_hits_and_adds_what_the_graph_placed(
    model_world: World, fake: FakeOpenAI, settings: Any
) -> None:
    from tests.conftest import backend_setting
    from tests.test_chat_api import MULTI_HOP, index_multi_hop
    from tests.test_graph import LOOSE

    index_multi_hop(model_world)
    # Hybrid's own order on both sides: re-ranking (which graph search does not apply) is not what this compares.
    settings.QUARRY_CHAT_RERANK = "none"
    # As by default, the graph neither takes hybrid's first hits nor places its own among them (here: 2, 6).
    settings.QUARRY_RAG_BACKEND = backend_setting(graph={**LOOSE, "protect": 2, "insert_after": 6})
    session_id = new_session(model_world, model_world.teammate)
    fake.chat_script = [tool_calls(search("hybrid_search", MULTI_HOP, limit=2)), "Nashville [1]."]
    ask(model_world, model_world.teammate, session_id=session_id, prompt=MULTI_HOP)
    plain = tool_results(sent(fake)[1])[0]["results"]
    fake.chat_script = [tool_calls(search("hybrid_search", MULTI_HOP, limit=2)), "Nashville [1]."]
    ask(model_world, model_world.teammate, session_id=session_id, prompt=MULTI_HOP, graph_search=True)
    found = tool_results(sent(fake)[3])[0]
    assert len(plain) == 2 and [r["chunk_id"] for r in found["results"][:2]] == [r["chunk_id"] for r in plain]
    placed = found["found_through_graph"]
    assert placed and all(v["via"] for v in placed)  # through which entities each came
    assert [r["source"] for r in found["results"][2:]] == [v["source"] for v in placed]


def test_timeout_stops_the_run_resumably(model_world: World, fake: FakeOpenAI, settings: Any) -> None:
    settings.QUARRY_AGENT_TIMEOUT_SECONDS = 1
    fake.chat_script = [tool_calls(search("keyword_search", "upload")), Scripted(text="Too late [1].", delay=2.5)]
    session_id = new_session(model_world, model_world.teammate)
    response = ask(model_world, model_world.teammate, session_id=session_id, prompt=UPLOAD_QUESTION)
    assert response.status_code == 503 and response["Retry-After"] == "5"
    body = response.json()
    assert (body["error"], body["stop_reason"]) == ("agent_timeout", "timeout") and body["run_id"].startswith("run-")
    assert "Resume the run" in body["detail"]
    run = AgentRun.objects.get(public_id=body["run_id"])
    assert (run.status, run.stop_reason, run.error, len(run.steps), run.answer) == (RunStatus.STOPPED, "timeout", "agent_timeout", 1, "")


# --- resume ----------------------------------------------------------------------------------------


def test_resume_after_a_provider_failure_mid_run(model_world: World, fake: FakeOpenAI, caplog: pytest.LogCaptureFixture) -> None:
    fake.chat_script = [tool_calls(search("keyword_search", "upload")), failure(500)]
    session_id = new_session(model_world, model_world.teammate)
    failed = ask(model_world, model_world.teammate, session_id=session_id, prompt=UPLOAD_QUESTION)
    assert failed.status_code == 503 and failed["Cache-Control"] == "no-store"
    error = failed.json()
    assert error == {"error": "model_unavailable", "detail": "The chat model is unreachable. Try again shortly, or resume the run.",
                     "run_id": error["run_id"], "stop_reason": "provider_error"}
    run = AgentRun.objects.get(public_id=error["run_id"])
    assert (run.status, run.stop_reason, run.turns, len(run.steps)) == (RunStatus.STOPPED, "provider_error", 1, 1)
    assert [m["role"] for m in run.messages] == ["user", "assistant", "tool"]
    assert "fake scripted failure" not in caplog.text

    fake.chat_script = ["Editors upload files in the admin [1]."]
    resumed = resume(model_world, model_world.teammate, error["run_id"], session_id=session_id, max_steps=2)
    assert resumed.status_code == 200, resumed.content
    body = resumed.json()
    assert list(body) == RESPONSE_KEYS and body["run_id"] == error["run_id"] and body["session_id"] == session_id
    assert (body["stop_reason"], body["turns"], body["tool_call_count"]) == ("completed", 2, 1)
    assert body["tool_calls"] == [{"step": 1, "tool": "keyword_search", "ok": True}]
    assert [c["chunk_id"] for c in body["citations"]] == ["guide:0"]
    continued = sent(fake)[-1]
    assert [m["role"] for m in continued["messages"]] == ["system", "user", "assistant", "tool"]
    assert tool_results(continued)[0]["results"][0]["source"] == 1
    run.refresh_from_db()
    assert (run.status, run.stop_reason, run.error, run.max_steps) == (RunStatus.COMPLETED, "completed", "", 2)
    assert AgentRun.objects.count() == 1


def test_resuming_a_finished_run_is_409(model_world: World, fake: FakeOpenAI) -> None:
    fake.chat_script = ["The knowledge base does not answer that."]
    session_id = new_session(model_world, model_world.teammate)
    body = ask(model_world, model_world.teammate, session_id=session_id, prompt="What is the capital of Peru?").json()
    assert (body["stop_reason"], body["tool_call_count"], body["citations"]) == ("completed", 0, [])
    response = resume(model_world, model_world.teammate, body["run_id"], session_id=session_id)
    assert response.status_code == 409 and response["Cache-Control"] == "no-store"
    assert response.json() == {
        "error": "run_finished",
        "detail": "This run has finished (stop reason: completed) and cannot be resumed. Ask again with POST /v1/agent/completions.",
    }
    assert len(sent(fake)) == 1


def test_a_run_in_progress_cannot_be_resumed_until_its_process_is_gone(model_world: World, settings: Any) -> None:
    session_id = new_session(model_world, model_world.teammate)
    session = ChatSession.objects.get(public_id=session_id)
    run = AgentRun.objects.create(tenant=model_world.acme, session=session, prompt="q", status=RunStatus.RUNNING,
                                  messages=[{"role": "user", "content": "q"}])
    response = resume(model_world, model_world.teammate, run.public_id, session_id=session_id)
    assert response.status_code == 409 and response.json()["error"] == "run_in_progress"
    AgentRun.objects.filter(pk=run.pk).update(updated_at=timezone.now() - timedelta(seconds=settings.QUARRY_AGENT_TIMEOUT_SECONDS + 61))
    claimed = agent_run_claim(run=run, max_steps=3, graph_search=False)
    assert (claimed.status, claimed.max_steps) == (RunStatus.RUNNING, 3)
    with pytest.raises(RunNotResumable):  # the second of two resumes loses
        agent_run_claim(run=run, max_steps=3, graph_search=False)


def test_max_steps_run_resumes_with_a_fresh_budget(model_world: World, fake: FakeOpenAI) -> None:
    fake.chat_script = [tool_calls(search("keyword_search", "upload")), "First answer [1]."]
    session_id = new_session(model_world, model_world.teammate)
    first = ask(model_world, model_world.teammate, session_id=session_id, prompt=UPLOAD_QUESTION, max_steps=1).json()
    assert first["stop_reason"] == "max_steps"
    fake.chat_script = [tool_calls(search("keyword_search", "BM25")), "Uploads [1] and BM25 [2]."]
    body = resume(model_world, model_world.teammate, first["run_id"], session_id=session_id, max_steps=3).json()
    assert (body["stop_reason"], body["turns"], body["tool_call_count"]) == ("completed", 4, 2)
    assert body["tool_calls"] == [{"step": 1, "tool": "keyword_search", "ok": True}, {"step": 2, "tool": "keyword_search", "ok": True}]
    assert [c["chunk_id"] for c in body["citations"]] == ["guide:0", "modes:0"]
    assert run_of(body).answer == "Uploads [1] and BM25 [2]."


# --- access ----------------------------------------------------------------------------------------


def test_outsider_gets_404_for_our_sessions_and_runs(model_world: World, fake: FakeOpenAI) -> None:
    fake.chat_script = [tool_calls(search("keyword_search", "upload")), failure(500)]
    session_id = new_session(model_world, model_world.teammate)
    run_id = ask(model_world, model_world.teammate, session_id=session_id, prompt=UPLOAD_QUESTION).json()["run_id"]
    requests_before = len(sent(fake))
    not_found = {"error": "not_found", "detail": "Not found."}

    outsider = ask(model_world, model_world.outsider, session_id=session_id, prompt=UPLOAD_QUESTION)
    assert outsider.status_code == 404 and outsider.json() == not_found
    outsider = resume(model_world, model_world.outsider, run_id, session_id=session_id)
    assert outsider.status_code == 404 and outsider.json() == not_found
    named = resume(model_world, model_world.outsider, run_id, session_id=session_id, tenant="acme")
    assert named.status_code == 404 and named.json()["error"] == "tenant_not_found"
    teammate_of_owner = resume(model_world, model_world.owner, run_id, session_id=session_id)
    assert teammate_of_owner.status_code == 404  # another principal's run, same tenant
    other_session = new_session(model_world, model_world.teammate)
    assert resume(model_world, model_world.teammate, run_id, session_id=other_session).status_code == 404
    chat_session = model_world.client(model_world.teammate).post("/v1/chat/sessions", {}, format="json").json()["session_id"]
    assert ask(model_world, model_world.teammate, session_id=chat_session, prompt="hi").status_code == 404
    assert resume(model_world, model_world.teammate, "run-doesnotexist", session_id=session_id).status_code == 404
    assert len(sent(fake)) == requests_before and AgentRun.objects.count() == 1
    assert AgentRun.objects.get().status == RunStatus.STOPPED

    from rest_framework.test import APIClient

    anonymous = APIClient().post(f"/v1/agent/runs/{run_id}/resume", {"session_id": session_id}, format="json")
    assert anonymous.status_code == 401 and anonymous.json()["error"] == "not_authenticated"
    assert APIClient().post("/v1/agent/sessions", {}, format="json").status_code == 401


BAD_INPUT: list[tuple[dict[str, Any], str, str]] = [
    ({"prompt": "hi"}, "session_id", "required"),
    ({"session_id": "session-x"}, "prompt", "required"),
    ({"session_id": "session-x", "prompt": "  "}, "prompt", "Type a question first"),
    ({"session_id": "session-x", "prompt": "hi", "max_steps": 0}, "max_steps", "greater than or equal to 1"),
    ({"session_id": "session-x", "prompt": "hi", "max_steps": 9}, "max_steps", "less than or equal to 8"),
    ({"session_id": "session-x", "prompt": "hi", "max_steps": "many"}, "max_steps", "valid integer"),
    ({"session_id": "session-x", "prompt": "hi", "tools": []}, "tools", "server chooses"),
    ({"session_id": "session-x", "prompt": "hi", "model": "gpt-4o"}, "model", "server chooses"),
    ({"session_id": "session-x", "prompt": "hi", "colour": "blue"}, "colour", "Not accepted"),
]


def test_bad_input_is_a_400_naming_the_field(world: World) -> None:
    for body, field, phrase in BAD_INPUT:
        response = ask(world, world.teammate, **body)
        assert response.status_code == 400, (body, response.content)
        fields = response.json()["fields"]
        assert field in fields and phrase in " ".join(fields[field]), (body, fields)
    response = resume(world, world.teammate, "run-x", session_id="session-x", max_steps=9)
    assert response.status_code == 400 and "max_steps" in response.json()["fields"]


# --- the offline model, streams, memory, privacy --------------------------------------------------------


def test_offline_model_drives_the_agent(model_world: World, tmp_path: Path, settings: Any) -> None:
    catalog = tmp_path / "offline.yaml"
    catalog.write_text(json.dumps({"models": {"chat": {"deployments": [{"model": "quarry/offline-extractive"}]}}}))
    settings.QUARRY_MODEL_CONFIG_PATH = catalog
    session_id = new_session(model_world, model_world.teammate)
    body = ask(model_world, model_world.teammate, session_id=session_id, prompt=UPLOAD_QUESTION).json()
    assert (body["provider"], body["provider_model"], body["stop_reason"], body["turns"]) == ("quarry", "offline-extractive", "completed", 2)
    assert body["tool_calls"] == [{"step": 1, "tool": "hybrid_search", "ok": True}]
    assert body["message"]["content"].startswith("From the knowledge base:\n\n- \u201cEditors upload files in the admin.\u201d [1]")
    assert [c["chunk_id"] for c in body["citations"]] == ["guide:0"]
    run = run_of(body)
    assert run.steps[0]["calls"][0]["arguments"] == {"query": UPLOAD_QUESTION}


def test_the_offline_agent_searches_once_more_for_what_its_first_results_name(model_world: World, tmp_path: Path, settings: Any) -> None:
    catalog = tmp_path / "offline.yaml"
    catalog.write_text(json.dumps({"models": {"chat": {"deployments": [{"model": "quarry/offline-extractive"}]}}}))
    settings.QUARRY_MODEL_CONFIG_PATH = catalog
    async_to_sync(rag.postgres(rag.default_embedder(), namespace="acme").ingest)([
        rag.RAGDocument("olympiad", "The 26th Chess Olympiad took place in Thessaloniki, Greece, in 1984.", title="26th Chess Olympiad"),
        rag.RAGDocument("port", "Thessaloniki's harbour moved 273,282 containers in 2010.", title="Port of Thessaloniki"),
    ])
    session_id = new_session(model_world, model_world.teammate)
    question = "How many containers did the port of the city hosting the 26th Chess Olympiad move?"
    body = ask(model_world, model_world.teammate, session_id=session_id, prompt=question).json()
    assert body["tool_calls"] == [{"step": 1, "tool": "hybrid_search", "ok": True}, {"step": 2, "tool": "hybrid_search", "ok": True}]
    run = run_of(body)
    assert run.steps[0]["calls"][0]["arguments"] == {"query": question}
    assert run.steps[1]["calls"][0]["arguments"]["query"].startswith("Thessaloniki")  # the name the first hop found
    assert "273,282" in body["message"]["content"] and body["stop_reason"] == "completed"


def parse_sse(text: str) -> list[tuple[str, dict[str, Any]]]:
    events = []
    for frame in text.strip().split("\n\n"):
        name, data = frame.split("\n", 1)
        events.append((name.removeprefix("event: "), json.loads(data.removeprefix("data: "))))
    return events


async def drain(response: Any) -> str:
    return b"".join([chunk async for chunk in response.streaming_content]).decode()


def test_stream_sends_the_exact_event_sequence(model_world: World, fake: FakeOpenAI) -> None:
    fake.chat_reasoning = "thinking"
    fake.chat_script = [tool_calls(search("keyword_search", "upload"), search("keyword_search", "BM25"), text="Searching."),
                        "Uploads [1] and BM25 [2]."]
    session_id = new_session(model_world, model_world.teammate)
    response = ask(model_world, model_world.teammate, session_id=session_id, prompt=UPLOAD_QUESTION, stream=True)
    assert response.status_code == 200 and response["Content-Type"] == "text/event-stream; charset=utf-8"
    assert response["Cache-Control"] == "no-store"
    events = parse_sse(async_to_sync(drain)(response))
    assert [name for name, _ in events] == [
        "run", "reasoning_delta", "text_delta", "step", "tool_result", "tool_result",
        "reasoning_delta", *["text_delta"] * 5, "citations", "usage", "completed",
    ]
    run = events[0][1]
    assert run == {"session_id": session_id, "run_id": run["run_id"], "resumed": False, "max_steps": 4,
                   "graph_search": False, "tools": BASE_TOOLS}
    assert events[2][1] == {"text": "Searching.", "turn": 1}
    step = events[3][1]
    assert (step["step"], step["turn"], [(c["tool"], c["arguments"]) for c in step["calls"]]) == (
        1, 1, [("keyword_search", {"query": "upload"}), ("keyword_search", {"query": "BM25"})])
    assert [(d["id"], d["ok"], d["chunk_ids"]) for _, d in events[4:6]] == [
        (step["calls"][0]["id"], True, ["guide:0"]), (step["calls"][1]["id"], True, ["modes:0"])]
    assert "".join(d["text"] for n, d in events if n == "text_delta" and d["turn"] == 2) == "Uploads [1] and BM25 [2]."
    completed = events[-1][1]
    assert list(completed) == RESPONSE_KEYS and completed["message"]["content"] == "Uploads [1] and BM25 [2]."
    assert events[-3][1]["citations"] == completed["citations"] and events[-2][1] == completed["usage"]


def test_a_stream_that_fails_ends_with_one_error_naming_the_run(model_world: World, fake: FakeOpenAI) -> None:
    fake.chat_script = [failure(503)]
    session_id = new_session(model_world, model_world.teammate)
    events = parse_sse(async_to_sync(drain)(ask(model_world, model_world.teammate, session_id=session_id, prompt="hi", stream=True)))
    assert [name for name, _ in events] == ["run", "error"]
    assert events[1][1] == {"error": "model_unavailable", "detail": "The chat model is unreachable. Try again shortly, or resume the run.",
                            "run_id": events[0][1]["run_id"], "stop_reason": "provider_error"}


def test_a_client_that_leaves_stops_the_run_resumably(model_world: World, fake: FakeOpenAI) -> None:
    fake.chat_script = [tool_calls(search("keyword_search", "upload")), "Editors upload files in the admin [1]."]
    session = ChatSession.objects.create(tenant=model_world.acme, principal="user:1", kind=SessionKind.AGENT)

    async def leave_after_first_step() -> None:
        async with aclosing(agent_stream(session=session, prompt=UPLOAD_QUESTION, reader=None)) as events:
            async for event in events:
                if event["event"] == "tool_result":
                    break

    async_to_sync(leave_after_first_step)()
    run = AgentRun.objects.get()
    assert (run.status, run.stop_reason, len(run.steps)) == (RunStatus.STOPPED, "cancelled", 1)
    assert agent_run_claim(run=run, max_steps=4, graph_search=False).status == RunStatus.RUNNING


def test_earlier_exchanges_of_the_session_are_memory_without_their_markers(model_world: World, fake: FakeOpenAI) -> None:
    session_id = new_session(model_world, model_world.teammate)
    chat_exchange_record(session=ChatSession.objects.get(public_id=session_id), prompt="chat question",
                         answer="chat answer [1].", citations=[], usage={}, model="openai/answer")
    fake.chat_script = ["Editors upload in the admin [1][2]."]
    ask(model_world, model_world.teammate, session_id=session_id, prompt="first question")
    fake.chat_script = ["Fine."]
    ask(model_world, model_world.teammate, session_id=session_id, prompt="second question")
    first, second = sent(fake)
    assert [(m["role"], m["content"]) for m in first["messages"][1:]] == [
        ("user", "chat question"), ("assistant", "chat answer."), ("user", "first question"),
    ]
    assert [(m["role"], m["content"]) for m in second["messages"][1:]] == [
        ("user", "first question"), ("assistant", "Editors upload in the admin."), ("user", "second question"),
    ]


def test_prompts_arguments_passages_and_answers_never_reach_the_logs(
    world: World, fake: FakeOpenAI, tmp_path: Path, settings: Any, caplog: pytest.LogCaptureFixture
) -> None:
    async_to_sync(rag.postgres(rag.default_embedder(), namespace="acme").ingest)(
        [rag.RAGDocument("secret", "The quokka-5531 launch code is kept in the vault with the upload keys.")]
    )
    settings.QUARRY_MODEL_CONFIG_PATH = write_catalog(tmp_path / "models.yaml", fake.base_url)
    fake.chat_reasoning = "thinking about numbat-3318"
    fake.chat_script = [tool_calls(search("keyword_search", "quokka-5531 koala-7001")), "The wombat-9012 answer [1].",
                        failure(500)]
    session_id = new_session(world, world.teammate)
    with caplog.at_level(logging.DEBUG):
        body = ask(world, world.teammate, session_id=session_id, prompt="zebra-7781: where is the quokka-5531 code?").json()
        failed = ask(world, world.teammate, session_id=session_id, prompt="zebra-7781 again")
    assert "wombat-9012" in body["message"]["content"] and failed.status_code == 503
    assert "agent run" in caplog.text and "answered in tenant acme" in caplog.text
    for marker in ("zebra-7781", "quokka-5531", "koala-7001", "wombat-9012", "numbat-3318", "launch code", SECRET_KEY_MARKER):
        assert marker not in caplog.text


def test_openapi_documents_the_agent_endpoints(db: None) -> None:
    import yaml

    response = Client().get("/v1/schema", HTTP_ACCEPT="application/json")
    schema = json.loads(response.content) if response["Content-Type"].startswith("application/json") else yaml.safe_load(response.content)
    paths = schema["paths"]
    assert "/v1/agent/sessions" in paths
    completions = paths["/v1/agent/completions"]["post"]
    assert set(completions["responses"]["200"]["content"]) == {"application/json", "text/event-stream"}
    assert "max_steps" in completions["description"]
    assert "409" in paths["/v1/agent/runs/{run_id}/resume"]["post"]["responses"]
