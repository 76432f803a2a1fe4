"""Documents, their chunks, and the audit trail. Every row carries its tenant.

A package cut where the old module's sections were; every name is re-exported here, so
``from knowledge.models import X`` is the one way to import them:

- ``text_search``: search languages, the ``regconfig`` column, the indexed-text expressions.
- ``lifecycle``: a document's statuses, its lease, and every transition (conditional UPDATEs).
- ``documents``: ``Document`` and the private stores' ``ConversationFile``.
- ``chunks``: ``Chunk``, cached vectors, term statistics, postings, corpus statistics.
- ``maintenance``: embedding model moves, search languages, index rebuilds, the audit trail.
- ``graph``: entities, mentions, relations, and the LLM pass's cache and meter.
"""

from __future__ import annotations

from knowledge.models.chunks import Chunk, CorpusStat, EmbeddingCache, Posting, TermStat
from knowledge.models.documents import ConversationFile, Document
from knowledge.models.graph import Entity, GraphExtraction, GraphStat, GraphTokenUsage, Mention, Relation
from knowledge.models.lifecycle import (
    API_STATUSES, CANCELLED_PHASES, DocumentQuerySet, DocumentStatus, from_now, lease_renew, live_lease,
)
from knowledge.models.maintenance import (
    AuditEvent, AuditTrigger, EmbeddingMigration, EmbeddingMigrationStatus, IndexRebuild, SearchLanguage,
)
from knowledge.models.text_search import (
    DEFAULT_SEARCH_CONFIG, DEFAULT_SEARCH_LANGUAGE, SEARCH_LANGUAGES, RegConfigField, indexed_text, search_config_name,
    tenant_config_sql, title_vector,
)

__all__ = [
    "API_STATUSES", "CANCELLED_PHASES", "DEFAULT_SEARCH_CONFIG", "DEFAULT_SEARCH_LANGUAGE", "SEARCH_LANGUAGES",
    "AuditEvent", "AuditTrigger", "Chunk", "ConversationFile", "CorpusStat", "Document", "DocumentQuerySet",
    "DocumentStatus",
    "EmbeddingCache", "EmbeddingMigration", "EmbeddingMigrationStatus", "Entity", "GraphExtraction", "GraphStat",
    "GraphTokenUsage", "IndexRebuild", "Mention", "Posting", "Relation", "RegConfigField", "SearchLanguage", "TermStat",
    "from_now", "indexed_text", "lease_renew", "live_lease", "search_config_name", "tenant_config_sql", "title_vector",
]
