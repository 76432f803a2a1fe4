"""Documents, their chunks, and the audit trail. Every row carries its tenant."""

from __future__ import annotations

from django.contrib.postgres.fields import ArrayField
from django.contrib.postgres.indexes import GinIndex
from django.contrib.postgres.search import SearchVectorField
from datetime import timedelta

from django.db import models
from django.db.models import Case, F, Func, Q, Value, When
from django.db.models.expressions import CombinedExpression
from django.db.models.functions import Coalesce, Now

# Text search: every tenant indexes and queries with one configuration ``quarry_<language>``
# (migration 0013): PostgreSQL's Snowball stemmer of that language, with ``unaccent`` in front
# where the server has the extension, over text passed through ``quarry_search_text`` (runs of
# Chinese, Japanese and Korean characters become overlapping bigrams, which the default parser
# then splits like words). The chunk stores its configuration (``Chunk.search_config``) and the
# tenant's statistics row the one its chunks and queries use (``CorpusStat.search_config``).
DEFAULT_SEARCH_LANGUAGE = "english"
# The Snowball languages of PostgreSQL 15 and later, and "simple" (no stemming, no stop words).
SEARCH_LANGUAGES = (
    "simple", "arabic", "armenian", "basque", "catalan", "danish", "dutch", "english", "finnish", "french",
    "german", "greek", "hindi", "hungarian", "indonesian", "irish", "italian", "lithuanian", "nepali",
    "norwegian", "portuguese", "romanian", "russian", "serbian", "spanish", "swedish", "tamil", "turkish", "yiddish",
)


def search_config_name(language: str) -> str:
    """The text search configuration of ``language`` (one of ``SEARCH_LANGUAGES``), as SQL knows it."""
    if language not in SEARCH_LANGUAGES:
        raise ValueError(f"unknown text search language {language!r}")
    return f"quarry_{language}"


DEFAULT_SEARCH_CONFIG = search_config_name(DEFAULT_SEARCH_LANGUAGE)


def tenant_config_sql(tenant_param: str = "%(tenant)s") -> str:
    """SQL for the tenant's text search configuration (its statistics row's; the default before it
    has one). Read in the statement that uses it, so it always matches the chunks that statement sees."""
    return (
        f"coalesce((SELECT s.search_config FROM knowledge_corpusstat s WHERE s.tenant_id = {tenant_param}), "
        f"'{DEFAULT_SEARCH_CONFIG}'::regconfig)"
    )


class RegConfigField(models.CharField):
    """A PostgreSQL ``regconfig`` (a text search configuration, stored as its OID, read back as its name).

    What ``to_tsvector`` takes in a generated column: the configuration is part of the row, so a
    tenant's chunks can be re-tokenized by changing it. Values are configuration names."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        kwargs.setdefault("max_length", 63)
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]

    def db_type(self, connection: object) -> str:
        return "regconfig"

    def cast_db_type(self, connection: object) -> str:
        return "regconfig"


def indexed_text(*fields: str) -> Func:
    """The text of ``fields`` as the index tokenizes it: joined by spaces, CJK runs as bigrams.
    Queries pass their text through the same SQL function, so both sides split alike."""
    parts: list[object] = []
    for name in fields:
        if parts:
            parts.append(Value(" "))
        parts.append(Coalesce(F(name), Value("")))
    joined = Func(*parts, template="(%(expressions)s)", arg_joiner=" || ", output_field=models.TextField())
    return Func(joined, function="quarry_search_text", output_field=models.TextField())


def title_vector() -> Func:
    """A chunk's title as its text search configuration tokenizes it (unweighted)."""
    return Func(F("search_config"), indexed_text("title"), function="to_tsvector", output_field=SearchVectorField())


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

    def mark_superseded(self) -> int:
        """A caller's text replaces whatever was requested: a new generation with no stored source
        and no lease, so a worker still busy with an older request can no longer land it."""
        return self.update(
            generation=F("generation") + 1, lease_id="", lease_expires_at=None, cancel_requested=False, attempts=0,
            source_text="", source_file="", source_name="", source_content_type="", source_size=0,
            queued_at=None, started_at=None,
        )


class Document(models.Model):
    """One source document. ``external_id`` is the id the caller chose (unique per tenant).

    ``version`` counts completed replacements; ``text`` and ``chunk_count`` always
    describe the chunks currently stored (they change in the same transaction).
    """

    tenant = models.ForeignKey("accounts.Tenant", on_delete=models.CASCADE, related_name="documents")
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

    objects = DocumentQuerySet.as_manager()

    @property
    def api_status(self) -> str:
        """The status the REST API and MCP report (``API_STATUSES``): ``cancelled`` for a cancelled request."""
        return "cancelled" if self.cancelled else self.status

    class Meta:
        constraints = [
            # The caller's id is the key: lookups by (tenant, external_id) on every ingest and GET.
            models.UniqueConstraint(fields=["tenant", "external_id"], name="document_tenant_external_id_unique"),
            models.CheckConstraint(condition=Q(progress__gte=0) & Q(progress__lte=1), name="document_progress_0_1"),
        ]
        indexes = [
            # Admin and API lists: a tenant's documents by status, newest first.
            models.Index(fields=["tenant", "status", "-updated_at"], name="document_tenant_status"),
        ]

    def __str__(self) -> str:
        return self.title or self.external_id


class ConversationFile(Document):
    """A document of a private store (a file a reader attached to a conversation; ``accounts.Tenant.private_to``),
    as the admin lists it: that it exists, its size and state, never its text."""

    class Meta:
        proxy = True
        verbose_name = "conversation file"


class Chunk(models.Model):
    """A searchable piece of a document: ``text == document.text[start_char:end_char]`` when the
    offsets are set; both are NULL for a chunk that is not a verbatim slice of its document
    (a custom chunker may return any text)."""

    # No index of its own: (tenant, chunk_id) leads with the tenant.
    tenant = models.ForeignKey("accounts.Tenant", on_delete=models.CASCADE, db_index=False, related_name="+")
    # Its index serves replacement and deletion of a document's chunks.
    document = models.ForeignKey(Document, on_delete=models.CASCADE, related_name="chunks")
    chunk_id = models.CharField(max_length=210)
    ordinal = models.PositiveIntegerField()
    text = models.TextField()
    title = models.CharField(max_length=1000, blank=True)
    uri = models.CharField(max_length=2048, blank=True)
    metadata = models.JSONField(default=dict, blank=True)
    start_char = models.PositiveIntegerField(null=True, blank=True)
    end_char = models.PositiveIntegerField(null=True, blank=True)
    content_hash = models.CharField(max_length=64)
    # double precision[], L2-normalized on write so cosine similarity is a dot product.
    embedding = ArrayField(models.FloatField(), null=True, blank=True)
    embedding_model = models.CharField(max_length=200, blank=True)
    # The tenant's configuration when the chunk was written; a language change rewrites all of a
    # tenant's chunks in one transaction (knowledge.services.text_search), so they never mix two.
    search_config = RegConfigField(default=DEFAULT_SEARCH_CONFIG, db_default=DEFAULT_SEARCH_CONFIG)
    # The title's lexemes carry weight A (the text's the default, D): keyword search counts a title
    # occurrence TITLE_WEIGHT times (knowledge.rag.backends.postgres.bm25), BM25F over the two fields.
    search_vector = models.GeneratedField(
        expression=Func(
            Func(title_vector(), Value("A"), function="setweight", output_field=SearchVectorField()),
            Func(F("search_config"), indexed_text("text"), function="to_tsvector", output_field=SearchVectorField()),
            template="(%(expressions)s)", arg_joiner=" || ", output_field=SearchVectorField(),
        ),
        output_field=SearchVectorField(),
        db_persist=True,
    )
    # True once the chunk has its postings and (with pgvector) its place in the HNSW index.
    # A large ingestion stores chunks with False and leaves that work to the background
    # indexer; until then search scores them exactly (the "backlog"), so they are found at once.
    indexed = models.BooleanField(default=False, db_default=False)

    class Meta:
        constraints = [
            # Fetch by id and the identity of a chunk across re-ingestion.
            models.UniqueConstraint(fields=["tenant", "chunk_id"], name="chunk_tenant_chunk_id_unique"),
        ]
        indexes = [
            # Keyword matching (@@) before BM25 scoring.
            GinIndex(fields=["search_vector"], name="chunk_search_vector_gin"),
            # Metadata filters: JSONB containment (@>).
            GinIndex(fields=["metadata"], name="chunk_metadata_gin", opclasses=["jsonb_path_ops"]),
            # The backlog: a tenant's chunks awaiting the indexer (small; empty in steady state).
            models.Index(fields=["tenant", "id"], condition=models.Q(indexed=False), name="chunk_backlog"),
        ]

    def __str__(self) -> str:
        return self.chunk_id


class EmbeddingCache(models.Model):
    """Vectors as the worker computes them, before its chunks land: keyed by tenant, model and the
    content hash of the embedded text (``embedding_input``), so a killed or retried run re-uses
    them instead of embedding everything again. A landing document's entries are dropped in the
    chunk swap's transaction (its chunks then hold the vectors); the reclaim task prunes the
    entries of work nobody came back for."""

    tenant = models.ForeignKey("accounts.Tenant", on_delete=models.CASCADE, db_index=False, related_name="+")
    model_id = models.CharField(max_length=200)
    content_hash = models.CharField(max_length=64)
    # double precision[], L2-normalized, exactly as the chunk will store it.
    embedding = ArrayField(models.FloatField())
    created_at = models.DateTimeField(db_default=Now())

    class Meta:
        constraints = [
            # The lookup of a resumed run, the upsert of a running one and the swap's delete.
            models.UniqueConstraint(fields=["tenant", "model_id", "content_hash"], name="embedding_cache_key"),
        ]
        indexes = [
            # The reclaim task's pruning of old entries.
            models.Index(fields=["created_at"], name="embedding_cache_created"),
        ]


class TermStat(models.Model):
    """Document frequency of one lexeme among a tenant's chunks (BM25's IDF).

    Maintained in the same transaction as every chunk insert and delete, so the
    statistics a query sees always match the chunks it can see.
    """

    tenant = models.ForeignKey("accounts.Tenant", on_delete=models.CASCADE, related_name="+")
    lexeme = models.TextField()
    df = models.IntegerField()

    class Meta:
        constraints = [
            # The IDF lookup of each query term, and the upsert key.
            models.UniqueConstraint(fields=["tenant", "lexeme"], name="termstat_tenant_lexeme_unique"),
        ]


class Posting(models.Model):
    """One lexeme of one chunk, for keyword search that reads only what it ranks.

    A query reads, for each of its terms, the postings with the highest
    ``impact`` (BM25's term-frequency part, length-normalized) from one index
    range, instead of scoring every chunk that matches any term. Rows change in
    the same transaction as their chunk.
    """

    pk = models.CompositePrimaryKey("chunk", "lexeme")  # also the index for removing a chunk's postings
    # No database-level foreign keys: the backend inserts ~100 postings per chunk
    # and removes them with the chunk itself, so per-row constraint checks buy nothing.
    chunk = models.ForeignKey(Chunk, on_delete=models.CASCADE, db_constraint=False, db_index=False, related_name="+")
    tenant = models.ForeignKey("accounts.Tenant", on_delete=models.CASCADE, db_constraint=False, db_index=False, related_name="+")
    lexeme = models.TextField()
    tf = models.IntegerField()  # occurrences in the chunk (at most 256 a field), a title's counted TITLE_WEIGHT times
    dl = models.IntegerField()  # the chunk's length: its number of distinct lexemes
    impact = models.FloatField()  # tf / (tf + k1 * (1 - b + b * dl / avgdl)) with avgdl when written

    class Meta:
        indexes = [
            # Keyword search: the top postings of one term in one tenant, best first, index-only.
            models.Index(fields=["tenant", "lexeme", "-impact"], include=["chunk", "tf", "dl"], name="posting_term_impact"),
        ]


class CorpusStat(models.Model):
    """Per-tenant chunk count and total length (BM25's N and average document length).

    A chunk's length is its number of distinct lexemes, ``length(search_vector)``.
    """

    tenant = models.OneToOneField("accounts.Tenant", on_delete=models.CASCADE, primary_key=True, related_name="+")
    chunk_count = models.BigIntegerField(default=0)
    token_count = models.BigIntegerField(default=0)
    # The text search configuration of all the tenant's chunks, which its queries tokenize with.
    # Ingests hold this row FOR KEY SHARE while they write chunks with it, and a language change
    # FOR UPDATE while it rewrites them: every statement sees one configuration, old or new.
    search_config = RegConfigField(default=DEFAULT_SEARCH_CONFIG, db_default=DEFAULT_SEARCH_CONFIG)
    # The model id of every vector the tenant's chunks hold, which its queries are embedded with
    # ("" until the first vectors land: they set it). Changed only by ``manage.py reembed``'s switch,
    # under this row's FOR UPDATE lock; an ingest whose vectors are of another model is refused.
    embedding_model = models.CharField(max_length=200, blank=True, default="", db_default="")


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


# --- The knowledge graph (knowledge.graph) ------------------------------------------------------
# Mentions are the source of truth: a chunk's mentions and relations are written and removed
# in the same transaction as the chunk itself (knowledge.graph.store), so the graph never
# names a chunk that is gone. Entities exist while something mentions them.


class Entity(models.Model):
    """A named thing in one tenant's documents: a document title, a heading, a name, an acronym.

    ``normalized`` is the key (``knowledge.graph.extract.normalize``). ``chunk_count`` is how
    many chunks mention it (graph expansion's IDF, and pruning of entities in too many chunks);
    ``defined_count`` how many are *about* it (their title or a heading): above 0, its name is
    in the tenant's gazetteer and is looked for in every chunk.
    """

    tenant = models.ForeignKey("accounts.Tenant", on_delete=models.CASCADE, db_index=False, related_name="+")
    normalized = models.CharField(max_length=300)
    name = models.CharField(max_length=300)
    type = models.CharField(max_length=32)
    chunk_count = models.IntegerField(default=0)
    defined_count = models.IntegerField(default=0)

    class Meta:
        verbose_name_plural = "entities"
        constraints = [
            # The key of every upsert, and the lookup of the names a query contains.
            models.UniqueConstraint(fields=["tenant", "normalized"], name="entity_tenant_normalized_unique"),
        ]
        # No index on the counts: every extraction changes them, and an index on them would
        # cost each of those updates an index entry (and PostgreSQL its in-place HOT update).
        # The gazetteer load and the entity browser read a tenant's rows through the unique key.

    def __str__(self) -> str:
        return self.name


class Mention(models.Model):
    """One chunk mentions one entity. ``extractor`` is the most trusted source that found it
    (title, heading, reference, llm, name, acronym); ``weight`` how strongly (0..1)."""

    # Also the index of a chunk's mentions (removal with the chunk; a seed chunk's entities).
    pk = models.CompositePrimaryKey("tenant", "chunk", "entity")
    # No database-level foreign keys, as for postings: rows go with their chunk, in the same transaction.
    tenant = models.ForeignKey("accounts.Tenant", on_delete=models.CASCADE, db_constraint=False, db_index=False, related_name="+")
    chunk = models.ForeignKey(Chunk, on_delete=models.CASCADE, db_constraint=False, db_index=False, related_name="+")
    entity = models.ForeignKey(Entity, on_delete=models.CASCADE, db_constraint=False, db_index=False, related_name="mentions")
    document = models.ForeignKey(Document, on_delete=models.CASCADE, db_constraint=False, db_index=False, related_name="+")
    extractor = models.CharField(max_length=16)
    weight = models.FloatField()

    class Meta:
        indexes = [
            # Graph expansion and the entity browser: an entity's chunks, strongest mentions first, ties by
            # chunk (the expansion's ORDER BY weight DESC, chunk_id LIMIT n reads n entries, not every tie:
            # a name's mentions all weigh alike, and a common one has hundreds).
            models.Index(fields=["tenant", "entity", "-weight", "chunk"], include=["extractor"], name="mention_entity_top"),
        ]


class Relation(models.Model):
    """A triple one chunk states: ``subject predicate object`` (both ends are mentions of that chunk)."""

    pk = models.CompositePrimaryKey("tenant", "chunk", "subject", "predicate", "object")
    tenant = models.ForeignKey("accounts.Tenant", on_delete=models.CASCADE, db_constraint=False, db_index=False, related_name="+")
    chunk = models.ForeignKey(Chunk, on_delete=models.CASCADE, db_constraint=False, db_index=False, related_name="+")
    subject = models.ForeignKey(Entity, on_delete=models.CASCADE, db_constraint=False, db_index=False, related_name="+")
    predicate = models.CharField(max_length=100)
    object = models.ForeignKey(Entity, on_delete=models.CASCADE, db_constraint=False, db_index=False, related_name="+")
    document = models.ForeignKey(Document, on_delete=models.CASCADE, db_constraint=False, db_index=False, related_name="+")
    extractor = models.CharField(max_length=16)
    weight = models.FloatField()

    class Meta:
        indexes = [
            # Triplet search, neighbours and the graph leg: the relations of an entity, from either end,
            # strongest first, ties by the other end (the leg reads an entity's top few, the same ones every time).
            models.Index(fields=["tenant", "subject", "-weight", "object"], name="relation_subject_weight"),
            models.Index(fields=["tenant", "object", "-weight", "subject"], name="relation_object_weight"),
        ]


class GraphStat(models.Model):
    """Per tenant: the gazetteer's version, bumped in every transaction that changes which names
    are defined (processes cache the matcher they build from it by version)."""

    tenant = models.OneToOneField("accounts.Tenant", on_delete=models.CASCADE, primary_key=True, related_name="+")
    gazetteer_version = models.BigIntegerField(default=0)


class GraphExtraction(models.Model):
    """The LLM extractor's answer for one chunk text (cached: the same text, model and prompt
    version are never sent twice). ``triples`` is ``[[subject, subject type, predicate, object, object type], ...]``."""

    pk = models.CompositePrimaryKey("tenant", "content_hash", "model", "prompt_version")
    tenant = models.ForeignKey("accounts.Tenant", on_delete=models.CASCADE, db_index=False, related_name="+")
    content_hash = models.CharField(max_length=64)
    model = models.CharField(max_length=200)
    prompt_version = models.CharField(max_length=16)
    triples = models.JSONField(default=list)
    tokens = models.IntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)


class GraphTokenUsage(models.Model):
    """Tokens the LLM extractor spent for one tenant in one calendar month (the budget's meter)."""

    pk = models.CompositePrimaryKey("tenant", "month")
    tenant = models.ForeignKey("accounts.Tenant", on_delete=models.CASCADE, db_index=False, related_name="+")
    month = models.DateField()  # the first day of the month
    tokens = models.BigIntegerField(default=0)
