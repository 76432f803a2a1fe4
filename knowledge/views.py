"""The readers' knowledge pages: search (``/search/``) and a document with a cited chunk highlighted (``/documents/<id>``).

Thin: resolve the tenant (``accounts.web.tenant_page``), call one selector, render.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from django.db.models.functions import Substr
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils.safestring import SafeString
from django.views.decorators.http import require_GET

from accounts.access import TenantContext
from accounts.web import base_context, tenant_page
from knowledge import rag
from knowledge.forms import FilterSyntaxError, parse_filters
from knowledge.highlight import DOCUMENT_WINDOW_CHARS, document_excerpt, query_terms, snippet, terms_pattern
from knowledge.rag import limits
from knowledge.selectors import chunk_search, document_chunks, document_get, graph_picture

SEARCH_LIMIT = 10


@tenant_page
@require_GET
def document_page(request: HttpRequest, ctx: TenantContext, document_id: str) -> HttpResponse:
    """A document of the tenant, the ``chunk`` of the query string highlighted; 404 for anything else.

    A chunk without offsets (a custom chunker's text that is not a slice of the document)
    is shown above the document, whose text then has no position highlighted. An id that no
    document or chunk could have (as the API checks them) is a 400 naming it.
    """
    chunk_id = request.GET.get("chunk")
    if not limits.DOCUMENT_ID_RE.fullmatch(document_id):
        return _bad_request(request, ctx, "This is not a document id: letters, digits and ._:/@+=- only, at most 200.")
    if chunk_id and not limits.CHUNK_ID_RE.fullmatch(chunk_id):
        return _bad_request(request, ctx, "chunk: this is not a passage id: letters, digits and ._:/@+=- only, at most 207.")
    reader = rag.reader_of(ctx)
    document = document_get(tenant=ctx.tenant, external_id=document_id, reader=reader)
    if document is None:  # none, or one the reader may not read: alike
        raise Http404("Document not found.")
    chunk = None
    if chunk_id:
        chunk = (
            document_chunks(tenant=ctx.tenant, document=document).filter(chunk_id=chunk_id)
            .values("chunk_id", "ordinal", "start_char", "end_char")
            # A chunk without offsets is not a verbatim part of the text: the page shows it on its own.
            .annotate(passage=Substr("text", 1, DOCUMENT_WINDOW_CHARS)).first()
        )
        if chunk is None:
            raise Http404("Passage not found.")
    excerpt = document_excerpt(document.text, chunk and chunk["start_char"], chunk and chunk["end_char"])
    uri = document.uri if re.match(r"^https?://", document.uri or "", re.IGNORECASE) else ""
    # The picture: how the cited passage (else the first) connects to other documents through entities.
    focus = chunk["chunk_id"] if chunk else next(iter(document_chunks(tenant=ctx.tenant, document=document).values_list("chunk_id", flat=True)[:1]), None)
    picture = graph_picture(tenant=ctx.tenant, chunk_ids=[focus], expand=True, reader=reader) if focus else None
    return render(request, "knowledge/document.html", base_context(
        request, ctx, document=document, chunk=chunk, excerpt=excerpt, link=uri, nav="document",
        picture=picture.as_json() if picture and picture.entities else None, picture_rows=_picture_rows(picture),
    ))


def _bad_request(request: HttpRequest, ctx: TenantContext, detail: str) -> HttpResponse:
    return render(request, "400.html", base_context(request, ctx, detail=detail), status=400)
def _picture_rows(picture: rag.Picture | None) -> list[dict[str, object]]:
    """The picture as text: each entity with the passages that mention it (the fallback, and what screen readers get)."""
    if picture is None:
        return []
    titles = {chunk_id: (document_id, title) for chunk_id, document_id, title in picture.passages}
    rows = []
    for entity_id, node in picture.entities:
        passages = [{"chunk_id": c, "document_id": titles[c][0], "title": titles[c][1]}
                    for c, e in picture.links if e == entity_id and c in titles and c not in picture.focus]
        rows.append({"name": node.name, "type": node.type, "passages": passages})
    return rows


@dataclass(frozen=True)
class SearchHitView:
    rank: int
    chunk_id: str
    document_id: str
    title: str
    snippet: SafeString
    score: float
    rrf_rank: int | None
    semantic_similarity: float | None


@tenant_page
@require_GET
def search_page(request: HttpRequest, ctx: TenantContext) -> HttpResponse:
    query = request.GET.get("q", "").strip()
    mode = request.GET.get("mode") or rag.SearchMode.HYBRID.value
    if mode not in {m.value for m in rag.SearchMode}:
        mode = rag.SearchMode.HYBRID.value
    raw_filters = request.GET.get("filters", "")
    hits: list[SearchHitView] = []
    error = ""
    if query:
        try:
            filters = parse_filters(raw_filters)
            found = chunk_search(tenant=ctx.tenant, query=query, mode=mode, limit=SEARCH_LIMIT, filters=filters, reader=rag.reader_of(ctx))
        except FilterSyntaxError as exc:
            error = str(exc)
        except (rag.RAGValidationError, rag.RAGTypeError) as exc:
            error = f"{exc.field}: {exc.message}"
        except rag.ConfigurationError:
            error = "This search mode is not available here: no embedding model is configured. Try keyword search."
        except rag.EmbedderError:
            error = "The embedding model failed, so semantic search is unavailable right now. Try keyword search."
        else:
            pattern = terms_pattern(query_terms(query))
            hits = [
                SearchHitView(
                    rank=n, chunk_id=h.chunk.chunk_id, document_id=h.chunk.document_id,
                    title=h.chunk.title or h.chunk.document_id, snippet=snippet(h.chunk.text, pattern), score=h.score,
                    rrf_rank=h.rrf_rank, semantic_similarity=h.semantic_similarity,
                )
                for n, h in enumerate(found, start=1)
            ]
    return render(request, "knowledge/search.html", base_context(
        request, ctx, query=query, mode=mode, modes=[m.value for m in rag.SearchMode], filters=raw_filters,
        hits=hits, error=error, searched=bool(query), nav="search", max_query_chars=limits.MAX_QUERY_CHARS,
    ), status=400 if error else 200)
