"""Files attached to a conversation: /v1/chat/sessions/{id}/files, the editors' pipeline (real worker
function, real embedder), retrieval with the knowledge base, bounds, clean-up, and isolation: nobody
but the conversation's owner sees the passages, through any way in."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from channels.testing import WebsocketCommunicator
from django.contrib.auth.models import User
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.utils import timezone

from accounts.access import TenantContext
from accounts.models import Role, Tenant
from chat.mcp.tools import call_tool
from chat.models import ChatSession, SessionFiles
from chat.tasks import expire_chat_files
from config.asgi import application
from knowledge.models import Chunk, Document, DocumentStatus, Entity
from knowledge.tasks import process_document
from tests.chat_support import index_world, write_catalog
from tests.conftest import World
from tests.factories import make_user

SECRET = "The Zanzibar protocol requires three purple keys and a lighthouse keeper named Ottoline."
QUESTION = "What does the Zanzibar protocol require?"


@pytest.fixture
def files_world(world: World, tmp_path: Path, settings: Any) -> World:
    """``world`` with acme's and globex's documents indexed, the offline model, and media in tmp."""
    settings.MEDIA_ROOT = tmp_path / "media"
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    settings.QUARRY_MODEL_CONFIG_PATH = write_catalog(tmp_path / "offline.yaml", "",
                                                      models={"chat": {"deployments": [{"model": "quarry/offline-extractive"}]}})
    index_world(world)
    return world


def new_session(world: World, user: User) -> str:
    response = world.client(user).post("/v1/chat/sessions", {}, format="json")
    assert response.status_code == 201, response.content
    return response.json()["session_id"]


def upload(world: World, user: User, session_id: str, *files: tuple[str, bytes, str]) -> Any:
    parts = [SimpleUploadedFile(name, data, content_type=kind) for name, data, kind in files]
    return world.client(user).post(f"/v1/chat/sessions/{session_id}/files", {"files": parts}, format="multipart")


def process_queued() -> list[str]:
    """Run the document worker's task on every queued document (as a django-q2 worker would)."""
    return [process_document(pk) for pk in Document.objects.filter(status=DocumentStatus.QUEUED).order_by("pk").values_list("pk", flat=True)]


def complete(world: World, user: User, **body: Any) -> Any:
    return world.client(user).post("/v1/chat/completions", body, format="json")


def store_of(session_id: str) -> Tenant:
    return SessionFiles.objects.select_related("store").get(session__public_id=session_id).store


@pytest.fixture
def attached(files_world: World) -> tuple[World, str, str]:
    """The teammate (a reader of acme) attached a ready text file to a conversation: (world, session, file id)."""
    session_id = new_session(files_world, files_world.teammate)
    response = upload(files_world, files_world.teammate, session_id, ("zanzibar.txt", SECRET.encode(), "text/plain"))
    assert response.status_code == 202, response.content
    file_id = response.json()["files"][0]["file_id"]
    assert process_queued() == ["ready"]
    return files_world, session_id, file_id


# --- attach, list, answer ---------------------------------------------------------------------------


def test_attach_queues_the_file_then_the_worker_indexes_it_and_the_list_shows_it(files_world: World) -> None:
    w = files_world
    session_id = new_session(w, w.teammate)
    response = upload(w, w.teammate, session_id, ("zanzibar.txt", SECRET.encode(), "text/plain"))
    assert response.status_code == 202, response.content
    assert response["Cache-Control"] == "no-store"
    (queued,) = response.json()["files"]
    assert queued["file_id"].startswith("file-") and queued["name"] == "zanzibar.txt"
    assert (queued["status"], queued["size"], queued["chunk_count"]) == ("queued", len(SECRET), 0)
    assert response.json()["limits"] == {"max_files": 10, "max_bytes": 20 * 1024 * 1024, "max_chunks": 2000}

    assert process_queued() == ["ready"]
    listed = w.client(w.teammate).get(f"/v1/chat/sessions/{session_id}/files").json()["files"]
    assert [(f["file_id"], f["status"], f["progress"], f["error"]) for f in listed] == [(queued["file_id"], "ready", 1.0, "")]
    assert listed[0]["chunk_count"] == 1
    one = w.client(w.teammate).get(f"/v1/chat/sessions/{session_id}/files/{queued['file_id']}")
    assert one.status_code == 200 and one.json()["status"] == "ready"
    # The passages live in the conversation's private store, never in the tenant.
    store = store_of(session_id)
    assert store.private_to_id == w.acme.pk
    assert Chunk.objects.filter(tenant=store).count() == 1 and not Chunk.objects.filter(tenant=w.acme, text__contains="Zanzibar").exists()


def test_the_answer_cites_the_attached_file_and_the_request_can_narrow_to_it(attached: tuple[World, str, str]) -> None:
    w, session_id, file_id = attached
    body = complete(w, w.teammate, session_id=session_id, prompt=QUESTION).json()
    assert "purple keys" in body["message"]["content"]
    assert body["citations"][0] == {"document_id": file_id, "chunk_id": f"{file_id}:0", "score": body["citations"][0]["score"],
                                    "file_id": file_id}

    # sources=files: only the files; sources=knowledge: never the files; identifier: one file.
    mixed = complete(w, w.teammate, session_id=session_id, prompt="How do editors upload files? And the Zanzibar protocol?").json()
    cited = {c["document_id"] for c in mixed["citations"] + mixed["also_retrieved"]}
    assert {"guide", file_id} <= cited
    only_files = complete(w, w.teammate, session_id=session_id, sources="files", prompt="How do editors upload files?").json()
    assert {c["document_id"] for c in only_files["citations"] + only_files["also_retrieved"]} <= {file_id}
    only_kb = complete(w, w.teammate, session_id=session_id, sources="knowledge", prompt=QUESTION).json()
    assert file_id not in {c["document_id"] for c in only_kb["citations"] + only_kb["also_retrieved"]}
    narrowed = complete(w, w.teammate, session_id=session_id, identifier=file_id, prompt=QUESTION).json()
    assert [c["document_id"] for c in narrowed["citations"]] == [file_id]


def test_an_answer_from_attached_files_says_so_and_keeps_each_stores_own_scores(attached: tuple[World, str, str]) -> None:
    """Merging the stores orders passages by RRF, but a citation's score is the one its own store's search
    gave it: the scale of an answer from the knowledge base alone (not a merged 1/61 = 0.0164)."""
    w, session_id, file_id = attached
    body = complete(w, w.teammate, session_id=session_id, prompt=QUESTION).json()
    assert body["message"]["content"].startswith("From the attached files:\n\n")
    alone = complete(w, w.teammate, session_id=session_id, sources="files", prompt=QUESTION).json()
    assert body["citations"][0]["score"] == alone["citations"][0]["score"] > 0.1
    both = "How do editors upload files? And the Zanzibar protocol?"
    mixed = complete(w, w.teammate, session_id=session_id, prompt=both).json()
    kb = complete(w, w.teammate, session_id=session_id, sources="knowledge", prompt=both).json()
    scores = {c["chunk_id"]: c["score"] for c in mixed["citations"] + mixed["also_retrieved"]}
    assert scores["guide:0"] == {c["chunk_id"]: c["score"] for c in kb["citations"] + kb["also_retrieved"]}["guide:0"]
    assert not kb["message"]["content"].startswith("From the attached files")


def test_identifier_must_name_a_file_of_this_conversation(attached: tuple[World, str, str]) -> None:
    w, session_id, file_id = attached
    other = new_session(w, w.teammate)
    response = complete(w, w.teammate, session_id=other, identifier=file_id, prompt=QUESTION)
    assert response.status_code == 400 and "identifier" in response.json()["fields"]
    response = complete(w, w.teammate, session_id=session_id, identifier=file_id, sources="knowledge", prompt=QUESTION)
    assert response.status_code == 400 and "sources knowledge searches no files" in response.json()["detail"]


def test_passages_endpoint_returns_the_conversations_own_text_only(attached: tuple[World, str, str]) -> None:
    w, session_id, file_id = attached
    response = w.client(w.teammate).post(f"/v1/chat/sessions/{session_id}/files/passages",
                                         {"ids": [f"{file_id}:0", "guide:0"]}, format="json")
    assert response.status_code == 200
    assert [(c["chunk_id"], c["file_id"]) for c in response.json()["chunks"]] == [(f"{file_id}:0", file_id)]
    assert "purple keys" in response.json()["chunks"][0]["text"]


# --- bad files and bounds ------------------------------------------------------------------------------


def test_a_file_that_fails_extraction_says_why_and_the_chat_goes_on(files_world: World) -> None:
    w = files_world
    session_id = new_session(w, w.teammate)
    assert upload(w, w.teammate, session_id, ("broken.pdf", b"%PDF-1.4 this is not really a pdf", "application/pdf")).status_code == 202
    assert process_queued() == ["failed"]
    (listed,) = w.client(w.teammate).get(f"/v1/chat/sessions/{session_id}/files").json()["files"]
    assert listed["status"] == "failed" and "broken.pdf" in listed["error"]
    answer = complete(w, w.teammate, session_id=session_id, prompt="How do editors upload files?")
    assert answer.status_code == 200 and answer.json()["citations"][0]["document_id"] == "guide"


def test_too_many_files_is_a_400_naming_the_bound(files_world: World, settings: Any) -> None:
    settings.QUARRY_CHAT_FILES_MAX_FILES = 1
    w = files_world
    session_id = new_session(w, w.teammate)
    assert upload(w, w.teammate, session_id, ("a.txt", b"first file", "text/plain")).status_code == 202
    response = upload(w, w.teammate, session_id, ("b.txt", b"second file", "text/plain"))
    assert response.status_code == 400
    assert "QUARRY_CHAT_FILES_MAX_FILES" in response.json()["detail"]
    assert Document.objects.filter(tenant=store_of(session_id)).count() == 1


def test_more_files_in_one_upload_than_a_conversation_holds_is_a_400_naming_the_setting(files_world: World) -> None:
    w = files_world
    session_id = new_session(w, w.teammate)
    response = upload(w, w.teammate, session_id, *[(f"f{n}.txt", b"a file", "text/plain") for n in range(11)])
    assert response.status_code == 400
    message = "A conversation holds at most 10 files (QUARRY_CHAT_FILES_MAX_FILES); this upload has more. Nothing was stored."
    assert response.json()["fields"] == {"files": [message]}
    assert not SessionFiles.objects.exists() and not Document.objects.filter(source_name="f0.txt").exists()


def test_bytes_over_the_conversation_bound_are_refused_and_nothing_is_stored(files_world: World, settings: Any) -> None:
    settings.QUARRY_CHAT_FILES_MAX_BYTES = 2048
    w = files_world
    session_id = new_session(w, w.teammate)
    # One file larger than any conversation may hold: refused while the body is read.
    response = upload(w, w.teammate, session_id, ("big.txt", b"x" * 5000, "text/plain"))
    assert response.status_code == 413
    assert "QUARRY_CHAT_FILES_MAX_BYTES" in response.json()["detail"]
    # Files that fit alone but not with what the conversation already holds.
    assert upload(w, w.teammate, session_id, ("a.txt", b"a" * 1500, "text/plain")).status_code == 202
    response = upload(w, w.teammate, session_id, ("b.txt", b"b" * 1000, "text/plain"))
    assert response.status_code == 413 and "QUARRY_CHAT_FILES_MAX_BYTES" in response.json()["detail"]
    assert [d.source_name for d in Document.objects.filter(tenant=store_of(session_id))] == ["a.txt"]
    stored = [p.name for p in Path(settings.MEDIA_ROOT).rglob("*") if p.is_file()]
    assert len(stored) == 1 and stored[0].endswith("a.txt")


def test_a_file_over_the_passage_bound_fails_naming_it(files_world: World, settings: Any) -> None:
    settings.QUARRY_CHAT_FILES_MAX_CHUNKS = 2
    w = files_world
    session_id = new_session(w, w.teammate)
    long_text = ("Lighthouse keepers log the weather every hour. " * 200).encode()  # ~9,600 characters: 5+ chunks
    assert upload(w, w.teammate, session_id, ("long.txt", long_text, "text/plain")).status_code == 202
    assert process_queued() == ["failed"]
    (listed,) = w.client(w.teammate).get(f"/v1/chat/sessions/{session_id}/files").json()["files"]
    assert "QUARRY_CHAT_FILES_MAX_CHUNKS" in listed["error"] and "over the limit of 2 passages" in listed["error"]
    assert not Chunk.objects.filter(tenant=store_of(session_id)).exists()


# --- delete, session delete, expiry ---------------------------------------------------------------------


def test_deleting_a_file_removes_its_passages(attached: tuple[World, str, str]) -> None:
    w, session_id, file_id = attached
    client = w.client(w.teammate)
    assert client.delete(f"/v1/chat/sessions/{session_id}/files/{file_id}").status_code == 204
    assert client.get(f"/v1/chat/sessions/{session_id}/files").json()["files"] == []
    assert not Chunk.objects.filter(tenant=store_of(session_id)).exists()
    assert client.delete(f"/v1/chat/sessions/{session_id}/files/{file_id}").status_code == 404
    body = complete(w, w.teammate, session_id=session_id, prompt=QUESTION).json()
    assert file_id not in {c["document_id"] for c in body["citations"] + body["also_retrieved"]}


def test_deleting_the_conversation_deletes_its_files_passages_and_uploads(
    attached: tuple[World, str, str], settings: Any, django_capture_on_commit_callbacks: Any,
) -> None:
    w, session_id, _ = attached
    store = store_of(session_id)
    assert [p for p in Path(settings.MEDIA_ROOT).rglob("*") if p.is_file()]
    with django_capture_on_commit_callbacks(execute=True):  # the stored uploads go when the deletion commits
        response = w.client(w.teammate).delete(f"/v1/chat/sessions/{session_id}")
    assert response.status_code == 204
    assert not [p for p in Path(settings.MEDIA_ROOT).rglob("*") if p.is_file()]
    assert not Tenant.objects.filter(pk=store.pk).exists()
    assert not Document.objects.filter(tenant_id=store.pk).exists() and not Chunk.objects.filter(tenant_id=store.pk).exists()


def test_idle_conversations_lose_their_files_on_the_scheduled_task(attached: tuple[World, str, str], settings: Any) -> None:
    w, session_id, file_id = attached
    recent = new_session(w, w.teammate)
    assert upload(w, w.teammate, recent, ("recent.txt", b"Recent notes about tide tables.", "text/plain")).status_code == 202
    process_queued()
    old = timezone.now() - timedelta(days=settings.QUARRY_CHAT_FILES_TTL_DAYS + 1)
    ChatSession.objects.filter(public_id=session_id).update(updated_at=old)
    assert expire_chat_files() == 1
    assert w.client(w.teammate).get(f"/v1/chat/sessions/{session_id}/files").json()["files"] == []
    assert ChatSession.objects.filter(public_id=session_id).exists()  # the conversation stays
    assert not SessionFiles.objects.filter(session__public_id=session_id).exists()
    assert len(w.client(w.teammate).get(f"/v1/chat/sessions/{recent}/files").json()["files"]) == 1
    assert expire_chat_files() == 0
    from django_q.models import Schedule
    assert Schedule.objects.filter(func="chat.tasks.expire_chat_files").count() == 1


# --- isolation --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("who", ["teammate_other_user", "editor", "owner", "outsider", "superuser"])
def test_nobody_else_reaches_the_session_or_its_files(attached: tuple[World, str, str], who: str) -> None:
    w, session_id, file_id = attached
    user = make_user("root", superuser=True) if who == "superuser" else getattr(w, {"teammate_other_user": "teammate"}.get(who, who))
    if who == "teammate_other_user":
        from tests.factories import make_member
        user = make_member(w.acme, Role.READER, "second-reader")
    if who == "superuser":
        client: Any = Client()
        client.force_login(user)
    else:
        client = w.client(user)
    base = f"/v1/chat/sessions/{session_id}/files"
    assert client.get(base).status_code == 404
    assert client.get(f"{base}/{file_id}").status_code == 404
    assert client.delete(f"{base}/{file_id}").status_code == 404
    assert client.post(f"{base}/passages", {"ids": [f"{file_id}:0"]}, content_type="application/json").status_code == 404
    parts = {"files": [SimpleUploadedFile("x.txt", b"intruder", content_type="text/plain")]}
    assert client.post(base, parts).status_code == 404
    assert Document.objects.filter(tenant=store_of(session_id)).count() == 1


@pytest.mark.parametrize("who", ["second_reader", "editor", "owner", "outsider"])
def test_nobody_else_sees_the_passages_through_search_fetch_documents_chat_or_agent(attached: tuple[World, str, str], who: str) -> None:
    w, _, file_id = attached
    if who == "second_reader":
        from tests.factories import make_member
        user = make_member(w.acme, Role.READER, "second-reader")
    else:
        user = getattr(w, who)
    client = w.client(user)
    for extra in ({"mode": "hybrid"}, {"mode": "keyword"}, {"mode": "semantic"}, {"mode": "hybrid", "graph_search": True}):
        response = client.post("/v1/search", {"query": QUESTION, "limit": 50, **extra}, format="json")
        assert response.status_code == 200, response.content
        hits = response.json()["hits"]
        assert hits or extra["mode"] == "keyword"  # semantic search always finds something: the check below is not vacuous
        assert all("Zanzibar" not in h["text"] and h["document_id"] != file_id for h in hits), extra
    assert client.post("/v1/chunks/fetch", {"ids": [f"{file_id}:0"]}, format="json").json()["chunks"] == []
    assert client.get(f"/v1/documents/{file_id}").status_code == 404
    listed = client.get("/v1/documents", {"limit": 100}).json()
    assert file_id not in str(listed)
    session = new_session(w, user)
    answer = complete(w, user, session_id=session, prompt=QUESTION).json()
    assert "Zanzibar" not in str(answer) and "purple" not in str(answer)
    agent_session = client.post("/v1/agent/sessions", {}, format="json").json()["session_id"]
    run = client.post("/v1/agent/completions", {"session_id": agent_session, "prompt": QUESTION}, format="json")
    assert run.status_code == 200, run.content
    assert "purple" not in str(run.json()) and file_id not in str(run.json())


def test_a_superuser_cannot_name_the_private_store_as_a_tenant(attached: tuple[World, str, str]) -> None:
    w, session_id, _ = attached
    store = store_of(session_id)
    root = make_user("root", superuser=True)
    client = Client()
    client.force_login(root)
    response = client.post(f"/v1/search?tenant={store.slug}", {"query": QUESTION}, content_type="application/json")
    assert response.status_code == 404
    assert client.get(f"/v1/documents?tenant={store.slug}").status_code == 404
    assert store.slug not in client.get("/v1/me").content.decode()


@pytest.mark.parametrize("who", ["editor", "owner", "outsider"])
def test_mcp_tools_never_return_the_passages(attached: tuple[World, str, str], who: str) -> None:
    w, _, file_id = attached
    user = getattr(w, who)
    tenant = w.globex if who == "outsider" else w.acme
    ctx = TenantContext(tenant=tenant, role=Role.ADMIN, user=user)
    for tool in ("hybrid_search", "keyword_search", "vector_search"):
        found = async_to_sync(call_tool)(ctx, tool, {"query": QUESTION, "limit": 10})
        assert "Zanzibar" not in str(found) and file_id not in str(found), tool
    fetched = async_to_sync(call_tool)(ctx, "fetch_chunks", {"ids": [f"{file_id}:0"]})
    assert "Zanzibar" not in str(fetched)
    listed = async_to_sync(call_tool)(ctx, "list_documents", {"limit": 100})
    assert file_id not in str(listed)


@pytest.mark.django_db(transaction=True)
def test_the_websocket_answers_others_without_the_passages_and_the_owner_with_them(files_world: World) -> None:
    w = files_world
    session_id = new_session(w, w.teammate)
    file_id = upload(w, w.teammate, session_id, ("zanzibar.txt", SECRET.encode(), "text/plain")).json()["files"][0]["file_id"]
    assert process_queued() == ["ready"]

    def cookie_of(user: User) -> str:
        client = Client()
        client.force_login(user)
        return client.cookies["sessionid"].value

    async def ask(cookie: str, session: str | None) -> list[dict[str, Any]]:
        communicator = WebsocketCommunicator(application, "/ws/chat/", headers=[(b"origin", b"http://localhost"),
                                                                                 (b"cookie", f"sessionid={cookie}".encode())])
        connected, _ = await communicator.connect()
        assert connected
        await communicator.send_json_to({"type": "ask", "prompt": QUESTION, "mode": "chat", "session_id": session, "tenant": "acme"})
        frames = []
        while True:
            frame = await communicator.receive_json_from(timeout=30)
            frames.append(frame)
            if frame["event"] in ("completed", "error"):
                break
        await communicator.disconnect()
        return frames

    for user in (w.editor, w.owner):
        frames = async_to_sync(ask)(cookie_of(user), None)
        assert frames[-1]["event"] == "completed" and "purple" not in str(frames) and file_id not in str(frames)
    mine = async_to_sync(ask)(cookie_of(w.teammate), session_id)
    assert mine[-1]["event"] == "completed"
    assert file_id in {c["document_id"] for c in mine[-1]["data"]["citations"]}


def test_the_openapi_schema_documents_the_files_endpoints(db: None) -> None:
    schema = Client().get("/v1/schema", {"format": "json"}).json()
    paths = schema["paths"]
    assert {"get", "post"} <= set(paths["/v1/chat/sessions/{session_id}/files"])
    assert {"get", "delete"} <= set(paths["/v1/chat/sessions/{session_id}/files/{file_id}"])
    assert "post" in paths["/v1/chat/sessions/{session_id}/files/passages"]
    completion = schema["components"]["schemas"]["ChatCompletionInputRequest"]["properties"]
    assert {"sources", "identifier"} <= set(completion)
    assert "file_id" in schema["components"]["schemas"]["ChatCitation"]["properties"]


# --- the admin: existence and size, never the text ------------------------------------------------------


@pytest.mark.parametrize("who", ["owner", "superuser"])
def test_admins_see_that_files_exist_and_their_size_but_not_their_text(attached: tuple[World, str, str], who: str) -> None:
    w, session_id, file_id = attached
    User.objects.filter(pk__in=[w.owner.pk, w.editor.pk, w.outsider.pk]).update(is_staff=True)
    user = make_user("root", superuser=True) if who == "superuser" else w.owner
    client = Client()
    client.force_login(user)
    listed = client.get("/admin/knowledge/conversationfile/")
    assert listed.status_code == 200
    page = listed.content.decode()
    assert "zanzibar.txt" in page and f"{len(SECRET)} bytes" in page and "acme" in page
    assert "purple" not in page and "Zanzibar protocol" not in page
    document = Document.objects.get(tenant=store_of(session_id), external_id=file_id)
    assert client.get(f"/admin/knowledge/conversationfile/{document.pk}/change/").status_code in (302, 403, 404)
    # The editors' document list and page never show it, nor the entity browser its names.
    assert "zanzibar" not in client.get("/admin/knowledge/document/").content.decode().lower()
    assert client.get(f"/admin/knowledge/document/{document.pk}/change/").status_code in (302, 403, 404)
    names = list(Entity.objects.filter(tenant=store_of(session_id)).values_list("name", flat=True))
    assert names  # the store has a graph of its own (for its own conversation only)
    entity_page = client.get("/admin/knowledge/entity/").content.decode()
    assert not [n for n in names if f">{n}<" in entity_page]


@pytest.mark.parametrize("who", ["editor", "outsider"])
def test_editors_and_other_tenants_admins_do_not_see_the_files_in_the_admin(attached: tuple[World, str, str], who: str) -> None:
    w, _, _ = attached
    User.objects.filter(pk__in=[w.owner.pk, w.editor.pk, w.outsider.pk]).update(is_staff=True)
    client = Client()
    client.force_login(getattr(w, who))
    response = client.get("/admin/knowledge/conversationfile/")
    assert response.status_code in (302, 403) or "zanzibar.txt" not in response.content.decode()
    assert "zanzibar" not in client.get("/admin/knowledge/document/").content.decode().lower()


# --- refused while it arrives (a real server: uvicorn + config.asgi) ------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_an_attach_over_the_byte_bound_is_refused_while_the_body_arrives(tmp_path: Path) -> None:
    import socket

    from tests.factories import make_member, make_tenant, make_token
    from tests.servers import asgi_server, child_env
    from tests.test_limits_live import MIB, _body, _host_port, _read_response

    tenant = make_tenant("streamfiles")
    token = make_token(tenant, make_member(tenant, Role.READER, "streamfiles-reader"))
    env = child_env(QUARRY_CHAT_FILES_MAX_BYTES=str(1 * MIB), QUARRY_DATA_DIR=str(tmp_path))
    with asgi_server(env, log_name="uvicorn-chat-files-limit") as base:
        import httpx

        session_id = httpx.post(f"{base}/v1/chat/sessions", headers={"Authorization": f"Bearer {token}"}, timeout=30).json()["session_id"]
        # Chunked, so no Content-Length announces the size: the edge counts the bytes as they come.
        sock = socket.create_connection(_host_port(base))
        boundary = "quarry-boundary"
        sock.sendall((
            f"POST /v1/chat/sessions/{session_id}/files HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            f"Authorization: Bearer {token}\r\nContent-Type: multipart/form-data; boundary={boundary}\r\n"
            "Transfer-Encoding: chunked\r\n\r\n"
        ).encode())
        part = (f'--{boundary}\r\nContent-Disposition: form-data; name="files"; filename="huge.txt"\r\n'
                "Content-Type: text/plain\r\n\r\n").encode()
        sock.sendall(f"{len(part):x}\r\n".encode() + part + b"\r\n")
        chunk = b"x" * (256 * 1024)
        framed = f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n"
        sent, total = 0, 64 * MIB
        import select

        while sent < total:
            readable, _, _ = select.select([sock], [], [], 0)
            if readable:
                break  # the server has answered before the body ended
            try:
                sock.sendall(framed)
            except (BrokenPipeError, ConnectionResetError):
                break
            sent += len(chunk)
        response = _read_response(sock)
        sock.close()
        assert response.startswith(b"HTTP/1.1 413"), response[:200]
        assert "QUARRY_CHAT_FILES_MAX_BYTES" in _body(response)["detail"]
        assert sent < 24 * MIB, sent  # long before the 64 MiB were sent
        # A declared length over the bound: refused before a byte of the body is sent.
        sock = socket.create_connection(_host_port(base))
        sock.sendall((
            f"POST /v1/chat/sessions/{session_id}/files HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            f"Authorization: Bearer {token}\r\nContent-Type: multipart/form-data; boundary={boundary}\r\n"
            f"Content-Length: {2 * MIB}\r\n\r\n"
        ).encode())
        declared = _read_response(sock)
        sock.close()
        assert declared.startswith(b"HTTP/1.1 413") and "QUARRY_CHAT_FILES_MAX_BYTES" in _body(declared)["detail"]
    assert not Document.objects.exists()
    assert not list(tmp_path.rglob("*huge*"))


def test_an_agent_session_lists_no_files_and_takes_none(files_world: World) -> None:
    w = files_world
    agent_session = w.client(w.teammate).post("/v1/agent/sessions", {}, format="json").json()["session_id"]
    listed = w.client(w.teammate).get(f"/v1/chat/sessions/{agent_session}/files")
    assert listed.status_code == 200 and listed.json()["files"] == []
    response = upload(w, w.teammate, agent_session, ("a.txt", b"agent notes", "text/plain"))
    assert response.status_code == 409 and "files attach to chat sessions" in response.json()["detail"]
    assert w.client(w.editor).get(f"/v1/chat/sessions/{agent_session}/files").status_code == 404
