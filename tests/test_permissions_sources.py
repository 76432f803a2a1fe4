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
