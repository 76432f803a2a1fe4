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
from tests.factories import make_member

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
    before = list(Chunk.objects.filter(document=payroll).values_list("embedding", flat=True))
    document_access_set(documents=[payroll], principals=access_principals(tenant=team.world.acme, users=["stranger"]), actor="t")
    assert "payroll/2026" in search(team, team.stranger, "Zebediah Quill", "keyword")
    assert "payroll/2026" not in search(team, team.world.teammate, "Zebediah Quill", "keyword")
    assert list(Chunk.objects.filter(document=payroll).values_list("embedding", flat=True)) == before


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
