"""Answer actions over the API: regenerate, edit and resend, flip between versions, feedback, and
conversation search; each persisted, each another principal's 404."""

from __future__ import annotations

import itertools
import json
from typing import Any

import pytest
from asgiref.sync import async_to_sync

from chat.models import ChatSession, Feedback, Turn
from tests.conftest import World
from tests.fake_openai import FakeOpenAI
from tests.test_chat_api import complete, drain, new_session

UPLOADS = "How do editors upload files?"


@pytest.fixture
def numbered(model_world: World, fake: FakeOpenAI) -> World:
    """Every answer of the fake model is different ("Answer 1 [1].", "Answer 2 [1].", ...)."""
    counter = itertools.count(1)
    fake.chat_reply = lambda messages: f"Answer {next(counter)} [1]."
    return model_world


def turns_url(session_id: str, turn_id: int, action: str) -> str:
    return f"/v1/chat/sessions/{session_id}/turns/{turn_id}/{action}"


def transcript(world: World, user: Any, session_id: str) -> dict[str, Any]:
    response = world.client(user).get(f"/v1/chat/sessions/{session_id}")
    assert response.status_code == 200, response.content
    return response.json()


def thread(world: World, user: Any, session_id: str) -> list[str]:
    return [t["content"] for t in transcript(world, user, session_id)["turns"]]


def user_messages(fake: FakeOpenAI) -> list[list[str]]:
    """The user/assistant contents of each chat request the model received (memory, then the question)."""
    sent = []
    for request in fake.received("/v1/chat/completions"):
        messages = request.json["messages"]
        sent.append([m["content"] for m in messages if m["role"] in ("user", "assistant")])
    return sent


def test_regenerate_keeps_the_old_answer_as_a_version_and_flipping_brings_it_back(numbered: World, fake: FakeOpenAI) -> None:
    world = numbered
    session_id = new_session(world, world.teammate)
    first = complete(world, world.teammate, session_id=session_id, prompt=UPLOADS).json()
    assert first["message"]["content"] == "Answer 1 [1]."
    client = world.client(world.teammate)
    again = client.post(turns_url(session_id, first["turn_id"], "regenerate"), {}, format="json")
    assert again.status_code == 200, again.content
    body = again.json()
    assert body["message"]["content"] == "Answer 2 [1]." and body["prompt_turn_id"] == first["prompt_turn_id"]
    assert body["citations"] and body["turn_id"] != first["turn_id"]
    # One question, two answers: the new one is shown, both are listed as versions.
    shown = transcript(world, world.teammate, session_id)["turns"]
    assert [t["content"] for t in shown] == [UPLOADS, "Answer 2 [1]."]
    assert shown[1]["versions"] == [first["turn_id"], body["turn_id"]] and shown[0]["versions"] == [first["prompt_turn_id"]]
    assert Turn.objects.filter(session__public_id=session_id, role="user").count() == 1
    # The regenerated answer was made from the same question without the old answer in memory.
    assert user_messages(fake)[-1][-1].endswith(UPLOADS) and not any("Answer 1" in m for m in user_messages(fake)[-1])
    # Flip back to version 1.
    flipped = client.post(turns_url(session_id, first["turn_id"], "select"), {}, format="json")
    assert flipped.status_code == 200, flipped.content
    assert [t["content"] for t in flipped.json()["turns"]] == [UPLOADS, "Answer 1 [1]."]
    assert thread(world, world.teammate, session_id) == [UPLOADS, "Answer 1 [1]."]  # persisted
    # The next question continues from the version shown.
    complete(world, world.teammate, session_id=session_id, prompt="And then?")
    assert thread(world, world.teammate, session_id) == [UPLOADS, "Answer 1 [1].", "And then?", "Answer 3 [1]."]
    assert "Answer 1 [1]." in user_messages(fake)[-1] and "Answer 2 [1]." not in user_messages(fake)[-1]


def test_edit_and_resend_continues_from_the_edited_question_and_keeps_the_old_branch(numbered: World, fake: FakeOpenAI) -> None:
    world = numbered
    session_id = new_session(world, world.teammate)
    one = complete(world, world.teammate, session_id=session_id, prompt="What are uploads?").json()
    two = complete(world, world.teammate, session_id=session_id, prompt="Who processes them?").json()
    three = complete(world, world.teammate, session_id=session_id, prompt="How long does it take?").json()
    client = world.client(world.teammate)
    edited = client.post(turns_url(session_id, two["prompt_turn_id"], "edit"), {"prompt": "Who indexes them?"}, format="json")
    assert edited.status_code == 200, edited.content
    # The third exchange belonged to the old branch: no longer shown, not lost.
    assert thread(world, world.teammate, session_id) == ["What are uploads?", "Answer 1 [1].", "Who indexes them?", "Answer 4 [1]."]
    assert Turn.objects.filter(pk=three["turn_id"]).exists()
    memory = user_messages(fake)[-1]
    assert "Answer 1 [1]." in memory and "Answer 2 [1]." not in memory and not any("processes" in m for m in memory)
    question = transcript(world, world.teammate, session_id)["turns"][2]
    assert question["versions"] == [two["prompt_turn_id"], edited.json()["prompt_turn_id"]]
    # Selecting the old question brings back the conversation that followed it, up to its newest turn.
    old = client.post(turns_url(session_id, two["prompt_turn_id"], "select"), {}, format="json").json()
    assert [t["content"] for t in old["turns"]] == [
        "What are uploads?", "Answer 1 [1].", "Who processes them?", "Answer 2 [1].", "How long does it take?", "Answer 3 [1].",
    ]
    # Editing the first question starts the conversation over from nothing (no memory).
    restart = client.post(turns_url(session_id, one["prompt_turn_id"], "edit"), {"prompt": "What is a tenant?"}, format="json")
    assert restart.status_code == 200
    assert thread(world, world.teammate, session_id) == ["What is a tenant?", "Answer 5 [1]."]
    assert user_messages(fake)[-1] == [user_messages(fake)[-1][-1]]  # the question alone
    assert ChatSession.objects.get(public_id=session_id).title == ""  # the title stays derived


def test_regenerate_and_edit_stream_like_completions(numbered: World) -> None:
    world = numbered
    session_id = new_session(world, world.teammate)
    first = complete(world, world.teammate, session_id=session_id, prompt=UPLOADS).json()
    client = world.client(world.teammate)
    streamed = client.post(turns_url(session_id, first["turn_id"], "regenerate"), {"stream": True}, format="json")
    assert streamed.status_code == 200 and streamed["Content-Type"].startswith("text/event-stream")
    frames = [block.split("\n", 1) for block in async_to_sync(drain)(streamed).strip().split("\n\n")]
    names = [name.removeprefix("event: ") for name, _ in frames]
    assert names[0] == "citations" and names[-1] == "completed" and "text_delta" in names
    completed = json.loads(frames[-1][1].removeprefix("data: "))
    assert Turn.objects.get(pk=completed["turn_id"]).content == "Answer 2 [1]."


def test_actions_refuse_wrong_turns_and_bad_input(numbered: World) -> None:
    world = numbered
    session_id = new_session(world, world.teammate)
    first = complete(world, world.teammate, session_id=session_id, prompt=UPLOADS).json()
    client = world.client(world.teammate)
    question, answer = first["prompt_turn_id"], first["turn_id"]
    cases = [
        (turns_url(session_id, question, "regenerate"), {}, "turn_id"),  # a question cannot be regenerated
        (turns_url(session_id, answer, "edit"), {"prompt": "x"}, "turn_id"),  # an answer cannot be edited
        (turns_url(session_id, question, "edit"), {"prompt": "   "}, "prompt"),
        (turns_url(session_id, question, "edit"), {}, "prompt"),
        (turns_url(session_id, answer, "regenerate"), {"model": "gpt-4"}, "model"),
        (turns_url(session_id, answer, "regenerate"), {"stream": "yes"}, "stream"),
    ]
    for url, body, field in cases:
        response = client.post(url, body, format="json")
        assert response.status_code == 400 and field in response.json()["fields"], (url, body, response.content)
    for bad in ("abc", "0", "-1", "99999999999999999999", str(answer + 1000)):
        response = client.post(f"/v1/chat/sessions/{session_id}/turns/{bad}/regenerate", {}, format="json")
        assert response.status_code == 404 and response.json()["error"] == "not_found", bad
    assert client.post(turns_url(session_id, answer, "select")).status_code == 200  # no body at all
    for body in ([1], {"turn": 1}):
        assert client.post(turns_url(session_id, answer, "select"), body, format="json").status_code == 400, body
    assert Turn.objects.filter(session__public_id=session_id).count() == 2


def test_feedback_is_stored_with_the_citations_and_retrieval_settings(numbered: World) -> None:
    world = numbered
    session_id = new_session(world, world.teammate)
    first = complete(world, world.teammate, session_id=session_id, prompt=UPLOADS).json()
    client = world.client(world.teammate)
    url = turns_url(session_id, first["turn_id"], "feedback")
    given = client.put(url, {"rating": "down", "comment": "  Missed the worker part. "}, format="json")
    assert given.status_code == 200, given.content
    assert {k: given.json()[k] for k in ("turn_id", "rating", "comment")} == {
        "turn_id": first["turn_id"], "rating": "down", "comment": "Missed the worker part."}
    changed = client.put(url, {"rating": "up"}, format="json")
    assert changed.status_code == 200 and changed.json()["comment"] == ""
    feedback = Feedback.objects.get()
    assert (feedback.rating, feedback.question, feedback.answer, feedback.principal) == (
        "up", UPLOADS, "Answer 1 [1].", f"user:{world.teammate.pk}")
    assert feedback.tenant_id == world.acme.pk and feedback.citations == first["citations"] and feedback.citations
    assert feedback.retrieval["mode"] == "hybrid" and feedback.retrieval["top_k"] >= 1
    assert set(feedback.retrieval) == {"mode", "graph_search", "fusion", "fusion_weight", "top_k", "min_similarity", "embedding_model", "rerank"}
    answer = transcript(world, world.teammate, session_id)["turns"][1]
    assert answer["feedback"] == {"rating": "up", "comment": ""}
    too_long = client.put(url, {"rating": "up", "comment": "x" * 2001}, format="json")
    assert too_long.status_code == 400 and "comment" in too_long.json()["fields"]
    for body, field in (({"rating": "meh"}, "rating"), ({}, "rating"), ({"rating": "up", "comment": "a\x00b"}, "comment"),
                        ({"rating": "up", "comment": 5}, "comment")):
        response = client.put(url, body, format="json")
        assert response.status_code == 400 and field in response.json()["fields"], body
    on_question = client.put(turns_url(session_id, first["prompt_turn_id"], "feedback"), {"rating": "up"}, format="json")
    assert on_question.status_code == 400 and "turn_id" in on_question.json()["fields"]
    assert client.delete(url).status_code == 204 and not Feedback.objects.exists()
    assert client.delete(url).status_code == 404
    # Deleting the conversation deletes its feedback.
    client.put(url, {"rating": "up"}, format="json")
    assert client.delete(f"/v1/chat/sessions/{session_id}").status_code == 204 and not Feedback.objects.exists()


def test_other_principals_and_tenants_get_404_for_every_action(numbered: World) -> None:
    world = numbered
    session_id = new_session(world, world.teammate)
    first = complete(world, world.teammate, session_id=session_id, prompt=UPLOADS).json()
    owner_client = world.client(world.teammate)
    owner_client.put(turns_url(session_id, first["turn_id"], "feedback"), {"rating": "up"}, format="json")
    # An editor of the same tenant, an admin of the same tenant, and another tenant's admin.
    for intruder in (world.editor, world.owner, world.outsider):
        client = world.client(intruder)
        for action, method, body in (("regenerate", "post", {}), ("edit", "post", {"prompt": "Mine now?"}),
                                     ("select", "post", {}), ("feedback", "put", {"rating": "down"}), ("feedback", "delete", None)):
            turn = first["prompt_turn_id"] if action == "edit" else first["turn_id"]
            response = getattr(client, method)(turns_url(session_id, turn, action), body, format="json")
            assert response.status_code == 404 and response.json()["error"] == "not_found", (intruder, action, response.content)
    # A turn of the owner's session under the intruder's own session is 404 too.
    own = new_session(world, world.editor)
    response = world.client(world.editor).post(turns_url(own, first["turn_id"], "regenerate"), {}, format="json")
    assert response.status_code == 404
    assert Feedback.objects.get().rating == "up" and Turn.objects.filter(session__public_id=session_id).count() == 2
    assert Turn.objects.filter(session__public_id=own).count() == 0


def test_conversation_search_finds_titles_and_messages_of_the_callers_own_sessions(numbered: World) -> None:
    world = numbered
    mine = new_session(world, world.teammate)
    complete(world, world.teammate, session_id=mine, prompt="Where do the Walrus reports live?")
    named = new_session(world, world.teammate)
    complete(world, world.teammate, session_id=named, prompt=UPLOADS)
    world.client(world.teammate).patch(f"/v1/chat/sessions/{named}", {"title": "Walrus planning"}, format="json")
    other = new_session(world, world.teammate)
    complete(world, world.teammate, session_id=other, prompt="Something else entirely")
    colleague = new_session(world, world.editor)
    complete(world, world.editor, session_id=colleague, prompt="Walrus reports for the editor?")
    client = world.client(world.teammate)

    def found(query: str) -> list[str]:
        response = client.get("/v1/chat/sessions", {"q": query} if query else {})
        assert response.status_code == 200, response.content
        return [s["session_id"] for s in response.json()["sessions"]]

    assert found("walrus") == [named, mine]  # newest first; the colleague's never
    assert found("ANSWER 1") == [mine]  # the answer's text counts too
    assert found("  walrus   reports ") == [mine]
    assert found("") == [other, named, mine]  # no q: every session
    assert found("   ") == [other, named, mine]  # blank words: no filter
    assert found("nothing like this") == []
    assert world.client(world.outsider).get("/v1/chat/sessions", {"q": "walrus"}).json()["sessions"] == []
    too_long = client.get("/v1/chat/sessions", {"q": "x" * 201})
    assert too_long.status_code == 400 and "q" in too_long.json()["fields"]
    # The web chat's sidebar asks the page endpoint, as a signed-in browser.
    browser = world.client()
    browser.force_login(world.teammate)
    page = browser.get("/chat/sessions", {"q": "walrus", "tenant": "acme"})
    assert page.status_code == 200 and [s["session_id"] for s in page.json()["sessions"]] == [named, mine]
    assert page.json()["sessions"][1]["title"] == "Where do the Walrus reports live?"
    assert page.json()["sessions"][1]["match"] == "Where do the Walrus reports live?"
    assert "match" not in page.json()["sessions"][0]  # found by its title only
    assert browser.get("/chat/sessions", {"q": "x" * 201, "tenant": "acme"}).status_code == 400


def test_generated_titles_come_from_the_first_question(numbered: World) -> None:
    world = numbered
    session_id = new_session(world, world.teammate)
    long = "## " + " ".join(["Where"] + ["exactly"] * 30 + ["are uploads kept?"])
    complete(world, world.teammate, session_id=session_id, prompt=long)
    title = transcript(world, world.teammate, session_id)["title"]
    assert title.startswith("Where exactly") and title.endswith("…") and len(title) <= 80 and "#" not in title
    assert not title.removesuffix("…").endswith(" ")


def test_export_feedback_writes_a_beir_folder_that_evaluate_runs_on(numbered: World, tmp_path: Any) -> None:
    from io import StringIO

    from django.core.management import call_command
    from django.core.management.base import CommandError

    from knowledge.models import Document

    world = numbered
    client = world.client(world.teammate)
    rated = []
    for prompt, rating in ((UPLOADS, "up"), ("What does keyword search use?", "up"), ("Who processes uploads?", "down")):
        session_id = new_session(world, world.teammate)
        body = complete(world, world.teammate, session_id=session_id, prompt=prompt).json()
        assert body["citations"], prompt
        assert client.put(turns_url(session_id, body["turn_id"], "feedback"), {"rating": rating, "comment": "ok"},
                          format="json").status_code == 200
        rated.append((prompt, rating, body["citations"]))
    # Another tenant's feedback never joins acme's export.
    other = new_session(world, world.outsider)
    theirs = complete(world, world.outsider, session_id=other, prompt="Globex upload numbers?").json()
    world.client(world.outsider).put(turns_url(other, theirs["turn_id"], "feedback"), {"rating": "up"}, format="json")

    out = tmp_path / "judged"
    printed = StringIO()
    call_command("export_feedback", str(out), tenant="acme", stdout=printed)
    assert "3 judged questions (2 up, 1 down)" in printed.getvalue()
    queries = [json.loads(line) for line in (out / "queries.jsonl").read_text().splitlines()]
    assert [q["text"] for q in queries] == [p for p, _, _ in rated]
    assert [q["metadata"]["rating"] for q in queries] == ["up", "up", "down"] and queries[0]["metadata"]["retrieval"]["mode"]
    rows = [line.split("\t") for line in (out / "qrels.tsv").read_text().splitlines()]
    assert rows[0] == ["query-id", "corpus-id", "score"]
    expected = [[q["_id"], c["document_id"], "1" if r == "up" else "0"]
                for q, (_, r, cites) in zip(queries, rated) for c in {c["document_id"]: c for c in cites}.values()]
    assert rows[1:] == expected
    corpus = {r["_id"]: r for r in map(json.loads, (out / "corpus.jsonl").read_text().splitlines())}
    assert set(corpus) == {row[1] for row in rows[1:]} and set(corpus) <= {"guide", "modes"}
    assert "Globex" not in (out / "corpus.jsonl").read_text() and "Globex" not in (out / "queries.jsonl").read_text()
    assert corpus["guide"]["text"].startswith("Editors upload files")

    documents = Document.objects.filter(tenant=world.acme).count()
    report = StringIO()
    call_command("evaluate", str(out), tenant="acme", modes="keyword", fusions="rrf", json=True, stdout=report)
    result = json.loads(report.getvalue())
    keyword = result["modes"]["keyword"]
    assert keyword["queries"] == 2  # the thumbs-up questions: a thumbs-down judges its documents not relevant
    assert keyword["ndcg@10"] > 0 and keyword["recall@100"] == 1.0
    assert Document.objects.filter(tenant=world.acme).count() == documents  # the tenant's own documents, not re-ingested
    try:
        call_command("export_feedback", str(out), tenant="nope")
    except CommandError as exc:
        assert "nope" in str(exc)
    else:
        raise AssertionError("an unknown tenant must be refused")


def test_the_admin_lists_feedback_of_the_staffs_own_tenants_only(numbered: World) -> None:
    from django.contrib.auth.models import User
    from django.test import Client

    world = numbered
    session_id = new_session(world, world.teammate)
    ours = complete(world, world.teammate, session_id=session_id, prompt=UPLOADS).json()
    world.client(world.teammate).put(turns_url(session_id, ours["turn_id"], "feedback"),
                                     {"rating": "down", "comment": "Too short"}, format="json")
    other = new_session(world, world.outsider)
    theirs = complete(world, world.outsider, session_id=other, prompt="Globex board numbers?").json()
    world.client(world.outsider).put(turns_url(other, theirs["turn_id"], "feedback"), {"rating": "up", "comment": "Globex secret"},
                                     format="json")
    User.objects.filter(pk__in=[world.owner.pk, world.editor.pk, world.teammate.pk, world.outsider.pk]).update(is_staff=True)
    curator = Client()
    curator.force_login(User.objects.get(pk=world.editor.pk))
    # Feedback quotes answers drawn from documents an editor may not read (issue 34): tenant admins only.
    assert curator.get("/admin/chat/feedback/").status_code == 403
    editor = Client()  # below: the tenant's admin
    editor.force_login(User.objects.get(pk=world.owner.pk))
    listing = editor.get("/admin/chat/feedback/")
    assert listing.status_code == 200
    page = listing.content.decode()
    assert UPLOADS in page and "Too short" in page and "Globex" not in page
    mine, = Feedback.objects.filter(tenant=world.acme)
    detail = editor.get(f"/admin/chat/feedback/{mine.pk}/change/").content.decode()
    assert ours["citations"][0]["chunk_id"] in detail and "hybrid" in detail
    foreign = Feedback.objects.get(tenant=world.globex)
    assert editor.get(f"/admin/chat/feedback/{foreign.pk}/change/").status_code == 302  # "no such object"
    reader = Client()
    reader.force_login(User.objects.get(pk=world.teammate.pk))  # staff, but only a reader of acme
    assert reader.get("/admin/chat/feedback/").status_code == 403
