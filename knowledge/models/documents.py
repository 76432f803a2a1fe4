"""Documents (one row per caller-chosen id and tenant) and the private stores' view of them."""

from __future__ import annotations

from django.contrib.postgres.fields import ArrayField
from django.contrib.postgres.indexes import GinIndex
from django.db import models
from django.db.models import Q, Value

from knowledge.models.lifecycle import DocumentQuerySet, DocumentStatus


# Who may read a document (issue 34): principals, "*" (the whole tenant, the default), "u:<user id>",
# "g:<group id>" (``knowledge.rag.types``). Its chunks hold a copy (``Chunk.access``) so every search
# filters in SQL; the two change together (``knowledge.services.access``).
EVERYONE_ACCESS = ["*"]


def access_field() -> ArrayField:
    """The access list column of documents and chunks: text[], ``{*}`` unless restricted."""
    return ArrayField(
        models.CharField(max_length=32), default=list_everyone, db_default=Value(EVERYONE_ACCESS, output_field=ArrayField(models.CharField(max_length=32))),
        blank=True,
    )


def list_everyone() -> list[str]:
    return list(EVERYONE_ACCESS)


class Document(models.Model):
    """One source document. ``external_id`` is the id the caller chose (unique per tenant).

    ``version`` counts completed replacements; ``text`` and ``chunk_count`` always
    describe the chunks currently stored (they change in the same transaction).
    """

    # No index of its own: (tenant, external_id) and (tenant, id) lead with the tenant.
    tenant = models.ForeignKey("accounts.Tenant", on_delete=models.CASCADE, db_index=False, related_name="documents")
    external_id = models.CharField(max_length=200)
    title = models.CharField(max_length=1000, blank=True)
    uri = models.CharField(max_length=2048, blank=True)
    text = models.TextField(blank=True)
    metadata = models.JSONField(default=dict, blank=True)
    content_hash = models.CharField(max_length=64, blank=True)
    source_file = models.FileField(upload_to="uploads/%Y/%m/", blank=True, max_length=500)
    source_name = models.CharField(max_length=255, blank=True)
    status = models.CharField(max_length=16, choices=DocumentStatus.choices, default=DocumentStatus.QUEUED)
    error = models.TextField(blank=True)
    progress = models.FloatField(default=0.0)  # 0..1 while processing; 1 when ready
    chunk_count = models.PositiveIntegerField(default=0)
    embedding_model = models.CharField(max_length=200, blank=True)
    version = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    # --- The background pipeline (knowledge.services) ----------------------------------
    # Every field below has a db_default too: the RAG backend inserts rows with raw SQL
    # that lists only the columns above. What the editor asked for lives in
    # source_text / source_file; ``text`` changes only when a new version lands.
    source_text = models.TextField(blank=True, default="", db_default="")  # pasted text, the source when set
    source_content_type = models.CharField(max_length=255, blank=True, default="", db_default="")
    source_size = models.PositiveBigIntegerField(default=0, db_default=0)  # bytes of source_file
    requested_by = models.CharField(max_length=200, blank=True, default="", db_default="")  # audit actor of the request
    # Bumped by every request (upload, edit, re-index, retry): a worker that finishes an
    # older generation re-queues the document instead of declaring it done.
    generation = models.PositiveIntegerField(default=0, db_default=0)
    # The worker holding the document; its heartbeat keeps lease_expires_at in the future.
    lease_id = models.CharField(max_length=32, blank=True, default="", db_default="")
    # Processing: the lease deadline. Queued: when the queue entry is presumed lost and
    # re-sent. Otherwise NULL. Indexed for the reclaim task's range scan.
    lease_expires_at = models.DateTimeField(null=True, blank=True, default=None, db_default=None, db_index=True)
    attempts = models.PositiveSmallIntegerField(default=0, db_default=0)  # claims of the current request
    cancel_requested = models.BooleanField(default=False, db_default=False)
    queued_at = models.DateTimeField(null=True, blank=True, default=None, db_default=None)
    started_at = models.DateTimeField(null=True, blank=True, default=None, db_default=None)
    finished_at = models.DateTimeField(null=True, blank=True, default=None, db_default=None)
    # What the worker is doing now, for the editors' live list: a phase (extracting,
    # embedding, indexing), its counts (texts embedded of the texts to embed, reused
    # ones included) and when it expects to finish (NULL: no estimate yet).
    phase = models.CharField(max_length=16, blank=True, default="", db_default="")
    phase_done = models.PositiveIntegerField(default=0, db_default=0)
    phase_total = models.PositiveIntegerField(default=0, db_default=0)
    eta_at = models.DateTimeField(null=True, blank=True, default=None, db_default=None)
    # Failed because an editor cancelled it (the list says "Cancelled", not "Failed").
    cancelled = models.BooleanField(default=False, db_default=False)
    # Who may read it ({*}: the whole tenant); copied to its chunks, which search filters on.
    access = access_field()

    objects = DocumentQuerySet.as_manager()

    @property
    def api_status(self) -> str:
        """The status the REST API and MCP report (``API_STATUSES``): ``cancelled`` for a cancelled request."""
        return "cancelled" if self.cancelled else self.status

    class Meta:
        constraints = [
            # The caller's id is the key: lookups by (tenant, external_id) on every ingest and GET.
            models.UniqueConstraint(fields=["tenant", "external_id"], name="document_tenant_external_id_unique"),
            # The key a distribution by tenant needs (Citus: every key holds the distribution column;
            # README, "Beyond one database"), and the target of tenant-qualified references to a document.
            models.UniqueConstraint(fields=["tenant", "id"], name="document_tenant_id_unique"),
            models.CheckConstraint(condition=Q(progress__gte=0) & Q(progress__lte=1), name="document_progress_0_1"),
        ]
        indexes = [
            # Admin and API lists: a tenant's documents by status, newest first.
            models.Index(fields=["tenant", "status", "-updated_at"], name="document_tenant_status"),
            # Document lists and reads filtered by the reader's principals (access && ...), and the
            # admin's "restricted to group X".
            GinIndex(fields=["access"], name="document_access_gin"),
        ]

    def __str__(self) -> str:
        return self.title or self.external_id


class ConversationFile(Document):
    """A document of a private store (a file a reader attached to a conversation; ``accounts.Tenant.private_to``),
    as the admin lists it: that it exists, its size and state, never its text."""

    class Meta:
        proxy = True
        verbose_name = "conversation file"
