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
(``chat.events.sse_frame``). As in ``chat.events``, each payload is one ``TypedDict``
and the API's serializers are derived from them.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, NotRequired, TypedDict

from chat.events import Citation, Message, Usage, UsageEvent
from common.typed_serializers import Help

StopReasonAnswered = Literal["completed", "max_steps", "repeated_call", "token_budget"]


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


class AgentResponse(TypedDict):
    """The JSON body of ``POST /v1/agent/completions`` and ``POST /v1/agent/runs/{run_id}/resume``."""

    id: Annotated[str, Help("The provider's id of the completion that answered.")]
    run_id: Annotated[str, Help("The run (run-...): resume it with POST /v1/agent/runs/{run_id}/resume.")]
    model: Annotated[str, Help("The catalog model that answered (config/models.yaml).")]
    provider: str
    provider_model: str
    message: Message
    finish_reason: str
    stop_reason: Annotated[StopReasonAnswered, Help(
        "completed: the model answered; max_steps: the step budget was spent (resumable); "
        "repeated_call / token_budget: the research stopped there. The answer comes from a final turn without tools."
    )]
    usage: Annotated[Usage, Help("The whole run's tokens, over all its turns and resumes.")]
    turns: Annotated[int, Help("Model turns of the whole run.")]
    tool_call_count: int
    tool_calls: list[ToolCallSummary]
    session_id: str
    citations: Annotated[list[Citation], Help("The passages the answer cites, in order of citation.")]


class AgentErrorData(TypedDict):
    """The project's error shape, plus where to resume when the run exists."""

    error: str
    detail: str
    run_id: NotRequired[Annotated[str, Help("The run that stopped, when it exists: resume it.")]]
    stop_reason: NotRequired[Annotated[str, Help("timeout or provider_error (both resumable).")]]


# --- events ----------------------------------------------------------------------------------


class RunEvent(TypedDict):
    event: Literal["run"]
    data: RunData


class StepEvent(TypedDict):
    event: Literal["step"]
    data: StepData


class ToolResultEvent(TypedDict):
    event: Literal["tool_result"]
    data: ToolResultData


class TurnTextDeltaEvent(TypedDict):
    event: Literal["text_delta"]
    data: TurnDeltaData


class TurnReasoningDeltaEvent(TypedDict):
    event: Literal["reasoning_delta"]
    data: TurnDeltaData


class AgentCitationsEvent(TypedDict):
    event: Literal["citations"]
    data: AgentCitationsData


class AgentCompletedEvent(TypedDict):
    event: Literal["completed"]
    data: AgentResponse


class AgentErrorEvent(TypedDict):
    event: Literal["error"]
    data: AgentErrorData


AgentEvent = (
    RunEvent | StepEvent | ToolResultEvent | TurnTextDeltaEvent | TurnReasoningDeltaEvent | AgentCitationsEvent
    | UsageEvent | AgentCompletedEvent | AgentErrorEvent
)
