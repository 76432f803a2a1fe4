"""The grounded answer pipeline: retrieve, prompt, stream the model, remember.

``answer_stream`` is the one async generator every transport forwards (the SSE
view, the WebSocket consumer, the CLI); ``answer`` collects it for the JSON
response. Neither checks access: callers pass a session they already loaded
through the access helper for the caller's tenant and principal.

Privacy: nothing here logs a prompt, a passage or a model output. Failures are
normalized into an ``error`` event with a fixed code and sentence; the
provider's own error text stays out of responses and logs.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator
from contextlib import aclosing, nullcontext
from typing import Any, cast

from django.conf import settings
from django.db import DatabaseError

from chat.events import (
    ERRORS,
    GRAPH_NOT_BUILT,
    GRAPH_NOT_KEPT,
    GRAPH_UNAVAILABLE,
    GRAPH_USED,
    ChatEvent,
    ChatResponse,
    Citation,
    CitationsData,
    CompletedData,
    ErrorData,
    ErrorEvent,
    GraphSearchDiagnostics,
    Usage,
)
from chat.llm import CatalogError, Finished, ModelUnavailable, ReasoningDelta, TextDelta, UsageReport, stream_chat
from chat.llm.selection import bridge_query, passage_similarities
from chat.models import ChatSession
from chat.prompting import CitationMarkers, build_messages
from chat.selectors import chat_memory
from chat.services import chat_exchange_record
from config.db import db_step
from knowledge import rag

logger = logging.getLogger(__name__)

class ChatFailed(Exception):
    """``answer`` could not complete; ``error`` is the normalized error (code and sentence)."""

    def __init__(self, error: ErrorData) -> None:
        super().__init__(error["error"])
        self.error = error


class RetrievalFailed(Exception):
    pass


def _error(code: str) -> ErrorEvent:
    return {"event": "error", "data": {"error": code, "detail": ERRORS[code]}}


async def retrieve(
    *, tenant: Any, prompt: str, graph: bool = False, fusion: rag.Fusion | str | None = None, fusion_weight: float | None = None,
) -> tuple[list[rag.RAGHit], GraphSearchDiagnostics | None]:
    """The tenant's chunks relevant to ``prompt``, best first, at most ``QUARRY_CHAT_RETRIEVAL_TOP_K``,
    and the graph diagnostic when ``graph`` was asked for (None otherwise). ``fusion`` /
    ``fusion_weight``: hybrid search's fusion (None: the configured default; the graph leg fuses by RRF).

    Hybrid search when an embedder is configured (keyword search when it is not,
    or when it fails), with the knowledge graph's leg fused in when ``graph``. A
    semantic-only hit counts as relevant only when its cosine similarity reaches
    ``QUARRY_CHAT_RETRIEVAL_MIN_SIMILARITY``; semantic search always returns
    *something*, and unrelated passages make worse answers. A passage the graph
    found counts: the entities on its path connect it to the question.
    """
    service = rag.tenant_service(tenant.slug)
    limit = settings.QUARRY_CHAT_RETRIEVAL_TOP_K
    mode = rag.SearchMode.HYBRID if service.embedder is not None else rag.SearchMode.KEYWORD
    result: rag.GraphSearchResult | None = None
    try:
        try:
            if graph and mode is rag.SearchMode.HYBRID and service.has_graph:
                result = await service.graph_search(prompt, limit=limit)
                hits = result.hits
            else:
                fused = {"fusion": fusion, "fusion_weight": fusion_weight} if mode is rag.SearchMode.HYBRID else {}
                hits = await service.search(prompt, mode=mode, limit=limit, **fused)
        except rag.EmbedderError as exc:
            logger.warning("chat retrieval: the embedder failed (%s); answering from keyword search", type(exc).__name__)
            hits, result = await service.search(prompt, mode=rag.SearchMode.KEYWORD, limit=limit), None
    except (rag.RAGError, DatabaseError, OSError) as exc:
        raise RetrievalFailed(type(exc).__name__) from exc
    floor = settings.QUARRY_CHAT_RETRIEVAL_MIN_SIMILARITY
    kept = [h for h in hits if h.keyword_score is not None or h.graph_path or (h.semantic_similarity or 0.0) >= floor]
    kept += await _next_hop(service, prompt=prompt, hits=kept, mode=mode, floor=floor, fusion=fusion, fusion_weight=fusion_weight)
    if not graph:
        return kept, None
    if result is None:
        return kept, {"requested": True, "used": False, "detail": GRAPH_NOT_KEPT if not service.has_graph else GRAPH_UNAVAILABLE}
    return kept, graph_diagnostic(result, kept)


async def _next_hop(
    service: rag.RAGService, *, prompt: str, hits: list[rag.RAGHit], mode: rag.SearchMode, floor: float,
    fusion: rag.Fusion | str | None, fusion_weight: float | None,
) -> list[rag.RAGHit]:
    """At most ``QUARRY_CHAT_RETRIEVAL_HOP_K`` more passages: those a search for what the best retrieved
    sentence names finds (``selection.bridge_query``), not already in ``hits``; none when that sentence
    names nothing new. One bounded hop, for every model: a multi-hop question ("the location where the
    26th Chess Olympiad occurred") names its second fact's entity only through its first passage.
    A failing second search costs the hop, never the answer."""
    limit = settings.QUARRY_CHAT_RETRIEVAL_HOP_K
    if not limit or not hits:
        return []
    numbered = [(n, hit.chunk.text) for n, hit in enumerate(hits, start=1)]
    titles = {n: hit.chunk.title for n, hit in enumerate(hits, start=1) if hit.chunk.title}
    similarity = {n: hit.semantic_similarity for n, hit in enumerate(hits, start=1) if hit.semantic_similarity is not None}
    query = bridge_query(prompt, numbered, titles=titles, similarity=similarity or None)
    if not query:
        return []
    have = {hit.chunk.chunk_id for hit in hits}
    fused = {"fusion": fusion, "fusion_weight": fusion_weight} if mode is rag.SearchMode.HYBRID else {}
    try:
        found = await service.search(query[:16384], mode=mode, limit=min(100, limit + len(hits)), **fused)
    except (rag.RAGError, DatabaseError, OSError) as exc:
        logger.warning("chat retrieval: the second hop failed (%s); answering from the first", type(exc).__name__)
        return []
    fresh = [h for h in found if h.chunk.chunk_id not in have and (h.keyword_score is not None or (h.semantic_similarity or 0.0) >= floor)]
    return fresh[:limit]


def graph_diagnostic(result: rag.GraphSearchResult, used: list[rag.RAGHit]) -> GraphSearchDiagnostics:
    """What the graph leg did, for the ``graph_search`` field of the citations and the response."""
    leg = result.leg
    if not leg.entities:
        return {"requested": True, "used": False, "detail": GRAPH_NOT_BUILT}
    return {
        "requested": True, "used": True,
        "detail": GRAPH_USED.format(found=len(leg.candidates), used=sum(1 for h in used if h.graph_path)),
        "graph_nodes": [{"name": n.name, "type": n.type} for n in leg.nodes],
        "graph_relations": [{"subject": r.subject, "predicate": r.predicate, "object": r.object, "chunk_id": r.chunk_id}
                            for r in leg.relations],
    }


def citation_of(hit: rag.RAGHit) -> Citation:
    citation: Citation = {"document_id": hit.chunk.document_id, "chunk_id": hit.chunk.chunk_id, "score": hit.score}
    if hit.graph_path:
        citation["graph_path"] = list(hit.graph_path)
    return citation


async def answer_stream(
    *,
    session: ChatSession,
    prompt: str,
    template: str = "default",
    graph_search: bool | None = None,
    fusion: rag.Fusion | str | None = None,
    fusion_weight: float | None = None,
) -> AsyncIterator[ChatEvent]:
    """Answer ``prompt`` in ``session``, as events (see ``chat.events``).

    Preconditions: ``session`` was loaded for the caller's tenant and principal
    (with ``session.tenant`` available); ``prompt`` is non-blank and within the
    search bounds (16,384 characters). The exchange is stored only when the
    answer completed. Cancelling the consumer (a client that disconnects)
    closes the model stream and stores nothing.
    """
    started = time.monotonic()
    # The views load the session with its tenant; anything else pays one query.
    tenant = session.tenant if ChatSession.tenant.is_cached(session) else await db_step(lambda: session.tenant)
    wants_graph = settings.QUARRY_CHAT_RETRIEVAL_GRAPH_SEARCH if graph_search is None else graph_search
    try:
        hits, graph = await retrieve(tenant=tenant, prompt=prompt, graph=bool(wants_graph), fusion=fusion, fusion_weight=fusion_weight)
    except RetrievalFailed as exc:
        logger.error("chat retrieval failed in tenant %s: %s", tenant.slug, exc)
        yield _error("retrieval_unavailable")
        return
    parts: list[str] = []
    finished: Finished | None = None
    markers = CitationMarkers(len(hits))
    try:
        memory = await db_step(chat_memory, session=session, limit=settings.QUARRY_CHAT_MEMORY_TURNS)
        messages = build_messages(template=template, hits=hits, memory=memory, prompt=prompt)
        # The offline model scores sentences with the similarities retrieval has just computed
        # instead of embedding them again (chat.llm.selection); a hosted model never sees them.
        similarities = {n: hit.semantic_similarity for n, hit in enumerate(hits, start=1) if hit.semantic_similarity is not None}
        with passage_similarities(similarities) if similarities else nullcontext():
            async with aclosing(stream_chat(messages)) as model_events:
                first_token: float | None = None
                async for item in model_events:
                    if isinstance(item, TextDelta):
                        first_token = first_token or time.monotonic()
                        text = markers.feed(item.text)
                        if text:
                            parts.append(text)
                            yield {"event": "text_delta", "data": {"text": text}}
                    elif isinstance(item, ReasoningDelta):
                        yield {"event": "reasoning_delta", "data": {"text": item.text}}
                    elif isinstance(item, UsageReport):
                        yield {"event": "usage", "data": cast(Usage, item.as_dict())}
                    elif isinstance(item, Finished):
                        finished = item
    except asyncio.CancelledError:
        logger.info("chat answer cancelled after %.0f ms (the client left); nothing stored", 1000 * (time.monotonic() - started))
        raise
    except ModelUnavailable as exc:
        logger.error("chat model unavailable in tenant %s: %s", tenant.slug, exc)
        yield _error("model_unavailable")
        return
    except CatalogError as exc:
        logger.error("chat model catalog is invalid: %s", exc)
        yield _error("model_unavailable")
        return
    except DatabaseError as exc:
        logger.error("chat memory unavailable: %s", type(exc).__name__)
        yield _error("database_unavailable")
        return
    except Exception:
        logger.exception("chat answer failed in tenant %s", tenant.slug)
        yield _error("internal_error")
        return
    if finished is None:  # pragma: no cover - stream_chat always ends with Finished or raises
        yield _error("model_unavailable")
        return
    tail = markers.flush()
    if tail:
        parts.append(tail)
        yield {"event": "text_delta", "data": {"text": tail}}
    # Cited: the passages the answer's markers name, in order of first use (the markers were
    # renumbered to match); the others were retrieved and given to the model but not used.
    citations = [citation_of(hits[n - 1]) for n in markers.used]
    also_retrieved = [citation_of(hit) for i, hit in enumerate(hits, start=1) if i not in markers.used]
    citations_data: CitationsData = {"session_id": session.public_id, "citations": citations, "also_retrieved": also_retrieved}
    if graph is not None:
        citations_data["graph_search"] = graph
    yield {"event": "citations", "data": citations_data}

    usage = cast(Usage, finished.usage.as_dict())
    try:
        await db_step(
            chat_exchange_record, session=session, prompt=prompt, answer="".join(parts), citations=citations, usage=usage,
            model=f"{finished.provider}/{finished.provider_model}",
        )
    except DatabaseError as exc:
        logger.error("chat exchange not stored: %s", type(exc).__name__)
        yield _error("database_unavailable")
        return
    completed: CompletedData = {
        "id": finished.id, "model": finished.model, "provider": finished.provider, "provider_model": finished.provider_model,
        "finish_reason": finished.finish_reason, "usage": usage, "retry_count": finished.retry_count,
        "fallback_count": finished.fallback_count, "session_id": session.public_id, "citations": citations,
        "also_retrieved": also_retrieved,
    }
    if graph is not None:
        completed["graph_search"] = graph
    logger.info(
        "chat answered in tenant %s: model %s via %s/%s, %d citations, %d+%d tokens, %d retries, %d fallbacks, "
        "first token %.0f ms, total %.0f ms",
        tenant.slug, finished.model, finished.provider, finished.provider_model, len(citations),
        usage["prompt_tokens"], usage["completion_tokens"], finished.retry_count, finished.fallback_count,
        1000 * ((first_token or time.monotonic()) - started), 1000 * (time.monotonic() - started),
    )
    yield {"event": "completed", "data": completed}


async def answer(
    *, session: ChatSession, prompt: str, template: str = "default", graph_search: bool | None = None,
    fusion: rag.Fusion | str | None = None, fusion_weight: float | None = None,
) -> ChatResponse:
    """``answer_stream`` collected into the JSON response; raises ``ChatFailed`` on an ``error`` event."""
    parts: list[str] = []
    completed: CompletedData | None = None
    async with aclosing(answer_stream(session=session, prompt=prompt, template=template, graph_search=graph_search,
                                      fusion=fusion, fusion_weight=fusion_weight)) as events:
        async for event in events:
            if event["event"] == "text_delta":
                parts.append(event["data"]["text"])
            elif event["event"] == "completed":
                completed = event["data"]
            elif event["event"] == "error":
                raise ChatFailed(event["data"])
    assert completed is not None
    response: dict[str, Any] = {}
    for key, value in completed.items():
        response[key] = value
        if key == "provider_model":  # where the API has always put the answer
            response["message"] = {"role": "assistant", "content": "".join(parts)}
    return response  # type: ignore[return-value]
