"""Reading back conversations over the API: list, read, rename and delete sessions; read agent runs."""

from __future__ import annotations

from typing import Any

from chat.models import AgentRun, ChatSession, Feedback, SessionKind, Turn
from chat.services import chat_exchange_record, chat_session_create
from tests.conftest import World
from tests.fake_openai import FakeOpenAI, ToolCall, tool_calls
from tests.test_agent import ask
from tests.test_agent import new_session as new_agent_session

CITATION = {"document_id": "guide", "chunk_id": "guide:0", "score": 0.5}


def chat_with_answer(world: World, user: Any, prompt: str = "How do uploads work?", *, title: str = "") -> ChatSession:
    session = chat_session_create(tenant=world.acme, principal=f"user:{user.pk}")
    chat_exchange_record(session=session, prompt=prompt, answer="Editors upload files [1].", citations=[CITATION],
                         usage={"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}, model="quarry/offline-extractive")
    if title:
        ChatSession.objects.filter(pk=session.pk).update(title=title)
    return session


def test_the_list_is_the_callers_own_sessions_of_that_kind_newest_first(world: World) -> None:
    older = chat_with_answer(world, world.teammate, "First question?")
    newer = chat_with_answer(world, world.teammate, "Second question?", title="Named")
    chat_with_answer(world, world.editor)  # a colleague's
    chat_session_create(tenant=world.acme, principal=f"user:{world.teammate.pk}", kind=SessionKind.AGENT)
    body = world.client(world.teammate).get("/v1/chat/sessions").json()
    assert body["count"] == 2 and body["next"] is None and body["previous"] is None
    assert [s["session_id"] for s in body["sessions"]] == [newer.public_id, older.public_id]
    first = body["sessions"][0]
    assert {k: first[k] for k in ("kind", "title", "titled", "turn_count")} == {"kind": "chat", "title": "Named", "titled": True, "turn_count": 2}
    assert body["sessions"][1]["title"] == "First question?" and body["sessions"][1]["titled"] is False
    assert set(first) == {"session_id", "kind", "title", "titled", "turn_count", "created_at", "updated_at"}
    agents = world.client(world.teammate).get("/v1/agent/sessions").json()
    assert agents["count"] == 1 and agents["sessions"][0]["kind"] == "agent"


def test_the_list_is_paged(world: World) -> None:
    ids = [chat_with_answer(world, world.teammate, f"Question {n}?").public_id for n in range(5)]
    client = world.client(world.teammate)
    page = client.get("/v1/chat/sessions?limit=2&offset=2").json()
    assert page["count"] == 5 and [s["session_id"] for s in page["sessions"]] == list(reversed(ids))[2:4]
    assert page["next"].endswith("offset=4") and page["previous"].endswith("offset=0")
    for bad, field in (("limit=0", "limit"), ("limit=101", "limit"), ("offset=-1", "offset"),
                       ("offset=9223372036854775808", "offset"), ("colour=blue", "colour")):
        response = client.get(f"/v1/chat/sessions?{bad}")
        assert response.status_code == 400 and field in response.json()["fields"], (bad, response.content)


def test_a_session_reads_back_with_its_turns_and_citations(world: World) -> None:
    session = chat_with_answer(world, world.teammate)
    response = world.client(world.teammate).get(f"/v1/chat/sessions/{session.public_id}")
    assert response.status_code == 200 and response["Cache-Control"] == "no-store"
    body = response.json()
    assert (body["session_id"], body["kind"], body["title"], body["truncated"]) == (session.public_id, "chat", "How do uploads work?", False)
    user, assistant = body["turns"]
    assert (user["role"], user["content"], user["citations"]) == ("user", "How do uploads work?", [])
    assert (assistant["role"], assistant["citations"], assistant["model"]) == ("assistant", [CITATION], "quarry/offline-extractive")
    assert assistant["usage"] == {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15} and assistant["created_at"]


def test_rename_and_delete(world: World) -> None:
    session = chat_with_answer(world, world.teammate)
    client = world.client(world.teammate)
    renamed = client.patch(f"/v1/chat/sessions/{session.public_id}", {"title": "  Upload   notes "}, format="json")
    assert renamed.status_code == 200 and (renamed.json()["title"], renamed.json()["titled"]) == ("Upload notes", True)
    too_long = client.patch(f"/v1/chat/sessions/{session.public_id}", {"title": "x" * 201}, format="json")
    assert too_long.status_code == 400 and "title" in too_long.json()["fields"]
    unknown = client.patch(f"/v1/chat/sessions/{session.public_id}", {"title": "a", "principal": "user:1"}, format="json")
    assert unknown.status_code == 400 and "principal" in unknown.json()["fields"]
    assert client.delete(f"/v1/chat/sessions/{session.public_id}").status_code == 204
    assert not ChatSession.objects.filter(pk=session.pk).exists() and not Turn.objects.filter(session_id=session.pk).exists()
    gone = client.get(f"/v1/chat/sessions/{session.public_id}")
    assert gone.status_code == 404 and gone.json()["error"] == "not_found"


def test_other_principals_tenants_kinds_and_unknown_ids_are_json_404s(world: World) -> None:
    session = chat_with_answer(world, world.teammate)
    path = f"/v1/chat/sessions/{session.public_id}"
    for client in (world.client(world.editor), world.client(world.outsider)):
        for method in ("get", "patch", "delete"):
            response = getattr(client, method)(path, {"title": "mine"}, format="json")
            assert response.status_code == 404 and response.json()["error"] == "not_found", (method, response.content)
    mine = world.client(world.teammate)
    assert mine.get(f"/v1/agent/sessions/{session.public_id}").status_code == 404  # a chat session is no agent session
    assert mine.get("/v1/chat/sessions/session-doesnotexist").json()["error"] == "not_found"
    assert mine.get("/v1/agent/runs/run-doesnotexist").status_code == 404
    assert world.client().get("/v1/chat/sessions").status_code == 401
    assert ChatSession.objects.get(pk=session.pk).title == ""  # nothing was renamed


def test_an_agent_run_reads_back_with_its_steps(model_world: World, fake: FakeOpenAI) -> None:
    fake.chat_script = [tool_calls(ToolCall("keyword_search", {"query": "upload"}), ToolCall("fetch_chunks", {"ids": "not an id"})),
                        "Editors upload files in the admin [1]."]
    session_id = new_agent_session(model_world, model_world.teammate)
    answered = ask(model_world, model_world.teammate, session_id=session_id, prompt="How do editors upload files?").json()
    client = model_world.client(model_world.teammate)
    run = client.get(f"/v1/agent/runs/{answered['run_id']}").json()
    assert (run["run_id"], run["session_id"], run["status"], run["stop_reason"]) == (answered["run_id"], session_id, "completed", "completed")
    assert run["answer"] == "Editors upload files in the admin [1]." and run["citations"] == answered["citations"]
    [step] = run["steps"]
    assert [(c["tool"], c["ok"]) for c in step["calls"]] == [("keyword_search", True), ("fetch_chunks", False)]
    assert step["calls"][0]["arguments"] == {"query": "upload"} and step["calls"][0]["chunk_ids"]
    assert "error" in step["calls"][1] and run["tool_call_count"] == 2 and run["finished_at"]
    transcript = client.get(f"/v1/agent/sessions/{session_id}").json()
    assert [t["role"] for t in transcript["turns"]] == ["user", "assistant"]
    assert client.get("/v1/agent/sessions").json()["sessions"][0]["turn_count"] == 2
    other = model_world.client(model_world.editor).get(f"/v1/agent/runs/{answered['run_id']}")
    assert other.status_code == 404 and AgentRun.objects.filter(public_id=answered["run_id"]).exists()


def test_a_search_hit_shows_whole_words_around_the_whole_matched_word(world: World) -> None:
    """The sidebar's snippet (web chat's /chat/sessions?q=) starts and ends at word boundaries and holds
    the word the query matched in full, however deep in a long message it sits."""
    words = " ".join(f"filler{n:03d}" for n in range(60))  # 600 characters of ten-letter words
    session = chat_with_answer(world, world.teammate, f"{words} the quarterly Walrusreports arrive {words}")
    browser = world.client()
    browser.force_login(world.teammate)
    [hit] = browser.get("/chat/sessions", {"q": "walrusrep", "tenant": "acme"}).json()["sessions"]
    assert hit["session_id"] == session.public_id
    snippet = hit["match"]
    assert snippet.startswith("… filler") and snippet.endswith(" …")
    assert "Walrusreports" in snippet.split()  # the matched word, whole
    inner = snippet.removeprefix("… ").removesuffix(" …").split()
    assert all(len(w) == 9 for w in inner if w.startswith("filler"))  # no word cut at either end
    assert len(snippet) <= 160
    start = browser.get("/chat/sessions", {"q": "filler000", "tenant": "acme"}).json()["sessions"][0]["match"]
    assert start.startswith("filler000 filler001") and start.endswith(" …")  # the message's start: no "…" before


def test_an_agent_runs_answer_takes_feedback_like_a_chat_answer(model_world: World, fake: FakeOpenAI) -> None:
    fake.chat_script = ["Editors upload files in the admin [1]."]
    session_id = new_agent_session(model_world, model_world.teammate)
    answered = ask(model_world, model_world.teammate, session_id=session_id, prompt="How do editors upload files?").json()
    client = model_world.client(model_world.teammate)
    url = f"/v1/agent/runs/{answered['run_id']}/feedback"
    given = client.put(url, {"rating": "down", "comment": " Too short. "}, format="json")
    assert given.status_code == 200, given.content
    assert {k: given.json()[k] for k in ("run_id", "rating", "comment")} == {"run_id": answered["run_id"], "rating": "down",
                                                                              "comment": "Too short."}
    feedback = Feedback.objects.get()
    assert (feedback.run.public_id, feedback.turn, feedback.question, feedback.answer) == (
        answered["run_id"], None, "How do editors upload files?", "Editors upload files in the admin [1].")
    assert feedback.citations == answered["citations"] and feedback.retrieval["mode"] == "agent"
    # The conversation read back says which run each answer is and how it was rated.
    answer = client.get(f"/v1/agent/sessions/{session_id}").json()["turns"][1]
    assert (answer["run_id"], answer["feedback"]) == (answered["run_id"], {"rating": "down", "comment": "Too short."})
    assert client.put(url, {"rating": "sideways"}, format="json").json()["fields"].keys() == {"rating"}
    outsider = model_world.client(model_world.outsider)
    assert outsider.put(url, {"rating": "up"}, format="json").status_code == 404
    assert model_world.client(model_world.editor).delete(url).status_code == 404  # a colleague's run is not theirs
    assert client.delete(url).status_code == 204 and not Feedback.objects.exists()
    assert client.delete(url).status_code == 404
