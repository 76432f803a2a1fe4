"""Syncs: one at a time per source, only what changed, nothing half done.

The rules, and where each is kept:

- One sync per source: a sync holds ``Source.lease_until`` (taken with a conditional UPDATE,
  renewed at checkpoints). A request while a sync is queued or running is merged: nothing more
  is queued. Syncs of different sources run in parallel, at most ``QUARRY_SOURCE_MAX_PARALLEL``.
- Only what changed: an item whose version token equals the one last written is unchanged
  without being read; a changed token leads to a fetch, and equal bytes (sha256) are still
  unchanged. Each written item goes through ``document_upload_create`` (the editors' pipeline:
  extraction, chunking, embedding, progress and failure reasons are theirs).
- Nothing half done: a failed item is reported with its reason and keeps its old version, so it
  is tried again next time; documents of vanished items are deleted only after a complete
  listing; a removed source's documents go in the background, after any running sync stopped.
"""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass
from collections.abc import Callable, Mapping
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import transaction
from django.db.models import Max, Q
from django.utils import timezone
from django_q.tasks import async_task

from common.schedules import schedule_ensure
from knowledge.models import Document
from knowledge.services.documents import DocumentInputError, document_delete, document_upload_create
from knowledge.services.file_ids import FileNameError, document_id_candidates
from knowledge.sources.connectors.base import ConfigError, Connector, Content, Item, ItemError, Known, ListingError
from knowledge.sources.crypto import SecretsUnreadable, secrets_open
from knowledge.sources.models import Source, SourceItem, SourceSync, SyncStatus
from knowledge.sources.services.registry import connector_class, context

logger = logging.getLogger(__name__)

SYNC_TASK = "knowledge.sources.tasks.sync_source"
REMOVE_TASK = "knowledge.sources.tasks.remove_source"
DISPATCH_TASK = "knowledge.sources.tasks.dispatch_syncs"
DISPATCH_SCHEDULE_NAME = "sources: start due syncs"  # also created by migration 0002
TASK_GROUP = "sources"
LEASE = timedelta(minutes=5)  # renewed at every checkpoint; a dead worker's sync is taken over after this
CHECKPOINT_ITEMS = 50  # counts saved and lease renewed every this many items (or CHECKPOINT_SECONDS)
CHECKPOINT_SECONDS = 10
MAX_ERRORS = 200  # errors kept per sync; the count is exact, the list is a sample
DELETE_BATCH = 500
# Changed items are written in batches of one transaction (a commit per item was most of a first
# sync's time: bench/sources.py); bounded in count and bytes, and flushed at every checkpoint.
WRITE_BATCH = 25
WRITE_BATCH_BYTES = 16 * 1024 * 1024
MAX_ID_CHARS = 200


class SourceGone(Exception):
    """The source is being removed."""


# --- Requests -----------------------------------------------------------------------------------------


def _enqueue(task: str, pk: int) -> None:
    def send() -> None:
        dispatch_schedule_ensure()
        async_task(task, pk, group=TASK_GROUP, timeout=settings.QUARRY_SOURCE_SYNC_TIMEOUT or -1)

    # robust: a broker outage must not fail the request; the dispatcher re-sends requested syncs.
    transaction.on_commit(send, robust=True)


def dispatch_schedule_ensure() -> None:
    schedule_ensure(DISPATCH_SCHEDULE_NAME, DISPATCH_TASK, schedule_type="I", minutes=1, repeats=-1)


def source_sync_request(*, source: Source, trigger: str = "manual") -> bool:
    """Ask for a sync of ``source``; True when one was queued, False when merged into one queued or running.

    Raises ``SourceGone`` for a source being removed. A paused source may still be synced by hand.
    """
    now = timezone.now()
    with transaction.atomic():
        locked = Source.objects.select_for_update().get(pk=source.pk)
        if locked.deleting:
            raise SourceGone(f"source {locked.name!r} is being removed")
        if locked.sync_requested_at is not None or (locked.lease_until is not None and locked.lease_until > now):
            return False
        Source.objects.filter(pk=locked.pk).update(sync_requested_at=now, sync_trigger=trigger[:16])
        _enqueue(SYNC_TASK, locked.pk)
    return True


def resend_after() -> timedelta:
    """How long a queued sync may wait for a worker before the dispatcher sends it again: the broker's own
    redelivery time, so a busy queue does not fill with copies (a copy is harmless, only wasteful)."""
    return timedelta(seconds=int(settings.Q_CLUSTER.get("retry") or 660))  # type: ignore[union-attr]


def _claim(source_pk: int) -> Source | None:
    """Take the source's lease (conditional UPDATE); None when another sync or removal holds it."""
    now = timezone.now()
    taken = Source.objects.filter(pk=source_pk).filter(Q(lease_until__isnull=True) | Q(lease_until__lt=now)).update(
        lease_until=now + LEASE)
    return Source.objects.select_related("tenant").filter(pk=source_pk).first() if taken else None


def _release(source_pk: int, **fields: Any) -> None:
    Source.objects.filter(pk=source_pk).update(lease_until=None, **fields)


# --- The sync ---------------------------------------------------------------------------------------


def source_sync_run(*, source_pk: int, progress: Callable[[SourceSync], None] | None = None) -> SourceSync | None:
    """Run the requested sync of a source if its lease can be taken; returns the sync (None if not run).

    Idempotent: a second copy of the task finds the lease held (or nothing requested) and returns.
    ``progress`` is called with the sync after each item (``manage.py source_sync --wait``'s bar).
    """
    source = _claim(source_pk)
    if source is None:
        return None
    if source.deleting or source.sync_requested_at is None:
        _release(source.pk)  # nothing asked for (a duplicate delivery), or being removed
        return None
    running = Source.objects.filter(lease_until__gt=timezone.now()).count()
    if running > settings.QUARRY_SOURCE_MAX_PARALLEL:
        # Still requested, and dated back so that the dispatcher sends it again at its next pass.
        _release(source.pk, sync_requested_at=timezone.now() - resend_after())
        return None
    Source.objects.filter(pk=source.pk).update(sync_requested_at=None)
    sync = SourceSync.objects.create(source=source, status=SyncStatus.RUNNING, trigger=source.sync_trigger or "manual")
    run = _Run(source, sync, progress)
    try:
        run.execute()
    except Exception as exc:  # a bug or an outage must still end the sync's record, with its reason
        logger.exception("sync of source %s failed", source.pk)
        run.note("", f"the sync stopped: {exc.__class__.__name__}: {str(exc)[:300]}")
        run.listing_failed = True
    finally:
        run.finish()
        _release(source.pk)
    return sync


@dataclass(frozen=True)
class _Write:
    item: Item
    content: Content
    digest: str
    document_id: str
    is_new: bool


class _Run:
    """One sync's work and counts."""

    def __init__(self, source: Source, sync: SourceSync, progress: Callable[[SourceSync], None] | None = None) -> None:
        self.source = source
        self.sync = sync
        self.progress = progress
        self.listing_failed = False
        self.stopped = False
        self.checkpoint_at = timezone.now()
        self.since_checkpoint = 0
        self.pending: list[_Write] = []  # fetched, changed items not written yet (see _flush)
        self.pending_bytes = 0

    def note(self, item: str, reason: str) -> None:
        if len(self.sync.errors) < MAX_ERRORS:
            self.sync.errors.append({"item": item[:2048], "reason": reason[:1000]})

    def fail_item(self, item: str, reason: str) -> None:
        self.sync.failed += 1
        self.note(item, reason)

    def execute(self) -> None:
        source = self.source
        try:
            cls = connector_class(source.kind)
            connector: Connector = cls(source.config, secrets_open(source.secrets), context(source.pk))
        except (ConfigError, SecretsUnreadable) as exc:
            self.note("", str(exc))
            self.listing_failed = True
            return
        try:
            self._sync(connector)
        finally:
            close = getattr(connector, "close", None)
            if close is not None:
                close()

    def _sync(self, connector: Connector) -> None:
        source = self.source
        stored = {i.path: i for i in SourceItem.objects.filter(source=source)}
        present = set(Document.objects.filter(tenant_id=source.tenant_id, external_id__in=[i.document_id for i in stored.values()])
                      .values_list("external_id", flat=True))
        # A document an editor deleted by hand is written again: its item counts as never written.
        known = {path: Known(i.version, i.extra) for path, i in stored.items() if i.document_id in present}
        ids_taken = {i.document_id: i.path for i in stored.values()}
        listed: set[str] = set()
        try:
            for item in connector.list_items(known, source.cursor):
                if item.path in listed:
                    continue
                listed.add(item.path)
                self.sync.listed += 1
                self._item(connector, item, stored.get(item.path), known.get(item.path), ids_taken)
                if self.progress is not None:
                    self.progress(self.sync)
                if not self._checkpoint():
                    self.stopped = True
                    self.note("", "the source was removed during the sync")
                    return
        except ListingError as exc:
            self._flush()  # what was read before the failure is good: it lands
            self.listing_failed = True
            self.note("", f"the listing failed, so nothing was deleted: {exc}")
            return
        self._flush()
        for warning in getattr(connector, "warnings", []):
            self.note("", warning)
        self._delete_vanished([i for path, i in stored.items() if path not in listed])
        Source.objects.filter(pk=source.pk).update(cursor=connector.cursor())

    def _item(self, connector: Connector, item: Item, stored: SourceItem | None, known: Known | None, ids_taken: dict[str, str]) -> None:
        if item.error:
            self.fail_item(item.path, item.error)
            return
        if known is not None and known.version == item.version:
            self.sync.unchanged += 1
            if stored is not None and dict(item.extra) != stored.extra:
                SourceItem.objects.filter(pk=stored.pk).update(extra=dict(item.extra))
            return
        try:
            content = item.content if item.content is not None else connector.fetch(item)
        except ItemError as exc:
            self.fail_item(item.path, str(exc))
            return
        digest = hashlib.sha256(content.data).hexdigest()
        if known is not None and stored is not None and stored.content_hash == digest:
            self.sync.unchanged += 1  # a new token over the same bytes (a touched file, a re-uploaded object)
            SourceItem.objects.filter(pk=stored.pk).update(version=item.version[:200], extra=dict(item.extra))
            return
        document_id = stored.document_id if stored is not None else self._new_document_id(item.path, ids_taken)
        ids_taken[document_id] = item.path
        self.pending.append(_Write(item, content, digest, document_id, is_new=stored is None or known is None))
        self.pending_bytes += len(content.data)
        if len(self.pending) >= WRITE_BATCH or self.pending_bytes >= WRITE_BATCH_BYTES:
            self._flush()

    def _flush(self) -> None:
        """Write the pending items through the documents write door: one transaction (one commit, the
        document tasks queued at its end), a savepoint per item so that a refused item fails alone."""
        pending, self.pending, self.pending_bytes = self.pending, [], 0
        if not pending:
            return
        with transaction.atomic():
            for write in pending:
                item, content = write.item, write.content
                upload = SimpleUploadedFile(content.name or "item", content.data, content_type=content.content_type or None)
                try:
                    with transaction.atomic():
                        document_upload_create(
                            tenant=self.source.tenant, files=[upload], actor=f"source {self.source.key}", document_ids=[write.document_id],
                            title=item.title, uri=item.uri[:2048], metadata={"source": self.source.key, "path": item.path[:10_000]},
                            # The source's default access list for a new document; a document it wrote before keeps
                            # its own (an admin may have narrowed it since: a sync must never widen it again).
                            access=None if Document.objects.filter(tenant=self.source.tenant, external_id=write.document_id).exists()
                            else list(self.source.access),
                        )
                        SourceItem.objects.update_or_create(source=self.source, path=item.path, defaults={
                            "document_id": write.document_id, "version": item.version[:200], "content_hash": write.digest,
                            "extra": dict(item.extra),
                        })
                except DocumentInputError as exc:
                    self.fail_item(item.path, exc.message)
                    continue
                if write.is_new:
                    self.sync.added += 1
                else:
                    self.sync.updated += 1

    def _new_document_id(self, path: str, taken: Mapping[str, str]) -> str:
        """``<source key>/<path>`` made an id (``knowledge.services.file_ids``); the hashed form when
        the readable one is taken by another path of this source or would be too long."""
        key = self.source.key
        name = path.split("://", 1)[-1]  # a URL keeps its host and path: https://docs.example.com/a -> docs.example.com/a
        try:
            candidates = document_id_candidates(name, folders=True)
        except FileNameError:
            candidates = ()
        for candidate in candidates:
            document_id = f"{key}/{candidate}"
            if len(document_id) <= MAX_ID_CHARS and taken.get(document_id, path) == path:
                return document_id
        return f"{key}/{hashlib.sha256(path.encode('utf-8', 'surrogateescape')).hexdigest()[:24]}"

    def _delete_vanished(self, gone: list[SourceItem]) -> None:
        for start in range(0, len(gone), DELETE_BATCH):
            batch = gone[start : start + DELETE_BATCH]
            with transaction.atomic():
                document_delete(tenant=self.source.tenant, document_ids=[i.document_id for i in batch], actor=f"source {self.source.key}")
                SourceItem.objects.filter(pk__in=[i.pk for i in batch]).delete()
            self.sync.deleted += len(batch)

    def _checkpoint(self) -> bool:
        """Save progress and renew the lease now and then; False when the source is being removed."""
        self.since_checkpoint += 1
        now = timezone.now()
        if self.since_checkpoint < CHECKPOINT_ITEMS and now - self.checkpoint_at < timedelta(seconds=CHECKPOINT_SECONDS):
            return True
        self.since_checkpoint, self.checkpoint_at = 0, now
        self._flush()
        self.sync.save(update_fields=["listed", "added", "updated", "unchanged", "deleted", "failed", "errors"])
        return bool(Source.objects.filter(pk=self.source.pk, deleting=False).update(lease_until=now + LEASE))

    def finish(self) -> None:
        sync = self.sync
        if self.listing_failed or self.stopped:
            sync.status = SyncStatus.FAILED
        elif sync.failed and not (sync.added or sync.updated or sync.unchanged):
            sync.status = SyncStatus.FAILED
        elif sync.failed:
            sync.status = SyncStatus.PARTIAL
        else:
            sync.status = SyncStatus.SUCCEEDED
        sync.finished_at = timezone.now()
        sync.save()


# --- Removal ----------------------------------------------------------------------------------------


def source_remove_run(*, source_pk: int) -> int | None:
    """Delete a removed source's documents, then the source; returns documents deleted (None: not now).

    Waits for a running sync (its lease): the task returns and the dispatcher sends it again.
    """
    source = _claim(source_pk)
    if source is None or not source.deleting:
        if source is not None:
            _release(source.pk)
        return None
    ids = set(SourceItem.objects.filter(source=source).values_list("document_id", flat=True))
    # Also documents written just before a crash, whose item row was never saved.
    ids |= set(Document.objects.filter(tenant_id=source.tenant_id, external_id__startswith=f"{source.key}/",
                                       metadata__source=source.key).values_list("external_id", flat=True))
    ordered = sorted(ids)
    deleted = 0
    for start in range(0, len(ordered), DELETE_BATCH):
        deleted += document_delete(tenant=source.tenant, document_ids=ordered[start : start + DELETE_BATCH], actor=f"source {source.key}")
        Source.objects.filter(pk=source.pk).update(lease_until=timezone.now() + LEASE)
    source.delete()
    return deleted


# --- The dispatcher ---------------------------------------------------------------------------------


def syncs_dispatch() -> dict[str, int]:
    """Every minute: start due scheduled syncs, re-send lost requests and removals, close dead syncs.

    Returns what it did, by kind. Safe to run concurrently: every action is a conditional request.
    """
    now = timezone.now()
    free = Q(lease_until__isnull=True) | Q(lease_until__lt=now)
    # A sync whose worker died: its lease ran out while its record still says running.
    dead = SourceSync.objects.filter(status=SyncStatus.RUNNING).filter(
        Q(source__lease_until__isnull=True) | Q(source__lease_until__lt=now)).exclude(started_at__gt=now - LEASE)
    closed = dead.update(status=SyncStatus.FAILED, finished_at=now)
    resent = 0
    for pk in Source.objects.filter(free, deleting=False, sync_requested_at__lte=now - resend_after()).values_list("pk", flat=True):
        with transaction.atomic():
            _enqueue(SYNC_TASK, pk)
        resent += 1
    removals = 0
    for pk in Source.objects.filter(free, deleting=True).values_list("pk", flat=True):
        with transaction.atomic():
            _enqueue(REMOVE_TASK, pk)
        removals += 1
    due = 0
    candidates = (Source.objects.filter(free, enabled=True, deleting=False, schedule_minutes__isnull=False, sync_requested_at__isnull=True)
                  .annotate(last_started=Max("syncs__started_at")))
    for source in candidates:
        if source.last_started is None or source.last_started + timedelta(minutes=source.schedule_minutes) <= now:
            try:
                due += source_sync_request(source=source, trigger="schedule")
            except SourceGone:
                continue
    return {"started": due, "resent": resent, "removals": removals, "closed_dead": closed}
