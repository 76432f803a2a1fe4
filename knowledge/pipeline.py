"""The editors' workflow: requests queue background work; workers claim, process and finish it.

Status of a document (the latest request for it):

- ``queued``: an upload, edit, re-index or retry is waiting for a worker.
- ``processing``: a worker holds a *lease* on it (``lease_id``, ``lease_expires_at``)
  and renews it from a heartbeat thread every third of
  ``QUARRY_DOCUMENT_LEASE_SECONDS`` while it extracts, chunks and embeds.
- ``ready``: the requested version is indexed. The backend sets this in the same
  transaction that swaps the chunks, so a reader never sees a half-indexed document.
- ``failed``: the request did not land; ``error`` says why in a sentence naming the
  file. Cancelled work ends here too ("... was cancelled by alice ..."), so "retry"
  picks it up again. Previous chunks are never touched by a failure: ``version`` and
  ``chunk_count`` say what is still searchable.

Faults:

- A killed worker stops renewing; the periodic ``reclaim_documents`` task (a
  django-q2 ``Schedule``, every minute) re-queues documents whose lease expired, up to
  ``QUARRY_DOCUMENT_MAX_ATTEMPTS`` runs, then marks them failed with the reason. It also
  re-sends queued documents whose queue entry looks lost (e.g. a Redis restart).
- A worker writes only while it still holds the lease and nobody asked to cancel:
  both are checked under a row lock in the same transaction as the chunk swap
  (``_GuardedBackend``), so a cancelled, deleted or reclaimed document is never
  overwritten by a worker that lost it.
- Requests bump ``generation``. A worker that finishes an older generation re-queues
  the document in that same transaction, so concurrent re-index requests end in
  one consistent version: the latest one requested.
- Embedding-provider errors are retried per batch with exponential backoff
  (``QUARRY_EMBEDDING_RETRIES``), then the document fails with the provider's message.

Callers (admin, API, tasks) use the ``document_*`` / ``documents_*`` functions; tasks are
enqueued by dotted path on commit.
"""

from __future__ import annotations

import asyncio
import logging
import re
import threading
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from enum import Enum
from pathlib import PurePath
from typing import Any, Literal

from asgiref.sync import async_to_sync, sync_to_async
from django.conf import settings
from django.core.files.storage import default_storage
from django.core.files.uploadedfile import UploadedFile
from django.db import DatabaseError, connection, transaction
from django.db import models
from django.db.models import Case, F, Q, Value, When
from django.db.models.expressions import CombinedExpression
from django.db.models.functions import Now
from django.utils import timezone
from django_q.models import Schedule
from django_q.tasks import async_task

from accounts.models import Tenant
from knowledge import rag
from knowledge.extraction import ExtractionError, extract
from knowledge.models import Document, DocumentStatus
from knowledge.rag import limits
from knowledge.rag.types import Embedder, Trigger, check_metadata
from knowledge.services import document_delete, knowledge_service

logger = logging.getLogger(__name__)

PROCESS_TASK = "knowledge.tasks.process_document"
RECLAIM_TASK = "knowledge.tasks.reclaim_documents"
RECLAIM_SCHEDULE_NAME = "knowledge: reclaim stalled documents"  # also created by migration 0005
TASK_GROUP = "knowledge-documents"

# Progress: extraction is the first tenth, embedding most of the rest; the chunk swap sets 1.
_EXTRACTED = 0.1
_EMBEDDED = 0.95
_RECLAIM_BATCH = 500  # documents per reclaim run; the next run takes the rest

_DEFAULT: Literal["default"] = "default"
EmbedderChoice = Embedder | None | Literal["default"]


class DocumentInputError(ValueError):
    """A request the pipeline refuses; ``field`` names the input at fault."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


class Outcome(str, Enum):
    """What one ``document_process`` call did (stored as the django-q2 task result)."""

    READY = "ready"
    FAILED = "failed"
    CANCELLED = "cancelled"
    REQUEUED = "requeued"  # a newer request arrived while it ran: it runs again
    SKIPPED = "skipped"  # nothing to claim: done already, or another worker holds it
    LOST = "lost"  # the lease was lost (reclaimed, deleted): the new holder decides


@dataclass(frozen=True)
class CancelResult:
    cancelled: int  # queued (or abandoned) work, cancelled at once
    stopping: int  # running work, asked to stop at its next batch
    not_running: int  # nothing to cancel (ready or failed already)


@dataclass(frozen=True)
class ReclaimResult:
    requeued: int
    failed: int
    resent: int


def document_label(document: Document) -> str:
    """How messages name a document: its file name, else its title, else its id."""
    return document.source_name or document.title or document.external_id


def document_id_from_filename(filename: str) -> str:
    """A document id from an uploaded file's name (``Q3 report.pdf`` -> ``Q3-report.pdf``)."""
    name = PurePath(filename.replace("\\", "/")).name
    cleaned = re.sub(r"[^A-Za-z0-9._@+=-]+", "-", name).strip("-.") or "document"
    return cleaned[:200]


# --- Requests: uploads, edits, re-index, retry, cancel, delete ---------------------------


def document_upload_create(
    *,
    tenant: Tenant,
    files: Sequence[UploadedFile],
    actor: str,
    document_ids: Sequence[str] | None = None,
    title: str = "",
    uri: str = "",
    metadata: Mapping[str, object] | None = None,
) -> list[Document]:
    """Store each file and queue it for processing; return the documents in input order.

    Preconditions: the caller may edit ``tenant``. ``document_ids`` (one per file) default
    to ids derived from the file names; an existing id gets a new version. ``title`` and
    ``uri`` apply to a single file only. Fields not given are kept on existing documents,
    except the title, which then comes from the new file.

    Raises ``DocumentInputError`` naming the field before anything is stored. A file over
    ``QUARRY_UPLOAD_MAX_BYTES`` does not fail the batch: it is not stored, and its document
    is failed at once with the reason. Everything else (type, corrupt or encrypted files)
    is checked by the worker and fails that document only.
    """
    if not files:
        raise DocumentInputError("files", "upload at least one file")
    if len(files) > limits.MAX_DOCUMENTS_PER_INGEST:
        raise DocumentInputError("files", f"at most {limits.MAX_DOCUMENTS_PER_INGEST} files per upload, got {len(files)}")
    if len(files) > 1 and (title or uri):
        raise DocumentInputError("title" if title else "uri", "applies to a single file; with several files each takes its title from the file")
    if document_ids is not None and len(document_ids) != len(files):
        raise DocumentInputError("ids", f"give one id per file: {len(files)} files, {len(document_ids)} ids")
    ids = [_check_document_id(i, "ids") for i in document_ids] if document_ids else [document_id_from_filename(f.name or "") for f in files]
    repeated = sorted({i for i in ids if ids.count(i) > 1})
    if repeated:
        raise DocumentInputError("ids" if document_ids else "files", f"two files would share the document id {repeated[0]!r}; give distinct ids")
    checked_metadata = _check_metadata(metadata) if metadata is not None else None
    _check_title_uri(title, uri)

    limit = settings.QUARRY_UPLOAD_MAX_BYTES
    stored: list[str | None] = []
    try:
        for upload in files:
            stored.append(_store_upload(tenant, upload) if (upload.size or 0) <= limit else None)
        with transaction.atomic():
            by_id: dict[str, Document] = {}
            queued: list[int] = []
            # Rows are locked in id order, so two uploads sharing ids cannot deadlock.
            for external_id, upload, name in sorted(zip(ids, files, stored, strict=True), key=lambda item: item[0]):
                document = _lock_or_create(tenant, external_id)
                _forget_source_on_commit(document)
                document.source_file = name or ""
                document.source_name = PurePath((upload.name or external_id).replace("\\", "/")).name[:255]
                document.source_content_type = (upload.content_type or "")[:255]
                document.source_size = upload.size or 0
                document.source_text = ""
                document.title = title
                if uri:
                    document.uri = uri
                if checked_metadata is not None:
                    document.metadata = checked_metadata
                document.save(update_fields=["source_file", "source_name", "source_content_type", "source_size",
                                             "source_text", "title", "uri", "metadata"])
                if name is None:
                    _fail_now(document, actor=actor, error=f"{document.source_name} is {_size(document.source_size)}, "
                              f"over the upload limit of {_size(limit)}; it was not stored")
                else:
                    queued.append(document.pk)
                by_id[external_id] = document
            _request_processing(queued, actor=actor)
    except BaseException:
        for name in stored:
            if name:
                default_storage.delete(name)
        raise
    return _reload([by_id[i] for i in ids])


def document_text_save(
    *,
    tenant: Tenant,
    external_id: str,
    text: str,
    actor: str,
    title: str = "",
    uri: str = "",
    metadata: Mapping[str, object] | None = None,
) -> Document:
    """Create or replace a document from pasted text and queue it for processing.

    Raises ``DocumentInputError`` for a bad id, empty or oversized text, title, URI or metadata.
    """
    external_id = _check_document_id(external_id, "external_id")
    if not text.strip():
        raise DocumentInputError("text", "paste some text")
    if len(text) > limits.MAX_CHARS_PER_DOCUMENT:
        raise DocumentInputError("text", f"at most {limits.MAX_CHARS_PER_DOCUMENT:,} characters, got {len(text):,}")
    checked_metadata = _check_metadata(metadata) if metadata is not None else None
    _check_title_uri(title, uri)
    with transaction.atomic():
        document = _lock_or_create(tenant, external_id)
        changed = _use_text_source(document, text)
        document.title = title
        document.uri = uri
        if checked_metadata is not None:
            document.metadata = checked_metadata
        document.save(update_fields=[*changed, "title", "uri", "metadata"])
        _request_processing([document.pk], actor=actor)
    return _reload([document])[0]


def document_update(
    *,
    document: Document,
    actor: str,
    title: str,
    uri: str,
    metadata: Mapping[str, object],
    text: str | None = None,
    upload: UploadedFile | None = None,
) -> bool:
    """Apply an editor's changes and queue a new version when anything changed; True if queued.

    ``upload`` replaces the source file; otherwise ``text`` (when given and different)
    becomes the pasted source. Title, URI and metadata reach the chunks with the new version.
    """
    checked_metadata = _check_metadata(metadata)
    _check_title_uri(title, uri)
    if text is not None and not upload and not text.strip():
        raise DocumentInputError("text", "must not be empty")
    oversized = upload is not None and (upload.size or 0) > settings.QUARRY_UPLOAD_MAX_BYTES
    stored = _store_upload(document.tenant, upload) if upload is not None and not oversized else None
    try:
        with transaction.atomic():
            current = Document.objects.select_for_update().get(pk=document.pk)
            changed = [f for f, v in (("title", title), ("uri", uri), ("metadata", checked_metadata)) if getattr(current, f) != v]
            current.title, current.uri, current.metadata = title, uri, checked_metadata
            if upload is not None:
                _forget_source_on_commit(current)
                current.source_file = stored or ""
                current.source_name = PurePath((upload.name or current.external_id).replace("\\", "/")).name[:255]
                current.source_content_type = (upload.content_type or "")[:255]
                current.source_size = upload.size or 0
                current.source_text = ""
                changed += ["source_file", "source_name", "source_content_type", "source_size", "source_text"]
            elif text is not None and text != (current.source_text or current.text):
                changed += _use_text_source(current, text)
            if not changed:
                return False
            current.save(update_fields=sorted(set(changed)))
            if oversized:
                _fail_now(current, actor=actor, error=f"{current.source_name} is {_size(current.source_size)}, over the "
                          f"upload limit of {_size(settings.QUARRY_UPLOAD_MAX_BYTES)}; it was not stored")
                return False
            _request_processing([current.pk], actor=actor)
            return True
    except BaseException:
        if stored:
            default_storage.delete(stored)
        raise


def document_reindex(*, documents: Iterable[Document], actor: str) -> int:
    """Queue a new version of each document from its stored source; returns how many.

    A document being processed keeps its worker: the worker re-queues it when done.
    """
    pks = [d.pk for d in documents]
    with transaction.atomic():
        return _request_processing(pks, actor=actor)


def document_retry(*, documents: Iterable[Document], actor: str) -> int:
    """Queue the failed ones among ``documents`` again (fresh attempts); returns how many."""
    pks = [d.pk for d in documents]
    with transaction.atomic():
        failed = list(Document.objects.select_for_update().filter(pk__in=pks, status=DocumentStatus.FAILED).values_list("pk", flat=True))
        return _request_processing(failed, actor=actor)


def document_cancel(*, documents: Iterable[Document], actor: str) -> CancelResult:
    """Cancel queued or running work.

    Queued work (or work whose worker died) is cancelled at once: status ``failed`` with a
    reason. Running work is flagged; its worker stops at the next embedding batch or, at
    the latest, refuses to write its chunks, then records the same reason. Either way the
    previous chunks stay searchable.
    """
    cancelled = stopping = not_running = 0
    with transaction.atomic():
        for document in Document.objects.select_for_update().filter(pk__in=[d.pk for d in documents]).order_by("pk"):
            message = _cancel_message(document, actor)
            live = Document.objects.filter(pk=document.pk).filter(_live_lease()).exists()
            if document.status == DocumentStatus.PROCESSING and live:
                Document.objects.filter(pk=document.pk).update(cancel_requested=True, error=message)
                stopping += 1
            elif document.status in (DocumentStatus.QUEUED, DocumentStatus.PROCESSING):
                _fail_now(document, actor=actor, error=message, bump=False)
                cancelled += 1
            else:
                not_running += 1
    return CancelResult(cancelled, stopping, not_running)


def document_delete_many(*, documents: Iterable[Document], actor: str) -> int:
    """Delete documents, their chunks and stored files (audited per tenant); returns how many.

    A worker still processing one of them loses its lease and writes nothing.
    """
    by_tenant: dict[int, list[str]] = {}
    files: list[str] = []
    for document in documents:
        by_tenant.setdefault(document.tenant_id, []).append(document.external_id)
        if document.source_file:
            files.append(document.source_file.name)
    tenants = Tenant.objects.in_bulk(list(by_tenant))
    deleted = 0
    with transaction.atomic():
        for tenant_id, external_ids in by_tenant.items():
            tenant = tenants[tenant_id]
            for start in range(0, len(external_ids), limits.MAX_DOCUMENTS_PER_INGEST):
                deleted += document_delete(tenant=tenant, document_ids=external_ids[start : start + limits.MAX_DOCUMENTS_PER_INGEST], actor=actor)
        _delete_files_on_commit(files)
    return deleted


def documents_ingest(
    *, tenant: Tenant, documents: Sequence[rag.RAGDocument], actor: str, embedder: EmbedderChoice = _DEFAULT
) -> int:
    """Index ``documents`` now (the caller waits); returns the chunk count.

    The given text becomes each document's source: queued or running background work for
    the same ids is superseded in the transaction that swaps the chunks, so a worker
    finishing later cannot overwrite this version. Raises the RAG API's errors.
    """
    external_ids = sorted({d.id for d in documents})

    def supersede() -> None:
        # Locks in external_id order, the order the backend's upsert locks them in.
        rows = list(
            Document.objects.select_for_update()
            .filter(tenant=tenant, external_id__in=external_ids)
            .order_by("external_id")
            .values_list("pk", "source_file")
        )
        Document.objects.filter(pk__in=[pk for pk, _ in rows]).update(
            generation=F("generation") + 1, lease_id="", lease_expires_at=None, cancel_requested=False, attempts=0,
            source_text="", source_file="", source_name="", source_content_type="", source_size=0,
            queued_at=None, started_at=None,
        )
        _delete_files_on_commit([name for _, name in rows if name])

    def record() -> None:  # new rows included: the backend has just created them
        Document.objects.filter(tenant=tenant, external_id__in=external_ids).update(requested_by=actor[:200], finished_at=Now())

    base = knowledge_service(tenant=tenant, embedder=embedder)
    guarded = _GuardedBackend(base.backend, before=supersede, after=record)
    service = rag.service(guarded, base.embedder, base.chunker, namespace=tenant.slug)
    return async_to_sync(service.ingest)(documents, actor=actor)


# --- Workers: claim, process, finish ------------------------------------------------------


@dataclass(frozen=True)
class _Claim:
    document: Document  # as it was when claimed: the source, title, metadata and generation to process
    lease_id: str


class _Stop(Exception):
    """Raised inside the ingest to abandon it without writing."""


class _Cancelled(_Stop):
    pass


class _LeaseLost(_Stop):
    pass


class _Failure(Exception):
    """A reason to fail the document, already phrased for the editor."""


def document_process(*, document_pk: int, embedder: EmbedderChoice = _DEFAULT) -> Outcome:
    """Claim the document and, if the claim succeeds, extract, chunk, embed and swap its chunks.

    Idempotent: a document that is not queued (or whose lease has not expired) is
    skipped, so a duplicate or late task does nothing. Expected failures are recorded
    on the row and returned as ``Outcome.FAILED``; a database error propagates (the lease
    then expires and the reclaim task retries the document).
    """
    claim = _claim(document_pk)
    if claim is None:
        return Outcome.SKIPPED
    document = claim.document
    label = document_label(document)
    landed: list[Outcome] = []  # set by the guarded write, in its transaction
    error: str | None = None
    cancelled = False
    with _LeaseKeeper(document.pk, claim.lease_id) as keeper:
        try:
            source = _source_document(document, label)
            keeper.report(_EXTRACTED)
            keeper.check()
            service = _worker_service(claim, embedder, landed)
            async_to_sync(service.ingest)(
                [source], actor=document.requested_by or None,
                on_progress=lambda fraction: keeper.report(_EXTRACTED + (_EMBEDDED - _EXTRACTED) * fraction, check=True),
            )
        except _Cancelled:
            cancelled = True
        except _LeaseLost:
            return Outcome.LOST
        except _Failure as exc:
            error = str(exc)
        except ExtractionError as exc:
            error = str(exc)
        except rag.EmbedderError as exc:
            error = f"{label} could not be indexed because the embedding model failed: {exc}"
        except (rag.RAGValidationError, rag.RAGTypeError) as exc:
            error = f"{label} could not be indexed: {exc.message}"
        except rag.RAGError as exc:
            error = f"{label} could not be indexed: {exc}"
        except DatabaseError:
            raise
        except Exception as exc:
            logger.exception("processing document %s (%s) failed", document.pk, label)
            error = f"{label} could not be processed because of an internal error ({type(exc).__name__}); the details are in the worker log"
    if landed:
        return landed[0]
    return _finish_unlanded(claim, error=error, cancelled=cancelled)


def documents_reclaim() -> ReclaimResult:
    """Re-queue documents whose worker stopped renewing its lease; fail those out of attempts.

    Also re-sends queued documents whose queue entry seems lost (queued for longer than the
    broker's own redelivery horizon). Safe to run anywhere, any number of times at once:
    rows are taken with SKIP LOCKED and every change is conditional.
    """
    requeued = failed = resent = 0
    max_attempts = settings.QUARRY_DOCUMENT_MAX_ATTEMPTS
    with transaction.atomic():
        expired = list(
            Document.objects.select_for_update(skip_locked=True)
            .filter(lease_expires_at__lt=Now(), status__in=[DocumentStatus.QUEUED, DocumentStatus.PROCESSING])
            .order_by("lease_expires_at")[:_RECLAIM_BATCH]
        )
        to_send: list[int] = []
        for document in expired:
            label = document_label(document)
            row = Document.objects.filter(pk=document.pk)
            if document.status == DocumentStatus.QUEUED:
                row.update(lease_expires_at=_from_now(_requeue_after()))
                to_send.append(document.pk)
                resent += 1
            elif document.cancel_requested:
                _fail_now(document, actor=document.requested_by, error=document.error or _cancel_message(document, "an editor"), bump=False)
                failed += 1
            elif document.attempts >= max_attempts:
                _fail_now(document, actor=document.requested_by, bump=False, error=(
                    f"{label} could not be processed: the worker stopped before finishing {document.attempts} "
                    f"time{'s' if document.attempts != 1 else ''} (killed, out of memory, or over the "
                    f"{_task_timeout()} s time limit). {_previous_note(document)}"))
                failed += 1
            else:
                row.update(
                    status=DocumentStatus.QUEUED, lease_id="", lease_expires_at=_from_now(_requeue_after()), progress=0.0,
                    queued_at=Now(), updated_at=Now(),
                    error=(f"Attempt {document.attempts} of {max_attempts} on {label} was interrupted (the worker "
                           "stopped or timed out); it is queued again."),
                )
                to_send.append(document.pk)
                requeued += 1
        _enqueue_on_commit(to_send)
    if requeued or failed or resent:
        logger.warning("reclaimed documents: %s re-queued, %s failed, %s re-sent", requeued, failed, resent)
    return ReclaimResult(requeued, failed, resent)


def reclaim_schedule_ensure() -> None:
    """Create the every-minute reclaim ``Schedule`` unless it exists (race-free).

    Migration 0005 creates it; this puts it back should it be deleted (by an operator,
    or a test flushing the tables), and runs whenever work is queued.
    """
    if Schedule.objects.filter(name=RECLAIM_SCHEDULE_NAME).exists():
        return
    with transaction.atomic(), connection.cursor() as cursor:
        # Schedule.name is not unique: serialize creators so there is exactly one.
        cursor.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", [RECLAIM_SCHEDULE_NAME])
        if not Schedule.objects.filter(name=RECLAIM_SCHEDULE_NAME).exists():
            Schedule.objects.create(name=RECLAIM_SCHEDULE_NAME, func=RECLAIM_TASK, schedule_type=Schedule.MINUTES, minutes=1, repeats=-1)


# --- Internals: requests -------------------------------------------------------------------


def _from_now(seconds: float) -> CombinedExpression:
    """A database-clock timestamp: every process compares leases on one clock."""
    return Now() + timedelta(seconds=seconds)


def _live_lease() -> Q:
    return Q(status=DocumentStatus.PROCESSING, lease_expires_at__gt=Now()) & ~Q(lease_id="")


def _task_timeout() -> int:
    return int(settings.Q_CLUSTER.get("timeout") or 600)  # type: ignore[union-attr]


def _requeue_after() -> int:
    # A queued document unclaimed for this long lost its queue entry: by then even the ORM
    # broker would have redelivered it.
    return int(settings.Q_CLUSTER.get("retry") or _task_timeout() + 60)  # type: ignore[union-attr]


def _request_processing(pks: Sequence[int], *, actor: str) -> int:
    """Record a new request for each document and enqueue its task on commit.

    A document a live worker holds stays ``processing`` with that worker, which re-queues it
    when it sees the new generation; every other document becomes ``queued``.
    """
    if not pks:
        return 0
    # Lock in primary-key order first: two bulk requests over overlapping rows cannot deadlock.
    locked = list(Document.objects.select_for_update().filter(pk__in=list(pks)).order_by("pk").values_list("pk", flat=True))
    live = _live_lease()
    count = Document.objects.filter(pk__in=locked).update(
        generation=F("generation") + 1,
        requested_by=actor[:200],
        cancel_requested=False,
        attempts=0,
        error="",
        status=Case(When(live, then=Value(DocumentStatus.PROCESSING)), default=Value(DocumentStatus.QUEUED)),
        lease_id=Case(When(live, then=F("lease_id")), default=Value("")),
        lease_expires_at=Case(When(live, then=F("lease_expires_at")), default=_from_now(_requeue_after())),
        progress=Case(When(live, then=F("progress")), default=Value(0.0)),
        started_at=Case(When(live, then=F("started_at")), default=Value(None), output_field=models.DateTimeField()),
        queued_at=Now(),
        finished_at=None,
        updated_at=Now(),
    )
    _enqueue_on_commit(locked)
    return count


def _requeue_now(pk: int) -> None:
    """Release the lease and queue the document again for the request now on it."""
    Document.objects.filter(pk=pk).update(
        status=DocumentStatus.QUEUED, progress=0.0, lease_id="", lease_expires_at=_from_now(_requeue_after()),
        attempts=0, error="", queued_at=Now(), started_at=None, updated_at=Now(),
    )
    _enqueue_on_commit([pk])


def _fail_now(document: Document, *, actor: str, error: str, bump: bool = True) -> None:
    """Fail the latest request at once (any worker on it loses its lease and writes nothing)."""
    Document.objects.filter(pk=document.pk).update(
        status=DocumentStatus.FAILED, error=error, progress=0.0, lease_id="", lease_expires_at=None,
        cancel_requested=False, finished_at=Now(), updated_at=Now(), requested_by=actor[:200],
        **({"generation": F("generation") + 1, "attempts": 0, "queued_at": Now()} if bump else {}),
    )


def _enqueue_on_commit(pks: Sequence[int]) -> None:
    if not pks:
        return
    pks = list(pks)

    def send() -> None:
        reclaim_schedule_ensure()
        for pk in pks:
            async_task(PROCESS_TASK, pk, group=TASK_GROUP)

    # robust: a broker outage must not turn a saved upload into an error page; the
    # documents stay queued and the reclaim task re-sends them.
    transaction.on_commit(send, robust=True)


def _lock_or_create(tenant: Tenant, external_id: str) -> Document:
    document, _ = Document.objects.select_for_update().get_or_create(
        tenant=tenant, external_id=external_id, defaults={"status": DocumentStatus.QUEUED}
    )
    document.tenant = tenant
    return document


def _reload(documents: Sequence[Document]) -> list[Document]:
    by_pk = Document.objects.select_related("tenant").in_bulk([d.pk for d in documents])
    return [by_pk[d.pk] for d in documents]


def _store_upload(tenant: Tenant, upload: UploadedFile) -> str:
    """Save the file under uploads/<tenant>/<yyyy>/<mm>/ with an unguessable prefix; returns its name."""
    name = document_id_from_filename(upload.name or "upload")[:120]
    folder = timezone.now().strftime(f"uploads/{tenant.slug}/%Y/%m")
    upload.seek(0)
    return default_storage.save(f"{folder}/{uuid.uuid4().hex[:12]}-{name}", upload)


def _use_text_source(document: Document, text: str) -> list[str]:
    """Make pasted ``text`` the document's source, dropping any stored file once the transaction
    commits; returns the fields set (the caller saves them)."""
    _forget_source_on_commit(document)
    document.source_text = text.replace("\x00", "")
    document.source_file = ""
    document.source_name = ""
    document.source_content_type = ""
    document.source_size = 0
    return ["source_text", "source_file", "source_name", "source_content_type", "source_size"]


def _forget_source_on_commit(document: Document) -> None:
    if document.pk and document.source_file:
        _delete_files_on_commit([document.source_file.name])


def _delete_files_on_commit(names: Sequence[str]) -> None:
    names = [n for n in names if n]
    if names:
        transaction.on_commit(lambda: [default_storage.delete(n) for n in names], robust=True)


def _check_document_id(value: object, field: str) -> str:
    if not isinstance(value, str) or not limits.DOCUMENT_ID_RE.match(value):
        raise DocumentInputError(field, f"{str(value)[:80]!r} is not a valid document id (letters, digits, ._:/@+=-; at most 200)")
    return value


def _check_metadata(metadata: Mapping[str, object] | None) -> dict[str, object]:
    try:
        return dict(check_metadata(metadata))
    except (rag.RAGValidationError, rag.RAGTypeError) as exc:
        raise DocumentInputError(exc.field, exc.message) from None


def _check_title_uri(title: str, uri: str) -> None:
    if len(title) > limits.MAX_TITLE_CHARS:
        raise DocumentInputError("title", f"at most {limits.MAX_TITLE_CHARS} characters, got {len(title)}")
    if len(uri) > limits.MAX_URI_CHARS:
        raise DocumentInputError("uri", f"at most {limits.MAX_URI_CHARS} characters, got {len(uri)}")


def _size(n: int) -> str:
    mb = 1024 * 1024
    if n >= mb:
        return f"{n / mb:.0f} MB" if n % mb == 0 else f"{n / mb:.1f} MB"
    return f"{n:,} bytes"


def _previous_note(document: Document) -> str:
    return "The previous version stays searchable." if document.version else "Nothing was indexed."


def _cancel_message(document: Document, actor: str) -> str:
    return f"{document_label(document)} was cancelled by {actor} before it finished. {_previous_note(document)}"


# --- Internals: workers --------------------------------------------------------------------


def _claim(document_pk: int) -> _Claim | None:
    """Take the document with one conditional UPDATE: queued, or processing with an expired lease."""
    lease_id = uuid.uuid4().hex
    claimable = Q(status=DocumentStatus.QUEUED) | Q(
        status=DocumentStatus.PROCESSING, lease_expires_at__lt=Now(), attempts__lt=settings.QUARRY_DOCUMENT_MAX_ATTEMPTS
    )
    taken = Document.objects.filter(claimable, pk=document_pk, cancel_requested=False).update(
        status=DocumentStatus.PROCESSING, lease_id=lease_id, lease_expires_at=_from_now(settings.QUARRY_DOCUMENT_LEASE_SECONDS),
        attempts=F("attempts") + 1, progress=0.0, started_at=Now(), finished_at=None, updated_at=Now(),
    )
    if not taken:
        return None
    document = Document.objects.select_related("tenant").filter(pk=document_pk, lease_id=lease_id).first()
    return _Claim(document, lease_id) if document is not None else None


def _source_document(document: Document, label: str) -> rag.RAGDocument:
    """The version to index: pasted text, else the stored file, else the current text."""
    title: str | None = None
    if document.source_text.strip():
        text = document.source_text
    elif document.source_file:
        data = _read_source(document, label)
        extracted = extract(
            data, filename=document.source_name or document.source_file.name,
            content_type=document.source_content_type or None, max_bytes=settings.QUARRY_UPLOAD_MAX_BYTES,
        )
        text, title = extracted.text, extracted.title
    elif document.text.strip():
        text = document.text
    else:
        raise _Failure(f"{label} has no stored source to process; upload the file or paste the text again")
    if len(text) > limits.MAX_CHARS_PER_DOCUMENT:
        raise _Failure(f"{label} has {len(text):,} characters of text, over the limit of {limits.MAX_CHARS_PER_DOCUMENT:,} per document")
    title = (document.title or title or document.source_name)[: limits.MAX_TITLE_CHARS] or None
    try:
        return rag.RAGDocument(document.external_id, text, title=title, uri=document.uri or None, metadata=document.metadata or {})
    except (rag.RAGValidationError, rag.RAGTypeError) as exc:
        raise _Failure(f"{label} could not be indexed: {exc.field}: {exc.message}") from None


def _read_source(document: Document, label: str) -> bytes:
    name = document.source_file.name
    try:
        size = default_storage.size(name)
        if size > settings.QUARRY_UPLOAD_MAX_BYTES:
            raise _Failure(f"{label} is {_size(size)}, over the upload limit of {_size(settings.QUARRY_UPLOAD_MAX_BYTES)}")
        with default_storage.open(name, "rb") as handle:
            return handle.read()
    except FileNotFoundError:
        raise _Failure(f"{label}: the uploaded file is missing from storage; upload it again") from None


def _worker_service(claim: _Claim, embedder: EmbedderChoice, landed: list[Outcome]) -> rag.RAGService:
    """The tenant's RAG service, with a retrying embedder and a backend that writes only for the lease holder."""
    document = claim.document

    def before() -> None:
        row = Document.objects.select_for_update().filter(pk=document.pk).values_list("lease_id", "cancel_requested").first()
        if row is None or row[0] != claim.lease_id:
            raise _LeaseLost()
        if row[1]:
            raise _Cancelled()

    def after() -> None:
        # The backend has just set status=ready with the new chunks, in this transaction.
        done = Document.objects.filter(pk=document.pk, generation=document.generation).update(
            lease_id="", lease_expires_at=None, finished_at=Now(), cancel_requested=False,
        )
        if done:
            landed.append(Outcome.READY)
            return
        # A newer request arrived while this one ran: what landed is superseded, go again.
        _requeue_now(document.pk)
        landed.append(Outcome.REQUEUED)

    base = knowledge_service(tenant=document.tenant, embedder=embedder)
    model = _RetryingEmbedder(base.embedder) if base.embedder is not None else None
    return rag.service(_GuardedBackend(base.backend, before=before, after=after), model, base.chunker, namespace=document.tenant.slug)


def _finish_unlanded(claim: _Claim, *, error: str | None, cancelled: bool) -> Outcome:
    """Record a run that wrote nothing: failed, cancelled, or re-queued for a newer request."""
    with transaction.atomic():
        row = Document.objects.select_for_update().filter(pk=claim.document.pk).first()
        if row is None or row.lease_id != claim.lease_id:
            return Outcome.LOST
        # The latest action wins: a cancel request is cleared by any later request.
        if row.cancel_requested:
            _fail_now(row, actor=row.requested_by, error=row.error or _cancel_message(row, "an editor"), bump=False)
            return Outcome.CANCELLED
        if row.generation != claim.document.generation:
            _requeue_now(row.pk)  # this run's failure concerned an older request
            return Outcome.REQUEUED
        if cancelled:
            _fail_now(row, actor=row.requested_by, error=_cancel_message(row, "an editor"), bump=False)
            return Outcome.CANCELLED
        _fail_now(row, actor=row.requested_by, error=error or f"{document_label(row)} could not be processed", bump=False)
        return Outcome.FAILED


class _LeaseKeeper:
    """While the worker computes, a thread renews its lease and writes its progress.

    The work itself runs on the event loop (the ingest) or in long blocking calls
    (extraction), where the ORM cannot be used; this thread has its own connection.
    It also notices a cancel request or a lost lease; ``check()`` then raises inside
    the work, which abandons it before anything is written.
    """

    def __init__(self, document_pk: int, lease_id: str) -> None:
        self.document_pk = document_pk
        self.lease_id = lease_id
        self.lease_seconds = settings.QUARRY_DOCUMENT_LEASE_SECONDS
        self.interval = min(1.0, self.lease_seconds / 3)
        self._progress = 0.0
        self._stop: type[_Stop] | None = None
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"lease-document-{document_pk}", daemon=True)

    def __enter__(self) -> _LeaseKeeper:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._done.set()
        self._thread.join(timeout=30)

    def report(self, fraction: float, *, check: bool = False) -> None:
        """Record progress (0..1; never moves backwards). Called from any thread, never blocks."""
        self._progress = max(self._progress, min(1.0, max(0.0, fraction)))
        if check:
            self.check()

    def check(self) -> None:
        if self._stop is not None:
            raise self._stop()

    def _run(self) -> None:
        try:
            while not self._done.wait(self.interval):
                self._beat()
        finally:
            connection.close()  # this thread's own connection

    def _beat(self) -> None:
        table = Document._meta.db_table
        try:
            with connection.cursor() as cursor:
                # One statement renews the lease, writes progress and reads the cancel flag.
                cursor.execute(
                    f"UPDATE {table} SET lease_expires_at = now() + make_interval(secs => %s), progress = %s "
                    "WHERE id = %s AND lease_id = %s RETURNING cancel_requested",
                    [self.lease_seconds, round(self._progress, 4), self.document_pk, self.lease_id],
                )
                row = cursor.fetchone()
        except DatabaseError as exc:
            # Keep trying: if the database stays away the lease lapses and the work is reclaimed.
            logger.warning("lease heartbeat for document %s failed: %s", self.document_pk, exc)
            return
        if row is None:
            self._stop = _LeaseLost
        elif row[0]:
            self._stop = _Cancelled


class _GuardedBackend:
    """A ``RAGBackend`` whose ``replace`` runs ``before`` and ``after`` in the chunk swap's transaction.

    ``before`` takes row locks and may raise to abandon the write; ``after`` records the
    outcome atomically with the new chunks. Everything else delegates.
    """

    def __init__(self, inner: rag.RAGBackend, *, before: Callable[[], None], after: Callable[[], None] | None = None) -> None:
        self.inner = inner
        self.before = before
        self.after = after
        self.using = getattr(inner, "using", "default")

    async def start(self) -> None:
        await self.inner.start()

    async def close(self) -> None:
        await self.inner.close()

    async def replace(self, namespace: str, documents: Sequence[Any], *, actor: str | None, trigger: Trigger) -> int:
        return await sync_to_async(self._replace, thread_sensitive=True)(namespace, documents, actor, trigger)

    def _replace(self, namespace: str, documents: Sequence[Any], actor: str | None, trigger: Trigger) -> int:
        with transaction.atomic(using=self.using):
            self.before()
            # Thread-sensitive all the way down: the backend's own sync code runs on this
            # thread, so its statements join this transaction.
            stored = async_to_sync(self.inner.replace)(namespace, documents, actor=actor, trigger=trigger)
            if self.after is not None:
                self.after()
        return stored

    async def delete(self, namespace: str, document_ids: Sequence[str], *, actor: str | None, trigger: Trigger) -> int:
        return await self.inner.delete(namespace, document_ids, actor=actor, trigger=trigger)

    async def fetch(self, namespace: str, chunk_ids: Sequence[str]) -> list[rag.RAGChunk]:
        return await self.inner.fetch(namespace, chunk_ids)

    async def search(self, query: rag.RAGQuery) -> list[rag.RAGHit]:
        return await self.inner.search(query)

    async def known_embeddings(self, namespace: str, document_ids: Sequence[str], model_id: str) -> dict[tuple[str, str], Any]:
        return await self.inner.known_embeddings(namespace, document_ids, model_id)


class _RetryingEmbedder:
    """An ``Embedder`` that retries a failed batch with exponential backoff, then raises the last error."""

    def __init__(self, inner: Embedder, *, retries: int | None = None, delay_seconds: float | None = None) -> None:
        self.inner = inner
        self.model_id = inner.model_id
        self.dimension = inner.dimension
        self.batch_size = getattr(inner, "batch_size", None)
        self.retries = settings.QUARRY_EMBEDDING_RETRIES if retries is None else retries
        self.delay = settings.QUARRY_EMBEDDING_RETRY_DELAY_MS / 1000 if delay_seconds is None else delay_seconds

    async def embed(self, texts: Sequence[str], *, kind: Literal["document", "query"] = "document") -> list[list[float]]:
        for attempt in range(self.retries + 1):
            try:
                return await self.inner.embed(texts, kind=kind)
            except (rag.RAGValidationError, rag.RAGTypeError, rag.ConfigurationError):
                raise  # our input or our configuration: trying again cannot help
            except Exception as exc:
                if attempt == self.retries:
                    tries = f" (tried {attempt + 1} times)" if attempt else ""
                    raise rag.EmbedderError(f"{exc}{tries}") from exc
                logger.warning("embedding batch failed (attempt %s of %s), retrying: %s", attempt + 1, self.retries + 1, exc)
                await asyncio.sleep(self.delay * 2**attempt)
        raise AssertionError("unreachable")
