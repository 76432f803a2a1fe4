"""POST /v1/chat/completions with ``stream: true`` over a real uvicorn server (ASGI, async view).

One server and one fake model provider serve the whole module; each test writes
the catalog it needs (the server rebuilds its Router when the file changes).
The server logs at DEBUG to var/test-logs/uvicorn-chat.log, which the privacy
checks read.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from django.db import connections

from chat.models import Turn
from tests.conftest import World
from tests.fake_openai import FAIL_ALWAYS, FakeOpenAI, fake_openai_server
from tests.factories import make_token
from tests.servers import asgi_server, child_env, read_log, wait_for
from tests.chat_support import UPLOAD_QUESTION, deployment, index_world

LOG = "uvicorn-chat"
pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeOpenAI]:
    with fake_openai_server() as server:
        yield server


@pytest.fixture(scope="module")
def catalog(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("chat") / "models.yaml"


@pytest.fixture(scope="module")
def base(django_db_setup: None, fake: FakeOpenAI, catalog: Path) -> Iterator[str]:
    use_catalog(catalog, {"chat": {"deployments": [deployment(fake.base_url, "answer")]}})
    env = child_env(QUARRY_MODEL_CONFIG_PATH=str(catalog), QUARRY_LOG_LEVEL="DEBUG")
    with asgi_server(env, log_name=LOG) as url:
        yield url


@pytest.fixture(autouse=True)
def reset_fake(fake: FakeOpenAI) -> None:
    fake.chat_reply = "The fake model answers from the passages [1]."
    fake.chat_reasoning = None
    fake.chat_failures = {}
    fake.chat_chunk_delay = 0.0
    fake.chat_break_after = None


_version = iter(range(1, 1_000_000))


def use_catalog(path: Path, models: dict[str, Any]) -> None:
    """Replace the catalog; a new mtime makes the server build a new Router (fresh cooldowns too)."""
    path.write_text(json.dumps({"default_model": "chat", "router": {"num_retries": 0}, "models": models}))
    stamp = time.time_ns() + next(_version) * 1_000_000
    os.utime(path, ns=(stamp, stamp))


def auth(world: World, user: Any) -> dict[str, str]:
    tenant = world.globex if user == world.outsider else world.acme
    return {"Authorization": f"Bearer {make_token(tenant, user)}"}


def start_session(base: str, headers: dict[str, str]) -> str:
    response = httpx.post(f"{base}/v1/chat/sessions", json={}, headers=headers)
    assert response.status_code == 201, response.text
    return response.json()["session_id"]


def read_events(response: httpx.Response) -> Iterator[tuple[str, dict[str, Any]]]:
    """Parse ``event: <name>\\ndata: <json>\\n\\n`` frames as they arrive."""
    name: str | None = None
    data: list[str] = []
    for line in response.iter_lines():
        if line.startswith("event: "):
            name = line[len("event: "):]
        elif line.startswith("data: "):
            data.append(line[len("data: "):])
        elif line == "" and name is not None:
            yield name, json.loads("\n".join(data))
            name, data = None, []


def stream(base: str, headers: dict[str, str], **body: Any) -> tuple[httpx.Response, list[tuple[str, dict[str, Any]]]]:
    with httpx.stream("POST", f"{base}/v1/chat/completions", json={**body, "stream": True}, headers=headers, timeout=30) as response:
        if response.status_code == 200:
            events = list(read_events(response))
        else:
            events = []
            response.read()
    return response, events


def turns_of(session_id: str) -> list[tuple[str, str]]:
    connections.close_all()  # the server wrote them in its own transactions
    return list(Turn.objects.filter(session__public_id=session_id).order_by("id").values_list("role", "content"))


def test_stream_sends_the_exact_event_sequence(world: World, base: str, fake: FakeOpenAI) -> None:
    index_world(world)
    headers = auth(world, world.teammate)
    session_id = start_session(base, headers)
    fake.chat_reasoning = "Passage 1 covers uploads."
    fake.chat_reply = "Editors upload in the admin, says koala-6620 [1]."
    response, events = stream(base, headers, session_id=session_id, prompt=f"{UPLOAD_QUESTION} (kiwi-2207)")

    assert response.status_code == 200
    assert response.headers["content-type"] == "text/event-stream; charset=utf-8"
    assert response.headers["cache-control"] == "no-store"
    names = [name for name, _ in events]
    # HarborRAG's order: the context first, then the model's frames, then completed.
    assert names == ["citations", "reasoning_delta"] + ["text_delta"] * 8 + ["usage", "completed"]
    context = events[0][1]
    assert set(context) == {"session_id", "citations"} and context["session_id"] == session_id
    assert [c["chunk_id"] for c in context["citations"]][0] == "guide:0"  # passage 1, as the model saw it
    assert events[1][1] == {"text": "Passage 1 covers uploads."}
    text = "".join(data["text"] for name, data in events if name == "text_delta")
    assert text == "Editors upload in the admin, says koala-6620 [1]."
    usage, completed = events[-2][1], events[-1][1]
    assert usage["completion_tokens"] == 8 and usage["total_tokens"] == usage["prompt_tokens"] + 8
    assert set(completed) == {"id", "model", "provider", "provider_model", "message", "finish_reason", "usage", "retry_count",
                              "fallback_count", "session_id", "citations", "also_retrieved", "turn_id", "prompt_turn_id"}
    assert completed["message"] == {"role": "assistant", "content": text}
    assert Turn.objects.get(pk=completed["turn_id"]).parent_id == completed["prompt_turn_id"]
    assert (completed["model"], completed["provider"], completed["provider_model"]) == ("chat", "openai", "answer")
    assert completed["usage"] == usage and completed["citations"] == context["citations"][:1]
    assert completed["also_retrieved"] == context["citations"][1:]
    assert (completed["retry_count"], completed["fallback_count"], completed["finish_reason"]) == (0, 0, "stop")
    assert turns_of(session_id) == [("user", f"{UPLOAD_QUESTION} (kiwi-2207)"), ("assistant", text)]

    log = read_log(LOG)
    assert "chat answered in tenant acme" in log
    for marker in ("kiwi-2207", "koala-6620", "Passage 1 covers uploads", "Editors upload files in the admin"):
        assert marker not in log


def test_the_context_comes_first_and_completed_renumbers_what_the_answer_cites(world: World, base: str, fake: FakeOpenAI) -> None:
    """The stream's text keeps the model's numbers (the first event's); the stored answer, ``message``
    and ``citations`` of ``completed`` are renumbered by first use, the rest is ``also_retrieved``."""
    index_world(world)
    headers = auth(world, world.teammate)
    session_id = start_session(base, headers)
    fake.chat_reply = "Search compares embeddings [2]. Uploads happen in the admin [1][2]."
    _, events = stream(base, headers, session_id=session_id, prompt="How do editors upload files, and how does keyword search rank?")
    assert events[0][0] == "citations" and [name for name, _ in events][-1] == "completed"
    context = events[0][1]["citations"]
    assert len(context) >= 2
    streamed = "".join(data["text"] for name, data in events if name == "text_delta")
    assert streamed == "Search compares embeddings [2]. Uploads happen in the admin [1][2]."
    completed = events[-1][1]
    assert completed["message"]["content"] == "Search compares embeddings [1]. Uploads happen in the admin [2][1]."
    assert completed["citations"] == [context[1], context[0]] and completed["also_retrieved"] == context[2:]
    assert turns_of(session_id)[-1] == ("assistant", completed["message"]["content"])


def test_a_model_that_fails_is_one_terminal_error_frame(world: World, base: str, fake: FakeOpenAI, catalog: Path) -> None:
    use_catalog(catalog, {"chat": {"deployments": [deployment(fake.base_url, "down")]}})
    fake.chat_failures = {"down": FAIL_ALWAYS}
    headers = auth(world, world.teammate)
    session_id = start_session(base, headers)
    response, events = stream(base, headers, session_id=session_id, prompt="anything at all")
    assert response.status_code == 200
    assert events == [
        ("citations", {"session_id": session_id, "citations": []}),  # nothing indexed: an empty context
        ("error", {"error": "model_unavailable", "detail": "The chat model is unreachable. Try again shortly."}),
    ]
    assert turns_of(session_id) == []
    assert "fake upstream failure" not in read_log(LOG)


def test_a_stream_that_breaks_midway_ends_with_an_error_frame(world: World, base: str, fake: FakeOpenAI, catalog: Path) -> None:
    use_catalog(catalog, {"chat": {"deployments": [deployment(fake.base_url, "brittle")]}})
    fake.chat_break_after = 3
    headers = auth(world, world.teammate)
    session_id = start_session(base, headers)
    _, events = stream(base, headers, session_id=session_id, prompt="anything at all")
    assert [name for name, _ in events] == ["citations", "text_delta", "text_delta", "text_delta", "error"]
    assert events[-1][1]["error"] == "model_unavailable"
    assert turns_of(session_id) == []


def test_a_client_that_disconnects_stops_the_generation(world: World, base: str, fake: FakeOpenAI, catalog: Path) -> None:
    use_catalog(catalog, {"chat": {"deployments": [deployment(fake.base_url, "slow")]}})
    fake.chat_reply = " ".join(f"word{i}" for i in range(200))
    fake.chat_chunk_delay = 0.05  # ten seconds for the whole answer
    headers = auth(world, world.teammate)
    session_id = start_session(base, headers)
    completed_before = fake.streams_completed
    started = time.monotonic()
    with httpx.stream("POST", f"{base}/v1/chat/completions", json={"session_id": session_id, "prompt": "talk", "stream": True},
                      headers=headers, timeout=30) as response:
        for name, _ in read_events(response):
            if name == "text_delta":
                break  # leaving the block closes the connection
    wait_for(lambda: fake.streams_aborted >= 1, timeout=8, what="the provider stream to be closed")
    assert time.monotonic() - started < 8 and fake.streams_completed == completed_before
    assert turns_of(session_id) == []
    wait_for(lambda: "chat answer cancelled" in read_log(LOG), timeout=5, what="the cancellation to be logged")


def test_outsider_gets_a_json_404_before_any_stream(world: World, base: str) -> None:
    session_id = start_session(base, auth(world, world.teammate))
    response, events = stream(base, auth(world, world.outsider), session_id=session_id, prompt="hello")
    assert response.status_code == 404 and events == []
    assert response.headers["content-type"] == "application/json"
    assert response.json() == {"error": "not_found", "detail": "Not found."}
    anonymous, _ = stream(base, {}, session_id=session_id, prompt="hello")
    assert anonymous.status_code == 401 and anonymous.json()["error"] == "not_authenticated"


def test_offline_model_end_to_end(world: World, base: str, catalog: Path) -> None:
    use_catalog(catalog, {"chat": {"deployments": [{"model": "quarry/offline-extractive"}]}})
    index_world(world)
    headers = auth(world, world.teammate)
    session_id = start_session(base, headers)
    _, events = stream(base, headers, session_id=session_id, prompt=UPLOAD_QUESTION)
    names = [name for name, _ in events]
    assert names[0] == "citations" and names[-2:] == ["usage", "completed"] and names.count("citations") == 1
    deltas = [data["text"] for name, data in events if name == "text_delta"]
    assert len(deltas) > 10  # small deltas, like a hosted model
    text = "".join(deltas)
    assert text.startswith("From the knowledge base:\n\n- \u201cEditors upload files in the admin.\u201d [1]")
    # Only the passage it quoted is cited; the search-modes passage (if retrieved) is only "also retrieved".
    completed = events[-1][1]
    assert [c["chunk_id"] for c in completed["citations"]] == ["guide:0"]
    assert "guide:0" in [c["chunk_id"] for c in events[0][1]["citations"]]
    assert "guide:0" not in [c["chunk_id"] for c in completed["also_retrieved"]]
    assert (completed["provider"], completed["provider_model"], completed["model"]) == ("quarry", "offline-extractive", "chat")
    assert completed["usage"]["completion_tokens"] > 0
    follow_up = httpx.post(f"{base}/v1/chat/completions", headers=headers,
                           json={"session_id": session_id, "prompt": "What is the capital of Peru?"}, timeout=30)
    assert follow_up.status_code == 200
    refusal = follow_up.json()
    assert refusal["message"]["content"].startswith(("I could not find an answer", "The knowledge base does not seem to answer"))
    assert refusal["citations"] == []
