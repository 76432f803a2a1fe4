"""Reads of the knowledge base. Every function takes the tenant, and every read of content the reader
(``rag.Reader``, ``rag.reader_of(context)``; None only for those who read everything: issue 34). The
reader is a required keyword, so no read can forget it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, TypedDict

from asgiref.sync import async_to_sync
from django.db.models import BooleanField, ExpressionWrapper, OuterRef, Q, Subquery
from django.db.models.functions import Length
from django.utils import timezone

from accounts.models import Tenant
from knowledge import rag
from knowledge.rag.protocols import declared_dimension, embedder_model_id
from knowledge.models import Chunk, CorpusStat, Document, DocumentStatus, Entity, Mention, Relation


def _principals(reader: rag.Reader | None) -> list[str] | None:
    return None if reader is None else reader.principals


def document_list(*, tenant: Tenant, reader: rag.Reader | None, status: str | None = None) -> "QuerySet[Document]":  # noqa: F821
    """``tenant``'s documents the reader may read, newest first; ``status``: one of ``API_STATUSES`` (failed excludes cancelled)."""
    documents = Document.objects.for_tenant(tenant.pk).readable_by(_principals(reader)).order_by("-updated_at", "-id")
    return documents.in_api_status(status) if status else documents


def document_get(*, tenant: Tenant, external_id: str, reader: rag.Reader | None) -> Document | None:
    """The document, or None when the tenant has none of that id or the reader may not read it (alike)."""
    return Document.objects.for_tenant(tenant.pk).readable_by(_principals(reader)).filter(external_id=external_id).first()


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
    fusion: rag.Fusion | str | None = None,
    fusion_weight: float | None = None,
    reader: rag.Reader | None,
) -> tuple[rag.RAGHit, ...]:
    """Ranked hits in the tenant that the reader may read, best first (raises the RAG API's validation errors).
    ``fusion`` / ``fusion_weight``: hybrid mode's fusion (None: the configured default)."""
    service = rag.tenant_service(tenant.slug, reader=reader)
    return async_to_sync(service.search)(query, mode=mode, limit=limit, filters=filters, min_score=min_score,  # type: ignore[arg-type]
                                         fusion=fusion, fusion_weight=fusion_weight)


def chunk_rerank(*, query: str, hits: Sequence[rag.RAGHit], limit: int) -> rag.Reranked:
    """``hits`` of a search for ``query`` re-ranked by the deployment's re-ranker and cut to ``limit``
    (``rag.rerank``: never raises for the model's sake; ``Reranked.applied`` / ``reason`` say what happened)."""
    return async_to_sync(rag.rerank)(query, hits, limit=limit)


def chunk_graph_search(
    *, tenant: Tenant, query: str, limit: int = 8, filters: Mapping[str, object] | None = None, min_score: float | None = None,
    fusion: str | None = None, fusion_weight: float | None = None, reader: rag.Reader | None,
) -> rag.GraphSearchResult:
    """Hybrid search (``fusion``: None, the deployment's) with the knowledge graph's leg in the tenant
    (raises the RAG API's errors), as far as the reader may read."""
    service = rag.tenant_service(tenant.slug, reader=reader)
    return async_to_sync(service.graph_search)(query, limit=limit, filters=filters, min_score=min_score,  # type: ignore[arg-type]
                                               fusion=fusion, fusion_weight=fusion_weight)


def graph_picture(*, tenant: Tenant, chunk_ids: Sequence[str], expand: bool = False, reader: rag.Reader | None) -> rag.Picture:
    """How the tenant's chunks ``chunk_ids`` connect through entities (an empty picture without a graph),
    among the chunks the reader may read."""
    service = rag.tenant_service(tenant.slug, embedder=None, reader=reader)
    if not service.has_graph:
        return rag.Picture()
    return async_to_sync(service.graph_picture)(chunk_ids, expand=expand)


def chunk_fetch(*, tenant: Tenant, ids: Sequence[str], reader: rag.Reader | None) -> tuple[rag.RAGChunk, ...]:
    """The tenant's chunks with these ids, in the requested order, missing and unreadable ones omitted alike."""
    return async_to_sync(rag.tenant_service(tenant.slug, embedder=None, reader=reader).fetch)(ids)


# --- The editors' admin and the documents API ---------------------------------------------------

def document_list_for_tenants(*, tenants: Sequence[Tenant] | None) -> "QuerySet[Document]":  # noqa: F821
    """Documents of ``tenants`` (None: every tenant, for superusers), newest first."""
    documents = Document.objects.select_related("tenant").order_by("-updated_at", "-id")
    return documents if tenants is None else documents.filter(tenant__in=list(tenants))


PROGRESS_FIELDS = (
    "id", "status", "progress", "error", "chunk_count", "version", "attempts", "cancel_requested", "updated_at",
    "embedding_model", "phase", "phase_done", "phase_total", "eta_at", "cancelled",
)


def document_list_label(*, title: str, source_name: str, external_id: str) -> str:
    """How the editors' list names a document: the title an editor gave or its file carried, else the
    file name, with the id beside it when that differs ("Harbor notes (harbor-notes.md)")."""
    name = title or source_name or external_id
    return name if name == external_id else f"{name} ({external_id})"


def document_progress(*, documents: "QuerySet[Document]", ids: Sequence[int]) -> list[dict[str, object]]:  # noqa: F821
    """Status, progress and phase of the documents with these primary keys, among ``documents`` (already scoped),
    each with its ``display`` (``document_display``) for the configured embedding model and its ``label``
    (``document_list_label``: processing can set the title, from the file's own)."""
    configured = current_embedding_model()
    now = timezone.now()
    rows = list(documents.filter(pk__in=list(ids)).order_by().annotate(tenant_model=tenant_model_subquery())
                .values(*PROGRESS_FIELDS, "tenant_model", "title", "source_name", "external_id"))
    return [
        {**row, "display": document_display(row, current_model=row.pop("tenant_model") or configured, now=now),
         "label": document_list_label(title=row.pop("title"), source_name=row.pop("source_name"), external_id=row.pop("external_id"))}
        for row in rows
    ]


def current_embedding_model() -> str | None:
    """The model id a tenant without vectors gets (None: embeddings are off). A tenant that holds
    vectors keeps its own (``CorpusStat.embedding_model``) until ``manage.py reembed`` moves it."""
    embedder = rag.default_embedder()
    return None if embedder is None else embedder_model_id(embedder, declared_dimension(embedder))


def tenant_model_subquery() -> Subquery:
    """The embedding model of the row's tenant ("" or NULL before its first vectors), for ``annotate``."""
    return Subquery(CorpusStat.objects.filter(tenant=OuterRef("tenant")).values("embedding_model")[:1])


class DocumentDisplay(TypedDict):
    state: str  # queued | processing | ready | failed | cancelled
    label: str  # "Embedding 1,200 / 3,300", "Cancelled", ...
    detail: str  # the estimate of the time left, or why the work is waiting
    percent: int
    eta_seconds: int | None
    reindex_needed: bool


def document_display(row: Mapping[str, Any], *, current_model: str | None, now: datetime) -> DocumentDisplay:
    """How the editors' list shows a document's state (``row``: the ``PROGRESS_FIELDS`` of a document).

    Cancelled work is its own state, not a failure. A processing document names its phase,
    with counts while embedding and an estimate of the time left once the worker has one.
    ``reindex_needed``: its chunks were embedded with another model than its tenant's
    (``current_model``), so semantic search cannot use them until it is re-indexed.
    """
    status = str(row["status"])
    percent = round(float(row["progress"]) * 100)
    eta: int | None = None
    detail = ""
    if status == DocumentStatus.PROCESSING:
        state = "processing"
        phase = str(row.get("phase") or "")
        if row.get("cancel_requested"):
            label = "Cancelling…"
        elif phase == "embedding" and row.get("phase_total"):
            label = f"Embedding {int(row['phase_done']):,} / {int(row['phase_total']):,}"
        elif phase:
            label = f"{phase.capitalize()}…"
        else:
            label = f"Processing {percent}%"
        eta_at = row.get("eta_at")
        if eta_at is not None and not row.get("cancel_requested"):
            eta = max(0, round((eta_at - now).total_seconds()))
            detail = f"about {_duration(eta)} left"
    elif status == DocumentStatus.FAILED:
        state = "cancelled" if row.get("cancelled") else "failed"
        label = "Cancelled" if row.get("cancelled") else "Failed"
        percent = 0
    elif status == DocumentStatus.QUEUED:
        state, label = "queued", "Queued"
        if percent and int(row.get("attempts") or 0):
            detail = f"resumes at {percent}%"
    else:
        state, label = "ready", "Ready"
    model = str(row.get("embedding_model") or "")
    reindex = bool(current_model and model and model != current_model and int(row.get("chunk_count") or 0))
    return DocumentDisplay(state=state, label=label, detail=detail, percent=percent, eta_seconds=eta, reindex_needed=reindex)


def _duration(seconds: int) -> str:
    if seconds < 60:
        return f"{max(1, seconds)} s"
    minutes = round(seconds / 60)
    return f"{minutes} min" if minutes < 90 else f"{minutes / 60:.1f} h"


def document_chunk_rows(*, tenant: Tenant, document: Document) -> "QuerySet[Chunk]":  # noqa: F821
    """The document's chunks in order, with their full text but without vectors: ordinal, offsets, text, embedded or not.

    Callers take a page (a slice) of it: chunks are at most ``limits.MAX_CHARS_PER_CHUNK``
    characters and ~2,000 with the default chunker, so a page stays small.
    """
    return (
        Chunk.objects.filter(tenant=tenant, document=document)
        .order_by("ordinal")
        .values("chunk_id", "ordinal", "start_char", "end_char", "embedding_model", "text")
        .annotate(
            length=Length("text"),
            # Where pgvector is installed the vector is in embedding_half (outside the model: migration 0022) and
            # embedding stays NULL; a chunk carries its model's id exactly when it got a vector of it.
            embedded=ExpressionWrapper(Q(embedding__isnull=False) | ~Q(embedding_model=""), output_field=BooleanField()),
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
