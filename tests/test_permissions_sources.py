"""Access inside a tenant for sources (issue 34): a source's default access list reaches every document it
writes, a change reaches the documents it wrote, and re-syncing keeps it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from asgiref.sync import async_to_sync

from accounts.models import Group, Role
from knowledge import rag
from knowledge.models import Chunk, Document
from knowledge.selectors import chunk_search
from knowledge.sources.connectors.base import ConfigError
from knowledge.sources.services.editing import source_create, source_update
from tests.conftest import World
from tests.factories import make_member
from tests.test_sources import process_queued, sources_under, sync


@pytest.fixture
def share(settings: Any, tmp_path: Path) -> Path:
    root = sources_under(settings, tmp_path) / "shares" / "hr"
    root.mkdir(parents=True)
    (root / "case.txt").write_text("HR case 77: a grievance about the Periwinkle project manager.\n")
    return root


def test_a_sources_access_list_reaches_its_documents_and_follows_changes(share: Path, world: World) -> None:
    # Load the embedding model first: the worker's lease heartbeat runs on a connection of its own, which
    # cannot see this test's uncommitted rows, so processing must finish before its first beat.
    async_to_sync(rag.default_embedder().embed)(["warm up"])
    group = Group.objects.create(tenant=world.acme, name="hr")
    group.members.add(world.teammate)
    stranger = make_member(world.acme, Role.READER, "stranger")
    with pytest.raises(ConfigError, match="unknown groups in tenant acme: nobody"):
        source_create(tenant=world.acme, name="HR", kind="folder", config={"path": str(share)}, actor="t", access={"groups": ["nobody"]})
    source = source_create(tenant=world.acme, name="HR", kind="folder", config={"path": str(share)}, actor="t", access={"groups": ["hr"]})
    sync(source)
    assert process_queued() == ["ready"]
    document = Document.objects.get(external_id="hr/case.txt")
    assert document.access == [f"g:{group.pk}"]
    assert all(a == [f"g:{group.pk}"] for a in Chunk.objects.filter(document=document).values_list("access", flat=True))

    def finds(user: Any) -> bool:
        reader = rag.Reader(user.pk, tuple(Group.objects.filter(members=user).values_list("pk", flat=True)))
        return any(h.chunk.document_id == "hr/case.txt"
                   for h in chunk_search(tenant=world.acme, reader=reader, query="Periwinkle grievance", mode="keyword"))

    assert finds(world.teammate) and not finds(stranger)
    (share / "case.txt").write_text("HR case 77: a grievance about the Periwinkle project manager, resolved.\n")
    sync(source)
    process_queued()
    assert Document.objects.get(external_id="hr/case.txt").access == [f"g:{group.pk}"]  # a new version keeps it
    source_update(source=source, access={"users": ["stranger"]}, actor="t")
    assert finds(stranger) and not finds(world.teammate)
    source_update(source=source, access={}, actor="t")
    assert finds(stranger) and finds(world.teammate)


def test_a_sync_never_widens_a_document_an_admin_narrowed_and_only_admins_change_a_sources_list(
    share: Path, world: World,
) -> None:
    """Review of issue 34: a source's list is the default of the documents it creates; a later sync keeps
    a document's own list, and an editor cannot reach restricted documents by changing the source's list."""
    from django.contrib.auth.models import User
    from django.test import Client
    from rest_framework.test import APIClient

    from accounts.services import api_token_create
    from knowledge.services.access import access_principals, document_access_set

    async_to_sync(rag.default_embedder().embed)(["warm up"])
    group = Group.objects.create(tenant=world.acme, name="hr")
    source = source_create(tenant=world.acme, name="HR", kind="folder", config={"path": str(share)}, actor="t")
    sync(source)
    assert process_queued() == ["ready"]
    narrowed = access_principals(tenant=world.acme, groups=["hr"])
    document_access_set(documents=Document.objects.filter(external_id="hr/case.txt"), principals=narrowed, actor="admin")
    (share / "case.txt").write_text("HR case 77: a grievance about the Periwinkle project manager, reopened.\n")
    sync(source)
    process_queued()
    assert Document.objects.get(external_id="hr/case.txt").access == [f"g:{group.pk}"]  # the sync kept it narrow

    _, editor_token = api_token_create(tenant=world.acme, owner=world.editor, role=Role.EDITOR)
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {editor_token}")
    refused = api.patch(f"/v1/sources/{source.pk}", {"access": {}}, format="json")
    assert refused.status_code == 403 and "admin role" in refused.json()["detail"]
    assert Document.objects.get(external_id="hr/case.txt").access == [f"g:{group.pk}"]
    _, owner_token = api_token_create(tenant=world.acme, owner=world.owner, role=Role.ADMIN)
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {owner_token}")
    assert api.patch(f"/v1/sources/{source.pk}", {"access": {}}, format="json").status_code == 200
    assert Document.objects.get(external_id="hr/case.txt").access == ["*"]

    # The admin's form: an editor's save leaves the list alone (its fields are disabled).
    document_access_set(documents=Document.objects.filter(external_id="hr/case.txt"), principals=narrowed, actor="admin")
    source_update(source=source, access={"groups": ["hr"]}, actor="admin")
    User.objects.filter(pk=world.editor.pk).update(is_staff=True)
    staff = Client()
    staff.force_login(User.objects.get(pk=world.editor.pk))
    page = staff.get(f"/admin/sources/source/{source.pk}/change/")
    assert page.status_code == 200
    form = page.context["adminform"].form
    assert form.fields["access_groups"].disabled and form.fields["access_users"].disabled


def test_sync_errors_name_only_items_the_caller_may_read(share: Path, world: World, settings: Any) -> None:
    """A sync's errors name items (paths): a member outside a document's list must not learn its path from them."""
    from django.contrib.auth.models import User
    from django.test import Client

    from knowledge.services.access import access_principals, document_access_set

    (share / "handbook.txt").write_text("Holidays are booked in the portal.\n")
    group = Group.objects.create(tenant=world.acme, name="hr")
    group.members.add(world.teammate)
    stranger = make_member(world.acme, Role.READER, "stranger")
    source = source_create(tenant=world.acme, name="HR", kind="folder", config={"path": str(share)}, actor="t")
    sync(source)
    document_access_set(documents=Document.objects.filter(external_id="hr/case.txt"),
                        principals=access_principals(tenant=world.acme, groups=["hr"]), actor="t")
    # Both files grow past the item limit: the next sync fails each, naming it.
    settings.QUARRY_UPLOAD_MAX_BYTES = 10
    (share / "case.txt").write_text("HR case 77, reopened: the Periwinkle grievance, second hearing.\n")
    (share / "handbook.txt").write_text("Holidays are booked in the portal; carry-over ends in March.\n")
    failed = sync(source)
    assert sorted(e["item"] for e in failed.errors) == ["case.txt", "handbook.txt"], failed.errors

    def last_errors(user: Any) -> tuple[list[str], int]:
        body = world.client(user).get("/v1/sources").json()["sources"][0]["last_sync"]
        detail = world.client(user).get(f"/v1/sources/{source.pk}").json()["last_sync"]
        assert detail["errors"] == body["errors"] and detail["errors_withheld"] == body["errors_withheld"]
        return sorted(e["item"] for e in body["errors"]), body["errors_withheld"]

    assert last_errors(world.owner) == (["case.txt", "handbook.txt"], 0)  # the tenant's admin reads everything
    assert last_errors(world.teammate) == (["case.txt", "handbook.txt"], 0)  # in hr: reads the case
    assert last_errors(stranger) == (["handbook.txt"], 1)
    assert last_errors(world.editor) == (["handbook.txt"], 1)
    # The admin's source page: the same rule for its staff.
    User.objects.filter(pk__in=[world.owner.pk, world.editor.pk]).update(is_staff=True)
    pages = {}
    for user in (world.owner, world.editor):
        client = Client()
        client.force_login(User.objects.get(pk=user.pk))
        page = client.get(f"/admin/sources/source/{source.pk}/change/")
        assert page.status_code == 200
        pages[user.username] = page.content.decode()
    assert "case.txt" in pages["owner"] and "handbook.txt" in pages["owner"]
    assert "case.txt" not in pages["editor"] and "handbook.txt" in pages["editor"] and "1 withheld" in pages["editor"]
    # A source restricted as a whole: a member outside its list sees none of its errors.
    source_update(source=source, access={"groups": ["hr"]}, actor="t")
    assert last_errors(stranger) == ([], 2)
    assert last_errors(world.teammate) == (["case.txt", "handbook.txt"], 0)
