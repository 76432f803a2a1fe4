"""ASGI middleware in front of Django and Channels: what must hold before any view runs.

- ``BodySizeLimit`` (HTTP): a request body over ``QUARRY_MAX_REQUEST_BYTES`` is answered 413
  while it arrives: at once when ``Content-Length`` says so, otherwise as soon as the bytes
  received pass the limit. Some POSTs have a tighter limit of their own (``RouteLimit``: a
  conversation's attached files, ``QUARRY_CHAT_FILES_MAX_BYTES``). Django's ASGI handler would first read the whole body (to a
  temporary file), whatever its size.
- ``WebSocketDatabaseGuard`` (WebSocket): Channels' ``AuthMiddlewareStack`` reads the session
  and the user before any consumer runs, so a database that is down (or too busy) would make
  the handshake an HTTP 500. The guard accepts the socket instead, sends one frame in the chat's
  error shape, ``{"event": "error", "data": {"error": "database_unavailable", ...}}``, and closes
  with 1013 (try again later), which browsers report as a close, not a network failure.
"""

from __future__ import annotations

import html
import json
import logging
import re
from collections.abc import Awaitable, Callable, MutableMapping, Sequence
from dataclasses import dataclass
from typing import Any

from django.db import DatabaseError

from common.db import database_error_kind
from common.db import DATABASE_ERRORS
from config.middleware import API_PREFIX
from common.uploads import request_too_large_message

logger = logging.getLogger(__name__)

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

CLOSE_TRY_AGAIN_LATER = 1013


class _TooLarge(Exception):
    pass


@dataclass(frozen=True)
class RouteLimit:
    """A tighter body limit for the POSTs to paths matching ``path`` (``limit()`` read per request,
    so settings can change), refused with ``message(limit)`` as the detail."""

    path: re.Pattern[str]
    limit: Callable[[], int]
    message: Callable[[int], str]


class BodySizeLimit:
    def __init__(self, app: ASGIApp, limit: int, routes: Sequence[RouteLimit] = ()) -> None:
        self.app = app
        self.limit = limit
        self.routes = tuple(routes)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit, detail = self.limit, request_too_large_message(self.limit)
        for route in self.routes:
            if scope.get("method") == "POST" and route.path.fullmatch(scope.get("path", "")):
                limit = min(limit, route.limit())
                detail = route.message(limit)
                break
        declared = _content_length(scope)
        if declared is not None and declared > limit:
            await self._refuse(scope, send, detail)
            return
        received = 0
        exceeded = False
        started = False

        async def limited_receive() -> Message:
            nonlocal received, exceeded
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    exceeded = True
                    # Django stops reading at a disconnect and sends nothing; the 413 is ours.
                    return {"type": "http.disconnect"}
            return message

        async def tracked_send(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        await self.app(scope, limited_receive, tracked_send)
        if exceeded and not started:
            await self._refuse(scope, send, detail)

    async def _refuse(self, scope: Scope, send: Send, detail: str) -> None:
        """413: JSON in the API's error shape under /v1/, a short page elsewhere (the admin's upload form)."""
        if scope.get("path", "").startswith(API_PREFIX):
            body, content_type = json.dumps({"error": "request_too_large", "detail": detail}).encode(), b"application/json"
        else:
            body = (f"<!doctype html><title>Request too large</title><h1>Request too large</h1><p>{html.escape(detail)}</p>"
                    "<p>Go back and send fewer or smaller files.</p>").encode()
            content_type = b"text/html; charset=utf-8"
        await send({"type": "http.response.start", "status": 413, "headers": [
            (b"content-type", content_type), (b"content-length", str(len(body)).encode()),
            (b"connection", b"close"), (b"cache-control", b"no-store"),
            (b"content-security-policy", b"default-src 'none'; frame-ancestors 'none'"),
        ]})
        await send({"type": "http.response.body", "body": body})


def _content_length(scope: Scope) -> int | None:
    for name, value in scope.get("headers", []):
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None


class WebSocketDatabaseGuard:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "websocket":
            await self.app(scope, receive, send)
            return
        state = {"accepted": False, "closed": False}

        async def tracked_send(message: Message) -> None:
            if message["type"] == "websocket.accept":
                state["accepted"] = True
            elif message["type"] == "websocket.close":
                state["closed"] = True
            await send(message)

        try:
            await self.app(scope, receive, tracked_send)
        except DatabaseError as exc:
            kind = database_error_kind(exc)
            if kind is None or state["closed"]:
                raise
            logger.error("websocket %s: database %s: %s", scope.get("path"), kind, type(exc).__name__)
            if not state["accepted"]:
                message = await receive()  # the handshake's websocket.connect, not yet read by anyone
                if message["type"] != "websocket.connect":
                    return
                await send({"type": "websocket.accept"})
            code, detail = DATABASE_ERRORS[kind]
            frame = {"event": "error", "data": {"error": code, "detail": detail}, "request_id": None}
            await send({"type": "websocket.send", "text": json.dumps(frame)})
            await send({"type": "websocket.close", "code": CLOSE_TRY_AGAIN_LATER})
