"""Sources under a real django-q2 cluster (ORM broker, ``manage.py qcluster``): adding a source queues its
first sync, the workers run it and process the documents it wrote, and after a change at the source
the dispatcher's schedule starts the next sync by itself, with no manual step, and search follows."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.utils import timezone
from django_q.models import Schedule

from knowledge.models import Document, DocumentStatus
from knowledge.selectors import chunk_search
from knowledge.sources.models import SourceSync, SyncStatus
from knowledge.sources.services.editing import source_create
from knowledge.sources.services.syncing import DISPATCH_SCHEDULE_NAME
from tests.conftest import World
from tests.servers import child_env, graceful_qcluster as cluster, read_log, wait_for

pytestmark = pytest.mark.django_db(transaction=True)


def found(world: World, word: str) -> list[str]:
    return sorted({h.chunk.document_id for h in chunk_search(tenant=world.acme, reader=None, query=word, mode="keyword", limit=10)})


def test_a_scheduled_source_follows_its_folder_with_no_manual_step(world: World, tmp_path: Path, settings: Any) -> None:
    share = tmp_path / "shares" / "team"
    share.mkdir(parents=True)
    (share / "install.md").write_text("# Install\n\nRun the installer named Marmalade.\n")
    settings.QUARRY_SOURCE_FOLDER_ROOTS = [str(tmp_path / "shares")]
    env = child_env(REDIS_URL="", QUARRY_DATA_DIR=str(tmp_path / "data"), QUARRY_SOURCE_FOLDER_ROOTS=str(tmp_path / "shares"),
                    QUARRY_EMBEDDING_MODEL="none")
    source = source_create(tenant=world.acme, name="Team share", kind="folder", config={"path": str(share)}, schedule_minutes=1,
                           actor="editor")
    # The dispatcher runs at the cluster's next scheduler pass, not a minute from the migration.
    Schedule.objects.filter(name=DISPATCH_SCHEDULE_NAME).update(next_run=timezone.now())
    with cluster(env, log_name="qcluster-sources"):
        wait_for(lambda: found(world, "Marmalade") == ["team-share/install.md"], timeout=180,
                 what=f"the first sync and its document: {read_log('qcluster-sources')[-2000:]}")
        (share / "install.md").write_text("# Install\n\nRun the installer named Quince.\n")
        (share / "faq.md").write_text("# FAQ\n\nThe lighthouse opens at dawn.\n")
        # A minute passes (the schedule is every minute): the dispatcher finds the source due by itself.
        SourceSync.objects.filter(source=source).update(started_at=timezone.now() - timedelta(minutes=2))
        wait_for(lambda: found(world, "Quince") == ["team-share/install.md"] and found(world, "lighthouse") == ["team-share/faq.md"],
                 timeout=240, what=f"the scheduled sync: {read_log('qcluster-sources')[-2000:]}")
    syncs = list(SourceSync.objects.filter(source=source).order_by("pk").values_list("trigger", "status", "added", "updated"))
    assert syncs[0] == ("created", SyncStatus.SUCCEEDED, 1, 0)
    assert ("schedule", SyncStatus.SUCCEEDED, 1, 1) in syncs
    assert not found(world, "Marmalade")
    assert set(Document.objects.filter(tenant=world.acme).values_list("status", flat=True)) == {DocumentStatus.READY}
