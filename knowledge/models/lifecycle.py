"""A document's lifecycle: its statuses, its lease, and every transition between them.

THE one writer of ``status``, the lease (``lease_id``, ``lease_expires_at``, ``attempts``),
``generation`` and the progress fields of a ``Document``: every transition is a
``DocumentQuerySet`` method (a conditional UPDATE) or, for the worker's heartbeat, ``lease_renew``.
Nothing else writes them. ``knowledge.services.state`` decides when each runs (row locks in a
fixed order, tasks enqueued on commit); the PostgreSQL backend writes a document's content and
calls ``mark_ready`` in the transaction that swaps its chunks. It sits at the models layer so
that the RAG API's backend, which imports no service, can call it too.
"""

from __future__ import annotations

from datetime import timedelta

from django.db import connections, models
from django.db.models import Case, F, Q, Value, When
from django.db.models.expressions import CombinedExpression
from django.db.models.functions import Now


class DocumentStatus(models.TextChoices):
    QUEUED = "queued", "Queued"
    PROCESSING = "processing", "Processing"
    READY = "ready", "Ready"
    FAILED = "failed", "Failed"


def from_now(seconds: float) -> CombinedExpression:
    """A database-clock timestamp: every process compares leases on one clock."""
    return Now() + timedelta(seconds=seconds)


def live_lease() -> Q:
    """A worker holds the document and has renewed its lease in time."""
    return Q(status=DocumentStatus.PROCESSING, lease_expires_at__gt=Now()) & ~Q(lease_id="")


# Where a cancelled document's work stopped, kept in its ``phase`` (the REST API's ``cancelled.phase``).
CANCELLED_PHASES = ("queued", "processing", "extracting", "embedding", "indexing")
# What the REST API and MCP report: the stored status, except that a cancelled request (stored as
# failed, with ``cancelled`` set) is its own status, as the admin shows it (``Document.api_status``).
API_STATUSES = ("queued", "processing", "ready", "failed", "cancelled")


def _cancelled_phase() -> Case:
    return Case(
        When(status=DocumentStatus.QUEUED, then=Value("queued")),
        When(phase="", then=Value("processing")),  # claimed, not yet extracting
        default=F("phase"),
    )


class DocumentQuerySet(models.QuerySet["Document"]):
    """Reads, and the pipeline's state transitions as conditional UPDATEs (``knowledge.services.state``
    decides when each runs; every one of them changes only the rows it still applies to)."""

    def for_tenant(self, tenant_id: int) -> DocumentQuerySet:
        return self.filter(tenant_id=tenant_id)

    def readable_by(self, principals: list[str] | None) -> DocumentQuerySet:
        """Documents whose access list names one of ``principals`` (a reader's, ``knowledge.rag.Reader``);
        None: every document (trusted code, tenant admins). One ``&&`` on the GIN-indexed column."""
        return self if principals is None else self.filter(access__overlap=list(principals))

    def in_api_status(self, status: str) -> DocumentQuerySet:
        """Documents whose ``api_status`` is ``status`` (one of ``API_STATUSES``; failed excludes cancelled)."""
        if status == "cancelled":
            return self.filter(cancelled=True)
        found = self.filter(status=DocumentStatus(status))
        return found.filter(cancelled=False) if status == DocumentStatus.FAILED else found

    def with_live_lease(self) -> DocumentQuerySet:
        return self.filter(live_lease())

    def claim(self, *, lease_id: str, lease_seconds: float, max_attempts: int) -> int:
        """Take the rows that are queued, or processing under an expired lease with attempts left."""
        claimable = Q(status=DocumentStatus.QUEUED) | Q(
            status=DocumentStatus.PROCESSING, lease_expires_at__lt=Now(), attempts__lt=max_attempts
        )
        return self.filter(claimable, cancel_requested=False).update(
            status=DocumentStatus.PROCESSING, lease_id=lease_id, lease_expires_at=from_now(lease_seconds),
            # progress is kept: a resumed run starts where the last one was (it only moves forward).
            attempts=F("attempts") + 1, started_at=Now(), finished_at=None, updated_at=Now(), eta_at=None,
        )

    def mark_requested(self, *, actor: str, requeue_after: float) -> int:
        """A new request on each row: a row a live worker holds stays with it (the worker sees the new
        generation when it finishes), every other row becomes ``queued``."""
        live = live_lease()
        return self.update(
            generation=F("generation") + 1,
            requested_by=actor[:200],
            cancel_requested=False,
            cancelled=False,
            attempts=0,
            error="",
            status=Case(When(live, then=Value(DocumentStatus.PROCESSING)), default=Value(DocumentStatus.QUEUED)),
            lease_id=Case(When(live, then=F("lease_id")), default=Value("")),
            lease_expires_at=Case(When(live, then=F("lease_expires_at")), default=from_now(requeue_after)),
            progress=Case(When(live, then=F("progress")), default=Value(0.0)),
            phase=Case(When(live, then=F("phase")), default=Value("")),
            started_at=Case(When(live, then=F("started_at")), default=Value(None), output_field=models.DateTimeField()),
            queued_at=Now(),
            finished_at=None,
            updated_at=Now(),
        )

    def mark_queued(self, *, requeue_after: float) -> int:
        """Release any lease and queue again, fresh attempts, for the request now on the rows."""
        return self.update(
            status=DocumentStatus.QUEUED, progress=0.0, phase="", eta_at=None, lease_id="", lease_expires_at=from_now(requeue_after),
            attempts=0, error="", queued_at=Now(), started_at=None, updated_at=Now(),
        )

    def mark_failed(self, *, actor: str, error: str, bump: bool, cancelled: bool = False) -> int:
        """Fail the latest request at once (a worker on it loses its lease and writes nothing).
        ``bump``: this is itself a new request (an upload refused at once), not the end of one.
        ``cancelled``: an editor cancelled it; ``phase`` then keeps where the work was stopped
        (``CANCELLED_PHASES``: queued, a worker's phase, or processing before its first phase)."""
        return self.update(
            status=DocumentStatus.FAILED, error=error, progress=0.0, phase=_cancelled_phase() if cancelled else Value(""),
            eta_at=None, lease_id="", lease_expires_at=None, cancelled=cancelled,
            cancel_requested=False, finished_at=Now(), updated_at=Now(), requested_by=actor[:200],
            **({"generation": F("generation") + 1, "attempts": 0, "queued_at": Now()} if bump else {}),
        )

    def mark_ready(self) -> int:
        """The rows' new chunks have just been swapped in (call it in the swap's transaction): ready, no error.

        The lease is left to ``mark_landed``: a row a worker holds is released only by that worker,
        which checks the generation it processed."""
        return self.update(status=DocumentStatus.READY, error="", progress=1.0, updated_at=Now())

    def mark_landed(self, *, generation: int) -> int:
        """A worker's chunks landed (after ``mark_ready``, same transaction): release its lease, if the
        request it processed (``generation``) is still the latest; 0 means a newer one arrived."""
        return self.filter(generation=generation).update(
            lease_id="", lease_expires_at=None, finished_at=Now(), cancel_requested=False, phase="", eta_at=None,
        )

    def mark_ingested(self, *, actor: str) -> int:
        """A synchronous ingest landed on the rows (after ``mark_ready``, same transaction): who asked, and
        when it ended."""
        return self.update(requested_by=actor[:200], finished_at=Now())

    def mark_resent(self, *, requeue_after: float) -> int:
        """A queued row whose queue entry looks lost is sent again: its next re-send deadline moves on."""
        return self.update(lease_expires_at=from_now(requeue_after))

    def mark_reclaimed(self, *, requeue_after: float, error: str) -> int:
        """A worker stopped renewing its lease: queue the row again with the attempts it has used.

        Progress stays: the next run re-uses the vectors this one stored and resumes there."""
        return self.update(
            status=DocumentStatus.QUEUED, lease_id="", lease_expires_at=from_now(requeue_after), phase="", eta_at=None,
            queued_at=Now(), updated_at=Now(), error=error,
        )

    def mark_cancel_requested(self, *, error: str) -> int:
        """Ask the live worker on the rows to stop; it records ``error`` when it does (``mark_failed``)."""
        return self.update(cancel_requested=True, error=error)

    def mark_superseded(self) -> int:
        """A caller's text replaces whatever was requested: a new generation with no stored source
        and no lease, so a worker still busy with an older request can no longer land it."""
        return self.update(
            generation=F("generation") + 1, lease_id="", lease_expires_at=None, cancel_requested=False, attempts=0,
            source_text="", source_file="", source_name="", source_content_type="", source_size=0,
            queued_at=None, started_at=None,
        )


def lease_renew(
    *, pk: int, lease_id: str, lease_seconds: float, progress: float, phase: str, done: int, total: int,
    eta_seconds: float | None, using: str = "default",
) -> bool | None:
    """The worker's heartbeat: renew its lease and write its progress in one statement.

    Returns whether an editor asked to cancel, or None when ``lease_id`` no longer holds the row
    (reclaimed, superseded, deleted). Progress on the row only moves forward (GREATEST), whatever
    the run reports. Raw SQL: one round trip that also reads the cancel flag (RETURNING)."""
    with connections[using].cursor() as cursor:
        cursor.execute(
            "UPDATE knowledge_document SET lease_expires_at = now() + make_interval(secs => %s), "
            "progress = GREATEST(progress, %s), phase = %s, phase_done = %s, phase_total = %s, "
            "eta_at = CASE WHEN %s::float8 IS NULL THEN NULL ELSE now() + make_interval(secs => %s::float8) END "
            "WHERE id = %s AND lease_id = %s RETURNING cancel_requested",
            [lease_seconds, round(progress, 4), phase, done, total, eta_seconds, eta_seconds, pk, lease_id],
        )
        row = cursor.fetchone()
    return None if row is None else bool(row[0])
