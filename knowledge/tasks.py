"""django-q2 tasks of the knowledge base. Thin: they take ids and call one service.

Enqueued by dotted path on commit (``knowledge.services.state``, ``knowledge.services.indexing``);
safe to run twice.
"""

from __future__ import annotations

from dataclasses import asdict

from knowledge.services import graphing, index_health, indexing, processing, reclaim, reembedding, text_search


def process_document(document_pk: int) -> str:
    """Extract, chunk, embed and index one document if it can be claimed; returns the outcome."""
    return processing.document_process(document_pk=document_pk).value


def reclaim_documents() -> dict[str, int]:
    """Every minute (a ``Schedule``): re-queue or fail documents whose worker stopped,
    and re-queue the indexer for any tenant whose backlog is not being worked on, and the
    re-index of any tenant whose text search language was not applied."""
    return {
        **asdict(reclaim.documents_reclaim()), "backlogs_queued": indexing.backlogs_reclaim(),
        "languages_queued": text_search.search_languages_reclaim(),
        "reembeds_queued": reembedding.reembeds_reclaim(),
    }


def index_backlog(namespace: str) -> int:
    """Index a tenant's backlog (postings, HNSW) for up to a minute; returns chunks indexed."""
    return indexing.backlog_index(namespace=namespace, seconds=indexing.TASK_SECONDS)


def apply_search_language(namespace: str) -> bool:
    """Re-index a tenant's keyword data in the text search language it asked for; returns whether it changed."""
    return text_search.search_language_apply(namespace=namespace)


def reembed(migration_pk: int) -> str:
    """Move a tenant's vectors to another embedding model for up to a minute (then it queues the rest); returns its status."""
    return reembedding.reembed_run(migration_pk)


def extract_graph_llm(namespace: str) -> int:
    """The knowledge graph's LLM pass over a tenant's unanswered chunk texts, for up to a minute; returns texts answered."""
    return graphing.llm_task(namespace)


def repair_indexes() -> dict[str, object]:
    """Every 10 minutes (a ``Schedule``): rebuild the most bloated shared search index past the bound, if any."""
    return index_health.indexes_repair(trigger="schedule")
