"""The agent stream's events: what the SSE view and the WebSocket consumer forward.

A stream is one ``run`` event, then for every model turn its ``reasoning_delta``
/ ``text_delta`` events; a turn that calls tools is followed by one ``step``
event (the calls) and one ``tool_result`` per call. Text of a turn that ended
in a ``step`` is the model's note before searching, not the answer (deltas
carry their ``turn`` so a client can tell). A run that produces an answer ends
with ``citations``, ``usage`` and ``completed`` (the JSON response, ``message``
included); one that cannot ends with one ``error`` (with ``run_id`` and
``stop_reason`` once the run exists, so the client can resume it). On the wire
(SSE) each event is ``event: <name>\\ndata: <json of data>\\n\\n``
(``chat.events.sse_frame``).
"""

from __future__ import annotations

from typing import Any, Literal, NotRequired, TypedDict

from chat.events import Citation, Usage

AgentEventName = Literal[
    "run", "step", "tool_result", "text_delta", "reasoning_delta", "citations", "usage", "completed", "error"
]


class RunData(TypedDict):
    session_id: str
    run_id: str
    resumed: bool
    max_steps: int
    graph_search: bool
    tools: list[str]  # the tool surface of this invocation


class ToolCallData(TypedDict):
    id: str
    tool: str
    arguments: Any  # the parsed JSON object, or the raw text when it was not valid JSON


class StepData(TypedDict):
    step: int  # tool-using steps of the run, from 1 (a resumed run continues the count)
    turn: int
    calls: list[ToolCallData]


class ToolResultData(TypedDict):
    step: int
    id: str
    tool: str
    ok: bool
    chunk_ids: list[str]  # the chunks it returned, in order
    error: NotRequired[str]  # why it failed (ok: false), in words the model also saw


class TurnDeltaData(TypedDict):
    text: str
    turn: int  # the run's model turns, from 1


class AgentCitationsData(TypedDict):
    session_id: str
    run_id: str
    citations: list[Citation]


class ToolCallSummary(TypedDict):
    step: int
    tool: str
    ok: bool


class AgentMessage(TypedDict):
    role: Literal["assistant"]
    content: str


class AgentResponse(TypedDict):
    """The JSON body of ``POST /v1/agent/completions`` and ``POST /v1/agent/runs/{run_id}/resume``."""

    id: str
    run_id: str
    model: str
    provider: str
    provider_model: str
    message: AgentMessage
    finish_reason: str
    stop_reason: str
    usage: Usage
    turns: int
    tool_call_count: int
    tool_calls: list[ToolCallSummary]
    session_id: str
    citations: list[Citation]


class AgentErrorData(TypedDict):
    """The project's error shape, plus where to resume when the run exists."""

    error: str
    detail: str
    run_id: NotRequired[str]
    stop_reason: NotRequired[str]


class AgentEvent(TypedDict):
    event: AgentEventName
    data: (
        RunData | StepData | ToolResultData | TurnDeltaData | AgentCitationsData | Usage | AgentResponse | AgentErrorData
    )
