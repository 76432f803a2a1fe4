"""Reads of the knowledge base. Every function takes the tenant."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from asgiref.sync import async_to_sync
from django.db.models import BooleanField, ExpressionWrapper, Q
from django.db.models.functions import Length, Substr

from accounts.models import Tenant
from knowledge import rag
from knowledge.models import Chunk, Document, DocumentStatus, Entity, Mention, Relation


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
) -> tuple[rag.RAGHit, ...]:
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


def chunk_fetch(*, tenant: Tenant, ids: Sequence[str]) -> tuple[rag.RAGChunk, ...]:
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


# --- The entity browser (admin) ---------------------------------------------------------------------

ENTITY_ROWS = 50


def entity_mentions(*, entity: Entity) -> list[dict[str, object]]:
    """The entity's strongest mentions (its tenant's chunks), with each chunk's document: at most ``ENTITY_ROWS``."""
    return list(
        Mention.objects.filter(tenant_id=entity.tenant_id, entity=entity)
        .order_by("-weight", "chunk_id")
        .values("extractor", "weight", "chunk__chunk_id", "chunk__ordinal", "document_id", "document__external_id", "document__title")
        [:ENTITY_ROWS]
    )


def entity_neighbors(*, entity: Entity) -> list[dict[str, object]]:
    """Entities its chunks relate it to (either end of a relation), strongest first: at most ``ENTITY_ROWS``."""
    as_subject = Relation.objects.filter(tenant_id=entity.tenant_id, subject=entity).values_list("object_id", "predicate", "weight")
    as_object = Relation.objects.filter(tenant_id=entity.tenant_id, object=entity).values_list("subject_id", "predicate", "weight")
    totals: dict[int, list[object]] = {}
    for other, predicate, weight in [*as_subject[:2000], *as_object[:2000]]:
        entry = totals.setdefault(other, [0.0, set(), 0])
        entry[0] += weight  # type: ignore[operator]
        entry[1].add(predicate)  # type: ignore[union-attr]
        entry[2] += 1  # type: ignore[operator]
    best = sorted(totals.items(), key=lambda kv: (-kv[1][0], kv[0]))[:ENTITY_ROWS]  # type: ignore[operator]
    names = {e.pk: e for e in Entity.objects.filter(tenant_id=entity.tenant_id, pk__in=[pk for pk, _ in best])}
    return [
        {"entity": names[pk], "weight": round(float(w), 3), "predicates": sorted(p), "chunks": n}  # type: ignore[arg-type]
        for pk, (w, p, n) in best if pk in names
    ]
