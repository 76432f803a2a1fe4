"""The knowledge graph (knowledge.graph): entities, their mentions in chunks, relations, and the LLM
pass's cache and meter."""

from __future__ import annotations

from django.db import models

from knowledge.models.chunks import Chunk
from knowledge.models.documents import Document

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
