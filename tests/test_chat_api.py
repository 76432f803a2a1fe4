"""POST /v1/chat/sessions and /v1/chat/completions (JSON) in process, through litellm for real.

The chat model is tests/fake_openai.py on 127.0.0.1 (the provider's network is
the boundary); retrieval is the real PostgreSQL backend with the local embedder.
Streaming over a real server is in test_chat_stream.py.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from django.test import Client

from chat.events import GRAPH_NOT_BUILT
from chat.models import ChatSession, Turn
from knowledge import rag
from tests.conftest import World
from tests.chat_support import SECRET_KEY_MARKER, UPLOAD_QUESTION, deployment, write_catalog
from tests.fake_openai import FAIL_ALWAYS, FakeOpenAI

def new_session(world: World, user: Any) -> str:
    response = world.client(user).post("/v1/chat/sessions", {}, format="json")
    assert response.status_code == 201, response.content
    return response.json()["session_id"]


def complete(world: World, user: Any, **body: Any) -> Any:
    return world.client(user).post("/v1/chat/completions", body, format="json")


async def drain(response: Any) -> str:
    """The body of a streamed response from the in-process test client."""
    return b"".join([chunk async for chunk in response.streaming_content]).decode()


# --- sessions --------------------------------------------------------------------------------


def test_reader_creates_a_session_with_a_greeting(model_world: World) -> None:
    response = model_world.client(model_world.teammate).post("/v1/chat/sessions", {"tenant": "acme"}, format="json")
    assert response.status_code == 201
    body = response.json()
    assert set(body) == {"session_id", "greeting"} and body["session_id"].startswith("session-")
    assert "acme" in body["greeting"]
    assert response["Cache-Control"] == "no-store"
    session = ChatSession.objects.get(public_id=body["session_id"])
    assert session.tenant == model_world.acme and session.principal == f"user:{model_world.teammate.pk}"


def test_outsider_cannot_create_a_session_in_our_tenant(model_world: World) -> None:
    response = model_world.client(model_world.outsider).post("/v1/chat/sessions", {"tenant": "acme"}, format="json")
    assert response.status_code == 404 and response.json()["error"] == "tenant_not_found"
    assert not ChatSession.objects.exists()


def test_anonymous_session_and_completion_are_401(model_world: World) -> None:
    from rest_framework.test import APIClient

    assert APIClient().post("/v1/chat/sessions", {}, format="json").status_code == 401
    response = APIClient().post("/v1/chat/completions", {"session_id": "session-x", "prompt": "hi"}, format="json")
    assert response.status_code == 401
    assert response.json() == {"error": "not_authenticated", "detail": "Authentication credentials were not provided."}
    assert response["WWW-Authenticate"] == "Bearer" and response["Cache-Control"] == "no-store"


# --- completions: the envelope, citations, grounding --------------------------------------------


def test_completion_envelope_citations_and_stored_turns(model_world: World, fake: FakeOpenAI) -> None:
    session_id = new_session(model_world, model_world.teammate)
    response = complete(model_world, model_world.teammate, session_id=session_id, prompt=UPLOAD_QUESTION)
    assert response.status_code == 200, response.content
    assert response["Cache-Control"] == "no-store"
    body = response.json()
    assert list(body) == ["id", "model", "provider", "provider_model", "message", "finish_reason", "usage", "retry_count",
                          "fallback_count", "session_id", "citations", "also_retrieved", "turn_id", "prompt_turn_id"]
    assert body["message"] == {"role": "assistant", "content": "The fake model answers from the passages [1]."}
    assert (body["model"], body["provider"], body["provider_model"]) == ("chat", "openai", "answer")
    assert body["id"].startswith("chatcmpl-fake-") and body["finish_reason"] == "stop"
    assert body["retry_count"] == 0 and body["fallback_count"] == 0 and body["session_id"] == session_id
    assert body["usage"]["completion_tokens"] == 8
    assert body["usage"]["total_tokens"] == body["usage"]["prompt_tokens"] + 8 > 8
    assert [(c["document_id"], c["chunk_id"]) for c in body["citations"]] == [("guide", "guide:0")]
    assert body["citations"][0]["score"] > 0

    # The model saw the server's template with the passage numbered 1, then the question, and nothing else chosen by us.
    sent = fake.received("/v1/chat/completions")[-1].json
    assert sent["model"] == "answer" and sent["stream"] is True
    system, question = sent["messages"][0], sent["messages"][-1]
    assert [m["role"] for m in sent["messages"]] == ["system", "user"]
    assert "Answer only from the numbered passages" in system["content"]
    assert '<passage n="1" document="guide" title="Uploading">\nEditors upload files in the admin.' in system["content"]
    assert "Globex" not in system["content"] and "BM25" not in system["content"]
    assert question == {"role": "user", "content": UPLOAD_QUESTION}

    turns = list(Turn.objects.filter(session__public_id=session_id).order_by("id").values("role", "content", "citations", "model"))
    assert turns == [
        {"role": "user", "content": UPLOAD_QUESTION, "citations": [], "model": ""},
        {"role": "assistant", "content": body["message"]["content"], "citations": body["citations"], "model": "openai/answer"},
    ]


def test_nothing_relevant_means_no_citations_and_an_empty_passage_list(model_world: World, fake: FakeOpenAI) -> None:
    session_id = new_session(model_world, model_world.teammate)
    body = complete(model_world, model_world.teammate, session_id=session_id, prompt="Who won the 1998 world cup?").json()
    assert body["citations"] == []
    assert "(No passages were found for this question.)" in fake.received("/v1/chat/completions")[-1].json["messages"][0]["content"]


def test_the_last_two_turns_go_into_the_prompt_oldest_first(model_world: World, fake: FakeOpenAI) -> None:
    session_id = new_session(model_world, model_world.teammate)
    replies = iter(["First answer [1].", "Second answer [1].", "Third answer."])
    fake.chat_reply = lambda messages: next(replies)
    for prompt in ("first question about uploads", "second question about search", "third question"):
        assert complete(model_world, model_world.teammate, session_id=session_id, prompt=prompt).status_code == 200
    requests = fake.received("/v1/chat/completions")
    assert [m["role"] for m in requests[0].json["messages"]] == ["system", "user"]
    assert [(m["role"], m["content"]) for m in requests[2].json["messages"][1:]] == [
        ("user", "second question about search"),
        ("assistant", "Second answer [1]."),
        ("user", "third question"),
    ]
    assert Turn.objects.filter(session__public_id=session_id).count() == 6


def test_memory_is_never_indexed_for_retrieval(model_world: World, fake: FakeOpenAI) -> None:
    session_id = new_session(model_world, model_world.teammate)
    fake.chat_reply = "Platypus-4471 is the answer [1]."
    complete(model_world, model_world.teammate, session_id=session_id, prompt="Tell me about platypus-4471 uploads")
    hits = async_to_sync(rag.postgres(rag.default_embedder(), namespace="acme").search)("platypus-4471", mode="keyword")
    assert hits == ()


def index_multi_hop(world: World) -> None:
    """acme gets passages that name each other (a question about one is answered by the one it names)."""
    from tests.test_graph import ARTICLES, doc, filler

    async_to_sync(rag.postgres(rag.default_embedder(), namespace="acme").ingest)([doc(k) for k in ARTICLES] + [filler(n) for n in range(6)])


MULTI_HOP = "What was the hometown of the singer of Hello Love?"


def test_graph_search_true_adds_the_graph_leg_and_its_paths_false_removes_it(
    model_world: World, fake: FakeOpenAI, settings: Any
) -> None:
    from tests.conftest import backend_setting
    from tests.test_graph import LOOSE

    index_multi_hop(model_world)
    settings.QUARRY_RAG_BACKEND = backend_setting(graph=LOOSE)
    settings.QUARRY_CHAT_RETRIEVAL_TOP_K = 4
    session_id = new_session(model_world, model_world.teammate)
    body = complete(model_world, model_world.teammate, session_id=session_id, prompt=MULTI_HOP, graph_search=True).json()
    graph = body["graph_search"]
    assert graph["requested"] is True and graph["used"] is True and graph["detail"].startswith("Graph search ranked")
    assert "Hank Snow" in {n["name"] for n in graph["graph_nodes"]}
    # The fake model cites [1] only; the graph's passage is among the retrieved either way.
    by_chunk = {c["chunk_id"]: c for c in body["citations"] + body["also_retrieved"]}
    assert by_chunk["snow:0"]["graph_path"] == ["Hank Snow"]
    system = fake.requests[-1].json["messages"][0]["content"]
    assert '<passage n="' in system and 'title="Hank Snow" via="Hank Snow">' in system  # the path reaches the model

    body = complete(model_world, model_world.teammate, session_id=session_id, prompt=MULTI_HOP, graph_search=False).json()
    assert "graph_search" not in body and all("graph_path" not in c for c in body["citations"] + body["also_retrieved"])
    assert " via=" not in fake.requests[-1].json["messages"][0]["content"]
    # The deployment default applies when the request says nothing.
    settings.QUARRY_CHAT_RETRIEVAL_GRAPH_SEARCH = True
    body = complete(model_world, model_world.teammate, session_id=session_id, prompt=MULTI_HOP).json()
    assert body["graph_search"]["used"] is True


def test_the_graphs_passages_reach_the_answer_when_it_places_them_below_the_answers_top_k(
    model_world: World, fake: FakeOpenAI, settings: Any
) -> None:
    """The graph places its passages after hybrid search's 6th hit (its default), deeper than the
    passages an answer reads: they join those passages rather than fall off the page."""
    from tests.conftest import backend_setting
    from tests.test_graph import LOOSE

    index_multi_hop(model_world)
    settings.QUARRY_RAG_BACKEND = backend_setting(graph={**LOOSE, "protect": 2, "insert_after": 6})
    settings.QUARRY_CHAT_RETRIEVAL_TOP_K = 2
    settings.QUARRY_CHAT_RETRIEVAL_HOP_K = 0
    session_id = new_session(model_world, model_world.teammate)
    plain = complete(model_world, model_world.teammate, session_id=session_id, prompt=MULTI_HOP, graph_search=False).json()
    body = complete(model_world, model_world.teammate, session_id=session_id, prompt=MULTI_HOP, graph_search=True).json()
    retrieved = body["citations"] + body["also_retrieved"]
    placed = {c["chunk_id"]: c["graph_path"] for c in retrieved if "graph_path" in c}
    assert placed.get("tn:0") == ["Hank Snow"]  # Tennessee, where the singer (Hank Snow) lived
    assert not set(placed) & {c["chunk_id"] for c in plain["citations"] + plain["also_retrieved"]}
    # Hybrid's own passages are those it gives without the graph.
    assert sorted(c["chunk_id"] for c in retrieved if "graph_path" not in c) == sorted(
        c["chunk_id"] for c in plain["citations"] + plain["also_retrieved"])
    assert 'title="Tennessee" via="Hank Snow">' in fake.requests[-1].json["messages"][0]["content"]
    assert f"; {len(placed)} of the passages used came through it." in body["graph_search"]["detail"]


def test_an_answers_passages_with_the_graph_are_hybrids_first_and_every_one_the_graph_placed() -> None:
    from knowledge.rag.fusion import with_graph_placed

    def hit(name: str, path: tuple[str, ...] | None = None) -> rag.RAGHit:
        return rag.RAGHit(rag.RAGChunk(f"{name}:0", name, "acme", name), 1.0, graph_path=path)

    page = [hit("a"), hit("b"), hit("c"), hit("g1", ("X",)), hit("d"), hit("g2", ("Y",)), hit("e")]
    assert [h.chunk.document_id for h in with_graph_placed(page, 2)] == ["a", "b", "g1", "g2"]
    assert [h.chunk.document_id for h in with_graph_placed(page, 5)] == ["a", "b", "c", "g1", "d", "g2", "e"]


def test_graph_search_in_a_tenant_without_entities_says_so(model_world: World, settings: Any) -> None:
    from knowledge.models import Entity

    Entity.objects.filter(tenant=model_world.acme).delete()  # as before any extraction ran
    session_id = new_session(model_world, model_world.teammate)
    body = complete(model_world, model_world.teammate, session_id=session_id, prompt=UPLOAD_QUESTION, graph_search=True).json()
    assert body["graph_search"] == {"requested": True, "used": False, "detail": GRAPH_NOT_BUILT}
    assert [c["chunk_id"] for c in body["citations"]] == ["guide:0"]


# --- access ---------------------------------------------------------------------------------------


def test_outsider_gets_404_for_our_session(model_world: World, fake: FakeOpenAI) -> None:
    session_id = new_session(model_world, model_world.teammate)
    own_tenant = complete(model_world, model_world.outsider, session_id=session_id, prompt=UPLOAD_QUESTION)
    assert own_tenant.status_code == 404 and own_tenant.json() == {"error": "not_found", "detail": "Not found."}
    named = complete(model_world, model_world.outsider, session_id=session_id, prompt=UPLOAD_QUESTION, tenant="acme")
    assert named.status_code == 404 and named.json()["error"] == "tenant_not_found"
    assert fake.received("/v1/chat/completions") == [] and not Turn.objects.exists()


def test_a_teammate_cannot_use_another_members_session(model_world: World) -> None:
    session_id = new_session(model_world, model_world.owner)
    response = complete(model_world, model_world.teammate, session_id=session_id, prompt=UPLOAD_QUESTION)
    assert response.status_code == 404
    assert complete(model_world, model_world.owner, session_id=session_id, prompt=UPLOAD_QUESTION).status_code == 200


def test_unknown_session_is_404(model_world: World) -> None:
    response = complete(model_world, model_world.teammate, session_id="session-doesnotexist", prompt="hello")
    assert response.status_code == 404


def test_browser_session_needs_a_csrf_token(model_world: World) -> None:
    session_id = new_session(model_world, model_world.teammate)
    browser = Client(enforce_csrf_checks=True)
    browser.force_login(model_world.teammate)
    refused = browser.post("/v1/chat/completions", {"session_id": session_id, "prompt": "hi", "tenant": "acme"},
                           content_type="application/json")
    assert refused.status_code == 403 and "CSRF" in refused.json()["detail"]
    browser = Client()  # the same rules as every DRF view: with the token check off, the session works
    browser.force_login(model_world.teammate)
    ok = browser.post("/v1/chat/completions", {"session_id": session_id, "prompt": UPLOAD_QUESTION, "tenant": "acme"},
                      content_type="application/json")
    assert ok.status_code == 200, ok.content


BAD_INPUT: list[tuple[dict[str, Any], str, str]] = [
    ({"prompt": "hi"}, "session_id", "required"),
    ({"session_id": "session-x"}, "prompt", "required"),
    ({"session_id": "session-x", "prompt": "   "}, "prompt", "Type a question first"),
    ({"session_id": "session-x", "prompt": "x" * 16_385}, "prompt", "too long: at most 16,384 characters"),
    ({"session_id": "session-x", "prompt": "a\x00b"}, "prompt", "must not contain NUL characters"),  # refused by the JSON parser
    ({"session_id": "session-x", "prompt": "hi", "stream": "maybe"}, "stream", "valid boolean"),
    ({"session_id": "session-x", "prompt": "hi", "model": "gpt-4o"}, "model", "server chooses the model"),
    ({"session_id": "session-x", "prompt": "hi", "api_base": "http://evil"}, "api_base", "server chooses"),
    ({"session_id": "session-x", "prompt": "hi", "temperature": 2}, "temperature", "server chooses"),
    ({"session_id": "session-x", "prompt": "hi", "colour": "blue"}, "colour", "Not accepted"),
    ({"session_id": "session-x", "prompt": "ring \x07 bell"}, "prompt", "control characters (found U+0007)"),
    ({"session_id": "not-a-session", "prompt": "hi"}, "session_id", "Not a session id"),
    ({"session_id": 5, "prompt": "hi"}, "session_id", "Not a valid string"),
    ({"session_id": "session-x", "prompt": "hi", "tenant": ""}, "tenant", "Must not be empty"),
    ({"session_id": "session-x", "prompt": "hi", "graph_search": "yes"}, "graph_search", "valid boolean"),
    ({"session_id": "session-x", "prompt": "hi", "fusion": "borda"}, "fusion", "not a valid choice"),
    ({"session_id": "session-x", "prompt": "hi", "fusion": "score", "fusion_weight": 500}, "fusion_weight", "less than or equal to 100"),
    ({"session_id": "session-x", "prompt": "hi", "fusion": "rrf", "fusion_weight": 2}, "fusion_weight", "applies to score fusion"),
]


@pytest.mark.parametrize(("message", "field"), [
    ({"prompt": "   "}, "prompt"), ({"prompt": "x" * 16_385}, "prompt"), ({"prompt": "ring \x07 bell"}, "prompt"),
    ({"prompt": "lone \ud800 surrogate"}, "prompt"), ({"prompt": 5}, "prompt"),
    ({"prompt": "hi", "fusion": "borda"}, "fusion"), ({"prompt": "hi", "fusion": "rrf", "fusion_weight": 2}, "fusion_weight"),
])
def test_the_websocket_refuses_a_question_with_the_sentence_of_the_http_api(message: dict[str, Any], field: str) -> None:
    """One check for both transports (chat.api.requests): the WebSocket's error detail is the sentence a 400
    lists under the field (the prompt's as it is, an option's after its name)."""
    from chat.api.chat import ChatCompletionInputSerializer
    from chat.api.requests import InvalidRequest, ws_request

    http = ChatCompletionInputSerializer(data={"session_id": "session-x", **message})
    assert not http.is_valid()
    sentence = str(http.errors[field][0])
    with pytest.raises(InvalidRequest) as refused:
        ws_request({"type": "ask", **message}, kind="chat", prompt=True)
    assert refused.value.detail == (sentence if field == "prompt" else f"{field}: {sentence}")


def test_bad_input_is_a_400_naming_the_field(world: World) -> None:
    # One world for all cases: building it dominates the cost of each request.
    for body, field, phrase in BAD_INPUT:
        response = complete(world, world.teammate, **body)
        assert response.status_code == 400, (body, response.content)
        fields = response.json()["fields"]
        assert field in fields and phrase in " ".join(fields[field]), (body, fields)


def test_malformed_json_is_400_and_get_is_405(world: World) -> None:
    client = world.client(world.teammate)
    response = client.generic("POST", "/v1/chat/completions", "{nope", content_type="application/json")
    assert response.status_code == 400 and response.json()["error"] == "parse_error"
    response = client.get("/v1/chat/completions")
    assert response.status_code == 405 and response.json()["error"] == "method_not_allowed"


# --- retries, fallbacks, failures -----------------------------------------------------------------


def test_retry_count_when_the_first_call_fails(model_world: World, fake: FakeOpenAI, tmp_path: Path, settings: Any) -> None:
    models = {"chat": {"deployments": [deployment(fake.base_url, "flaky")]}}
    settings.QUARRY_MODEL_CONFIG_PATH = write_catalog(tmp_path / "retry.yaml", fake.base_url, models=models, num_retries=1)
    fake.chat_failures = {"flaky": 1}
    body = complete(model_world, model_world.teammate, session_id=new_session(model_world, model_world.teammate), prompt=UPLOAD_QUESTION).json()
    assert (body["retry_count"], body["fallback_count"], body["provider_model"]) == (1, 0, "flaky")
    assert [r.json["model"] for r in fake.received("/v1/chat/completions")] == ["flaky", "flaky"]


def test_first_deployment_fails_second_answers(model_world: World, fake: FakeOpenAI, tmp_path: Path, settings: Any) -> None:
    models = {"chat": {"deployments": [deployment(fake.base_url, "first"), deployment(fake.base_url, "second")]}}
    settings.QUARRY_MODEL_CONFIG_PATH = write_catalog(tmp_path / "fallback.yaml", fake.base_url, models=models, num_retries=1)
    fake.chat_failures = {"first": FAIL_ALWAYS}
    body = complete(model_world, model_world.teammate, session_id=new_session(model_world, model_world.teammate), prompt=UPLOAD_QUESTION).json()
    # The first deployment is tried and retried once, then the second answers.
    assert [r.json["model"] for r in fake.received("/v1/chat/completions")] == ["first", "first", "second"]
    assert (body["retry_count"], body["fallback_count"]) == (1, 1)
    assert (body["model"], body["provider"], body["provider_model"]) == ("chat", "openai", "second")
    assert body["message"]["content"] == "The fake model answers from the passages [1]."


def test_fallback_to_another_catalog_model(model_world: World, fake: FakeOpenAI, tmp_path: Path, settings: Any) -> None:
    models = {
        "chat": {"deployments": [deployment(fake.base_url, "broken")], "fallbacks": ["backup"]},
        "backup": {"deployments": [deployment(fake.base_url, "good")]},
    }
    settings.QUARRY_MODEL_CONFIG_PATH = write_catalog(tmp_path / "groups.yaml", fake.base_url, models=models)
    fake.chat_failures = {"broken": FAIL_ALWAYS}
    body = complete(model_world, model_world.teammate, session_id=new_session(model_world, model_world.teammate), prompt=UPLOAD_QUESTION).json()
    assert (body["model"], body["provider_model"], body["retry_count"], body["fallback_count"]) == ("backup", "good", 0, 1)


def test_model_failure_is_a_503_without_provider_text_or_stored_turns(
    model_world: World, fake: FakeOpenAI, caplog: pytest.LogCaptureFixture
) -> None:
    fake.chat_failures = {"answer": FAIL_ALWAYS}
    session_id = new_session(model_world, model_world.teammate)
    with caplog.at_level(logging.DEBUG):
        response = complete(model_world, model_world.teammate, session_id=session_id, prompt=UPLOAD_QUESTION)
    assert response.status_code == 503
    assert response.json() == {"error": "model_unavailable", "detail": "The chat model is unreachable. Try again shortly."}
    assert response["Retry-After"] == "5" and response["Cache-Control"] == "no-store"
    assert not Turn.objects.exists()
    assert "fake upstream failure" not in caplog.text and SECRET_KEY_MARKER not in caplog.text
    assert "chat model unavailable in tenant acme: model 'chat': InternalServerError, status 500" in caplog.text


def test_an_unreachable_model_is_a_503(model_world: World, tmp_path: Path, settings: Any) -> None:
    models = {"chat": {"deployments": [deployment("http://127.0.0.1:9/v1", "nobody")]}}
    settings.QUARRY_MODEL_CONFIG_PATH = write_catalog(tmp_path / "dead.yaml", "", models=models)
    response = complete(model_world, model_world.teammate, session_id=new_session(model_world, model_world.teammate), prompt="hi there")
    assert response.status_code == 503 and response.json()["error"] == "model_unavailable"


def test_retrieval_failure_is_a_503(model_world: World, fake: FakeOpenAI, settings: Any) -> None:
    session_id = new_session(model_world, model_world.teammate)
    settings.QUARRY_RAG_BACKEND = {"CLASS": "tests.backends.UnreachableDatabase"}  # the datastore, gone mid-conversation
    response = complete(model_world, model_world.teammate, session_id=session_id, prompt=UPLOAD_QUESTION)
    assert response.status_code == 503
    assert response.json() == {"error": "retrieval_unavailable", "detail": "Searching the knowledge base failed. Try again shortly."}
    assert fake.received("/v1/chat/completions") == []


def test_an_invalid_catalog_is_a_503_and_logged_by_key(model_world: World, tmp_path: Path, settings: Any,
                                                     caplog: pytest.LogCaptureFixture) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("models:\n  chat:\n    deployments:\n      - model: openai/x\n        colour: blue\n")
    settings.QUARRY_MODEL_CONFIG_PATH = bad
    response = complete(model_world, model_world.teammate, session_id=new_session(model_world, model_world.teammate), prompt="hi")
    assert response.status_code == 503 and response.json()["error"] == "model_unavailable"
    assert "models.chat.deployments[0].colour: unknown key" in caplog.text


# --- privacy ---------------------------------------------------------------------------------------


def test_prompts_passages_and_answers_never_reach_the_logs(world: World, fake: FakeOpenAI, tmp_path: Path, settings: Any,
                                                          caplog: pytest.LogCaptureFixture) -> None:
    async_to_sync(rag.postgres(rag.default_embedder(), namespace="acme").ingest)(
        [rag.RAGDocument("secret", "The quokka-5531 launch code is kept in the vault with the upload keys.")]
    )
    settings.QUARRY_MODEL_CONFIG_PATH = write_catalog(tmp_path / "models.yaml", fake.base_url)
    fake.chat_reply = "The wombat-9012 answer cites [1]."
    fake.chat_reasoning = "thinking about numbat-3318"
    session_id = new_session(world, world.teammate)
    with caplog.at_level(logging.DEBUG):
        first = complete(world, world.teammate, session_id=session_id, prompt="zebra-7781: where is the quokka-5531 launch code?")
        second = complete(world, world.teammate, session_id=session_id, prompt="zebra-7781 again", stream=True)
        frames = async_to_sync(drain)(second)
    assert first.status_code == 200 and "wombat-9012" in first.json()["message"]["content"]
    assert "numbat-3318" in frames and "event: completed" in frames
    assert "chat answered in tenant acme" in caplog.text  # the pipeline does log, without content
    for marker in ("zebra-7781", "quokka-5531", "wombat-9012", "numbat-3318", SECRET_KEY_MARKER):
        assert marker not in caplog.text


# --- schema ----------------------------------------------------------------------------------------


def test_openapi_documents_both_endpoints(db: None) -> None:
    response = Client().get("/v1/schema", HTTP_ACCEPT="application/json")
    paths = json.loads(response.content)["paths"] if response["Content-Type"].startswith("application/json") else None
    if paths is None:
        import yaml

        paths = yaml.safe_load(response.content)["paths"]
    assert "/v1/chat/sessions" in paths
    completions = paths["/v1/chat/completions"]["post"]
    assert set(completions["responses"]["200"]["content"]) == {"application/json", "text/event-stream"}
    assert "graph" in completions["description"]


def test_the_schema_describes_the_streams_frames_as_sent(db: None) -> None:
    """OpenAPI's x-sse-events: the first frame lists the context, without also_retrieved; completed is the
    JSON response, message included (the answer as stored)."""
    schema = Client().get("/v1/schema", {"format": "json"}).json()
    stream = schema["paths"]["/v1/chat/completions"]["post"]["responses"]["200"]["content"]["text/event-stream"]["schema"]
    events = stream["x-sse-events"]
    assert set(events) == {"citations", "text_delta", "reasoning_delta", "usage", "completed", "error"}
    assert set(events["citations"]["properties"]) == {"session_id", "citations", "graph_search"}
    assert "given to the model as context" in events["citations"]["properties"]["citations"]["description"]
    assert {"message", "citations", "also_retrieved"} <= set(events["completed"]["properties"])
    assert "one `citations`" in schema["paths"]["/v1/chat/completions"]["post"]["description"].split("then the model's")[0]
