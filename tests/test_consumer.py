"""The web chat's WebSocket (``/ws/chat/``) through the real ASGI stack with Channels'
``WebsocketCommunicator``: origin check, session-cookie auth, tenant resolution, the exact
event sequence of the answer stream, cancel, history after a reconnect.

The chat model is tests/fake_openai.py on 127.0.0.1 (the provider's network is the boundary);
retrieval is the real PostgreSQL backend with the local embedder.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from importlib import import_module
from pathlib import Path
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator
from django.conf import settings
from django.contrib.auth.models import User
from django.db import connections
from django.test import Client

from chat.models import AgentRun, ChatSession, SessionKind, Turn
from chat.services import chat_session_create
from config.asgi import application
from tests.conftest import World
from tests.fake_openai import FAIL_ALWAYS, FakeOpenAI, fake_openai_server
from tests.chat_support import UPLOAD_QUESTION, deployment, index_world, write_catalog

pytestmark = pytest.mark.django_db(transaction=True)

TERMINAL = {"completed", "error", "cancelled", "history"}
REPLY = "Editors upload in the admin, says the guide [1]."
REPLY_DELTAS = len(REPLY.split())  # the fake model streams one word per delta


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeOpenAI]:
    with fake_openai_server() as server:
        yield server


@pytest.fixture(autouse=True)
def reset_fake(fake: FakeOpenAI) -> None:
    fake.chat_reply = REPLY
    fake.chat_reasoning = None
    fake.chat_failures = {}
    fake.chat_chunk_delay = 0.0
    fake.chat_break_after = None


@pytest.fixture(autouse=True)
async def close_worker_connections() -> Any:
    """The consumer reaches the database from asgiref's shared worker thread; close what it opened
    there, or the test database cannot be flushed and dropped afterwards."""
    yield
    await sync_to_async(connections.close_all)()


@pytest.fixture
def chat_world(world: World, fake: FakeOpenAI, tmp_path: Path, settings: Any) -> World:
    index_world(world)
    settings.QUARRY_MODEL_CONFIG_PATH = write_catalog(tmp_path / "models.yaml", fake.base_url)
    return world


def session_cookie(user: User) -> str:
    client = Client()
    client.force_login(user)
    return client.cookies[settings.SESSION_COOKIE_NAME].value


def socket(cookie: str | None = None, origin: bytes = b"http://localhost") -> WebsocketCommunicator:
    headers = [(b"origin", origin)]
    if cookie is not None:
        headers.append((b"cookie", f"{settings.SESSION_COOKIE_NAME}={cookie}".encode()))
    return WebsocketCommunicator(application, "/ws/chat/", headers=headers)


async def connected(user: User) -> WebsocketCommunicator:
    communicator = socket(await sync_to_async(session_cookie)(user))
    ok, _ = await communicator.connect(timeout=10)
    assert ok
    return communicator


async def frames_until(communicator: WebsocketCommunicator, stop: set[str] = TERMINAL, timeout: float = 20) -> list[dict[str, Any]]:
    """Frames up to and including the first whose event is in ``stop``."""
    frames = []
    while True:
        frame = await communicator.receive_json_from(timeout=timeout)
        frames.append(frame)
        if frame["event"] in stop:
            return frames


def names(frames: list[dict[str, Any]]) -> list[str]:
    return [f["event"] for f in frames]


@sync_to_async
def turns_of(session_id: str) -> list[tuple[str, str]]:
    return list(Turn.objects.filter(session__public_id=session_id).order_by("id").values_list("role", "content"))


@sync_to_async
def new_session(world: World, user: User, kind: str = SessionKind.CHAT) -> str:
    return chat_session_create(tenant=world.acme, principal=f"user:{user.pk}", kind=kind).public_id


async def wait_until(predicate: Any, timeout: float = 8) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not predicate():
        assert asyncio.get_running_loop().time() < deadline, "timed out"
        await asyncio.sleep(0.05)


# --- auth ------------------------------------------------------------------------------------------


async def test_a_socket_without_a_signed_in_session_is_refused(world: World) -> None:
    for cookie in (None, "not-a-real-session-key"):
        communicator = socket(cookie)
        ok, _ = await communicator.connect(timeout=10)
        assert ok  # accepted only to say why it closes: the page then offers to sign in again
        assert await communicator.receive_json_from() == {
            "event": "error", "data": {"error": "not_authenticated", "detail": "Sign in to chat."}, "request_id": None}
        assert await communicator.receive_output() == {"type": "websocket.close", "code": 4401}


async def test_a_foreign_origin_is_refused_before_anything(world: World) -> None:
    communicator = socket(await sync_to_async(session_cookie)(world.teammate), origin=b"https://evil.example")
    ok, _ = await communicator.connect(timeout=10)
    assert not ok


async def test_signing_out_elsewhere_stops_the_open_socket(chat_world: World) -> None:
    cookie = await sync_to_async(session_cookie)(chat_world.teammate)
    communicator = socket(cookie)
    assert (await communicator.connect(timeout=10))[0]
    store = import_module(settings.SESSION_ENGINE).SessionStore(cookie)
    await sync_to_async(store.delete)()  # what logging out in another tab does
    await communicator.send_json_to({"type": "ask", "prompt": "hello", "tenant": "acme", "request_id": "q1"})
    frame = await communicator.receive_json_from()
    assert (frame["event"], frame["data"]["error"], frame["request_id"]) == ("error", "not_authenticated", "q1")
    assert await communicator.receive_output() == {"type": "websocket.close", "code": 4401}
    assert await sync_to_async(ChatSession.objects.count)() == 0


# --- asking -------------------------------------------------------------------------------------------


async def test_ask_streams_the_exact_event_sequence_then_history_restores_it(chat_world: World, fake: FakeOpenAI) -> None:
    fake.chat_reasoning = "Passage 1 covers uploads."
    communicator = await connected(chat_world.teammate)
    await communicator.send_json_to({"type": "ask", "request_id": "q1", "prompt": UPLOAD_QUESTION, "mode": "chat",
                                     "session_id": None, "tenant": "acme"})
    frames = await frames_until(communicator)
    assert names(frames) == ["session", "citations", "reasoning_delta"] + ["text_delta"] * REPLY_DELTAS + ["usage", "completed"]
    assert {f["request_id"] for f in frames} == {"q1"}
    session = frames[0]["data"]
    assert session["kind"] == "chat" and session["created"] is True and session["session_id"].startswith("session-")
    context = frames[1]["data"]  # the passages given to the model, before it writes
    assert context["session_id"] == session["session_id"]
    assert [(c["document_id"], c["chunk_id"]) for c in context["citations"]][:1] == [("guide", "guide:0")]
    assert frames[2]["data"] == {"text": "Passage 1 covers uploads."}
    assert "".join(f["data"]["text"] for f in frames if f["event"] == "text_delta") == REPLY
    completed = frames[-1]["data"]
    assert (completed["model"], completed["provider"], completed["provider_model"]) == ("chat", "openai", "answer")
    assert completed["citations"] == context["citations"][:1] and completed["usage"] == frames[-2]["data"]
    assert completed["message"]["content"] == REPLY
    citations = completed
    assert await turns_of(session["session_id"]) == [("user", UPLOAD_QUESTION), ("assistant", REPLY)]

    # The same session again: no new session, memory carries on.
    await communicator.send_json_to({"type": "ask", "request_id": "q2", "prompt": "And the workers?",
                                     "session_id": session["session_id"], "tenant": "acme"})
    again = await frames_until(communicator)
    assert again[0]["data"] == {"session_id": session["session_id"], "kind": "chat", "created": False}
    assert again[-1]["event"] == "completed"
    await communicator.disconnect()

    # A new connection (a reload, a reconnect) gets the finished turns back.
    reconnected = await connected(chat_world.teammate)
    await reconnected.send_json_to({"type": "history", "request_id": "h1", "session_id": session["session_id"], "tenant": "acme"})
    history = await reconnected.receive_json_from(timeout=10)
    assert history["event"] == "history" and history["request_id"] == "h1"
    transcript = history["data"]
    assert (transcript["session_id"], transcript["kind"], transcript["title"], transcript["truncated"]) == (
        session["session_id"], "chat", UPLOAD_QUESTION, False)
    assert [(t["role"], t["content"]) for t in transcript["turns"]] == [
        ("user", UPLOAD_QUESTION), ("assistant", REPLY), ("user", "And the workers?"), ("assistant", REPLY)]
    assert transcript["turns"][1]["citations"] == citations["citations"]
    assert transcript["turns"][1]["model"] == "openai/answer"
    await reconnected.disconnect()


async def test_a_failing_model_is_one_terminal_error_and_nothing_is_stored(chat_world: World, fake: FakeOpenAI, tmp_path: Path, settings: Any) -> None:
    settings.QUARRY_MODEL_CONFIG_PATH = write_catalog(tmp_path / "down.yaml", fake.base_url,
                                                      models={"chat": {"deployments": [deployment(fake.base_url, "down")]}})
    fake.chat_failures = {"down": FAIL_ALWAYS}
    communicator = await connected(chat_world.teammate)
    session_id = await new_session(chat_world, chat_world.teammate)
    await communicator.send_json_to({"type": "ask", "prompt": "anything at all", "session_id": session_id, "tenant": "acme"})
    frames = await frames_until(communicator)
    assert names(frames) == ["session", "citations", "error"]  # the context (empty here), then the failure
    assert frames[-1]["data"] == {"error": "model_unavailable", "detail": "The chat model is unreachable. Try again shortly."}
    assert await turns_of(session_id) == []
    await communicator.disconnect()


async def test_stop_cancels_the_generation_and_stores_nothing(chat_world: World, fake: FakeOpenAI) -> None:
    fake.chat_reply = " ".join(f"word{i}" for i in range(200))
    fake.chat_chunk_delay = 0.05  # ten seconds for the whole answer
    communicator = await connected(chat_world.teammate)
    await communicator.send_json_to({"type": "ask", "request_id": "slow", "prompt": "talk", "tenant": "acme"})
    head = await frames_until(communicator, {"text_delta"})
    session_id = head[0]["data"]["session_id"]
    aborted_before, completed_before = fake.streams_aborted, fake.streams_completed

    await communicator.send_json_to({"type": "cancel"})
    rest = await frames_until(communicator, {"cancelled", "completed"}, timeout=5)
    assert rest[-1] == {"event": "cancelled", "data": {"session_id": session_id}, "request_id": "slow"}
    assert set(names(rest[:-1])) <= {"text_delta"}
    await wait_until(lambda: fake.streams_aborted > aborted_before)
    assert fake.streams_completed == completed_before
    assert await turns_of(session_id) == []
    assert await communicator.receive_nothing(timeout=0.3)

    # The connection stays usable, and a second cancel with nothing running says nothing.
    await communicator.send_json_to({"type": "cancel"})
    assert await communicator.receive_nothing(timeout=0.3)
    fake.chat_chunk_delay, fake.chat_reply = 0.0, REPLY
    await communicator.send_json_to({"type": "ask", "prompt": UPLOAD_QUESTION, "session_id": session_id, "tenant": "acme"})
    assert names(await frames_until(communicator))[-1] == "completed"
    await communicator.disconnect()


async def test_closing_the_socket_cancels_the_generation(chat_world: World, fake: FakeOpenAI) -> None:
    fake.chat_reply = " ".join(f"word{i}" for i in range(200))
    fake.chat_chunk_delay = 0.05
    communicator = await connected(chat_world.teammate)
    await communicator.send_json_to({"type": "ask", "prompt": "talk", "tenant": "acme"})
    head = await frames_until(communicator, {"text_delta"})
    aborted_before = fake.streams_aborted
    await communicator.disconnect()
    await wait_until(lambda: fake.streams_aborted > aborted_before)
    assert await turns_of(head[0]["data"]["session_id"]) == []


async def test_one_answer_at_a_time_and_malformed_messages_get_an_error(chat_world: World, fake: FakeOpenAI) -> None:
    fake.chat_reply = " ".join(f"word{i}" for i in range(40))
    fake.chat_chunk_delay = 0.05
    communicator = await connected(chat_world.teammate)
    await communicator.send_json_to({"type": "ask", "request_id": "first", "prompt": "talk", "tenant": "acme"})
    await frames_until(communicator, {"text_delta"})
    await communicator.send_json_to({"type": "ask", "request_id": "second", "prompt": "again", "tenant": "acme"})
    busy = await frames_until(communicator, {"error"})
    assert busy[-1]["request_id"] == "second" and busy[-1]["data"]["error"] == "busy"
    assert set(names(busy[:-1])) <= {"text_delta"}
    assert names(await frames_until(communicator))[-1] == "completed"

    async def refusal(message: Any, raw: str | None = None) -> dict[str, Any]:
        if raw is not None:
            await communicator.send_to(text_data=raw)
        else:
            await communicator.send_json_to(message)
        frame = await communicator.receive_json_from(timeout=5)
        assert frame["event"] == "error"
        return frame["data"]

    assert (await refusal(None, raw="{not json"))["error"] == "invalid"
    assert (await refusal(None, raw="x" * 70_000))["error"] == "invalid"
    assert (await refusal(["a", "list"]))["error"] == "invalid"
    assert (await refusal({"type": "shout"}))["error"] == "invalid"
    assert await refusal({"type": "ask", "prompt": "   ", "tenant": "acme"}) == {"error": "invalid", "detail": "Type a question first."}
    assert (await refusal({"type": "ask", "prompt": "x" * 16_385, "tenant": "acme"}))["detail"].startswith("The question is too long")
    # A much longer prompt gets the same sentence naming the bound (not "Send one JSON object per text frame").
    await communicator.send_json_to({"type": "ask", "request_id": "long", "prompt": "x" * 100_000, "tenant": "acme"})
    long = await communicator.receive_json_from(timeout=5)
    assert long == {"event": "error", "request_id": "long",
                    "data": {"error": "invalid", "detail": "The question is too long: at most 16,384 characters."}}
    huge = await refusal({"type": "ask", "prompt": "x" * 1_100_000, "tenant": "acme"})
    assert huge["detail"] == "The message is too long (1,100,047 characters): a question is at most 16,384 characters."
    for prompt in ("a\x00b", "bell\x07", "lone \ud800 surrogate"):
        assert (await refusal({"type": "ask", "prompt": prompt, "tenant": "acme"}))["detail"].startswith("The question holds characters")
    assert not await sync_to_async(Turn.objects.filter(content__startswith="bell").exists)()
    assert (await refusal({"type": "ask", "prompt": "hi", "mode": "oracle", "tenant": "acme"}))["error"] == "invalid"
    assert (await refusal({"type": "ask", "prompt": "hi", "session_id": 42, "tenant": "acme"}))["error"] == "not_found"
    assert (await refusal({"type": "history", "session_id": "session-nope", "tenant": "acme"}))["error"] == "not_found"
    await communicator.disconnect()


async def test_agent_mode_streams_the_agents_run_and_history_shows_it(chat_world: World, tmp_path: Path, settings: Any) -> None:
    # The offline model drives the agent too: one hybrid_search with the prompt, then an extractive answer.
    settings.QUARRY_MODEL_CONFIG_PATH = write_catalog(tmp_path / "offline.yaml", "",
                                                      models={"chat": {"deployments": [{"model": "quarry/offline-extractive"}]}})
    communicator = await connected(chat_world.teammate)
    await communicator.send_json_to({"type": "ask", "request_id": "a1", "prompt": UPLOAD_QUESTION, "mode": "agent", "tenant": "acme"})
    frames = await frames_until(communicator)
    deltas = names(frames).count("text_delta")
    assert names(frames) == ["session", "run", "step", "tool_result"] + ["text_delta"] * deltas + ["citations", "usage", "completed"]
    assert deltas > 5 and {f["request_id"] for f in frames} == {"a1"}
    session_id = frames[0]["data"]["session_id"]
    assert frames[0]["data"] == {"session_id": session_id, "kind": "agent", "created": True}
    assert frames[2]["data"]["calls"][0]["tool"] == "hybrid_search"
    assert frames[3]["data"]["ok"] is True and frames[3]["data"]["chunk_ids"][0] == "guide:0"
    answer = "".join(f["data"]["text"] for f in frames if f["event"] == "text_delta")
    assert "Editors upload files in the admin." in answer
    completed = frames[-1]["data"]
    assert completed["message"]["content"] == answer and completed["stop_reason"] == "completed"
    assert [c["chunk_id"] for c in completed["citations"]] == ["guide:0"]

    # An agent session is not a chat session, and a chat session is not an agent's.
    await communicator.send_json_to({"type": "ask", "prompt": "hi", "mode": "chat", "session_id": session_id, "tenant": "acme"})
    assert (await communicator.receive_json_from(timeout=5))["data"]["error"] == "not_found"
    await communicator.send_json_to({"type": "history", "request_id": "h", "session_id": session_id, "tenant": "acme"})
    transcript = (await communicator.receive_json_from(timeout=5))["data"]
    assert (transcript["kind"], transcript["title"]) == ("agent", UPLOAD_QUESTION)
    assert [(t["role"], t["content"]) for t in transcript["turns"]] == [("user", UPLOAD_QUESTION), ("assistant", answer)]
    assert transcript["turns"][1]["citations"] == completed["citations"]
    assert transcript["turns"][1]["sources"][0] == {"source": 1, "chunk_id": "guide:0"}
    await communicator.disconnect()


async def test_stopping_the_agent_stops_its_run_without_an_answer(chat_world: World, fake: FakeOpenAI) -> None:
    fake.chat_reply = " ".join(f"word{i}" for i in range(200))  # answers at once, slowly, without tools
    fake.chat_chunk_delay = 0.05
    communicator = await connected(chat_world.teammate)
    await communicator.send_json_to({"type": "ask", "request_id": "a2", "prompt": "talk", "mode": "agent", "tenant": "acme"})
    head = await frames_until(communicator, {"text_delta"})
    assert names(head)[:2] == ["session", "run"]
    await communicator.send_json_to({"type": "cancel"})
    rest = await frames_until(communicator, {"cancelled", "completed"}, timeout=5)
    assert rest[-1]["event"] == "cancelled" and rest[-1]["request_id"] == "a2"
    run = await sync_to_async(AgentRun.objects.get)(public_id=head[1]["data"]["run_id"])
    assert (run.status, run.stop_reason, run.answer) == ("stopped", "cancelled", "")
    await communicator.disconnect()


# --- tenancy ---------------------------------------------------------------------------------------------


async def test_outsiders_and_other_principals_cannot_reach_a_session(chat_world: World) -> None:
    session_id = await new_session(chat_world, chat_world.teammate)
    cases = [
        (chat_world.outsider, None, "tenant_not_found"),     # DEFAULT: not a member (it does not even exist here)
        (chat_world.outsider, "acme", "tenant_not_found"),   # not a member of acme
        (chat_world.outsider, "globex", "not_found"),        # their tenant, someone else's session
        (chat_world.owner, "acme", "not_found"),             # same tenant, another principal
    ]
    for user, tenant, error in cases:
        communicator = await connected(user)
        for message in ({"type": "ask", "prompt": UPLOAD_QUESTION, "session_id": session_id, "tenant": tenant},
                        {"type": "history", "session_id": session_id, "tenant": tenant}):
            await communicator.send_json_to(message)
            frame = await communicator.receive_json_from(timeout=5)
            assert (frame["event"], frame["data"]["error"]) == ("error", error), (user.username, tenant, message["type"])
        await communicator.disconnect()
    assert await turns_of(session_id) == []


# --- answer actions over the socket ----------------------------------------------------------------


async def test_regenerate_edit_and_select_over_the_socket(chat_world: World, fake: FakeOpenAI) -> None:
    communicator = await connected(chat_world.teammate)
    await communicator.send_json_to({"tenant": "acme", "type": "ask", "request_id": "a1", "prompt": UPLOAD_QUESTION, "mode": "chat", "session_id": None})
    asked = await frames_until(communicator)
    session_id = asked[0]["data"]["session_id"]
    first = asked[-1]["data"]
    fake.chat_reply = "A second answer [1]."
    await communicator.send_json_to({"tenant": "acme", "type": "regenerate", "request_id": "r1", "session_id": session_id, "turn_id": first["turn_id"]})
    regenerated = await frames_until(communicator)
    assert names(regenerated)[0] == "session" and names(regenerated)[-1] == "completed"
    assert regenerated[0]["data"] == {"session_id": session_id, "kind": "chat", "created": False}
    assert {f["request_id"] for f in regenerated} == {"r1"}
    assert await turns_of(session_id) == [("user", UPLOAD_QUESTION), ("assistant", REPLY), ("assistant", "A second answer [1].")]

    await communicator.send_json_to({"tenant": "acme", "type": "select", "request_id": "s1", "session_id": session_id, "turn_id": first["turn_id"]})
    [history] = await frames_until(communicator)
    assert history["event"] == "history" and history["request_id"] == "s1"
    shown = history["data"]["turns"]
    assert [t["content"] for t in shown] == [UPLOAD_QUESTION, REPLY]
    assert shown[1]["versions"] == [first["turn_id"], regenerated[-1]["data"]["turn_id"]]

    fake.chat_reply = "Edited answer [1]."
    await communicator.send_json_to({"tenant": "acme", "type": "edit", "request_id": "e1", "session_id": session_id,
                                     "turn_id": first["prompt_turn_id"], "prompt": "Who uploads files?"})
    edited = await frames_until(communicator)
    assert names(edited)[-1] == "completed"
    await communicator.send_json_to({"tenant": "acme", "type": "history", "request_id": "h1", "session_id": session_id})
    [history] = await frames_until(communicator)
    assert [t["content"] for t in history["data"]["turns"]] == ["Who uploads files?", "Edited answer [1]."]
    await communicator.disconnect()


async def test_answer_actions_on_someone_elses_turns_are_not_found(chat_world: World) -> None:
    owner = await connected(chat_world.teammate)
    await owner.send_json_to({"tenant": "acme", "type": "ask", "request_id": "a1", "prompt": UPLOAD_QUESTION, "mode": "chat", "session_id": None})
    asked = await frames_until(owner)
    session_id, first = asked[0]["data"]["session_id"], asked[-1]["data"]
    await owner.disconnect()
    other_session = await new_session(chat_world, chat_world.editor)
    intruder = await connected(chat_world.editor)
    attempts = [
        {"type": "regenerate", "session_id": session_id, "turn_id": first["turn_id"]},
        {"type": "edit", "session_id": session_id, "turn_id": first["prompt_turn_id"], "prompt": "Mine?"},
        {"type": "select", "session_id": session_id, "turn_id": first["turn_id"]},
        # the owner's turn through the intruder's own session
        {"type": "regenerate", "session_id": other_session, "turn_id": first["turn_id"]},
        {"type": "select", "session_id": other_session, "turn_id": "1"},
    ]
    for n, attempt in enumerate(attempts):
        await intruder.send_json_to({**attempt, "tenant": "acme", "request_id": f"x{n}"})
        [frame] = await frames_until(intruder, {"error"})
        assert frame["data"]["error"] == "not_found" and frame["request_id"] == f"x{n}", attempt
    await intruder.send_json_to({"tenant": "acme", "type": "regenerate", "request_id": "q", "session_id": session_id, "turn_id": first["prompt_turn_id"]})
    assert (await frames_until(intruder, {"error"}))[0]["data"]["error"] == "not_found"  # a question is no answer to regenerate
    await intruder.disconnect()
    assert len(await turns_of(session_id)) == 2 and await turns_of(other_session) == []


@sync_to_async
def retrieval_of(session_id: str) -> list[dict[str, Any]]:
    return list(Turn.objects.filter(session__public_id=session_id, role="assistant").order_by("id").values_list("retrieval", flat=True))


async def test_retrieval_options_are_checked_as_the_api_checks_them_and_reach_the_answer(chat_world: World, fake: FakeOpenAI) -> None:
    communicator = await connected(chat_world.teammate)
    ask = {"tenant": "acme", "type": "ask", "prompt": UPLOAD_QUESTION, "mode": "chat", "session_id": None}
    await communicator.send_json_to({**ask, "request_id": "a1", "fusion": "score", "fusion_weight": 0.5})
    asked = await frames_until(communicator)
    assert names(asked)[-1] == "completed"
    session_id = asked[0]["data"]["session_id"]
    [used] = await retrieval_of(session_id)
    assert (used["mode"], used["fusion"], used["fusion_weight"], used["graph_search"]) == ("hybrid", "score", 0.5, False)

    await communicator.send_json_to({"tenant": "acme", "type": "regenerate", "request_id": "r1", "session_id": session_id,
                                     "turn_id": asked[-1]["data"]["turn_id"], "graph_search": True})
    regenerated = await frames_until(communicator)
    assert names(regenerated)[-1] == "completed"
    assert "graph_search" in regenerated[-1]["data"]  # the diagnostic of a request that asked for the graph
    again = (await retrieval_of(session_id))[1]
    assert again["graph_search"] is True and again["fusion"] in ("rrf", "score")

    refused = {
        "fusion": ({"fusion": "ranked"}, "fusion: "),
        "weight": ({"fusion": "rrf", "fusion_weight": 1.0}, "fusion_weight: fusion_weight applies to score fusion"),
        "sources": ({"sources": "everything"}, "sources: "),
        "graph": ({"graph_search": "yes"}, "graph_search: "),
        "file": ({"session_id": session_id, "identifier": "nope"}, "identifier: no file 'nope' is attached"),
        "agent": ({"mode": "agent", "sources": "files"}, "sources: an agent run takes graph_search only"),
    }
    for request_id, (options, detail) in refused.items():
        await communicator.send_json_to({**ask, **options, "request_id": request_id})
        [error] = await frames_until(communicator)
        assert error["event"] == "error" and error["request_id"] == request_id, error
        assert error["data"]["error"] == "invalid" and error["data"]["detail"].startswith(detail), error
    assert len(await retrieval_of(session_id)) == 2  # nothing refused reached the model or the store
    await communicator.disconnect()


async def test_a_browser_that_leaves_mid_answer_closes_the_stream_quietly(caplog: pytest.LogCaptureFixture) -> None:
    """The socket's send fails once the tab is gone (uvicorn raises ClientDisconnected, an OSError): the
    answer's stream is closed (so nothing is stored) and that is logged as news, not as a failure."""
    from uvicorn.protocols.utils import ClientDisconnected

    from chat.consumers import ChatConsumer

    closed: list[bool] = []

    async def answer() -> Any:
        try:
            yield {"event": "text_delta", "data": {"text": "From "}}
            yield {"event": "text_delta", "data": {"text": "the guide"}}
        finally:
            closed.append(True)

    async def gone(message: dict[str, Any]) -> None:  # the ASGI server's send: the network edge
        raise ClientDisconnected()

    consumer = ChatConsumer()
    consumer.base_send = gone
    with caplog.at_level("INFO", logger="chat.consumers"):
        await consumer._forward(answer(), "r1")
    assert closed == [True]
    assert [r.levelname for r in caplog.records] == ["INFO"] and "left during an answer" in caplog.records[0].getMessage()


async def test_questions_over_the_socket_count_against_the_users_chat_rate(chat_world: World, settings: Any) -> None:
    """One answer at a time per socket bounded nothing: a client asking as each answer ended, or over several
    sockets, was unlimited. Asks, regenerations and edits count against QUARRY_THROTTLE_CHAT, per user, and the
    refusal stores nothing."""
    settings.QUARRY_THROTTLE_RATES = {**settings.QUARRY_THROTTLE_RATES, "chat": "2/min"}
    first, second = await connected(chat_world.teammate), await connected(chat_world.teammate)
    await first.send_json_to({"tenant": "acme", "type": "ask", "request_id": "a1", "prompt": UPLOAD_QUESTION, "mode": "chat"})
    asked = await frames_until(first)
    assert names(asked)[-1] == "completed"
    session_id = asked[0]["data"]["session_id"]
    await second.send_json_to({"tenant": "acme", "type": "regenerate", "request_id": "r1", "session_id": session_id,
                               "turn_id": asked[-1]["data"]["turn_id"]})
    assert names(await frames_until(second))[-1] == "completed"
    sessions_before = await sync_to_async(ChatSession.objects.count)()
    for communicator, message in ((first, {"type": "ask", "request_id": "a2", "prompt": "And the workers?", "mode": "chat"}),
                                  (second, {"type": "edit", "request_id": "e1", "session_id": session_id,
                                            "turn_id": asked[-1]["data"]["prompt_turn_id"], "prompt": "Who uploads?"})):
        await communicator.send_json_to({"tenant": "acme", **message})
        [refused] = await frames_until(communicator)
        assert refused["event"] == "error" and refused["data"]["error"] == "throttled", refused
        assert "at most 2/min" in refused["data"]["detail"] and refused["request_id"] == message["request_id"]
    assert await sync_to_async(ChatSession.objects.count)() == sessions_before  # no conversation made for a refused ask
    assert len(await turns_of(session_id)) == 3  # the question and its two answers; nothing of the refused edit
    # Another user's budget is their own.
    other = await connected(chat_world.owner)
    await other.send_json_to({"tenant": "acme", "type": "ask", "request_id": "o1", "prompt": UPLOAD_QUESTION, "mode": "chat"})
    assert names(await frames_until(other))[-1] == "completed"
    for communicator in (first, second, other):
        await communicator.disconnect()
