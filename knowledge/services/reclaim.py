"""Repair of work whose worker stopped: the every-minute ``reclaim_documents`` task.

A killed worker stops renewing its lease; this re-queues documents whose lease expired,
up to ``QUARRY_DOCUMENT_MAX_ATTEMPTS`` runs, then marks them failed with the reason. It
also re-sends queued documents whose queue entry looks lost (e.g. a Redis restart).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from django.conf import settings
from django.db import connection, transaction
from django.db.models.functions import Now

from knowledge.models import Document, DocumentStatus
from knowledge.services import state

logger = logging.getLogger(__name__)

_RECLAIM_BATCH = 500  # documents per reclaim run; the next run takes the rest
# Vectors of work nobody came back for (failed for good, deleted) are kept this long, so
# that a retry within it still resumes; then pruned, this many rows per reclaim run.
EMBEDDING_CACHE_DAYS = 7
_PRUNE_BATCH = 20_000


@dataclass(frozen=True)
class ReclaimResult:
    requeued: int
    failed: int
    resent: int


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
            label = state.document_label(document)
            row = Document.objects.filter(pk=document.pk)
            if document.status == DocumentStatus.QUEUED:
                row.mark_resent(requeue_after=state.requeue_after())
                to_send.append(document.pk)
                resent += 1
            elif document.cancel_requested:
                state.fail_now(document, actor=document.requested_by, error=document.error or state.cancel_message(document, "an editor"), bump=False, cancelled=True)
                failed += 1
            elif document.attempts >= max_attempts:
                state.fail_now(document, actor=document.requested_by, bump=False, error=(
                    f"{label} could not be processed: the worker stopped before finishing {document.attempts} "
                    f"time{'s' if document.attempts != 1 else ''} (killed, or out of memory). {state.previous_note(document)}"))
                failed += 1
            else:
                row.mark_reclaimed(requeue_after=state.requeue_after(), error=(
                    f"Attempt {document.attempts} of {max_attempts} on {label} was interrupted (the worker "
                    "stopped); it is queued again and resumes where it stopped."))
                to_send.append(document.pk)
                requeued += 1
        state.enqueue_on_commit(to_send)
    pruned = embedding_cache_prune()
    if requeued or failed or resent or pruned:
        logger.warning("reclaimed documents: %s re-queued, %s failed, %s re-sent; %s stale cached vectors pruned",
                       requeued, failed, resent, pruned)
    return ReclaimResult(requeued, failed, resent)


def embedding_cache_prune() -> int:
    """Delete cached vectors older than ``EMBEDDING_CACHE_DAYS`` (a bounded batch); returns how many."""
    with connection.cursor() as cursor:
        cursor.execute(
            "DELETE FROM knowledge_embeddingcache WHERE id IN (SELECT id FROM knowledge_embeddingcache "
            "WHERE created_at < now() - make_interval(days => %s) ORDER BY created_at LIMIT %s)",
            [EMBEDDING_CACHE_DAYS, _PRUNE_BATCH],
        )
        return cursor.rowcount
