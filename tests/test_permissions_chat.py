"""Chat and the agent read as the request does (issue 34): an API token's role cap, revocations, removed members.

The world of ``tests/test_permissions.py``: in tenant acme, ``owner`` (admin), ``teammate`` (a reader in group
payroll), ``stranger`` (a reader outside it); ``payroll/2026`` is restricted to the group, ``handbook`` is the
whole tenant's. An admin's token with role "reader" reads as a member: it must not get the payroll passage from
chat (JSON, SSE, regenerate), the agent (start and resume) or the stored conversation and run, while the same
admin's full token does. Chat answers with the offline model (it quotes the passages it was given); the agent's
model is tests/fake_openai.py, scripted, and each test asserts what it was sent.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from asgiref.sync import async_to_sync, sync_to_async
from django.contrib.auth.models import User

from accounts.models import Membership
from chat.retrieval import WITHHELD, unreadable_chunks, withhold_unreadable
from knowledge import rag
from knowledge.selectors import document_list
from tests.chat_support import write_catalog
from tests.fake_openai import FakeOpenAI, ToolCall, tool_calls
from tests.conftest import World
from tests.test_permissions import QUESTION, Team, make_team

SECRET = "91,500"  # only the payroll passage says it


@pytest.fixture
def team(world: World) -> Team:
    return make_team(world)


def _chat(team: Team, user: User, *, role: str | None = None, stream: bool = False, session_id: str | None = None) -> Any:
    client = team.world.client(user, role=role)
    if session_id is None:
        session_id = client.post("/v1/chat/sessions", {}, format="json").json()["session_id"]
    response = client.post("/v1/chat/completions", {"session_id": session_id, "prompt": QUESTION, "stream": stream}, format="json")
    assert response.status_code == 200, response.content
    return async_to_sync(_drain)(response) if stream else response.json()


async def _drain(response: Any) -> str:
    return b"".join([chunk async for chunk in response.streaming_content]).decode()


def _cites_payroll(body: dict[str, Any]) -> bool:
    return any(c["document_id"] == "payroll/2026" for c in body["citations"] + body["also_retrieved"])


# --- chat: the token's role cap -----------------------------------------------------------------------


def test_an_admins_reader_token_chats_as_a_member(team: Team) -> None:
    owner = team.world.owner
    full = _chat(team, owner)
    assert _cites_payroll(full) and SECRET in full["message"]["content"]
    capped = _chat(team, owner, role="reader")
    assert not _cites_payroll(capped), capped
    assert SECRET not in capped["message"]["content"] and "Zebediah" not in capped["message"]["content"]
    # The stream (SSE): its citations frame is the model's whole context.
    assert "payroll/2026" in _chat(team, owner, stream=True)
    streamed = _chat(team, owner, role="reader", stream=True)
    assert streamed.startswith("event: citations") and "event: completed" in streamed
    assert "payroll/2026" not in streamed and SECRET not in streamed


def test_an_admins_reader_token_regenerates_as_a_member_and_sees_the_citation_withheld(team: Team) -> None:
    owner = team.world.owner
    answered = _chat(team, owner)
    session_id, turn_id = answered["session_id"], answered["turn_id"]
    capped = team.world.client(owner, role="reader")
    transcript = capped.get(f"/v1/chat/sessions/{session_id}").json()
    cited = [c for t in transcript["turns"] for c in t["citations"]]
    assert any(c == WITHHELD for c in cited) and "payroll/2026" not in str(cited)
    assert "payroll/2026" in str(team.world.client(owner).get(f"/v1/chat/sessions/{session_id}").json()["turns"])
    again = capped.post(f"/v1/chat/sessions/{session_id}/turns/{turn_id}/regenerate", {}, format="json")
    assert again.status_code == 200, again.content
    assert not _cites_payroll(again.json()) and SECRET not in again.json()["message"]["content"]


# --- the agent: start, show, resume --------------------------------------------------------------------


@pytest.fixture
def agent_team(team: Team, fake: FakeOpenAI, tmp_path: Path, settings: Any) -> Team:
    settings.QUARRY_MODEL_CONFIG_PATH = write_catalog(tmp_path / "models.yaml", fake.base_url)
    return team


def _sent_tool_results(fake: FakeOpenAI) -> list[str]:
    """The tool messages of the last request the model received."""
    last = fake.received("/v1/chat/completions")[-1].json
    return [m["content"] for m in last["messages"] if m["role"] == "tool"]


def _ask_agent(team: Team, user: User, *, role: str | None = None, max_steps: int = 4, stream: bool = False) -> Any:
    client = team.world.client(user, role=role)
    session_id = client.post("/v1/agent/sessions", {}, format="json").json()["session_id"]
    response = client.post("/v1/agent/completions", {"session_id": session_id, "prompt": QUESTION, "max_steps": max_steps,
                                                     "stream": stream}, format="json")
    assert response.status_code == 200, response.content
    return (session_id, async_to_sync(_drain)(response)) if stream else response.json()


SEARCH = ToolCall("keyword_search", {"query": "Zebediah Quill payroll calendar"})


def test_an_admins_reader_token_runs_the_agent_as_a_member(agent_team: Team, fake: FakeOpenAI) -> None:
    owner = agent_team.world.owner
    fake.chat_script = [tool_calls(SEARCH), "He earns it, says [1]."]
    full = _ask_agent(agent_team, owner)
    assert [c["chunk_id"] for c in full["citations"]] == ["payroll/2026:0"]
    assert SECRET in "".join(_sent_tool_results(fake))
    fake.chat_script = [tool_calls(SEARCH), "He earns it, says [1]."]
    capped = _ask_agent(agent_team, owner, role="reader")
    sent = "".join(_sent_tool_results(fake))
    assert SECRET not in sent and "payroll/2026" not in sent and "handbook:0" in sent
    assert [c["chunk_id"] for c in capped["citations"]] == ["handbook:0"]
    # The same over SSE: no tool_result names the passage.
    fake.chat_script = [tool_calls(SEARCH), "He earns it, says [1]."]
    _, streamed = _ask_agent(agent_team, owner, role="reader", stream=True)
    assert "event: tool_result" in streamed and "payroll/2026" not in streamed and SECRET not in streamed


def _stopped_run(team: Team, fake: FakeOpenAI, user: User) -> tuple[str, str]:
    """A run of ``user`` that read the payroll passage (source 1) and the handbook (source 2), stopped at max_steps."""
    fake.chat_script = [tool_calls(SEARCH), "So far: [1] and [2]."]
    client = team.world.client(user)
    session_id = client.post("/v1/agent/sessions", {}, format="json").json()["session_id"]
    body = client.post("/v1/agent/completions", {"session_id": session_id, "prompt": QUESTION, "max_steps": 1}, format="json").json()
    assert body["stop_reason"] == "max_steps", body
    run = client.get(f"/v1/agent/runs/{body['run_id']}").json()
    assert run["steps"][0]["calls"][0]["chunk_ids"] == ["payroll/2026:0", "handbook:0"]
    return session_id, body["run_id"]


def test_a_resumed_run_after_revocation_neither_shows_nor_replays_the_passage(agent_team: Team, fake: FakeOpenAI) -> None:
    w = agent_team.world
    session_id, run_id = _stopped_run(agent_team, fake, w.teammate)
    agent_team.group.members.remove(w.teammate)  # the next request reads without the group
    client = w.client(w.teammate)
    shown = client.get(f"/v1/agent/runs/{run_id}").json()
    assert shown["steps"][0]["calls"][0]["chunk_ids"] == ["", "handbook:0"]
    assert "payroll/2026" not in json.dumps(shown)
    transcript = client.get(f"/v1/agent/sessions/{session_id}").json()
    assert "payroll/2026" not in json.dumps(transcript) and {"source": 1, **WITHHELD} in transcript["turns"][-1]["sources"]

    fake.chat_script = ["Zebediah earns it [1]; the calendar is in the portal [2]."]
    resumed = client.post(f"/v1/agent/runs/{run_id}/resume", {"session_id": session_id}, format="json")
    assert resumed.status_code == 200, resumed.content
    [replayed] = _sent_tool_results(fake)
    assert SECRET not in replayed and "payroll/2026" not in replayed
    result = json.loads(replayed)
    assert [r["chunk_id"] for r in result["results"]] == ["handbook:0"] and result["withheld"] == 1
    assert [c["chunk_id"] for c in resumed.json()["citations"]] == ["handbook:0"]  # [1] cites nothing now
    # Nor through the stored conversation the resume saved.
    assert "payroll/2026" not in json.dumps(client.get(f"/v1/agent/runs/{run_id}").json())


def test_a_resumed_run_replays_what_its_reader_still_reads(agent_team: Team, fake: FakeOpenAI) -> None:
    w = agent_team.world
    session_id, run_id = _stopped_run(agent_team, fake, w.teammate)
    fake.chat_script = ["Zebediah earns it [1]."]
    resumed = w.client(w.teammate).post(f"/v1/agent/runs/{run_id}/resume", {"session_id": session_id}, format="json")
    assert SECRET in "".join(_sent_tool_results(fake))
    assert [c["chunk_id"] for c in resumed.json()["citations"]] == ["payroll/2026:0"]


def test_an_admins_run_resumed_with_a_reader_token_replays_as_a_member(agent_team: Team, fake: FakeOpenAI) -> None:
    w = agent_team.world
    session_id, run_id = _stopped_run(agent_team, fake, w.owner)
    capped = w.client(w.owner, role="reader")
    assert capped.get(f"/v1/agent/runs/{run_id}").json()["steps"][0]["calls"][0]["chunk_ids"] == ["", "handbook:0"]
    fake.chat_script = ["Zebediah earns it [1]."]
    resumed = capped.post(f"/v1/agent/runs/{run_id}/resume", {"session_id": session_id, "stream": True}, format="json")
    streamed = async_to_sync(_drain)(resumed)
    assert "event: completed" in streamed and "payroll/2026" not in streamed
    assert SECRET not in "".join(_sent_tool_results(fake))


# --- the web chat's WebSocket: the reader of each message ---------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_the_websocket_reads_as_each_message_does(team: Team) -> None:
    from django.db import connections

    from tests.test_consumer import connected, frames_until

    async def ask(communicator: Any, session_id: str | None) -> list[dict[str, Any]]:
        await communicator.send_json_to({"type": "ask", "prompt": QUESTION, "session_id": session_id, "tenant": "acme"})
        return await frames_until(communicator)

    async def scenario() -> None:
        communicator = await connected(team.stranger)
        first = await ask(communicator, None)
        session_id = first[0]["data"]["session_id"]
        assert first[-1]["event"] == "completed" and "payroll/2026" not in str(first) and SECRET not in str(first)
        await sync_to_async(team.group.members.add)(team.stranger)  # counts from the next message on the same socket
        second = await ask(communicator, session_id)
        assert second[-1]["event"] == "completed" and "payroll/2026" in str(second[1])
        await sync_to_async(team.group.members.remove)(team.stranger)
        await communicator.send_json_to({"type": "history", "session_id": session_id, "tenant": "acme"})
        [history] = await frames_until(communicator)
        assert history["event"] == "history" and "payroll/2026" not in str(history) and "'withheld': True" in str(history)
        await communicator.disconnect()
        await sync_to_async(connections.close_all)()

    async_to_sync(scenario)()


# --- a removed member reads nothing ------------------------------------------------------------------------


def test_a_removed_members_work_reads_nothing(team: Team) -> None:
    w = team.world
    principal = f"user:{team.stranger.pk}"
    before = rag.reader_for_principal(tenant_id=w.acme.pk, principal=principal)
    assert before is not None and before.member
    Membership.objects.filter(tenant=w.acme, user=team.stranger).delete()
    gone = rag.reader_for_principal(tenant_id=w.acme.pk, principal=principal)
    assert gone == rag.Reader.nobody(team.stranger.pk) and gone.principals == []
    service = rag.tenant_service("acme", reader=gone)
    for mode in ("keyword", "semantic", "hybrid"):
        assert async_to_sync(service.search)("payroll calendar portal handbook", mode=mode) == (), mode
    assert not async_to_sync(service.graph_search)("payroll calendar portal", limit=8).hits
    assert async_to_sync(service.fetch)(["handbook:0", "payroll/2026:0"]) == ()
    assert async_to_sync(service.graph_neighbors)("Zebediah Quill").entity is None
    assert not async_to_sync(service.graph_picture)(["handbook:0"], expand=True).passages
    assert list(document_list(tenant=w.acme, reader=gone)) == []
    assert unreadable_chunks(tenant_id=w.acme.pk, chunk_ids=["handbook:0", "nothing:0"], reader=gone) == {"handbook:0"}
    shown = withhold_unreadable({"turns": [{"citations": [{"document_id": "handbook", "chunk_id": "handbook:0", "score": 1.0}]}]},
                                tenant_id=w.acme.pk, reader=gone)
    assert shown["turns"][0]["citations"] == [WITHHELD]
    # A member of another tenant only is no member here either; a superuser still reads everything.
    assert rag.reader_for_principal(tenant_id=w.acme.pk, principal=f"user:{w.outsider.pk}") == rag.Reader.nobody(w.outsider.pk)
    User.objects.filter(pk=w.outsider.pk).update(is_superuser=True)
    assert rag.reader_for_principal(tenant_id=w.acme.pk, principal=f"user:{w.outsider.pk}") is None
    # What the whole tenant reads stays readable for a member, and an anonymous reader (no auth mode).
    assert async_to_sync(rag.tenant_service("acme", reader=rag.Reader(None)).fetch)(["handbook:0"])


def test_a_reader_who_is_no_member_belongs_to_no_group() -> None:
    with pytest.raises(rag.RAGTypeError, match="no group"):
        rag.Reader(3, (1,), member=False)
    with pytest.raises(rag.RAGTypeError, match="member must be a bool"):
        rag.Reader(3, (), member=1)  # type: ignore[arg-type]
    assert rag.Reader(3, (2,)).principals == ["*", "u:3", "g:2"]
