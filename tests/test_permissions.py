"""Who may read what inside a tenant (issue 34): the permission matrix over every read path.

The world: in tenant acme, ``owner`` (admin), ``editor``, ``teammate`` (a reader in group payroll) and
``stranger`` (a reader outside it); ``outsider`` reads globex only. ``payroll/2026`` is restricted to
the group; ``handbook`` is the whole tenant's. Each path is asked by each principal.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from asgiref.sync import async_to_sync
from django.contrib.auth.models import User

from accounts.models import Group, Role
from knowledge import rag
from knowledge.models import Chunk, Document
from knowledge.services.access import access_principals, document_access_set
from knowledge.services.documents import document_ingest
from tests.conftest import World
from tests.factories import chunk_vectors, make_member

PAYROLL = "Payroll 2026: Zebediah Quill earns 91,500 dollars a year; the payroll run is on the 25th."
HANDBOOK = "Employee handbook: holidays are booked in the portal; the payroll calendar is in the portal too."


@dataclass
class Team:
    world: World
    stranger: User
    group: Group

    def reader(self, user: User) -> rag.Reader | None:
        """The reader as a request resolves it (admins: None, they read everything)."""
        from accounts.access import TenantContext
        from accounts.selectors import membership_role

        role = membership_role(user=user, tenant=self.world.acme)
        assert role is not None
        return rag.reader_of(TenantContext(tenant=self.world.acme, role=role, user=user))


@pytest.fixture
def team(world: World) -> Team:
    return make_team(world)


def make_team(world: World) -> Team:
    """``world`` with the stranger, the payroll group (the teammate in it) and the two documents."""
    stranger = make_member(world.acme, Role.READER, "stranger")
    group = Group.objects.create(tenant=world.acme, name="payroll")
    group.members.add(world.teammate)
    restricted = access_principals(tenant=world.acme, groups=["payroll"])
    document_ingest(tenant=world.acme, documents=[rag.RAGDocument("payroll/2026", PAYROLL, title="Payroll 2026")], actor="t",
                    access=restricted)
    document_ingest(tenant=world.acme, documents=[rag.RAGDocument("handbook", HANDBOOK, title="Handbook")], actor="t")
    return Team(world, stranger, group)


def search(team: Team, user: User, text: str, mode: str = "hybrid", **kwargs: object) -> list[str]:
    service = rag.tenant_service("acme", reader=team.reader(user))
    return [h.chunk.document_id for h in async_to_sync(service.search)(text, mode=mode, **kwargs)]


def test_restricted_document_and_its_chunks_carry_the_group(team: Team) -> None:
    principal = f"g:{team.group.pk}"
    assert Document.objects.get(external_id="payroll/2026").access == [principal]
    restricted = list(Chunk.objects.filter(document__external_id="payroll/2026").values_list("access", flat=True))
    assert restricted and all(a == [principal] for a in restricted)
    assert all(a == ["*"] for a in Chunk.objects.filter(document__external_id="handbook").values_list("access", flat=True))


@pytest.mark.parametrize("mode", ["keyword", "semantic", "hybrid"])
def test_search_every_mode_matrix(team: Team, mode: str) -> None:
    w = team.world
    assert "payroll/2026" in search(team, w.teammate, "Zebediah Quill salary payroll", mode)
    assert "payroll/2026" in search(team, w.owner, "Zebediah Quill salary payroll", mode)
    assert "payroll/2026" not in search(team, team.stranger, "Zebediah Quill salary payroll", mode)
    assert "payroll/2026" not in search(team, w.editor, "Zebediah Quill salary payroll", mode)
    # The stranger still finds what the whole tenant reads.
    assert search(team, team.stranger, "payroll calendar portal", mode)[:1] == ["handbook"]


def test_fetch_omits_unreadable_ids_like_missing_ones(team: Team) -> None:
    ids = ["payroll/2026:0", "handbook:0", "nothing:0"]
    stranger = rag.tenant_service("acme", embedder=None, reader=team.reader(team.stranger))
    member = rag.tenant_service("acme", embedder=None, reader=team.reader(team.world.teammate))
    assert [c.chunk_id for c in async_to_sync(stranger.fetch)(ids)] == ["handbook:0"]
    assert [c.chunk_id for c in async_to_sync(member.fetch)(ids)] == ["payroll/2026:0", "handbook:0"]


def test_access_change_reaches_chunks_without_reembedding(team: Team) -> None:
    payroll = Document.objects.get(external_id="payroll/2026")
    before = chunk_vectors(Chunk.objects.filter(document=payroll))
    assert None not in before
    document_access_set(documents=[payroll], principals=access_principals(tenant=team.world.acme, users=["stranger"]), actor="t")
    assert "payroll/2026" in search(team, team.stranger, "Zebediah Quill", "keyword")
    assert "payroll/2026" not in search(team, team.world.teammate, "Zebediah Quill", "keyword")
    assert chunk_vectors(Chunk.objects.filter(document=payroll)) == before


def test_reingestion_keeps_access(team: Team) -> None:
    document_ingest(tenant=team.world.acme, documents=[rag.RAGDocument("payroll/2026", PAYROLL + " Revised.")], actor="t")
    assert Document.objects.get(external_id="payroll/2026").access == [f"g:{team.group.pk}"]
    assert "payroll/2026" not in search(team, team.stranger, "Zebediah Quill", "keyword")


def test_membership_change_counts_from_the_next_request(team: Team) -> None:
    assert "payroll/2026" not in search(team, team.stranger, "Zebediah Quill", "keyword")
    team.group.members.add(team.stranger)
    assert "payroll/2026" in search(team, team.stranger, "Zebediah Quill", "keyword")
    team.group.members.remove(team.world.teammate)
    assert "payroll/2026" not in search(team, team.world.teammate, "Zebediah Quill", "keyword")


# --- REST: groups, access on ingest and PATCH, documents, search and fetch -----------------------------


def test_groups_api_is_for_admins(world: World) -> None:
    admin, editor, reader = world.client(world.owner), world.client(world.editor), world.client(world.teammate)
    assert reader.get("/v1/groups").status_code == 403
    assert editor.post("/v1/groups", {"name": "payroll"}, format="json").status_code == 403
    created = admin.post("/v1/groups", {"name": "payroll"}, format="json")
    assert created.status_code == 201 and created.json()["members"] == []
    taken = admin.post("/v1/groups", {"name": "payroll"}, format="json")
    assert taken.status_code == 400, taken.json()
    assert "already has a group 'payroll'" in taken.json()["fields"]["name"][0], taken.json()
    assert admin.post("/v1/groups", {"name": "bad name!"}, format="json").status_code == 400
    added = admin.post("/v1/groups/payroll/members", {"username": "teammate"}, format="json")
    assert added.status_code == 200 and added.json()["members"] == ["teammate"]
    stranger = admin.post("/v1/groups/payroll/members", {"username": "outsider"}, format="json")
    assert stranger.status_code == 400 and "'outsider' is not a member of tenant acme" in stranger.json()["fields"]["username"][0]
    assert editor.get("/v1/groups").json() == {"groups": [{"name": "payroll", "created_at": created.json()["created_at"]}]}
    assert admin.get("/v1/groups").json()["groups"][0]["members"] == ["teammate"]
    assert editor.delete("/v1/groups/payroll/members/teammate").status_code == 403
    assert admin.delete("/v1/groups/payroll/members/teammate").status_code == 204
    assert admin.delete("/v1/groups/payroll/members/teammate").status_code == 404
    assert world.client(world.outsider).get("/v1/groups", {"tenant": "acme"}).status_code == 404
    assert world.client(world.outsider).delete("/v1/groups/payroll", QUERY_STRING="tenant=acme").status_code == 404
    assert admin.delete("/v1/groups/payroll").status_code == 204
    assert admin.delete("/v1/groups/payroll").status_code == 404


def test_ingest_with_unknown_groups_or_users_is_a_400_naming_them(team: Team) -> None:
    body = {"documents": [{"id": "x", "text": "secret"}], "access": {"groups": ["payroll", "nope"], "users": ["ghost", "outsider"]}}
    response = team.world.client(team.world.editor).post("/v1/documents", body, format="json")
    assert response.status_code == 400
    message = response.json()["fields"]["access"][0]
    assert "unknown groups in tenant acme: nope" in message and "ghost, outsider" in message
    assert not Document.objects.filter(external_id="x").exists()
    bad = team.world.client(team.world.editor).post("/v1/documents", {**body, "access": {"roles": []}}, format="json")
    assert bad.status_code == 400 and "unknown keys roles" in bad.json()["fields"]["access"][0]


def test_document_reads_matrix(team: Team) -> None:
    w = team.world
    clients = {"owner": w.client(w.owner), "member": w.client(w.teammate), "stranger": w.client(team.stranger),
               "outsider": w.client(w.outsider), "editor": w.client(w.editor)}
    # GET one document: 404 for whoever may not read it, as for another tenant.
    expected = {"owner": 200, "member": 200, "stranger": 404, "outsider": 404, "editor": 404}
    for who, client in clients.items():
        assert client.get("/v1/documents/payroll%2F2026", {"tenant": "acme"}).status_code == expected[who], who
        listed = client.get("/v1/documents", {"tenant": "acme"})
        ids = [d["id"] for d in listed.json()["documents"]] if listed.status_code == 200 else None
        assert ids == ({"outsider": None}.get(who, ["handbook", "payroll/2026"] if expected[who] == 200 else ["handbook"])), who
        if listed.status_code == 200:
            assert listed.json()["count"] == len(ids)
    # Access is shown to those who may change it (editors and admins), not to readers.
    assert clients["owner"].get("/v1/documents/payroll%2F2026").json()["access"] == {"groups": ["payroll"], "users": []}
    assert "access" not in clients["member"].get("/v1/documents/payroll%2F2026").json()
    # An editor who may not read it may neither delete, change nor replace it.
    assert clients["editor"].delete("/v1/documents/payroll%2F2026").status_code == 404
    assert clients["editor"].patch("/v1/documents/payroll%2F2026", {"access": {}}, format="json").status_code == 404
    replaced = clients["editor"].post("/v1/documents", {"documents": [{"id": "payroll/2026", "text": "overwritten"}]}, format="json")
    assert replaced.status_code == 404
    assert Document.objects.get(external_id="payroll/2026").text == PAYROLL


def test_search_and_fetch_api_matrix(team: Team) -> None:
    w = team.world
    for user, sees in ((w.owner, True), (w.teammate, True), (team.stranger, False), (w.editor, False)):
        client = w.client(user)
        for mode in ("keyword", "semantic", "hybrid"):
            hits = client.post("/v1/search", {"query": "Zebediah Quill payroll salary", "mode": mode}, format="json").json()["hits"]
            assert any(h["document_id"] == "payroll/2026" for h in hits) is sees, (user, mode)
            assert all("Zebediah" not in h["text"] for h in hits) or sees
        fetched = client.post("/v1/chunks/fetch", {"ids": ["payroll/2026:0", "handbook:0"]}, format="json").json()["chunks"]
        assert [c["chunk_id"] for c in fetched] == (["payroll/2026:0", "handbook:0"] if sees else ["handbook:0"])
    outsider = w.client(w.outsider).post("/v1/search", {"query": "Zebediah", "tenant": "acme"}, format="json")
    assert outsider.status_code == 404


def test_patch_access_takes_effect_on_the_next_request(team: Team) -> None:
    w = team.world
    editor_view = w.client(w.owner).patch("/v1/documents/payroll%2F2026", {"access": {"users": ["stranger"]}}, format="json")
    assert editor_view.status_code == 200 and editor_view.json()["access"] == {"groups": [], "users": ["stranger"]}
    stranger, member = w.client(team.stranger), w.client(w.teammate)
    assert stranger.get("/v1/documents/payroll%2F2026").status_code == 200
    assert member.get("/v1/documents/payroll%2F2026").status_code == 404
    hits = stranger.post("/v1/search", {"query": "Zebediah Quill", "mode": "keyword"}, format="json").json()["hits"]
    assert [h["document_id"] for h in hits] == ["payroll/2026"]
    unknown = w.client(w.owner).patch("/v1/documents/payroll%2F2026", {"access": {"groups": ["board"]}}, format="json")
    assert unknown.status_code == 400 and "board" in unknown.json()["fields"]["access"][0]
    assert w.client(w.teammate).patch("/v1/documents/payroll%2F2026", {"access": {}}, format="json").status_code == 403  # readers never write
    opened = w.client(w.owner).patch("/v1/documents/payroll%2F2026", {"access": {"groups": [], "users": []}}, format="json")
    assert opened.json()["access"] == {"groups": [], "users": []}
    assert member.get("/v1/documents/payroll%2F2026").status_code == 200


def test_membership_change_via_api_counts_from_the_next_request(team: Team) -> None:
    w = team.world
    stranger = w.client(team.stranger)  # one token, before and after
    assert stranger.get("/v1/documents/payroll%2F2026").status_code == 404
    assert w.client(w.owner).post("/v1/groups/payroll/members", {"username": "stranger"}, format="json").status_code == 200
    assert stranger.get("/v1/documents/payroll%2F2026").status_code == 200
    assert w.client(w.owner).delete("/v1/groups/payroll/members/stranger").status_code == 204
    assert stranger.get("/v1/documents/payroll%2F2026").status_code == 404


def test_deleting_the_group_leaves_its_documents_to_admins(team: Team) -> None:
    w = team.world
    assert w.client(w.owner).delete("/v1/groups/payroll").status_code == 204
    assert w.client(w.teammate).get("/v1/documents/payroll%2F2026").status_code == 404
    assert w.client(w.owner).get("/v1/documents/payroll%2F2026").json()["access"]["groups"] == [f"#{team.group.pk}"]


def test_upload_with_access_is_restricted_at_once(team: Team) -> None:
    from django.core.files.uploadedfile import SimpleUploadedFile

    w = team.world
    upload = SimpleUploadedFile("board.txt", b"Board minutes: the merger with Initech is approved.", content_type="text/plain")
    response = w.client(w.editor).post("/v1/documents/upload", {"files": [upload], "access": '{"users": ["editor"]}'}, format="multipart")
    assert response.status_code == 202
    assert Document.objects.get(external_id="board.txt").access == [f"u:{w.editor.pk}"]
    assert w.client(w.teammate).get("/v1/documents/board.txt").status_code == 404
    assert w.client(w.editor).get("/v1/documents/board.txt").status_code == 200
    bad = SimpleUploadedFile("x.txt", b"x", content_type="text/plain")
    refused = w.client(w.editor).post("/v1/documents/upload", {"files": [bad], "access": '{"groups": ["nope"]}'}, format="multipart")
    assert refused.status_code == 400 and "nope" in refused.json()["fields"]["access"][0]


# --- Chat, its stream, stored conversations, the agent's tools, MCP ------------------------------------


def _ctx(team: Team, user: User) -> "TenantContext":  # noqa: F821
    from accounts.access import TenantContext
    from accounts.selectors import membership_role

    return TenantContext(tenant=team.world.acme, role=membership_role(user=user, tenant=team.world.acme), user=user)


def _chat(team: Team, user: User, prompt: str, session_id: str | None = None) -> dict[str, object]:
    client = team.world.client(user)
    if session_id is None:
        session_id = client.post("/v1/chat/sessions", {}, format="json").json()["session_id"]
    response = client.post("/v1/chat/completions", {"session_id": session_id, "prompt": prompt}, format="json")
    assert response.status_code == 200, response.content
    return response.json()


QUESTION = "How much does Zebediah Quill earn?"


def test_chat_answers_from_a_passage_only_to_who_may_read_it(team: Team) -> None:
    member = _chat(team, team.world.teammate, QUESTION)
    assert any(c["document_id"] == "payroll/2026" for c in member["citations"] + member["also_retrieved"])
    assert "91,500" in member["message"]["content"]
    for user in (team.stranger, team.world.editor):
        other = _chat(team, user, QUESTION)
        assert all(c["document_id"] != "payroll/2026" for c in other["citations"] + other["also_retrieved"])
        assert "91,500" not in other["message"]["content"] and "Zebediah" not in other["message"]["content"]


def test_the_stream_never_carries_an_unreadable_passage(team: Team) -> None:
    """The one generator behind SSE and the WebSocket: its citations event is the model's whole context."""
    from chat.models import ChatSession
    from chat.pipeline import answer_stream

    async def events(user: User, reader: rag.Reader | None) -> list[dict[str, object]]:
        session = await ChatSession.objects.select_related("tenant").acreate(
            tenant=team.world.acme, principal=f"user:{user.pk}", public_id=f"session-{user.pk}x")
        return [e async for e in answer_stream(session=session, prompt=QUESTION, reader=reader)]

    stranger = async_to_sync(events)(team.stranger, team.reader(team.stranger))
    assert [e["event"] for e in stranger][0] == "citations" and stranger[-1]["event"] == "completed"
    assert "payroll/2026" not in str(stranger) and "91,500" not in str(stranger)
    member = async_to_sync(events)(team.world.teammate, team.reader(team.world.teammate))
    assert "payroll/2026" in str(member[0]) and "91,500" in str(member)


def test_revoked_access_withholds_the_citation_in_an_existing_conversation(team: Team) -> None:
    w = team.world
    answered = _chat(team, w.teammate, QUESTION)
    session_id = answered["session_id"]
    assert any(c["document_id"] == "payroll/2026" for c in answered["citations"])
    before = w.client(w.teammate).get(f"/v1/chat/sessions/{session_id}").json()
    assert "payroll/2026" in str(before["turns"]) and "withheld" not in str(before["turns"])
    team.group.members.remove(w.teammate)  # the next request reads without the group
    after = w.client(w.teammate).get(f"/v1/chat/sessions/{session_id}").json()
    cited = [c for t in after["turns"] for c in t["citations"]]
    assert cited and all(c == {"document_id": "", "chunk_id": "", "score": 0.0, "withheld": True}
                         for c in cited if c.get("withheld")) and any(c.get("withheld") for c in cited)
    assert "payroll/2026" not in str(cited)
    # Asked again in the same conversation, the passage is no longer context.
    again = _chat(team, w.teammate, QUESTION, session_id=session_id)
    assert all(c["document_id"] != "payroll/2026" for c in again["citations"] + again["also_retrieved"])
    fetched = w.client(w.teammate).post("/v1/chunks/fetch", {"ids": ["payroll/2026:0"]}, format="json").json()["chunks"]
    assert fetched == []


def test_agent_tools_read_as_the_runs_owner(team: Team) -> None:
    from chat.agent.tools import ToolFailure, Toolbox

    async def found(user: User, name: str, arguments: dict[str, object]) -> list[str]:
        reader = await sync_to_async(rag.reader_for_principal)(tenant_id=team.world.acme.pk, principal=f"user:{user.pk}")
        box = Toolbox(tenant=team.world.acme, graph_search=False, sources=[], reader=reader)
        try:
            result = await box.find(name, arguments)
        finally:
            await box.close()
        assert not isinstance(result, ToolFailure) or "payroll" not in str(result), result
        return [] if isinstance(result, ToolFailure) else [chunk.chunk_id for chunk, _ in result.hits]

    from asgiref.sync import sync_to_async

    for tool, args in (("hybrid_search", {"query": QUESTION}), ("keyword_search", {"query": "Zebediah"}),
                       ("semantic_search", {"query": PAYROLL}), ("fetch_chunks", {"ids": ["payroll/2026:0", "handbook:0"]})):
        assert "payroll/2026:0" in async_to_sync(found)(team.world.teammate, tool, args), tool
        assert "payroll/2026:0" not in async_to_sync(found)(team.stranger, tool, args), tool
        assert "payroll/2026:0" in async_to_sync(found)(team.world.owner, tool, args), tool


def test_mcp_tools_read_as_the_tokens_owner(team: Team) -> None:
    from chat.mcp.tools import call_tool

    def ids(user: User, name: str, arguments: dict[str, object]) -> str:
        found = async_to_sync(call_tool)(_ctx(team, user), name, arguments)
        return str({k: v for k, v in found.items() if k != "missing"})  # "missing" echoes the ids asked for

    for name, args in (("hybrid_search", {"query": QUESTION}), ("keyword_search", {"query": "Zebediah"}),
                       ("vector_search", {"query": PAYROLL}), ("fetch_chunks", {"ids": ["payroll/2026:0"]}),
                       ("list_documents", {})):
        assert "payroll/2026" in ids(team.world.teammate, name, args), name
        assert "payroll/2026" not in ids(team.stranger, name, args), name
    listed = async_to_sync(call_tool)(_ctx(team, team.stranger), "list_documents", {})
    assert listed["count"] == 1


# --- The graph: an entity known only from a restricted chunk --------------------------------------------


def test_an_entity_known_only_from_a_restricted_chunk_never_appears(team: Team) -> None:
    member = rag.tenant_service("acme", reader=team.reader(team.world.teammate))
    stranger = rag.tenant_service("acme", reader=team.reader(team.stranger))
    assert async_to_sync(member.graph_neighbors)("Zebediah Quill").entity is not None
    assert async_to_sync(stranger.graph_neighbors)("Zebediah Quill").entity is None
    assert async_to_sync(stranger.graph_neighbors)("Zebediah").entity is None  # nor by prefix
    for service, sees in ((member, True), (stranger, False)):
        result = async_to_sync(service.graph_search)("Who is Zebediah Quill?", limit=8)
        shown = str([result.leg.named, result.leg.nodes, result.leg.relations, [h.graph_path for h in result.hits],
                     [h.chunk.chunk_id for h in result.hits]])
        assert ("Zebediah" in shown) is sees, shown
        triplets = async_to_sync(service.graph_triplets)("Zebediah Quill payroll", limit=10)
        assert all("payroll/2026" not in t.chunk_id for t in triplets) or sees
        picture = async_to_sync(service.graph_picture)(["payroll/2026:0", "handbook:0"], expand=True)
        assert ("payroll/2026:0" in str(picture.passages)) is sees
        assert ("Zebediah" in str(picture.entities)) is sees


# --- Commands: evaluate and export_feedback as a member ------------------------------------------------


def test_evaluate_as_a_member_searches_what_they_may_read(team: Team, tmp_path: "Path") -> None:  # noqa: F821
    import json as jsonlib

    from django.core.management import call_command

    (tmp_path / "corpus.jsonl").write_text(jsonlib.dumps({"_id": "handbook", "text": HANDBOOK}) + "\n")
    (tmp_path / "queries.jsonl").write_text(jsonlib.dumps({"_id": "q1", "text": "Zebediah Quill payroll"}) + "\n")
    (tmp_path / "qrels.tsv").write_text("query-id\tcorpus-id\tscore\nq1\tpayroll/2026\t1\n")

    def recall(*extra: str) -> float:
        from io import StringIO

        out = StringIO()
        call_command("evaluate", str(tmp_path), "--tenant", "acme", "--modes", "keyword", "--fusions", "rrf", "--json", *extra, stdout=out)
        return jsonlib.loads(out.getvalue())["modes"]["keyword"]["recall@10"]

    assert recall() == 1.0
    assert recall("--as", "teammate") == 1.0
    assert recall("--as", "stranger") == 0.0


# --- The admin: editors manage what they may read, admins all --------------------------------------------


def test_admin_lists_and_opens_only_readable_documents_for_editors(team: Team) -> None:
    from django.test import Client

    w = team.world
    User.objects.filter(pk__in=[w.owner.pk, w.editor.pk]).update(is_staff=True)
    editor, owner = Client(), Client()
    editor.force_login(User.objects.get(pk=w.editor.pk))
    owner.force_login(User.objects.get(pk=w.owner.pk))
    payroll = Document.objects.get(external_id="payroll/2026")
    listed = editor.get("/admin/knowledge/document/").content.decode()
    assert "handbook" in listed and "payroll/2026" not in listed
    assert editor.get(f"/admin/knowledge/document/{payroll.pk}/change/").status_code in (302, 403, 404)
    everything = owner.get("/admin/knowledge/document/").content.decode()
    assert "payroll/2026" in everything and "group payroll" in everything
    restricted = owner.get("/admin/knowledge/document/", {"group": str(team.group.pk)}).content.decode()
    assert "payroll/2026" in restricted and "Handbook" not in restricted
    # The bulk action: the owner opens the handbook to the editor alone, by name; an unknown name changes nothing.
    handbook = Document.objects.get(external_id="handbook")
    refused = owner.post("/admin/knowledge/document/", {"action": "set_access", "_selected_action": [handbook.pk],
                                                         "access_groups": "nobody", "access_users": ""}, follow=True)
    assert "unknown groups in tenant acme: nobody" in refused.content.decode()
    assert Document.objects.get(pk=handbook.pk).access == ["*"]
    owner.post("/admin/knowledge/document/", {"action": "set_access", "_selected_action": [handbook.pk],
                                              "access_groups": "", "access_users": "editor"})
    assert Document.objects.get(pk=handbook.pk).access == [f"u:{w.editor.pk}"]
    assert "handbook" not in search(team, team.stranger, "payroll calendar portal", "keyword")
    # The group admin: the tenant's admins only.
    assert owner.get("/admin/accounts/group/").status_code == 200
    assert editor.get("/admin/accounts/group/").status_code in (302, 403)


def test_odd_names_are_400s_or_404s_never_5xx(team: Team) -> None:
    admin = team.world.client(team.world.owner)
    assert admin.post("/v1/documents", {"documents": [{"id": "x", "text": "y"}], "access": {"groups": ["a\x00b"]}},
                      format="json").status_code == 400
    assert admin.post("/v1/documents", {"documents": [{"id": "x", "text": "y"}], "access": {"groups": "payroll"}},
                      format="json").status_code == 400
    assert admin.post("/v1/documents", {"documents": [{"id": "x", "text": "y"}], "access": [1]}, format="json").status_code == 400
    assert admin.delete("/v1/groups/payroll/members/a%00b").status_code == 404
    assert admin.delete("/v1/groups/a%00b").status_code == 404
    assert admin.post("/v1/groups", {"name": "x" * 65}, format="json").status_code == 400


def test_the_admins_upload_form_never_replaces_a_document_the_editor_may_not_read(team: Team) -> None:
    """Review of issue 34: the admin's paste and upload form refuse a restricted id for an editor outside
    its list, as the API does, and change nothing of it."""
    from django.contrib.auth.models import User
    from django.core.files.uploadedfile import SimpleUploadedFile
    from django.test import Client

    world = team.world
    User.objects.filter(pk__in=[world.editor.pk, world.owner.pk]).update(is_staff=True)
    editor = Client()
    editor.force_login(User.objects.get(pk=world.editor.pk))
    before = Document.objects.get(tenant=world.acme, external_id="payroll/2026")
    pasted = editor.post("/admin/knowledge/document/add/", {
        "tenant": world.acme.pk, "external_id": "payroll/2026", "title": "Payroll 2026", "text": "Quill earns nothing.",
        "uri": "", "metadata": "{}",
    })
    assert pasted.status_code == 200 and "taken by a document you may not read" in pasted.content.decode()
    uploaded = editor.post("/admin/knowledge/document/add/", {
        "tenant": world.acme.pk, "external_id": "payroll/2026", "title": "", "uri": "", "metadata": "{}",
        "files": SimpleUploadedFile("payroll.txt", b"Quill earns nothing."),
    })
    assert uploaded.status_code == 200 and "taken by a document you may not read" in uploaded.content.decode()
    after = Document.objects.get(pk=before.pk)
    assert (after.source_text, after.source_file, after.version, after.access) == (
        before.source_text, before.source_file, before.version, before.access)
    # A new id is the editor's to write; and the tenant's admin may replace the restricted one.
    fresh = editor.post("/admin/knowledge/document/add/", {
        "tenant": world.acme.pk, "external_id": "notes/new", "title": "New", "text": "A new note.", "uri": "", "metadata": "{}",
    })
    assert fresh.status_code == 302 and Document.objects.filter(tenant=world.acme, external_id="notes/new").exists()
    owner = Client()
    owner.force_login(User.objects.get(pk=world.owner.pk))
    replaced = owner.post("/admin/knowledge/document/add/", {
        "tenant": world.acme.pk, "external_id": "payroll/2026", "title": "Payroll 2026", "text": "Payroll, corrected.",
        "uri": "", "metadata": "{}",
    })
    assert replaced.status_code == 302
    assert Document.objects.get(pk=before.pk).source_text == "Payroll, corrected."


def test_group_admin_is_for_each_tenants_admins_only(team: Team, django_assert_max_num_queries) -> None:  # type: ignore[no-untyped-def]
    from django.test import Client

    from accounts.services import membership_set

    w = team.world
    membership_set(user=w.owner, tenant=w.globex, role=Role.EDITOR)  # an editor there: none of its groups are the owner's
    User.objects.filter(pk__in=[w.owner.pk, w.editor.pk]).update(is_staff=True)
    theirs = Group.objects.create(tenant=w.globex, name="globex-board")
    for n in range(10):
        Group.objects.create(tenant=w.acme, name=f"team-{n}").members.add(w.teammate, w.editor)
    owner, editor = Client(), Client()
    owner.force_login(User.objects.get(pk=w.owner.pk))
    editor.force_login(User.objects.get(pk=w.editor.pk))
    changelist, ours = "/admin/accounts/group/", f"/admin/accounts/group/{team.group.pk}/change/"

    # As many as the document change list's bound plus one, however many groups (27 when GroupAdmin
    # asked for the user's tenants at each permission test).
    with django_assert_max_num_queries(13):
        listed = owner.get(changelist)
    html = listed.content.decode()
    assert listed.status_code == 200 and "payroll" in html and "team-9" in html and "globex-board" not in html
    assert owner.get(f"/admin/accounts/group/{theirs.pk}/change/").status_code in (302, 403, 404)
    added = owner.get("/admin/accounts/group/add/").content.decode()
    assert f'<option value="{w.acme.pk}"' in added and f'<option value="{w.globex.pk}"' not in added
    # Moving a group to a tenant where the owner is only an editor is refused; changing its members is not.
    moved = owner.post(ours, {"tenant": w.globex.pk, "name": "payroll", "members": []})
    assert moved.status_code == 200 and Group.objects.get(pk=team.group.pk).tenant_id == w.acme.pk
    emptied = owner.post(ours, {"tenant": w.acme.pk, "name": "payroll", "members": []})
    assert emptied.status_code == 302 and not team.group.members.exists()

    # Editors: no groups at all, not even through a crafted request.
    for url in (changelist, ours, "/admin/accounts/group/add/", f"/admin/accounts/group/{team.group.pk}/delete/"):
        assert editor.get(url).status_code in (302, 403, 404), url
    refused = editor.post(ours, {"tenant": w.acme.pk, "name": "payroll", "members": [w.editor.pk]})
    assert refused.status_code in (302, 403, 404) and not team.group.members.exists()
    assert editor.post(f"/admin/accounts/group/{team.group.pk}/delete/", {"post": "yes"}).status_code in (302, 403, 404)
    assert Group.objects.filter(pk=team.group.pk).exists()
    assert "Groups" not in editor.get("/admin/").content.decode()
