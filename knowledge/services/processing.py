"""The background worker: claim a document, extract, chunk, embed, and swap its chunks in.

Faults:

- A worker writes only while it still holds the lease and nobody asked to cancel: the
  worker embeds first (``RAGService.prepare_ingest``, no transaction open), then, in one
  transaction of its own, checks both under a row lock, swaps the chunks in
  (``RAGService.write_ingest``, on this thread's connection) and records the outcome
  (``state.land``). A cancelled, deleted, superseded or reclaimed document is never
  overwritten by a worker that lost it, and chunks never land without their status.
- A killed worker stops renewing its lease; ``knowledge.services.reclaim`` re-queues it.
- Embedding-provider errors are retried per batch with exponential backoff
  (``QUARRY_EMBEDDING_RETRIES``), then the document fails with the provider's message.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence
from enum import Enum
from typing import Literal

from asgiref.sync import async_to_sync
from django.conf import settings
from django.core.files.storage import default_storage
from django.db import DatabaseError, connection, transaction

from knowledge import rag
from knowledge.extraction import ExtractionError, extract
from knowledge.models import Chunk, Document, lease_renew
from knowledge.rag import factory, limits
from knowledge.rag.chunking import PassageChunker, chunker_output
from knowledge.rag.protocols import Chunker, Embedder
from knowledge.rag.wrappers import RetryingEmbedder
from knowledge.services import indexing, state

logger = logging.getLogger(__name__)

DEFAULT: Literal["default"] = "default"
EmbedderChoice = Embedder | None | Literal["default"]

# Progress: extraction is the first tenth, embedding most of the rest; the chunk swap sets 1.
_EXTRACTED = 0.1
_EMBEDDED = 0.95


class Outcome(str, Enum):
    """What one ``document_process`` call did (stored as the django-q2 task result)."""

    READY = "ready"
    FAILED = "failed"
    CANCELLED = "cancelled"
    REQUEUED = "requeued"  # a newer request arrived while it ran: it runs again
    SKIPPED = "skipped"  # nothing to claim: done already, or another worker holds it
    LOST = "lost"  # the lease was lost (reclaimed, deleted): the new holder decides


class _Stop(Exception):
    """Raised inside the ingest to abandon it without writing."""


class _Cancelled(_Stop):
    pass


class _LeaseLost(_Stop):
    pass


class _Failure(Exception):
    """A reason to fail the document, already phrased for the editor."""


def document_process(*, document_pk: int, embedder: EmbedderChoice = DEFAULT) -> Outcome:
    """Claim the document and, if the claim succeeds, extract, chunk, embed and swap its chunks.

    Idempotent: a document that is not queued (or whose lease has not expired) is
    skipped, so a duplicate or late task does nothing. Expected failures are recorded
    on the row and returned as ``Outcome.FAILED``; a database error propagates (the lease
    then expires and the reclaim task retries the document).
    """
    claim = state.claim(document_pk)
    if claim is None:
        return Outcome.SKIPPED
    document = claim.document
    label = state.document_label(document)
    landed: Outcome | None = None
    error: str | None = None
    cancelled = False
    with _LeaseKeeper(document.pk, claim.lease_id, floor=document.progress) as keeper:
        try:
            keeper.phase(Phase.EXTRACTING)
            source, passages = _source_document(document, label)
            keeper.report(_EXTRACTED)
            keeper.check()
            chunker = _chunker(source, passages)
            planned = _quota_check(document, source, label, chunker=chunker)
            service = _worker_service(claim, embedder, chunker)
            keeper.phase(Phase.EMBEDDING)
            plan = async_to_sync(service.prepare_ingest)(
                [source], actor=document.requested_by or None,
                on_progress=lambda fraction: keeper.report(_EXTRACTED + (_EMBEDDED - _EXTRACTED) * fraction, check=True),
                on_counts=keeper.counts,
            )
            try:
                landed = _land(claim, service, plan, keeper, planned)
            except rag.EmbeddingModelChanged as changed:
                # manage.py reembed switched the tenant's model while this embedded: embed again with the new one, once.
                landed = _land(claim, service, async_to_sync(service.embed_again)(plan, changed), keeper, planned)
            if keeper.first_counts is not None:
                reused, total = keeper.first_counts
                logger.info("document %s (%s): embedded %s of %s texts; %s re-used (stored chunks or an interrupted run)",
                            document.pk, label, total - reused, total, reused)
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
            if exc.field == "documents":  # a bound of the whole document (chunks per request): say them all
                error += ". " + limits.editor_bounds(settings.QUARRY_UPLOAD_MAX_BYTES)
        except rag.RAGError as exc:
            error = f"{label} could not be indexed: {exc}"
        except DatabaseError:
            raise
        except Exception as exc:
            logger.exception("processing document %s (%s) failed", document.pk, label)
            error = f"{label} could not be processed because of an internal error ({type(exc).__name__}); the details are in the worker log"
    if landed is not None:
        return landed
    return _finish_unlanded(claim, error=error, cancelled=cancelled)


def _land(claim: state.Claim, service: rag.RAGService, plan: rag.PreparedIngest, keeper: _LeaseKeeper, planned: int | None) -> Outcome:
    """Swap the document's chunks in and record the outcome, in one transaction, while the lease holds.

    The lease and the cancel flag are read under the document's row lock, which the transaction keeps
    to its end: a reclaim, cancel, delete or newer request waits for the commit, or wins before it and
    this writes nothing (``_LeaseLost``, ``_Cancelled``, raised out of the transaction). ``planned``: the
    document's chunk count when its tenant bounds chunks, checked again with the tenant row locked.
    """
    document = claim.document
    keeper.phase(Phase.INDEXING)
    with transaction.atomic():
        row = Document.objects.select_for_update().filter(pk=document.pk).values_list("lease_id", "cancel_requested").first()
        if row is None or row[0] != claim.lease_id:
            raise _LeaseLost()
        if row[1]:
            raise _Cancelled()
        if planned is not None:
            _quota_check(document, None, state.document_label(document), planned=planned, lock=True)  # type: ignore[arg-type]
        stored = service.write_ingest(plan)
        indexing.after_write(namespace=plan.namespace, stored=stored)
        return Outcome.READY if state.land(document) else Outcome.REQUEUED


def _source_document(document: Document, label: str) -> tuple[rag.RAGDocument, tuple[str, ...]]:
    """The version to index: pasted text, else the stored file, else the current text; with the
    file's own passages (slides, groups of rows), each to be a chunk of its own, when it has them."""
    title: str | None = None
    passages: tuple[str, ...] = ()
    if document.source_text.strip():
        text = document.source_text
    elif document.source_file:
        data = _read_source(document, label)
        extracted = extract(
            data, filename=document.source_name or document.source_file.name,
            content_type=document.source_content_type or None, max_bytes=settings.QUARRY_UPLOAD_MAX_BYTES,
        )
        text, title, passages = extracted.text, extracted.title, extracted.passages
    elif document.text.strip():
        text = document.text
    else:
        raise _Failure(f"{label} has no stored source to process; upload the file or paste the text again")
    if len(text) > limits.MAX_CHARS_PER_DOCUMENT:
        raise _Failure(f"{label} has {len(text):,} characters of text, over the limit of {limits.MAX_CHARS_PER_DOCUMENT:,} per document. "
                       + limits.editor_bounds(settings.QUARRY_UPLOAD_MAX_BYTES))
    title = (document.title or title or document.source_name)[: limits.MAX_TITLE_CHARS] or None
    try:
        source = rag.RAGDocument(document.external_id, text, title=title, uri=document.uri or None, metadata=document.metadata or {})
    except (rag.RAGValidationError, rag.RAGTypeError) as exc:
        raise _Failure(f"{label} could not be indexed: {exc.field}: {exc.message}") from None
    return source, passages


def _chunker(source: rag.RAGDocument, passages: Sequence[str]) -> Chunker:
    """The configured chunker, keeping each of the file's passages whole (``PassageChunker``) when it has them."""
    return PassageChunker(factory.chunker(), {source.id: passages}) if passages else factory.chunker()


def _read_source(document: Document, label: str) -> bytes:
    name = document.source_file.name
    try:
        size = default_storage.size(name)
        if size > settings.QUARRY_UPLOAD_MAX_BYTES:
            raise _Failure(f"{label} is {limits.describe_bytes(size)}, over the upload limit of {limits.describe_bytes(settings.QUARRY_UPLOAD_MAX_BYTES)}")
        with default_storage.open(name, "rb") as handle:
            return handle.read()
    except FileNotFoundError:
        raise _Failure(f"{label}: the uploaded file is missing from storage; upload it again") from None


def _quota_check(
    document: Document, source: rag.RAGDocument, label: str, *, chunker: Chunker | None = None, planned: int | None = None, lock: bool = False,
) -> int | None:
    """The chunks ``source`` makes when its tenant bounds its chunks (``Tenant.chunk_quota``), else None.

    Raises ``_Failure`` when the tenant's other documents' chunks and these would pass the bound:
    first before any embedding (cheap), then again in the chunk swap's transaction with the tenant
    row locked (``lock``), so two documents processed at once cannot both take the last room.
    """
    tenant = document.tenant
    if tenant.chunk_quota is None:
        return None
    if planned is None:
        # What the service's ingest will cut (the same chunker and reader); read to one past the bound at most.
        pieces, _, _ = chunker_output(chunker or factory.chunker(), source, tenant.chunk_quota + 1)
        planned = len(pieces)
    if lock:
        tenant_row = type(tenant).objects.select_for_update().filter(pk=tenant.pk).values_list("chunk_quota", flat=True).first()
        if tenant_row is None:
            raise _LeaseLost()
    others = Chunk.objects.filter(tenant_id=tenant.pk).exclude(document_id=document.pk).count()
    if others + planned > tenant.chunk_quota:
        name = f" ({tenant.chunk_quota_name})" if tenant.chunk_quota_name else ""
        raise _Failure(f"{label} makes {planned:,} passages; with the {others:,} already stored that is over the limit of "
                       f"{tenant.chunk_quota:,} passages{name}")
    return planned


def _worker_service(claim: state.Claim, embedder: EmbedderChoice, chunker: Chunker) -> rag.RAGService:
    """The tenant's RAG service, with a retrying embedder and ``chunker`` (``_chunker``)."""
    document = claim.document
    # By default the tenant's embedding model (manage.py reembed may switch it while this runs: the
    # write then refuses the vectors and the worker embeds again with the new one).
    follow = embedder == DEFAULT
    base = rag.tenant_service(document.tenant.slug, embedder=rag.tenant_embedder(document.tenant.slug) if follow else embedder)
    model = None
    if base.embedder is not None:
        model = RetryingEmbedder(base.embedder, retries=settings.QUARRY_EMBEDDING_RETRIES,
                                 delay_seconds=settings.QUARRY_EMBEDDING_RETRY_DELAY_MS / 1000)
    return rag.service(base.backend, model, chunker, namespace=document.tenant.slug,
                       embedder_for_model=factory.embedder_for_model if follow else None)


def _finish_unlanded(claim: state.Claim, *, error: str | None, cancelled: bool) -> Outcome:
    """Record a run that wrote nothing: failed, cancelled, or re-queued for a newer request."""
    with transaction.atomic():
        row = Document.objects.select_for_update().filter(pk=claim.document.pk).first()
        if row is None or row.lease_id != claim.lease_id:
            return Outcome.LOST
        # The latest action wins: a cancel request is cleared by any later request.
        if row.cancel_requested:
            state.fail_now(row, actor=row.requested_by, error=row.error or state.cancel_message(row, "an editor"), bump=False, cancelled=True)
            return Outcome.CANCELLED
        if row.generation != claim.document.generation:
            state.requeue_now(row.pk)  # this run's failure concerned an older request
            return Outcome.REQUEUED
        if cancelled:
            state.fail_now(row, actor=row.requested_by, error=state.cancel_message(row, "an editor"), bump=False, cancelled=True)
            return Outcome.CANCELLED
        state.fail_now(row, actor=row.requested_by, error=error or f"{state.document_label(row)} could not be processed", bump=False)
        return Outcome.FAILED


class Phase(str, Enum):
    """What a worker is doing, as the live list shows it."""

    EXTRACTING = "extracting"
    EMBEDDING = "embedding"
    INDEXING = "indexing"


# An estimate of the time left needs this much embedding of the current run to go on.
_ETA_MIN_SECONDS = 3.0


class _LeaseKeeper:
    """While the worker computes, a thread renews its lease and writes its progress.

    The work itself runs on the event loop (the ingest) or in long blocking calls
    (extraction), where the ORM cannot be used; this thread has its own connection.
    It also notices a cancel request or a lost lease; ``check()`` then raises inside
    the work, which abandons it before anything is written.
    """

    def __init__(self, document_pk: int, lease_id: str, *, floor: float = 0.0) -> None:
        """``floor``: the progress an interrupted earlier run of this request reached; shown
        progress never goes below it (a resumed run re-uses that run's vectors)."""
        self.document_pk = document_pk
        self.lease_id = lease_id
        self.lease_seconds = settings.QUARRY_DOCUMENT_LEASE_SECONDS
        self.interval = min(1.0, self.lease_seconds / 3)
        self._progress = max(0.0, min(1.0, floor))
        self._phase = ""
        self._done_count = 0
        self._total_count = 0
        self._rate_start: tuple[float, int] | None = None  # (monotonic time, done) when this run began embedding
        self._eta_seconds: float | None = None
        self.first_counts: tuple[int, int] | None = None  # (re-used, total) when embedding began
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

    def phase(self, phase: Phase) -> None:
        """Enter a phase (its counts and estimate start afresh). Called from any thread, never blocks."""
        self._phase = phase.value
        self._eta_seconds = None
        if phase is not Phase.EMBEDDING:
            self._done_count = self._total_count = 0

    def counts(self, done: int, total: int) -> None:
        """Embedding counts (re-used vectors included); the estimate is this run's rate over what is left."""
        now = time.monotonic()
        self._done_count, self._total_count = done, total
        if self._rate_start is None:
            self._rate_start = (now, done)
            self.first_counts = (done, total)
            return
        started, done_then = self._rate_start
        elapsed = now - started
        if elapsed >= _ETA_MIN_SECONDS and done > done_then:
            self._eta_seconds = (total - done) * elapsed / (done - done_then)

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
        try:
            cancel = lease_renew(
                pk=self.document_pk, lease_id=self.lease_id, lease_seconds=self.lease_seconds, progress=self._progress,
                phase=self._phase, done=self._done_count, total=self._total_count, eta_seconds=self._eta_seconds,
            )
        except DatabaseError as exc:
            # Keep trying: if the database stays away the lease lapses and the work is reclaimed.
            logger.warning("lease heartbeat for document %s failed: %s", self.document_pk, exc)
            return
        if cancel is None:
            self._stop = _LeaseLost
        elif cancel:
            self._stop = _Cancelled
