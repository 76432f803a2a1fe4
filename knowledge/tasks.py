"""django-q2 tasks of the knowledge base. Thin: they take ids and call one pipeline service.

Enqueued by dotted path (``knowledge.pipeline`` does it on commit); safe to run twice.
"""

from __future__ import annotations

from dataclasses import asdict

from knowledge import indexer, pipeline


def process_document(document_pk: int) -> str:
    """Extract, chunk, embed and index one document if it can be claimed; returns the outcome."""
    return pipeline.document_process(document_pk=document_pk).value


def reclaim_documents() -> dict[str, int]:
    """Every minute (a ``Schedule``): re-queue or fail documents whose worker stopped,
    and re-queue the indexer for any tenant whose backlog is not being worked on."""
    return {**asdict(pipeline.documents_reclaim()), "backlogs_queued": indexer.backlogs_reclaim()}


def index_backlog(namespace: str) -> int:
    """Index a tenant's backlog (postings, HNSW) for up to a minute; returns chunks indexed."""
    return indexer.backlog_index(namespace=namespace, seconds=indexer.TASK_SECONDS)
