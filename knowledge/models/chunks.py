"""Chunks and what keyword and semantic search read beside them: cached vectors, term statistics, postings."""

from __future__ import annotations

from django.contrib.postgres.fields import ArrayField
from django.contrib.postgres.indexes import GinIndex
from django.contrib.postgres.search import SearchVectorField
from django.db import models
from django.db.models import F, Func, Value
from django.db.models.functions import Now

from knowledge.models.documents import Document, access_field
from knowledge.models.text_search import DEFAULT_SEARCH_CONFIG, RegConfigField, indexed_text, title_vector


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
    # Its document's access list, copied in the transaction that writes or changes it: search, fetch and
    # the graph filter on it in the same statement (``c.access && <the reader's principals>``).
    access = access_field()

    class Meta:
        constraints = [
            # Fetch by id and the identity of a chunk across re-ingestion.
            models.UniqueConstraint(fields=["tenant", "chunk_id"], name="chunk_tenant_chunk_id_unique"),
            # The key a distribution by tenant needs (Citus: every key holds the distribution column;
            # README, "Beyond one database"), and the target of tenant-qualified references to a chunk.
            # It carries the access list so a reader's test on a chunk found by id (the postings path of
            # keyword search) is an index-only scan, not a fetch of the wide row (migration 0021).
            models.UniqueConstraint(fields=["tenant", "id"], include=["access"], name="chunk_tenant_id_unique"),
        ]
        indexes = [
            # Keyword matching (@@) before BM25 scoring.
            GinIndex(fields=["search_vector"], name="chunk_search_vector_gin"),
            # Metadata filters: JSONB containment (@>).
            GinIndex(fields=["metadata"], name="chunk_metadata_gin", opclasses=["jsonb_path_ops"]),
            # The backlog: a tenant's chunks awaiting the indexer (small; empty in steady state).
            models.Index(fields=["tenant", "id"], condition=models.Q(indexed=False), name="chunk_backlog"),
            # A reader's restricted search: candidate counts (plan._few_candidates) over access && principals.
            GinIndex(fields=["access"], name="chunk_access_gin"),
            # Whether a tenant restricts anything (namespaces.resolve, once per search): restricted chunks only.
            models.Index(fields=["tenant"], condition=~models.Q(access__contains=["*"]), name="chunk_restricted"),
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

    # No index of its own: (tenant, lexeme) leads with the tenant.
    tenant = models.ForeignKey("accounts.Tenant", on_delete=models.CASCADE, db_index=False, related_name="+")
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
