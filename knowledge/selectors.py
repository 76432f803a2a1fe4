"""Reads of the knowledge base. Every function takes the tenant."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from asgiref.sync import async_to_sync

from accounts.models import Tenant
from knowledge import rag
from knowledge.models import Chunk, Document, DocumentStatus
from knowledge.services import knowledge_service


def document_list(*, tenant: Tenant, status: str | None = None) -> "QuerySet[Document]":  # noqa: F821
    documents = Document.objects.for_tenant(tenant.pk).order_by("-updated_at", "-id")
    if status:
        documents = documents.filter(status=DocumentStatus(status))
    return documents


def document_get(*, tenant: Tenant, external_id: str) -> Document | None:
    return Document.objects.for_tenant(tenant.pk).filter(external_id=external_id).first()


def document_chunks(*, tenant: Tenant, document: Document) -> "QuerySet[Chunk]":  # noqa: F821
    return Chunk.objects.filter(tenant=tenant, document=document).order_by("ordinal")


def chunk_search(
    *,
    tenant: Tenant,
    query: str,
    mode: rag.SearchMode | str = rag.SearchMode.HYBRID,
    limit: int = 8,
    filters: Mapping[str, object] | None = None,
    min_score: float | None = None,
) -> list[rag.RAGHit]:
    """Ranked hits in the tenant, best first (raises the RAG API's validation errors)."""
    service = knowledge_service(tenant=tenant)
    return async_to_sync(service.search)(query, mode=mode, limit=limit, filters=filters, min_score=min_score)  # type: ignore[arg-type]


def chunk_fetch(*, tenant: Tenant, ids: Sequence[str]) -> list[rag.RAGChunk]:
    """The tenant's chunks with these ids, in the requested order, missing ones omitted."""
    return async_to_sync(knowledge_service(tenant=tenant, embedder=None).fetch)(ids)
