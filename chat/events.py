"""The chat stream's events: what the SSE view, the WebSocket consumer and the CLI forward.

Every stream is exactly one ``citations`` event, then model events
(``reasoning_delta``, ``text_delta``, ``usage``), then ``completed``; or it ends
early with one ``error`` event (possibly the only event, when retrieval failed).
On the wire (SSE) each event is ``event: <name>\\ndata: <json of data>\\n\\n``.
"""

from __future__ import annotations

import json
from typing import Literal, NotRequired, TypedDict

EventName = Literal["citations", "text_delta", "reasoning_delta", "usage", "completed", "error"]


class Citation(TypedDict):
    document_id: str
    chunk_id: str
    score: float


class Usage(TypedDict):
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int


class GraphSearchDiagnostics(TypedDict):
    requested: bool
    used: bool
    detail: str


class CitationsData(TypedDict):
    session_id: str
    citations: list[Citation]
    graph_search: NotRequired[GraphSearchDiagnostics]


class DeltaData(TypedDict):
    text: str


class CompletedData(TypedDict):
    """The JSON response of ``POST /v1/chat/completions`` without ``message``."""

    id: str
    model: str
    provider: str
    provider_model: str
    finish_reason: str
    usage: Usage
    retry_count: int
    fallback_count: int
    session_id: str
    citations: list[Citation]
    graph_search: NotRequired[GraphSearchDiagnostics]


class ErrorData(TypedDict):
    """The project's error shape (config/errors.py): a code and a sentence for people."""

    error: str
    detail: str


class ChatEvent(TypedDict):
    event: EventName
    data: CitationsData | DeltaData | Usage | CompletedData | ErrorData


def sse_frame(event: ChatEvent) -> bytes:
    """One Server-Sent Events frame. JSON never contains a raw newline, so one ``data:`` line suffices."""
    payload = json.dumps(event["data"], ensure_ascii=False, separators=(",", ":"))
    return f"event: {event['event']}\ndata: {payload}\n\n".encode()
