"""django-q2 tasks of the knowledge base. Thin: they take ids and call one pipeline service.

Enqueued by dotted path (``knowledge.pipeline`` does it on commit); safe to run twice.
"""

from __future__ import annotations

from dataclasses import asdict

from knowledge import pipeline


def process_document(document_pk: int) -> str:
    """Extract, chunk, embed and index one document if it can be claimed; returns the outcome."""
    return pipeline.document_process(document_pk=document_pk).value


def reclaim_documents() -> dict[str, int]:
    """Every minute (a ``Schedule``): re-queue or fail documents whose worker stopped."""
    return asdict(pipeline.documents_reclaim())
