"""The web chat's WebSocket, ``/ws/chat/`` (Channels): the same answer stream as SSE.

The transport authenticates (the session cookie, through Channels' AuthMiddlewareStack),
resolves the tenant as the HTTP API does for session users, finds the caller's session,
and forwards the events of ``chat.pipeline.answer_stream`` (or the agent's stream) one
JSON frame each. Retrieval, prompts and storage live in the pipeline, never here.

Client -> server (JSON text frames; ``request_id`` is optional and echoed back):
  {"type": "ask", "prompt": str, "mode": "chat" | "agent", "session_id": str | null, "tenant": str | null,
   ...retrieval options}
      answer ``prompt`` in that session (a new one of kind ``mode`` when null); one at a time.
      "chat" forwards chat.pipeline.answer_stream, "agent" the retrieval agent's chat.agent.agent_stream.
      Retrieval options (each optional, as in POST /v1/chat/completions and checked by the same rules):
      graph_search, fusion, fusion_weight, sources, identifier; an agent run takes graph_search only.
      ``regenerate`` and ``edit`` take them too.
  {"type": "cancel"}                                   stop the answer being written.
  {"type": "history", "session_id": str, "tenant": str | null}
      the finished turns of a session (after a reconnect, or when opening it).
  {"type": "regenerate", "session_id": str, "turn_id": int, "tenant": str | null}
      answer again the question that answer ``turn_id`` answered (chat sessions; the old answer stays a version).
  {"type": "edit", "session_id": str, "turn_id": int, "prompt": str, "tenant": str | null}
      ask question ``turn_id`` again as ``prompt``; the conversation continues from the new version.
  {"type": "select", "session_id": str, "turn_id": int, "tenant": str | null}
      make the thread through that version the conversation; answered with a ``history`` frame.

Server -> client: {"event": <name>, "data": {...}, "request_id": str | null}
  session      {session_id, kind, created}        first frame of every admitted ask
  citations, reasoning_delta, text_delta, usage, completed, error
                                                  forwarded unchanged from the stream, in that order (see
                                                  chat.events: citations is the context, completed the
                                                  stored answer with what it cites)
  run, step, tool_result                          agent mode only, forwarded unchanged (chat.agent.events;
                                                  there ``citations`` comes after the text)
  cancelled    {session_id}                       after "cancel": the stream is closed, nothing stored
  history      {session_id, kind, title, truncated, turns: [{role, content, citations, model, usage, created_at,
               sources?, stop_reason?}]}  (agent sessions: one question and answer per run; ``sources``
               numbers the chunks the answer's [n] markers refer to)
  error        {error, detail}                    also for refused messages: not_authenticated (then the
               socket closes with 4401), tenant_not_found, not_found, invalid, busy, throttled (sentences: chat.events)

A tenant or session the caller cannot see is ``tenant_not_found`` / ``not_found``, exactly
like the API's 404s: the caller learns nothing about whether it exists.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import aclosing, suppress
from importlib import import_module
from types import SimpleNamespace
from typing import Any

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer
from django.conf import settings
from django.contrib.auth import get_user
from django.db import DatabaseError

from accounts.access import TenantContext, tenant_context_for_user
from chat.agent import agent_stream
from chat.api.requests import InvalidRequest, WsRequest, first_error, unknown_file_error, ws_request
from chat.agent.events import AgentEvent
from chat.events import ERRORS, ChatEvent
from chat.models import ChatSession, SessionKind, TurnRole
from chat.pipeline import Branch, answer_stream
from chat.services import chat_session_create, chat_turn_select
from chat.retrieval import withhold_unreadable
from chat.selectors import chat_session_find, chat_transcript, chat_turn_find
from common import replicas
from common.throttling import Limit, Throttled
from knowledge import rag
from knowledge.rag import limits

logger = logging.getLogger(__name__)

CLOSE_NOT_AUTHENTICATED = 4401
# A prompt is at most MAX_QUERY_CHARS. A frame up to MAX_FRAME_CHARS is still parsed (a few ms), so a
# too-long question is refused with the sentence naming that bound and its request_id echoed; anything
# larger is not a message of this protocol, and is refused unread, naming the same bound.
MAX_FRAME_CHARS = 1 << 20
MAX_REQUEST_ID_CHARS = 64

# The stream each mode forwards, called as ``stream(session=<ChatSession of that kind>, prompt=<str>, reader=<the
# message's rag.Reader>)``; the agent runs with its default bounds (DEFAULT_MAX_STEPS steps; graph search when
# the message asks for it).
STREAMS: dict[str, Callable[..., AsyncIterator[ChatEvent | AgentEvent]]] = {
    SessionKind.CHAT: answer_stream,
    SessionKind.AGENT: agent_stream,
}


@database_sync_to_async
def _signed_in_user(session_key: str | None) -> Any:
    """The user the session cookie still signs in, read fresh from the session store.

    The scope's user was resolved at connect; a logout, an expired session or a password
    change since then must stop the next request on an open socket as well.
    """
    if not session_key:
        return None
    store = import_module(settings.SESSION_ENGINE).SessionStore(session_key)
    user = get_user(SimpleNamespace(session=store))  # type: ignore[arg-type]
    return user if user.is_authenticated else None


@database_sync_to_async
def _context(user: Any, slug: str | None) -> TenantContext | None:
    return tenant_context_for_user(user=user, slug=slug)


@database_sync_to_async
def _create_session(ctx: TenantContext, kind: str) -> ChatSession:
    return chat_session_create(tenant=ctx.tenant, principal=ctx.principal, kind=kind)


@database_sync_to_async
def _reader(ctx: TenantContext) -> rag.Reader | None:
    """The caller as this message reads: their groups read now, so a change counts from the next message."""
    return rag.reader_of(ctx)


_find_session = database_sync_to_async(chat_session_find)


def _visible_transcript(*, session: Any, reader: rag.Reader | None) -> Any:
    """The transcript as ``reader`` may see it now (citations of passages they can no longer read withheld)."""
    return withhold_unreadable(chat_transcript(session=session), tenant_id=session.tenant_id, reader=reader)


_transcript = database_sync_to_async(_visible_transcript)


_find_turn = database_sync_to_async(chat_turn_find)
_select_turn = database_sync_to_async(chat_turn_select)


def _request(message: dict[str, Any], *, kind: str, prompt: bool) -> WsRequest:
    """The message's prompt and retrieval options, checked as the HTTP API checks them (``chat.api.requests``)."""
    try:
        return ws_request(message, kind=kind, prompt=prompt)
    except InvalidRequest as invalid:
        raise Refused("invalid", invalid.detail) from None


@database_sync_to_async
def _check_file(session: ChatSession, request: WsRequest) -> None:
    if (error := unknown_file_error(session, request.identifier)) is not None:
        raise Refused("invalid", first_error(error))


class Refused(Exception):
    """A message the consumer answers with one ``error`` frame."""

    def __init__(self, code: str, detail: str | None = None) -> None:
        super().__init__(code)
        self.code = code
        self.detail = detail or ERRORS[code]


@database_sync_to_async
def _count_answer(principal: str, kind: str) -> None:
    """Count an answer against its owner's chat or agent rate (``QUARRY_THROTTLE_CHAT`` / ``_AGENT``), the
    same counter as their signed-in HTTP requests; ``Refused("throttled")`` over it. One answer at a time
    per socket bounded nothing: a client opening sockets, or asking as each answer ends, was unlimited."""
    scope = "agent" if kind == SessionKind.AGENT else "chat"
    limit = Limit.of(scope)
    if limit is None:
        return
    try:
        limit.hit(principal, f"Too many {scope} requests for this user: at most {limit.rate}.")
    except Throttled as exc:
        raise Refused("throttled", f"{exc.detail}") from None


class ChatConsumer(AsyncJsonWebsocketConsumer):
    """One browser tab's chat connection; at most one answer in flight."""

    async def connect(self) -> None:
        self.answering: asyncio.Task[None] | None = None
        self.answering_request: str | None = None
        self.answering_session: str | None = None
        await self.accept()
        # Accept first, then refuse with a close code: a refused handshake looks like a
        # network failure to the browser, which would keep reconnecting instead of
        # telling the user to sign in again.
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            await self._sign_in_again(None)

    async def disconnect(self, code: int) -> None:
        await self._stop_answering()

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None, **kwargs: Any) -> None:
        if text_data is None:
            await self._error(None, "invalid", "Send one JSON object per text frame.")
            return
        if len(text_data) > MAX_FRAME_CHARS:
            await self._error(None, "invalid", f"The message is too long ({len(text_data):,} characters): "
                                               f"a question is at most {limits.MAX_QUERY_CHARS:,} characters.")
            return
        try:
            content = json.loads(text_data)
        except ValueError:
            await self._error(None, "invalid", "Send one JSON object per text frame.")
            return
        await self.receive_json(content)

    async def receive_json(self, content: Any, **kwargs: Any) -> None:
        if not isinstance(content, dict):
            await self._error(None, "invalid", "Send one JSON object per text frame.")
            return
        request_id = content.get("request_id")
        if not isinstance(request_id, str) or len(request_id) > MAX_REQUEST_ID_CHARS:
            request_id = None
        # Each message is a request of its own: its retrieval may read a replica (common.replicas), the
        # browser session being the principal that a write (an attached file) pins to the primary.
        session = self.scope.get("session")
        replicas.begin(replicas.principal_key(session_key=session.session_key if session else None))
        handler = {"ask": self._ask, "cancel": self._cancel, "history": self._history, "regenerate": self._regenerate,
                   "edit": self._edit, "select": self._select}.get(content.get("type"))
        if handler is None:
            await self._error(request_id, "invalid",
                              'Unknown message type: expected "ask", "cancel", "history", "regenerate", "edit" or "select".')
            return
        try:
            await handler(content, request_id)
        except Refused as refusal:
            if refusal.code == "not_authenticated":
                await self._sign_in_again(request_id)
            else:
                await self._error(request_id, refusal.code, refusal.detail)
        except DatabaseError as exc:
            logger.error("web chat: database unavailable: %s", type(exc).__name__)
            await self._error(request_id, "database_unavailable")

    # --- messages ------------------------------------------------------------------------

    async def _ask(self, message: dict[str, Any], request_id: str | None) -> None:
        if self.answering is not None and not self.answering.done():
            raise Refused("busy")
        mode = message.get("mode", SessionKind.CHAT)
        if mode not in SessionKind.values:
            raise Refused("invalid", 'mode must be "chat" or "agent".')
        request = _request(message, kind=mode, prompt=True)
        session_id = message.get("session_id")
        ctx = await self._tenant(message.get("tenant"))
        await _count_answer(ctx.principal, mode)  # before a new conversation is made for a refused question
        created = session_id is None
        session = await _create_session(ctx, mode) if created else await _find_session(tenant=ctx.tenant, principal=ctx.principal, session_id=session_id, kind=mode)
        if session is None:
            raise Refused("not_found")
        await _check_file(session, request)
        reader = await _reader(ctx)
        await self._send("session", {"session_id": session.public_id, "kind": session.kind, "created": created}, request_id)
        self.answering_request, self.answering_session = request_id, session.public_id
        events = STREAMS[mode](session=session, prompt=request.prompt, reader=reader, **request.stream_options)
        self.answering = asyncio.create_task(self._forward(events, request_id))

    async def _chat_turn(self, message: dict[str, Any], role: TurnRole | None) -> tuple[TenantContext, ChatSession, Any]:
        """The caller's context, their chat session and its turn named by the message (of ``role``), or ``not_found``."""
        ctx = await self._tenant(message.get("tenant"))
        session = await _find_session(tenant=ctx.tenant, principal=ctx.principal, session_id=message.get("session_id"),
                                      kind=SessionKind.CHAT)
        if session is None:
            raise Refused("not_found")
        turn = await _find_turn(session=session, turn_id=message.get("turn_id"), role=role)
        if turn is None:
            raise Refused("not_found")
        return ctx, session, turn

    async def _regenerate(self, message: dict[str, Any], request_id: str | None) -> None:
        if self.answering is not None and not self.answering.done():
            raise Refused("busy")
        request = _request(message, kind=SessionKind.CHAT, prompt=False)
        ctx, session, answer_turn = await self._chat_turn(message, TurnRole.ASSISTANT)
        question = await _find_turn(session=session, turn_id=answer_turn.parent_id, role=TurnRole.USER)
        if question is None:  # pragma: no cover - every stored answer follows its question
            raise Refused("not_found")
        await self._answer(ctx, session, question.content, Branch(parent_id=question.parent_id, question_id=question.pk),
                           request, request_id)

    async def _edit(self, message: dict[str, Any], request_id: str | None) -> None:
        if self.answering is not None and not self.answering.done():
            raise Refused("busy")
        request = _request(message, kind=SessionKind.CHAT, prompt=True)
        ctx, session, question = await self._chat_turn(message, TurnRole.USER)
        assert request.prompt is not None
        await self._answer(ctx, session, request.prompt, Branch(parent_id=question.parent_id), request, request_id)

    async def _select(self, message: dict[str, Any], request_id: str | None) -> None:
        ctx, session, turn = await self._chat_turn(message, None)
        await _select_turn(session=session, turn=turn)
        await self._send("history", await _transcript(session=session, reader=await _reader(ctx)), request_id)

    async def _answer(self, ctx: TenantContext, session: ChatSession, prompt: str, branch: Branch, request: WsRequest,
                      request_id: str | None) -> None:
        await _check_file(session, request)
        await _count_answer(session.principal, session.kind)
        reader = await _reader(ctx)
        await self._send("session", {"session_id": session.public_id, "kind": session.kind, "created": False}, request_id)
        self.answering_request, self.answering_session = request_id, session.public_id
        events = answer_stream(session=session, prompt=prompt, reader=reader, branch=branch, **request.stream_options)
        self.answering = asyncio.create_task(self._forward(events, request_id))

    async def _cancel(self, message: dict[str, Any], request_id: str | None) -> None:
        """Stop the answer in flight; an answer that already finished is left as it is (no reply)."""
        session_id, answering_request = self.answering_session, self.answering_request
        if await self._stop_answering():
            await self._send("cancelled", {"session_id": session_id}, answering_request)

    async def _history(self, message: dict[str, Any], request_id: str | None) -> None:
        ctx = await self._tenant(message.get("tenant"))
        session = await _find_session(tenant=ctx.tenant, principal=ctx.principal, session_id=message.get("session_id"))
        if session is None:
            raise Refused("not_found")
        await self._send("history", await _transcript(session=session, reader=await _reader(ctx)), request_id)

    # --- helpers -------------------------------------------------------------------------

    async def _tenant(self, slug: Any) -> TenantContext:
        """The caller's tenant context, re-checking that the session cookie still signs them in."""
        user = await _signed_in_user(self.scope["session"].session_key if self.scope.get("session") else None)
        if user is None:
            raise Refused("not_authenticated")
        if slug is not None and not isinstance(slug, str):
            raise Refused("tenant_not_found")
        ctx = await _context(user, slug)
        if ctx is None:
            raise Refused("tenant_not_found")
        return ctx

    async def _forward(self, events: AsyncIterator[ChatEvent | AgentEvent], request_id: str | None) -> None:
        """Send every event of one answer. Cancelling this task closes the stream (nothing is stored)."""
        try:
            async with aclosing(events):  # type: ignore[type-var]
                async for event in events:
                    await self._send(event["event"], event["data"], request_id)
        except asyncio.CancelledError:
            raise
        except OSError as exc:
            # The browser went away mid-answer (a closed tab; uvicorn's ClientDisconnected is an OSError):
            # the stream is closed above, so nothing is stored, and there is no one left to tell.
            logger.info("web chat: the client left during an answer (%s)", type(exc).__name__)
        except Exception:
            # The pipeline normalizes its own failures into error events; this is a bug.
            logger.exception("web chat: forwarding an answer failed")
            with suppress(Exception):
                await self._error(request_id, "internal_error")

    async def _stop_answering(self) -> bool:
        """Cancel the answer in flight and wait until its stream is closed; False when none was running."""
        task, self.answering = self.answering, None
        if task is None or task.done():
            return False
        task.cancel()
        with suppress(asyncio.CancelledError):
            await task
        return True

    async def _sign_in_again(self, request_id: str | None) -> None:
        await self._error(request_id, "not_authenticated")
        await self.close(code=CLOSE_NOT_AUTHENTICATED)

    async def _error(self, request_id: str | None, code: str, detail: str | None = None) -> None:
        await self._send("error", {"error": code, "detail": detail or ERRORS[code]}, request_id)

    async def _send(self, event: str, data: Any, request_id: str | None) -> None:
        await self.send_json({"event": event, "data": data, "request_id": request_id})
