"""The grounded answer pipeline: retrieve (``chat.retrieval``), generate (prompt, stream the model), record.

``answer_stream`` is the one async generator every transport forwards (the SSE
view, the WebSocket consumer, the CLI); ``answer`` collects it for the JSON
response. Neither checks access: callers pass a session they already loaded
through the access helper for the caller's tenant and principal, and the
caller's reader as their request reads (``rag.reader_of(ctx)``).

Privacy: nothing here logs a prompt, a passage or a model output. Failures are
normalized into an ``error`` event with a fixed code and sentence; the
provider's own error text stays out of responses and logs.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import Any, cast

from django.conf import settings
from django.db import DatabaseError

from chat.events import (
    ERRORS,
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
from chat.files.selectors import session_store_slug
from chat.llm import CatalogError, Finished, ModelUnavailable, ReasoningDelta, TextDelta, UsageReport, stream_chat
from chat.models import ChatSession
from chat.prompting import CitationMarkers, build_messages
from chat.retrieval import AttachedHit, RetrievalFailed, RetrievalOptions, retrieve, similarities
from chat.selectors import chat_memory, session_head
from chat.services import chat_exchange_record
from common.db import db_step
from knowledge import rag

logger = logging.getLogger(__name__)


class ChatFailed(Exception):
    """``answer`` could not complete; ``error`` is the normalized error (code and sentence)."""

    def __init__(self, error: ErrorData) -> None:
        super().__init__(error["error"])
        self.error = error


def _error(code: str) -> ErrorEvent:
    return {"event": "error", "data": {"error": code, "detail": ERRORS[code]}}


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


@dataclass(frozen=True)
class _Turn:
    """One question being answered, once its passages are retrieved: what generating and recording it need."""

    session: ChatSession
    tenant: Any
    prompt: str
    branch: Branch
    options: RetrievalOptions
    hits: list[rag.RAGHit]
    graph: GraphSearchDiagnostics | None
    started: float

    def context(self) -> CitationsData:
        """The seed's first frame: the context, numbered as the model sees it (before any model output,
        so a client can resolve the streamed text's markers as they arrive)."""
        data: CitationsData = {"session_id": self.session.public_id, "citations": [citation_of(hit) for hit in self.hits]}
        if self.graph is not None:
            data["graph_search"] = self.graph
        return data


@dataclass
class _Generated:
    """What the model wrote, filled in as it streams; ``finished`` stays None when it failed."""

    parts: list[str] = field(default_factory=list)
    finished: Finished | None = None
    first_token: float | None = None


async def answer_stream(
    *,
    session: ChatSession,
    prompt: str,
    reader: rag.Reader | None,
    template: str = "default",
    options: RetrievalOptions | None = None,
    branch: Branch | None = None,
) -> AsyncIterator[ChatEvent]:
    """Answer ``prompt`` in ``session``, as events (see ``chat.events``): ``citations`` (the context),
    the model's frames, then ``completed`` (the stored answer, renumbered, with what it cites), or
    one terminal ``error``.

    Preconditions: ``session`` was loaded for the caller's tenant and principal
    (with ``session.tenant`` available); ``prompt`` is non-blank and within the
    search bounds (16,384 characters). ``reader``: who asks, as the request reads (``rag.reader_of(ctx)`` of
    the request's context, read for this request: an API token's role cap and a membership or access change
    count from this answer on; None only for who reads everything); no passage it may not read is context.
    It is required so no transport can forget it. ``options``: the request's retrieval options
    (``RetrievalOptions.of``; None: the server's defaults); an ``identifier`` among them the
    caller checked names one of the session's files. The exchange is stored only when the
    answer completed. Cancelling the consumer (a client that disconnects)
    closes the model stream and stores nothing. ``branch``: where the exchange
    goes in the conversation (regenerate, edit); None continues the current thread.
    """
    turn = await _retrieve(session=session, prompt=prompt, options=(options or RetrievalOptions.of()).for_reader(reader), branch=branch)
    if not isinstance(turn, _Turn):
        yield turn
        return
    yield {"event": "citations", "data": turn.context()}
    generated = _Generated()
    async with aclosing(_generate(turn, template=template, generated=generated)) as frames:
        async for frame in frames:
            yield frame
    if generated.finished is not None:
        yield await _record(turn, generated)


async def _retrieve(*, session: ChatSession, prompt: str, options: RetrievalOptions, branch: Branch | None) -> _Turn | ErrorEvent:
    """Where the answer goes and the passages it is given (``chat.retrieval.retrieve``), or the error to end with."""
    started = time.monotonic()
    # The views load the session with its tenant; anything else pays one query.
    tenant = session.tenant if ChatSession.tenant.is_cached(session) else await db_step(lambda: session.tenant)
    try:
        if branch is None:
            branch = Branch(parent_id=await db_step(session_head, session=session))
        store = await db_step(session_store_slug, session=session)
    except DatabaseError as exc:
        logger.error("chat memory or attached files unavailable: %s", type(exc).__name__)
        return _error("database_unavailable")
    options = options.with_store(store)
    try:
        hits, graph = await retrieve(tenant=tenant, prompt=prompt, options=options)
    except RetrievalFailed as exc:
        logger.error("chat retrieval failed in tenant %s: %s", tenant.slug, exc)
        return _error("retrieval_unavailable")
    return _Turn(session, tenant, prompt, branch, options, hits, graph, started)


async def _generate(turn: _Turn, *, template: str, generated: _Generated) -> AsyncIterator[ChatEvent]:
    """The model's frames for ``turn`` (``generated`` filled in as they come), or, when it fails, one ``error``."""
    try:
        memory = await db_step(chat_memory, session=turn.session, limit=settings.QUARRY_CHAT_MEMORY_TURNS, until=turn.branch.parent_id)
        attached = {n for n, hit in enumerate(turn.hits, start=1) if isinstance(hit, AttachedHit)}
        messages = build_messages(template=template, hits=turn.hits, memory=memory, prompt=turn.prompt, attached=attached)
        # The offline model scores sentences with the similarities retrieval has just computed instead of
        # embedding them again (chat.llm.selection), on MiniLM's scale whatever the tenant's model
        # (ScoredHit.calibrated_similarity), as they were tuned; a hosted model never sees them.
        async with aclosing(stream_chat(messages, similarities=similarities(turn.hits) or None)) as model_events:
            async for item in model_events:
                if isinstance(item, TextDelta):
                    generated.first_token = generated.first_token or time.monotonic()
                    if item.text:
                        generated.parts.append(item.text)
                        yield {"event": "text_delta", "data": {"text": item.text}}
                elif isinstance(item, ReasoningDelta):
                    yield {"event": "reasoning_delta", "data": {"text": item.text}}
                elif isinstance(item, UsageReport):
                    yield {"event": "usage", "data": cast(Usage, item.as_dict())}
                elif isinstance(item, Finished):
                    generated.finished = item
    except asyncio.CancelledError:
        logger.info("chat answer cancelled after %.0f ms (the client left); nothing stored", 1000 * (time.monotonic() - turn.started))
        raise
    except ModelUnavailable as exc:
        logger.error("chat model unavailable in tenant %s: %s", turn.tenant.slug, exc)
        failure = "model_unavailable"
    except CatalogError as exc:
        logger.error("chat model catalog is invalid: %s", exc)
        failure = "model_unavailable"
    except DatabaseError as exc:
        logger.error("chat memory unavailable: %s", type(exc).__name__)
        failure = "database_unavailable"
    except Exception:
        logger.exception("chat answer failed in tenant %s", turn.tenant.slug)
        failure = "internal_error"
    else:
        # stream_chat always ends with Finished or raises; a stream that did not is a model failure.
        failure = None if generated.finished is not None else "model_unavailable"
    if failure is not None:
        generated.finished = None  # a failed answer is never recorded, whatever the model had sent
        yield _error(failure)


async def _recorded_settings(turn: _Turn) -> dict[str, Any]:
    """The retrieval settings to keep with the answer, resolved against the tenant's own model."""
    service = rag.tenant_service(turn.tenant.slug)
    try:
        await service.follow_namespace_model()  # record the tenant's model, not the configured default
    except (rag.RAGError, DatabaseError):
        pass  # the record is informative; the answer stands
    return turn.options.recorded(service)


async def _record(turn: _Turn, generated: _Generated) -> ChatEvent:
    """Store the exchange; the ``completed`` event (or the ``error`` of a failed store).

    The stored answer is renumbered in order of first use and cites only the passages its markers
    name, in that order; the others were given to the model but not used (``also_retrieved``)."""
    finished = generated.finished
    assert finished is not None
    hits = turn.hits
    markers = CitationMarkers(len(hits))
    text = markers.feed("".join(generated.parts)) + markers.flush()
    citations = [citation_of(hits[n - 1]) for n in markers.used]
    also_retrieved = [citation_of(hit) for i, hit in enumerate(hits, start=1) if i not in markers.used]
    usage = cast(Usage, finished.usage.as_dict())
    used = await _recorded_settings(turn)
    try:
        question, stored = await db_step(
            chat_exchange_record, session=turn.session, prompt=turn.prompt, answer=text, citations=citations, usage=usage,
            model=f"{finished.provider}/{finished.provider_model}", parent_id=turn.branch.parent_id,
            question_id=turn.branch.question_id, retrieval=used,
        )
    except DatabaseError as exc:
        logger.error("chat exchange not stored: %s", type(exc).__name__)
        return _error("database_unavailable")
    completed: CompletedData = {
        "id": finished.id, "model": finished.model, "provider": finished.provider, "provider_model": finished.provider_model,
        "message": {"role": "assistant", "content": text}, "finish_reason": finished.finish_reason, "usage": usage,
        "retry_count": finished.retry_count, "fallback_count": finished.fallback_count, "session_id": turn.session.public_id,
        "citations": citations, "also_retrieved": also_retrieved, "turn_id": stored.pk, "prompt_turn_id": question.pk,
    }
    if turn.graph is not None:
        completed["graph_search"] = turn.graph
    now = time.monotonic()
    logger.info(
        "chat answered in tenant %s: model %s via %s/%s, %d citations, %d+%d tokens, %d retries, %d fallbacks, "
        "first token %.0f ms, total %.0f ms",
        turn.tenant.slug, finished.model, finished.provider, finished.provider_model, len(citations),
        usage["prompt_tokens"], usage["completion_tokens"], finished.retry_count, finished.fallback_count,
        1000 * ((generated.first_token or now) - turn.started), 1000 * (now - turn.started),
    )
    return {"event": "completed", "data": completed}


async def answer(
    *, session: ChatSession, prompt: str, reader: rag.Reader | None, template: str = "default",
    options: RetrievalOptions | None = None, branch: Branch | None = None,
) -> ChatResponse:
    """``answer_stream``'s ``completed`` event, the JSON response; raises ``ChatFailed`` on an ``error`` event."""
    async with aclosing(answer_stream(session=session, prompt=prompt, reader=reader, template=template, options=options,
                                      branch=branch)) as events:
        async for event in events:
            if event["event"] == "completed":
                return event["data"]  # type: ignore[return-value]  # ChatResponse is exactly CompletedData
            if event["event"] == "error":
                raise ChatFailed(event["data"])
    raise AssertionError("answer_stream ends with completed or error")  # pragma: no cover
