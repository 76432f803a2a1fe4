"""Reads of the knowledge base. Every function takes the tenant."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from asgiref.sync import async_to_sync
from django.db.models import BooleanField, ExpressionWrapper, Q
from django.db.models.functions import Length, Substr

from accounts.models import Tenant
from knowledge import rag
from knowledge.models import Chunk, Document, DocumentStatus


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
    service = rag.tenant_service(tenant.slug)
    return async_to_sync(service.search)(query, mode=mode, limit=limit, filters=filters, min_score=min_score)  # type: ignore[arg-type]


def chunk_graph_search(
    *, tenant: Tenant, query: str, limit: int = 8, filters: Mapping[str, object] | None = None, min_score: float | None = None,
) -> rag.GraphSearchResult:
    """Hybrid search with the knowledge graph's leg in the tenant (raises the RAG API's errors)."""
    service = rag.tenant_service(tenant.slug)
    return async_to_sync(service.graph_search)(query, limit=limit, filters=filters, min_score=min_score)  # type: ignore[arg-type]


def graph_picture(*, tenant: Tenant, chunk_ids: Sequence[str], expand: bool = False) -> rag.Picture:
    """How the tenant's chunks ``chunk_ids`` connect through entities (an empty picture without a graph)."""
    service = rag.tenant_service(tenant.slug, embedder=None)
    if not service.has_graph:
        return rag.Picture()
    return async_to_sync(service.graph_picture)(chunk_ids, expand=expand)


def chunk_fetch(*, tenant: Tenant, ids: Sequence[str]) -> list[rag.RAGChunk]:
    """The tenant's chunks with these ids, in the requested order, missing ones omitted."""
    return async_to_sync(rag.tenant_service(tenant.slug, embedder=None).fetch)(ids)


# --- The editors' admin and the documents API ---------------------------------------------------

CHUNK_PREVIEW_CHARS = 160


def document_list_for_tenants(*, tenants: Sequence[Tenant] | None) -> "QuerySet[Document]":  # noqa: F821
    """Documents of ``tenants`` (None: every tenant, for superusers), newest first."""
    documents = Document.objects.select_related("tenant").order_by("-updated_at", "-id")
    return documents if tenants is None else documents.filter(tenant__in=list(tenants))


def document_progress(*, documents: "QuerySet[Document]", ids: Sequence[int]) -> list[dict[str, object]]:  # noqa: F821
    """Status and progress of the documents with these primary keys, among ``documents`` (already scoped)."""
    return list(
        documents.filter(pk__in=list(ids)).order_by().values(
            "id", "status", "progress", "error", "chunk_count", "version", "attempts", "cancel_requested", "updated_at"
        )
    )


def document_chunk_rows(*, tenant: Tenant, document: Document) -> "QuerySet[Chunk]":  # noqa: F821
    """The document's chunks in order, without their text or vectors: ordinal, offsets, a preview, embedded or not.

    The preview is cut in the database, so a page of chunks never loads megabytes of text.
    """
    return (
        Chunk.objects.filter(tenant=tenant, document=document)
        .order_by("ordinal")
        .values("chunk_id", "ordinal", "start_char", "end_char", "embedding_model")
        .annotate(
            preview=Substr("text", 1, CHUNK_PREVIEW_CHARS),
            length=Length("text"),
            embedded=ExpressionWrapper(Q(embedding__isnull=False), output_field=BooleanField()),
        )
    )
