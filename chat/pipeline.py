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
import dataclasses
import logging
import time
from collections.abc import AsyncIterator
from contextlib import aclosing, nullcontext
from dataclasses import dataclass
from typing import Any, cast

from django.conf import settings
from django.db import DatabaseError

from chat.files.selectors import session_store_slug
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
from chat.selectors import chat_memory, session_head
from chat.services import chat_exchange_record
from config.db import db_step
from knowledge import rag
from knowledge.rag.fusion import graph_page, rrf, with_graph_placed

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


@dataclass(frozen=True)
class FileScope:
    """Where a conversation's retrieval looks besides (or instead of) the tenant's knowledge base.

    ``store``: the namespace of the session's attached files (None: nothing attached). ``sources``:
    ``all`` (the knowledge base and the files, fused by RRF), ``files`` (the files only) or
    ``knowledge`` (the knowledge base only). ``identifier``: one file's id, narrowing the files to it
    (Parsimony's ``identifier``); with it, only that file is searched.
    """

    store: str | None
    sources: str = "all"
    identifier: str | None = None


@dataclass(frozen=True)
class ScoredHit(rag.RAGHit):
    """A retrieved hit with the relevance floor of the model that scored it (``similarity_floor``)."""

    relevance_floor: float = rag.types.DEFAULT_RELEVANCE_FLOOR

    @property
    def calibrated_similarity(self) -> float | None:
        """``semantic_similarity`` on MiniLM's scale (``rag.types.calibrated_similarity``), what the
        offline model's thresholds were tuned on."""
        if self.semantic_similarity is None:
            return None
        return rag.types.calibrated_similarity(self.semantic_similarity, self.relevance_floor)


@dataclass(frozen=True)
class AttachedHit(ScoredHit):
    """A hit from the conversation's own files (its citation says ``file_id``)."""


def similarity_floor(service: rag.RAGService) -> float:
    """The least cosine a semantic-only hit of ``service``'s searches needs: the setting when set,
    else the floor of the embedder the service searched with (the tenant's model, after a search)."""
    configured = settings.QUARRY_CHAT_RETRIEVAL_MIN_SIMILARITY
    return configured if configured is not None else rag.types.relevance_floor(service.embedder)


def _scored(hit: rag.RAGHit, floor: float, cls: type[ScoredHit] = ScoredHit) -> ScoredHit:
    return cls(**{f.name: getattr(hit, f.name) for f in dataclasses.fields(rag.RAGHit)}, relevance_floor=floor)


async def retrieve(
    *, tenant: Any, prompt: str, graph: bool = False, fusion: rag.Fusion | str | None = None, fusion_weight: float | None = None,
    files: FileScope | None = None,
) -> tuple[list[rag.RAGHit], GraphSearchDiagnostics | None]:
    """The chunks relevant to ``prompt``, best first, at most ``QUARRY_CHAT_RETRIEVAL_TOP_K``, and the
    graph diagnostic when ``graph`` was asked for (None otherwise). ``fusion`` / ``fusion_weight``:
    hybrid search's fusion (None: the configured default), which the graph leg places its passages in.

    Searched: the tenant's knowledge base, and with ``files`` the conversation's attached files
    (``FileScope``). Both lists are ordered together by Reciprocal Rank Fusion (k = 60, as within one
    search), each store keeping its own statistics. Each hit keeps the score its own store's search
    gave it (both searched with the same mode and fusion), never the merge's RRF score: an answer's
    citations then show one scale whichever store they come from, that of an answer from the
    knowledge base alone (a merged 1/61 = 0.0164 read as worse than 2.50 everywhere else).
    """
    limit = settings.QUARRY_CHAT_RETRIEVAL_TOP_K
    with_files = files is not None and files.store is not None and files.sources != "knowledge"
    with_knowledge = files is None or (files.sources != "files" and files.identifier is None)
    if not with_files:
        if not with_knowledge:
            return [], ({"requested": True, "used": False, "detail": GRAPH_NOT_KEPT} if graph else None)
        return await _retrieve_tenant(tenant=tenant, prompt=prompt, graph=graph, fusion=fusion, fusion_weight=fusion_weight)
    assert files is not None and files.store is not None
    attached = await _retrieve_files(store=files.store, prompt=prompt, identifier=files.identifier, fusion=fusion,
                                     fusion_weight=fusion_weight)
    if not with_knowledge:
        return attached, ({"requested": True, "used": False, "detail": GRAPH_NOT_KEPT} if graph else None)
    known, diagnostic = await _retrieve_tenant(tenant=tenant, prompt=prompt, graph=graph, fusion=fusion, fusion_weight=fusion_weight)
    by_key = {f"k{h.chunk.chunk_id}": h for h in known} | {f"f{h.chunk.chunk_id}": h for h in attached}
    fused = rrf([[f"k{h.chunk.chunk_id}" for h in known], [f"f{h.chunk.chunk_id}" for h in attached]])
    return with_graph_placed([by_key[key] for key, _, _ in fused], limit), diagnostic


async def _retrieve_files(
    *, store: str, prompt: str, identifier: str | None, fusion: rag.Fusion | str | None = None, fusion_weight: float | None = None,
) -> list[rag.RAGHit]:
    """The conversation's own passages for ``prompt`` (one file's with ``identifier``), as ``AttachedHit``;
    hybrid search fuses its legs by ``fusion`` / ``fusion_weight``, as the knowledge base's does."""
    service = rag.tenant_service(store)
    limit = settings.QUARRY_CHAT_RETRIEVAL_TOP_K
    mode = rag.SearchMode.HYBRID if service.embedder is not None else rag.SearchMode.KEYWORD
    filters = {"file_id": identifier} if identifier else None
    fused = {"fusion": fusion, "fusion_weight": fusion_weight} if mode is rag.SearchMode.HYBRID else {}
    try:
        try:
            hits = await service.search(prompt, mode=mode, limit=limit, filters=filters, **fused)
        except rag.EmbedderError as exc:
            logger.warning("chat retrieval: the embedder failed (%s); searching the attached files by keyword", type(exc).__name__)
            hits = await service.search(prompt, mode=rag.SearchMode.KEYWORD, limit=limit, filters=filters)
    except rag.NamespaceNotFound:
        return []  # the files were dropped meanwhile (the conversation expired or was deleted)
    except (rag.RAGError, DatabaseError, OSError) as exc:
        raise RetrievalFailed(type(exc).__name__) from exc
    floor = similarity_floor(service)
    return [_scored(h, floor, AttachedHit) for h in hits if h.keyword_score is not None or (h.semantic_similarity or 0.0) >= floor]


async def _retrieve_tenant(
    *, tenant: Any, prompt: str, graph: bool, fusion: rag.Fusion | str | None, fusion_weight: float | None,
) -> tuple[list[rag.RAGHit], GraphSearchDiagnostics | None]:
    """The tenant's chunks relevant to ``prompt`` (see ``retrieve``).

    Hybrid search when an embedder is configured (keyword search when it is not,
    or when it fails), with the knowledge graph's leg fused in when ``graph``. A
    semantic-only hit counts as relevant only when its cosine similarity reaches
    the embedding model's floor (``similarity_floor``); semantic search always returns
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
                # The graph places its passages below hybrid search's first hits (after the 6th by default,
                # deeper than the 5 an answer reads): a page deep enough to hold them, then hybrid's first
                # ``limit`` and every passage the graph placed, so they reach the answer.
                result = await service.graph_search(prompt, limit=graph_page(limit), fusion=fusion, fusion_weight=fusion_weight)
                hits = with_graph_placed(result.hits, limit)
            else:
                fused = {"fusion": fusion, "fusion_weight": fusion_weight} if mode is rag.SearchMode.HYBRID else {}
                hits = await service.search(prompt, mode=mode, limit=limit, **fused)
        except rag.EmbedderError as exc:
            logger.warning("chat retrieval: the embedder failed (%s); answering from keyword search", type(exc).__name__)
            hits, result = await service.search(prompt, mode=rag.SearchMode.KEYWORD, limit=limit), None
    except (rag.RAGError, DatabaseError, OSError) as exc:
        raise RetrievalFailed(type(exc).__name__) from exc
    floor = similarity_floor(service)
    kept: list[rag.RAGHit] = [
        _scored(h, floor) for h in hits if h.keyword_score is not None or h.graph_path or (h.semantic_similarity or 0.0) >= floor
    ]
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
    similarity = {n: value for n, hit in enumerate(hits, start=1) if (value := _calibrated(hit)) is not None}  # MiniLM's scale
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
    fresh = [_scored(h, floor) for h in found
             if h.chunk.chunk_id not in have and (h.keyword_score is not None or (h.semantic_similarity or 0.0) >= floor)]
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
    if isinstance(hit, AttachedHit):
        citation["file_id"] = hit.chunk.document_id
    if hit.graph_path:
        citation["graph_path"] = list(hit.graph_path)
    return citation


@dataclass(frozen=True)
class Branch:
    """Where a new answer goes in the conversation's tree (see ``chat.models.Turn``).

    ``parent_id``: the turn the question follows; its thread is the memory (None: a first
    question, no memory). ``question_id``: regenerate, answer this stored question of the
    session again (then ``parent_id`` is that question's parent). Edit-and-resend is a new
    question with the edited question's parent. Built by the caller from turns it found
    through ``chat.selectors.chat_turn_find`` for the caller's session.
    """

    parent_id: int | None
    question_id: int | None = None


def _calibrated(hit: rag.RAGHit) -> float | None:
    if isinstance(hit, ScoredHit):
        return hit.calibrated_similarity
    return hit.semantic_similarity


def retrieval_settings(*, service: Any, graph: bool, fusion: rag.Fusion | str | None, fusion_weight: float | None) -> dict[str, Any]:
    """What an answer's retrieval was asked to do, resolved against the server's defaults (kept with
    the answer, and copied into feedback on it)."""
    hybrid = service.embedder is not None
    return {
        "mode": (rag.SearchMode.HYBRID if hybrid else rag.SearchMode.KEYWORD).value,
        "graph_search": graph and hybrid,
        "fusion": (rag.Fusion.parse(fusion) if fusion else service.fusion).value if hybrid else None,
        "fusion_weight": (service.fusion_weight if fusion_weight is None else fusion_weight) if hybrid else None,
        "top_k": settings.QUARRY_CHAT_RETRIEVAL_TOP_K,
        "min_similarity": similarity_floor(service),
        "embedding_model": rag.types.declared_model_id(service.embedder) if hybrid else None,
    }


async def answer_stream(
    *,
    session: ChatSession,
    prompt: str,
    template: str = "default",
    graph_search: bool | None = None,
    fusion: rag.Fusion | str | None = None,
    fusion_weight: float | None = None,
    branch: Branch | None = None,
    sources: str = "all",
    identifier: str | None = None,
) -> AsyncIterator[ChatEvent]:
    """Answer ``prompt`` in ``session``, as events (see ``chat.events``): ``citations`` (the context),
    the model's frames, then ``completed`` (the stored answer, renumbered, with what it cites), or
    one terminal ``error``.

    Preconditions: ``session`` was loaded for the caller's tenant and principal
    (with ``session.tenant`` available); ``prompt`` is non-blank and within the
    search bounds (16,384 characters). ``sources`` / ``identifier``: which of the knowledge base
    and the conversation's attached files are searched (``FileScope``; an ``identifier`` the
    caller checked names one of the session's files). The exchange is stored only when the
    answer completed. Cancelling the consumer (a client that disconnects)
    closes the model stream and stores nothing. ``branch``: where the exchange
    goes in the conversation (regenerate, edit); None continues the current thread.
    """
    started = time.monotonic()
    # The views load the session with its tenant; anything else pays one query.
    tenant = session.tenant if ChatSession.tenant.is_cached(session) else await db_step(lambda: session.tenant)
    wants_graph = settings.QUARRY_CHAT_RETRIEVAL_GRAPH_SEARCH if graph_search is None else graph_search
    try:
        if branch is None:
            branch = Branch(parent_id=await db_step(session_head, session=session))
        store = await db_step(session_store_slug, session=session)
    except DatabaseError as exc:
        logger.error("chat memory or attached files unavailable: %s", type(exc).__name__)
        yield _error("database_unavailable")
        return
    try:
        hits, graph = await retrieve(tenant=tenant, prompt=prompt, graph=bool(wants_graph), fusion=fusion, fusion_weight=fusion_weight,
                                     files=FileScope(store, sources, identifier))
    except RetrievalFailed as exc:
        logger.error("chat retrieval failed in tenant %s: %s", tenant.slug, exc)
        yield _error("retrieval_unavailable")
        return
    # The seed's first frame: the context, numbered as the model sees it (before any model output,
    # so a client can resolve the streamed text's markers as they arrive).
    context: CitationsData = {"session_id": session.public_id, "citations": [citation_of(hit) for hit in hits]}
    if graph is not None:
        context["graph_search"] = graph
    yield {"event": "citations", "data": context}
    parts: list[str] = []
    finished: Finished | None = None
    try:
        memory = await db_step(chat_memory, session=session, limit=settings.QUARRY_CHAT_MEMORY_TURNS, until=branch.parent_id)
        attached = {n for n, hit in enumerate(hits, start=1) if isinstance(hit, AttachedHit)}
        messages = build_messages(template=template, hits=hits, memory=memory, prompt=prompt, attached=attached)
        # The offline model scores sentences with the similarities retrieval has just computed
        # instead of embedding them again (chat.llm.selection); a hosted model never sees them.
        # On MiniLM's scale whatever the tenant's model (ScoredHit.calibrated_similarity), as they were tuned.
        similarities = {n: similarity for n, hit in enumerate(hits, start=1)
                        if (similarity := _calibrated(hit)) is not None}
        with passage_similarities(similarities) if similarities else nullcontext():
            async with aclosing(stream_chat(messages)) as model_events:
                first_token: float | None = None
                async for item in model_events:
                    if isinstance(item, TextDelta):
                        first_token = first_token or time.monotonic()
                        if item.text:
                            parts.append(item.text)
                            yield {"event": "text_delta", "data": {"text": item.text}}
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
    # The stored answer is renumbered in order of first use and cites only the passages its markers
    # name, in that order; the others were given to the model but not used.
    markers = CitationMarkers(len(hits))
    text = markers.feed("".join(parts)) + markers.flush()
    citations = [citation_of(hits[n - 1]) for n in markers.used]
    also_retrieved = [citation_of(hit) for i, hit in enumerate(hits, start=1) if i not in markers.used]

    usage = cast(Usage, finished.usage.as_dict())
    settings_service = rag.tenant_service(tenant.slug)
    try:
        await settings_service.follow_namespace_model()  # record the tenant's model, not the configured default
    except (rag.RAGError, DatabaseError):
        pass  # the record is informative; the answer stands
    used = retrieval_settings(service=settings_service, graph=bool(wants_graph), fusion=fusion, fusion_weight=fusion_weight)
    try:
        question, stored = await db_step(
            chat_exchange_record, session=session, prompt=prompt, answer=text, citations=citations, usage=usage,
            model=f"{finished.provider}/{finished.provider_model}", parent_id=branch.parent_id,
            question_id=branch.question_id, retrieval=used,
        )
    except DatabaseError as exc:
        logger.error("chat exchange not stored: %s", type(exc).__name__)
        yield _error("database_unavailable")
        return
    completed: CompletedData = {
        "id": finished.id, "model": finished.model, "provider": finished.provider, "provider_model": finished.provider_model,
        "message": {"role": "assistant", "content": text}, "finish_reason": finished.finish_reason, "usage": usage,
        "retry_count": finished.retry_count, "fallback_count": finished.fallback_count, "session_id": session.public_id,
        "citations": citations, "also_retrieved": also_retrieved, "turn_id": stored.pk, "prompt_turn_id": question.pk,
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
    fusion: rag.Fusion | str | None = None, fusion_weight: float | None = None, branch: Branch | None = None,
    sources: str = "all", identifier: str | None = None,
) -> ChatResponse:
    """``answer_stream``'s ``completed`` event, the JSON response; raises ``ChatFailed`` on an ``error`` event."""
    async with aclosing(answer_stream(session=session, prompt=prompt, template=template, graph_search=graph_search,
                                      fusion=fusion, fusion_weight=fusion_weight, branch=branch, sources=sources,
                                      identifier=identifier)) as events:
        async for event in events:
            if event["event"] == "completed":
                return event["data"]  # type: ignore[return-value]  # ChatResponse is exactly CompletedData
            if event["event"] == "error":
                raise ChatFailed(event["data"])
    raise AssertionError("answer_stream ends with completed or error")  # pragma: no cover
