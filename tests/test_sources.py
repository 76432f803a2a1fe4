"""Sources: the sync service against real folders (this file), and each kind against its real
server or tool (tests/test_source_kinds.py). Syncs run as a django-q2 worker runs them: the
task function, in process; queued documents are processed by the document worker's task."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from django_q.models import OrmQ, Schedule

from knowledge.models import Document, DocumentStatus
from knowledge.selectors import chunk_search
from knowledge.tasks import process_document
from knowledge.sources.crypto import secrets_open
from knowledge.sources.models import Source, SourceItem, SourceSync, SyncStatus
from knowledge.sources.services import syncing
from knowledge.sources.services.editing import source_create, source_delete, source_update
from knowledge.sources.connectors.base import ConfigError
from knowledge.sources.tasks import dispatch_syncs, remove_source, sync_source
from tests.conftest import World


def sources_under(settings: Any, tmp_path: Path) -> Path:
    """Uploads, the sources' work folder and the one folder root (``shares``, created) under ``tmp_path``."""
    settings.MEDIA_ROOT = tmp_path / "media"
    settings.QUARRY_SOURCE_WORK_DIR = str(tmp_path / "work")
    settings.QUARRY_SOURCE_FOLDER_ROOTS = [str(tmp_path / "shares")]
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    (tmp_path / "shares").mkdir()
    return tmp_path


@pytest.fixture(autouse=True)
def media(settings: Any, tmp_path: Path) -> Path:
    return sources_under(settings, tmp_path)


def process_queued() -> list[str]:
    """Run the document worker's task on every queued document (as a django-q2 worker would)."""
    return [process_document(pk) for pk in Document.objects.filter(status=DocumentStatus.QUEUED).order_by("pk").values_list("pk", flat=True)]


def sync(source: Source, trigger: str = "manual") -> SourceSync:
    """Request a sync and run its task; the sync it ran."""
    syncing.source_sync_request(source=source, trigger=trigger)
    assert sync_source(source.pk) != "not run"
    return SourceSync.objects.filter(source=source).latest("started_at", "pk")


def counts(s: SourceSync) -> dict[str, int]:
    return {"added": s.added, "updated": s.updated, "unchanged": s.unchanged, "deleted": s.deleted, "failed": s.failed}


def folder_source(world: World, root: Path, schedule_minutes: int | None = None, **config: Any) -> Source:
    """A folder source; creating it queues its first sync (the tests run the task themselves)."""
    return source_create(tenant=world.acme, name="Team share", kind="folder", config={"path": str(root), **config},
                         schedule_minutes=schedule_minutes, actor="editor")


@pytest.fixture
def share(media: Path) -> Path:
    root = media / "shares" / "team"
    (root / "guides").mkdir(parents=True)
    (root / "guides" / "install.md").write_text("# Install\n\nRun the installer named Marmalade to set up Quarry.\n")
    (root / "faq.txt").write_text("Questions and answers about the lighthouse protocol.\n")
    (root / "logo.bin").write_bytes(b"\x00\x01binary")  # not a kind the knowledge base reads: not taken by default
    return root


def test_first_sync_writes_each_item_through_the_pipeline(world: World, share: Path) -> None:
    source = folder_source(world, share)
    first = sync(source)
    assert first.status == SyncStatus.SUCCEEDED
    assert counts(first) == {"added": 2, "updated": 0, "unchanged": 0, "deleted": 0, "failed": 0}
    documents = {d.external_id: d for d in Document.objects.filter(tenant=world.acme)}
    assert set(documents) == {"team-share/guides/install.md", "team-share/faq.txt"}
    install = documents["team-share/guides/install.md"]
    assert install.metadata == {"source": "team-share", "path": "guides/install.md"}
    assert install.uri == (share / "guides" / "install.md").as_uri()
    assert install.status == DocumentStatus.QUEUED  # the editors' pipeline does the rest
    assert process_queued() == ["ready", "ready"]
    hits = chunk_search(tenant=world.acme, reader=None, query="Marmalade installer", mode="keyword", limit=3)
    assert hits[0].chunk.document_id == "team-share/guides/install.md"
    assert hits[0].chunk.metadata["source"] == "team-share"


def test_resync_writes_only_changes_and_deletes_vanished_items(world: World, share: Path) -> None:
    source = folder_source(world, share)
    sync(source)
    process_queued()
    versions = dict(Document.objects.filter(tenant=world.acme).values_list("external_id", "generation"))
    # Touched with the same bytes: a new mtime, the same hash, so not written again.
    os.utime(share / "faq.txt", ns=(1, 1))
    (share / "guides" / "install.md").write_text("# Install\n\nRun the installer named Quince now.\n")
    (share / "new.md").write_text("A new page about the harbour.\n")
    (share / "guides" / "old.md").write_text("soon gone\n")
    second = sync(source)
    assert counts(second) == {"added": 2, "updated": 1, "unchanged": 1, "deleted": 0, "failed": 0}
    (share / "guides" / "old.md").unlink()
    third = sync(source)
    assert counts(third) == {"added": 0, "updated": 0, "unchanged": 3, "deleted": 1, "failed": 0}
    assert not Document.objects.filter(tenant=world.acme, external_id="team-share/guides/old.md").exists()
    assert Document.objects.get(tenant=world.acme, external_id="team-share/faq.txt").generation == versions["team-share/faq.txt"]
    process_queued()
    hits = chunk_search(tenant=world.acme, reader=None, query="Quince", mode="keyword", limit=3)
    assert [h.chunk.document_id for h in hits] == ["team-share/guides/install.md"]
    assert not chunk_search(tenant=world.acme, reader=None, query="Marmalade", mode="keyword", limit=3)


def test_a_failed_item_is_reported_and_retried_next_time_while_the_rest_lands(world: World, share: Path, settings: Any) -> None:
    (share / "big.md").write_text("x" * 5000)
    settings.QUARRY_UPLOAD_MAX_BYTES = 4000
    source = folder_source(world, share)
    first = sync(source)
    assert first.status == SyncStatus.PARTIAL
    assert counts(first) == {"added": 2, "updated": 0, "unchanged": 0, "deleted": 0, "failed": 1}
    assert first.errors == [{"item": "big.md", "reason": "5,000 bytes, over the limit of 4,000 bytes per item"}]
    settings.QUARRY_UPLOAD_MAX_BYTES = 10_000
    second = sync(source)  # nothing changed at the source: the failed item is tried again all the same
    assert second.status == SyncStatus.SUCCEEDED
    assert counts(second) == {"added": 1, "updated": 0, "unchanged": 2, "deleted": 0, "failed": 0}
    assert Document.objects.filter(tenant=world.acme, external_id="team-share/big.md").exists()


def test_a_listing_that_fails_midway_deletes_nothing(world: World, share: Path) -> None:
    source = folder_source(world, share)
    sync(source)
    assert Document.objects.filter(tenant=world.acme).count() == 2
    # The share is unmounted: the listing cannot complete.
    share.rename(share.with_name("elsewhere"))
    failed = sync(source)
    assert failed.status == SyncStatus.FAILED
    assert "nothing was deleted" in failed.errors[0]["reason"]
    assert failed.deleted == 0 and Document.objects.filter(tenant=world.acme).count() == 2
    assert SourceItem.objects.filter(source=source).count() == 2


def test_symlinks_out_of_the_root_are_not_followed(world: World, share: Path, tmp_path: Path) -> None:
    outside = tmp_path / "private"
    outside.mkdir()
    (outside / "payroll.md").write_text("salaries\n")
    (share / "payroll.md").symlink_to(outside / "payroll.md")
    (share / "private").symlink_to(outside, target_is_directory=True)
    (share / "inside.md").symlink_to(share / "faq.txt")  # a link within the root is fine
    sync(folder_source(world, share))
    ids = set(Document.objects.filter(tenant=world.acme).values_list("external_id", flat=True))
    assert ids == {"team-share/guides/install.md", "team-share/faq.txt", "team-share/inside.md"}


def test_folder_outside_the_roots_or_without_roots_is_refused(world: World, tmp_path: Path, settings: Any) -> None:
    with pytest.raises(ConfigError) as refused:
        source_create(tenant=world.acme, name="etc", kind="folder", config={"path": "/etc"}, actor="editor")
    assert refused.value.field == "config.path" and "outside" in refused.value.message
    with pytest.raises(ConfigError) as escaped:
        source_create(tenant=world.acme, name="up", kind="folder", config={"path": str(tmp_path / "shares" / ".." / "media")}, actor="e")
    assert escaped.value.field == "config.path"
    settings.QUARRY_SOURCE_FOLDER_ROOTS = []
    with pytest.raises(ConfigError) as off:
        source_create(tenant=world.acme, name="any", kind="folder", config={"path": str(tmp_path / "shares")}, actor="editor")
    assert "QUARRY_SOURCE_FOLDER_ROOTS" in off.value.message
    assert not Source.objects.exists()


def test_a_second_request_merges_into_the_queued_or_running_sync(world: World, share: Path, django_capture_on_commit_callbacks: Any) -> None:
    with django_capture_on_commit_callbacks(execute=True):
        source = folder_source(world, share)
    assert Source.objects.get(pk=source.pk).sync_trigger == "created"
    assert OrmQ.objects.count() == 1
    with django_capture_on_commit_callbacks(execute=True) as sent:
        assert syncing.source_sync_request(source=source) is False  # the first sync is queued: merged
    assert sent == [] and OrmQ.objects.count() == 1
    # Running: another worker holds the lease.
    Source.objects.filter(pk=source.pk).update(lease_until="2999-01-01T00:00Z")
    assert syncing.source_sync_request(source=source) is False
    assert sync_source(source.pk) == "not run"
    assert not SourceSync.objects.exists()
    Source.objects.filter(pk=source.pk).update(lease_until=None)
    assert sync_source(source.pk) == SyncStatus.SUCCEEDED
    assert sync_source(source.pk) == "not run"  # a second delivery of the same task: nothing requested
    assert SourceSync.objects.count() == 1
    with django_capture_on_commit_callbacks(execute=True):
        assert syncing.source_sync_request(source=source) is True
    assert OrmQ.objects.count() == 2


def test_the_dispatcher_starts_due_scheduled_syncs_only(world: World, share: Path) -> None:
    scheduled = folder_source(world, share, schedule_minutes=5)
    manual = source_create(tenant=world.acme, name="Manual", kind="folder", config={"path": str(share)}, actor="e", enabled=False)
    assert Schedule.objects.filter(name=syncing.DISPATCH_SCHEDULE_NAME, func="knowledge.sources.tasks.dispatch_syncs").count() == 1
    assert sync_source(scheduled.pk) == SyncStatus.SUCCEEDED  # the first sync, queued by the creation
    assert dispatch_syncs()["started"] == 0  # synced a moment ago: not due for 5 minutes
    SourceSync.objects.filter(source=scheduled).update(started_at="2000-01-01T00:00Z")
    assert dispatch_syncs()["started"] == 1
    assert sync_source(scheduled.pk) == SyncStatus.SUCCEEDED
    assert SourceSync.objects.filter(source=scheduled).latest("pk").trigger == "schedule"
    assert not SourceSync.objects.filter(source=manual).exists()
    assert Source.objects.get(pk=manual.pk).sync_requested_at is None


def test_removing_a_source_removes_its_documents_in_the_background(world: World, share: Path) -> None:
    source = folder_source(world, share)
    sync(source)
    Document.objects.create(tenant=world.acme, external_id="team-share-notes", title="not the source's")
    source_delete(source=source, actor="editor")
    assert Source.objects.live().count() == 0
    assert Document.objects.filter(tenant=world.acme).count() == 3  # not yet: the task does it
    assert remove_source(source.pk) == 2
    assert list(Document.objects.filter(tenant=world.acme).values_list("external_id", flat=True)) == ["team-share-notes"]
    assert not Source.objects.filter(pk=source.pk).exists()


def test_secrets_are_encrypted_at_rest_and_kept_on_change(world: World, settings: Any) -> None:
    from knowledge.sources.services.editing import source_secret_names

    source = source_create(tenant=world.acme, name="Site", kind="web", probe=False, actor="e",
                           config={"url": "https://intranet.example/", "authorization": "Bearer hunter2-secret"})
    raw = Source.objects.get(pk=source.pk)
    assert "hunter2" not in raw.secrets and "hunter2" not in str(raw.config) and "authorization" not in raw.config
    assert secrets_open(raw.secrets) == {"authorization": "Bearer hunter2-secret"}
    updated = source_update(source=raw, config={"url": "https://intranet.example/docs/"}, probe=False, actor="e")
    assert secrets_open(updated.secrets) == {"authorization": "Bearer hunter2-secret"}
    assert source_secret_names(updated) == ["authorization"]


# --- Admin and commands -----------------------------------------------------------------------------


@pytest.fixture
def staff(world: World) -> World:
    for user in (world.editor, world.outsider):
        user.is_staff = True
        user.save()
    return world


def admin_client(user: Any) -> Any:
    from django.test import Client

    client = Client()
    client.force_login(user)
    return client


def test_admin_adds_edits_pauses_syncs_and_removes_a_source(staff: World, share: Path) -> None:
    client = admin_client(staff.editor)
    refused = client.post("/admin/sources/source/add/", {"tenant": staff.acme.pk, "name": "Etc", "kind": "folder",
                                                           "config": '{"path": "/etc"}', "enabled": "on"})
    assert refused.status_code == 200 and "outside the folders" in refused.content.decode()
    assert not Source.objects.exists()
    added = client.post("/admin/sources/source/add/", {"tenant": staff.acme.pk, "name": "Team share", "kind": "folder",
                                                         "config": f'{{"path": "{share}"}}', "schedule_minutes": "15", "enabled": "on"})
    assert added.status_code == 302, added.content.decode()[:3000]
    source = Source.objects.get()
    again = client.post("/admin/sources/source/add/", {"tenant": staff.acme.pk, "name": "Team share", "kind": "folder",
                                                         "config": f'{{"path": "{share}"}}', "enabled": "on"})
    assert again.status_code == 200 and "already has a source named" in again.content.decode()
    assert (source.tenant, source.key, source.schedule_minutes, source.sync_trigger) == (staff.acme, "team-share", 15, "created")
    sync_source(source.pk)
    page = client.get(f"/admin/sources/source/{source.pk}/change/").content.decode()
    assert "Syncs (newest first)" in page and "succeeded" in page
    listing = client.get("/admin/sources/source/").content.decode()
    assert "Team share" in listing and "+2 ~0 =0 -0" in listing
    syncs = SourceSync.objects.filter(source=source).count()
    edited = client.post(f"/admin/sources/source/{source.pk}/change/", {
        "name": "Team share (docs)", "config": f'{{"path": "{share}"}}', "schedule_minutes": "30", "enabled": "on",
        "syncs-TOTAL_FORMS": str(syncs), "syncs-INITIAL_FORMS": str(syncs), "syncs-MIN_NUM_FORMS": "0", "syncs-MAX_NUM_FORMS": "0",
        **{f"syncs-{n}-id": str(pk) for n, pk in enumerate(SourceSync.objects.filter(source=source).order_by("-started_at").values_list("pk", flat=True))},
        **{f"syncs-{n}-source": str(source.pk) for n in range(syncs)},
    })
    assert edited.status_code == 302, edited.content.decode()[:2000]
    assert Source.objects.values_list("name", "schedule_minutes", "key").get(pk=source.pk) == ("Team share (docs)", 30, "team-share")
    client.post("/admin/sources/source/", {"action": "pause", "_selected_action": [source.pk]})
    assert Source.objects.get(pk=source.pk).enabled is False
    client.post("/admin/sources/source/", {"action": "sync_now", "_selected_action": [source.pk]})
    assert Source.objects.get(pk=source.pk).sync_requested_at is not None
    # The outsider (staff of globex only) sees none of it.
    assert admin_client(staff.outsider).get(f"/admin/sources/source/{source.pk}/change/").status_code in (302, 404)
    assert "Team share" not in admin_client(staff.outsider).get("/admin/sources/source/").content.decode()
    removed = client.post(f"/admin/sources/source/{source.pk}/delete/", {"post": "yes"})
    assert removed.status_code == 302
    assert Source.objects.get(pk=source.pk).deleting is True
    assert remove_source(source.pk) == 2 and not Document.objects.filter(tenant=staff.acme).exists()


def test_commands_add_list_and_sync_with_wait(world: World, share: Path) -> None:
    from io import StringIO

    from django.core.management import call_command
    from django.core.management.base import CommandError

    out = StringIO()
    call_command("source_add", "--tenant", "acme", "--name", "Team share", "--kind", "folder", "--config", f'{{"path": "{share}"}}',
                 "--every", "60", stdout=out)
    assert "documents are named team-share/" in out.getvalue()
    with pytest.raises(CommandError, match="config.path"):
        call_command("source_add", "--tenant", "acme", "--name", "X", "--kind", "folder", "--config", '{"path": "/etc"}')
    out = StringIO()
    call_command("source_sync", "team-share", "--tenant", "acme", "--wait", stdout=out, stderr=StringIO())
    assert "succeeded: added 2, updated 0, unchanged 0, deleted 0, failed 0" in out.getvalue()
    out = StringIO()
    call_command("source_list", "--tenant", "acme", stdout=out)
    assert "Team share  [folder, every 60 min]  succeeded  last" in out.getvalue()
    with pytest.raises(CommandError, match="no source"):
        call_command("source_sync", "Team share", "--tenant", "globex")


def test_a_folder_whose_root_was_removed_from_the_setting_is_not_read(world: World, share: Path, settings: Any) -> None:
    source = folder_source(world, share)
    settings.QUARRY_SOURCE_FOLDER_ROOTS = ["/srv/elsewhere"]
    refused = sync(source)
    assert refused.status == SyncStatus.FAILED and "no longer under QUARRY_SOURCE_FOLDER_ROOTS" in refused.errors[0]["reason"]
    assert not Document.objects.filter(tenant=world.acme).exists()


def test_syncs_past_the_parallel_bound_wait_for_the_dispatcher(world: World, share: Path, settings: Any,
                                                                django_capture_on_commit_callbacks: Any) -> None:
    settings.QUARRY_SOURCE_MAX_PARALLEL = 1
    busy = source_create(tenant=world.acme, name="Busy", kind="folder", config={"path": str(share)}, actor="e", enabled=False)
    Source.objects.filter(pk=busy.pk).update(lease_until="2999-01-01T00:00Z")  # another worker is syncing it
    source = folder_source(world, share)
    assert sync_source(source.pk) == "not run"  # one sync at a time on this server: it waits
    assert Source.objects.get(pk=source.pk).sync_requested_at is not None and not SourceSync.objects.exists()
    Source.objects.filter(pk=busy.pk).update(lease_until=None)
    with django_capture_on_commit_callbacks(execute=True) as sent:
        assert dispatch_syncs()["resent"] == 1
    assert len(sent) == 1
    assert sync_source(source.pk) == SyncStatus.SUCCEEDED


def test_a_source_removed_during_its_sync_stops_it_and_then_loses_every_document(world: World, share: Path) -> None:
    for n in range(syncing.CHECKPOINT_ITEMS + 20):
        (share / f"page-{n:03}.md").write_text(f"Page {n}.\n")
    source = folder_source(world, share)
    syncing.source_sync_request(source=source)

    def remove_once(sync: SourceSync) -> None:
        if sync.listed == 1:
            source_delete(source=source, actor="editor")  # an editor removes it from another request meanwhile

    stopped = syncing.source_sync_run(source_pk=source.pk, progress=remove_once)
    assert stopped is not None and stopped.status == SyncStatus.FAILED
    assert stopped.errors[-1]["reason"] == "the source was removed during the sync"
    assert stopped.listed == syncing.CHECKPOINT_ITEMS  # it stopped at its first checkpoint
    assert remove_source(source.pk) == syncing.CHECKPOINT_ITEMS
    assert not Document.objects.filter(tenant=world.acme).exists() and not Source.objects.exists()


def test_the_admin_shows_which_source_wrote_a_document(world: World, share: Path) -> None:
    from django.contrib.auth.models import User
    from django.test import Client

    source = folder_source(world, share)
    sync(source)
    document = Document.objects.get(tenant=world.acme, external_id="team-share/faq.txt")
    client = Client()
    client.force_login(User.objects.create_superuser("root", "root@example.com", "pw"))
    page = client.get(f"/admin/knowledge/document/{document.pk}/change/").content.decode()
    assert "Synced from" in page and f'/admin/sources/source/{source.pk}/change/' in page and "faq.txt" in page
    # A document whose metadata names no source of its tenant says nothing of sources.
    Document.objects.filter(pk=document.pk).update(metadata={"source": "no-such-source"})
    assert "Synced from" not in client.get(f"/admin/knowledge/document/{document.pk}/change/").content.decode()
