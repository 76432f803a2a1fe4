"""Maintenance of a tenant's index (embedding model moves, search languages, index rebuilds) and the audit trail."""

from __future__ import annotations

from django.contrib.postgres.fields import ArrayField
from django.db import models

from knowledge.models.text_search import DEFAULT_SEARCH_LANGUAGE, SEARCH_LANGUAGES


class EmbeddingMigrationStatus(models.TextChoices):
    RUNNING = "running", "Running"
    DONE = "done", "Done"
    FAILED = "failed", "Failed"
    CANCELLED = "cancelled", "Cancelled"


class EmbeddingMigration(models.Model):
    """One move of a tenant's vectors to another embedding model (``manage.py reembed``).

    The worker embeds every chunk with ``target_model`` into ``EmbeddingCache`` (keyed by the
    chunk's content hash, so a stopped run resumes where it was), while searches keep using the
    vectors the chunks hold. When every chunk has its new vector, one transaction swaps them in,
    sets the tenant's model (``CorpusStat.embedding_model``) and drops the staged copies: searches
    see the old vectors or the new ones, never a mix. At most one runs per tenant.
    """

    tenant = models.ForeignKey("accounts.Tenant", on_delete=models.CASCADE, related_name="+")
    source_model = models.CharField(max_length=200, blank=True)  # the tenant's model when it started
    target_model = models.CharField(max_length=200)  # a model id, as chunks store it
    target_name = models.CharField(max_length=200)  # the name it was asked by (QUARRY_EMBEDDING_MODEL's values)
    status = models.CharField(max_length=16, choices=EmbeddingMigrationStatus.choices, default=EmbeddingMigrationStatus.RUNNING)
    done = models.BigIntegerField(default=0)  # chunks whose new vector is ready
    total = models.BigIntegerField(default=0)  # the tenant's chunks at the last count
    position = models.BigIntegerField(default=0)  # the last chunk pk staged: a resumed run continues after it
    requested_by = models.CharField(max_length=200, blank=True)
    error = models.TextField(blank=True)
    started_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)  # the worker's heartbeat: the reclaim re-queues a silent run
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-started_at"]
        verbose_name = "embedding model move"
        constraints = [
            models.UniqueConstraint(
                fields=["tenant"], condition=models.Q(status="running"), name="embedding_migration_one_running",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.source_model or 'no vectors'} -> {self.target_model} ({self.status})"

    @property
    def percent(self) -> int:
        return 100 if self.status == EmbeddingMigrationStatus.DONE else int(100 * self.done / self.total) if self.total else 0


class SearchLanguage(models.Model):
    """The text search language a tenant asked for (stemming and stop words of its documents).

    ``language`` is the request; ``CorpusStat.search_config`` is what the index uses now. They
    differ while the background re-index runs (``knowledge.tasks.apply_search_language``), and
    search keeps using the old one until the new index is complete.
    """

    tenant = models.OneToOneField("accounts.Tenant", on_delete=models.CASCADE, primary_key=True, related_name="+")
    language = models.CharField(
        max_length=32, choices=[(name, name.capitalize()) for name in SEARCH_LANGUAGES], default=DEFAULT_SEARCH_LANGUAGE,
    )
    requested_at = models.DateTimeField(null=True, blank=True)
    applied_at = models.DateTimeField(null=True, blank=True)  # when the index last switched to ``language``
    error = models.TextField(blank=True)  # the last re-index's failure ("" once one succeeds)

    def __str__(self) -> str:
        return self.language


class IndexRebuild(models.Model):
    """One ``REINDEX INDEX CONCURRENTLY`` of a search index (knowledge.services.index_health).

    Not tenant data: the indexes are shared by every tenant. The newest finished row of an
    index is its "last rebuild" and its per-entry size the baseline its bloat is measured against.
    """

    index_name = models.CharField(max_length=63)  # PostgreSQL's identifier limit
    trigger = models.CharField(max_length=16)  # "schedule" | "command"
    started_at = models.DateTimeField()
    finished_at = models.DateTimeField(null=True, blank=True)
    seconds = models.FloatField(null=True, blank=True)
    size_before = models.BigIntegerField()
    size_after = models.BigIntegerField(null=True, blank=True)
    live_rows = models.BigIntegerField()  # the table's live rows when the rebuild started
    bloat_before = models.FloatField(null=True, blank=True)
    error = models.TextField(blank=True)

    class Meta:
        # The last rebuild of each index (the health report, the admin).
        indexes = [models.Index(fields=["index_name", "-started_at"], name="indexrebuild_name_started")]
        ordering = ["-started_at"]

    def __str__(self) -> str:
        return f"{self.index_name} rebuilt {self.started_at:%Y-%m-%d %H:%M}"


class AuditTrigger(models.TextChoices):
    USER = "user", "User"
    AGENT = "agent", "Agent"


class AuditEvent(models.Model):
    """Who changed what in the knowledge base, and whether a person or the agent asked."""

    tenant = models.ForeignKey("accounts.Tenant", on_delete=models.CASCADE, related_name="+")
    actor = models.CharField(max_length=200, blank=True)
    trigger = models.CharField(max_length=8, choices=AuditTrigger.choices)
    action = models.CharField(max_length=32)
    document_ids = ArrayField(models.CharField(max_length=200), default=list)
    chunk_count = models.IntegerField(default=0)
    at = models.DateTimeField(auto_now_add=True)

    class Meta:
        indexes = [models.Index(fields=["tenant", "-at"], name="auditevent_tenant_at")]  # newest events per tenant
        ordering = ["-at"]

    def __str__(self) -> str:
        return f"{self.action} {len(self.document_ids)} document(s) by {self.actor or '?'} ({self.trigger})"
