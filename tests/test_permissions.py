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
