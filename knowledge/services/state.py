"""A document's pipeline state: who may process it, and the transitions between states.

Status of a document (the latest request for it):

- ``queued``: an upload, edit, re-index or retry is waiting for a worker.
- ``processing``: a worker holds a *lease* on it (``lease_id``, ``lease_expires_at``) and
  renews it from a heartbeat while it extracts, chunks and embeds.
- ``ready``: the requested version is indexed. Set in the same transaction that swaps the
  chunks (the backend calls ``mark_ready`` there), so a reader never sees a half-indexed document.
- ``failed``: the request did not land; ``error`` says why in a sentence naming the file.
  Cancelled work ends here too. Previous chunks are never touched by a failure:
  ``version`` and ``chunk_count`` say what is still searchable.

Every request bumps ``generation``; a worker that finishes an older generation re-queues
the document in the same transaction, so concurrent requests end in the latest one.
The transitions themselves, and nothing else, write status, lease and generation:
``knowledge.models.lifecycle`` (conditional UPDATEs). The functions here decide when each
runs, lock rows in a fixed order and enqueue the worker's task on commit.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass

from django.conf import settings
from django.db import transaction
from django_q.models import Schedule
from django_q.tasks import async_task

from common.schedules import schedule_ensure
from knowledge.models import Document
from knowledge.services.index_health import repair_schedule_ensure

PROCESS_TASK = "knowledge.tasks.process_document"
RECLAIM_TASK = "knowledge.tasks.reclaim_documents"
RECLAIM_SCHEDULE_NAME = "knowledge: reclaim stalled documents"  # also created by migration 0005
TASK_GROUP = "knowledge-documents"


@dataclass(frozen=True)
class Claim:
    document: Document  # as it was when claimed: the source, title, metadata and generation to process
    lease_id: str


def task_timeout() -> int:
    return int(settings.Q_CLUSTER.get("timeout") or 600)  # type: ignore[union-attr]


def document_task_timeout() -> int:
    """django-q2's per-task ``timeout`` for the document task: -1 (none) unless one is configured.

    A redelivery of a task still running (the ORM broker's ``retry``) is harmless: the copy
    finds the document leased to a live worker and is skipped."""
    return settings.QUARRY_DOCUMENT_TASK_TIMEOUT or -1


def requeue_after() -> int:
    # A queued document unclaimed for this long lost its queue entry: by then even the ORM
    # broker would have redelivered it.
    return int(settings.Q_CLUSTER.get("retry") or task_timeout() + 60)  # type: ignore[union-attr]


def claim(document_pk: int) -> Claim | None:
    """Take the document with one conditional UPDATE: queued, or processing with an expired lease."""
    lease_id = uuid.uuid4().hex
    taken = Document.objects.filter(pk=document_pk).claim(
        lease_id=lease_id, lease_seconds=settings.QUARRY_DOCUMENT_LEASE_SECONDS,
        max_attempts=settings.QUARRY_DOCUMENT_MAX_ATTEMPTS,
    )
    if not taken:
        return None
    document = Document.objects.select_related("tenant").filter(pk=document_pk, lease_id=lease_id).first()
    return Claim(document, lease_id) if document is not None else None


def request_processing(pks: Sequence[int], *, actor: str) -> int:
    """Record a new request for each document and enqueue its task on commit (inside a transaction).

    A document a live worker holds stays ``processing`` with that worker, which re-queues it
    when it sees the new generation; every other document becomes ``queued``.
    """
    if not pks:
        return 0
    # Lock in primary-key order first: two bulk requests over overlapping rows cannot deadlock.
    locked = list(Document.objects.select_for_update().filter(pk__in=list(pks)).order_by("pk").values_list("pk", flat=True))
    count = Document.objects.filter(pk__in=locked).mark_requested(actor=actor, requeue_after=requeue_after())
    enqueue_on_commit(locked)
    return count


def requeue_now(pk: int) -> None:
    """Release the lease and queue the document again for the request now on it."""
    Document.objects.filter(pk=pk).mark_queued(requeue_after=requeue_after())
    enqueue_on_commit([pk])


def land(document: Document) -> bool:
    """A worker's chunks for ``document`` (as claimed) have just landed, in this transaction: release its
    lease and return True; or, when a newer request arrived while it ran, queue that one and return False."""
    if Document.objects.filter(pk=document.pk).mark_landed(generation=document.generation):
        return True
    requeue_now(document.pk)
    return False


def cancel_request(pk: int, *, error: str) -> None:
    """Ask the live worker on the document to stop; it fails the request with ``error`` when it does."""
    Document.objects.filter(pk=pk).mark_cancel_requested(error=error)


def fail_now(document: Document, *, actor: str, error: str, bump: bool = True, cancelled: bool = False) -> None:
    """Fail the latest request at once (any worker on it loses its lease and writes nothing)."""
    Document.objects.filter(pk=document.pk).mark_failed(actor=actor, error=error, bump=bump, cancelled=cancelled)


def enqueue_on_commit(pks: Sequence[int]) -> None:
    """Queue the worker's task for each document once the transaction commits."""
    if not pks:
        return
    pks = list(pks)

    def send() -> None:
        reclaim_schedule_ensure()
        repair_schedule_ensure()
        for pk in pks:
            async_task(PROCESS_TASK, pk, group=TASK_GROUP, timeout=document_task_timeout())

    # robust: a broker outage must not turn a saved upload into an error page; the
    # documents stay queued and the reclaim task re-sends them.
    transaction.on_commit(send, robust=True)


def reclaim_schedule_ensure() -> None:
    """Create the every-minute reclaim ``Schedule`` unless it exists (migration 0005 creates it first)."""
    schedule_ensure(RECLAIM_SCHEDULE_NAME, RECLAIM_TASK, schedule_type=Schedule.MINUTES, minutes=1, repeats=-1)


def document_label(document: Document) -> str:
    """How messages name a document: its file name, else its title, else its id."""
    return document.source_name or document.title or document.external_id


def previous_note(document: Document) -> str:
    return "The previous version stays searchable." if document.version else "Nothing was indexed."


def cancel_message(document: Document, actor: str) -> str:
    return f"{document_label(document)} was cancelled by {actor} before it finished. {previous_note(document)}"
