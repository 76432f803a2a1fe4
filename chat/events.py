"""What chat sends: the stream's events, the JSON responses, and every error code with its sentence.

Every chat stream is, in order (HarborRAG's contract): exactly one ``citations`` event, the
passages given to the model as context, numbered as the model sees them (its ``[n]`` is the
n-th); then the model's frames (``reasoning_delta``, ``text_delta``, ``usage``) as the model
wrote them, so the streamed text's markers use those numbers; then ``completed``. ``completed``
carries the answer as stored (``message``), with its markers renumbered in order of first use,
``citations``, the passages it actually cites in that order, and ``also_retrieved``, the other
passages of the context. A stream that fails ends with one ``error`` event instead of
``completed`` (the only event when the conversation or retrieval failed, before any context).
On the wire (SSE) each event is ``event: <name>\\ndata: <json of data>\\n\\n``.
The agent's events (``chat.agent.events``) reuse these shapes and sentences; its ``citations``
comes after the text, since an agent finds its passages while it answers.

Each payload is one ``TypedDict``; the API's serializers are derived from them
(``common.typed_serializers``), so the ``Help`` texts here are the OpenAPI descriptions.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Annotated, Any, Literal, NotRequired, TypedDict

from common.db import DATABASE_UNAVAILABLE
from common.typed_serializers import Help

# Every error code chat sends (streams, JSON 503s, the web chat socket's refusals) with its sentence for people.
# A provider's own error text never reaches a caller: failures are normalized to one of these.
ERRORS: dict[str, str] = {
    "retrieval_unavailable": "Searching the knowledge base failed. Try again shortly.",
    "model_unavailable": "The chat model is unreachable. Try again shortly.",
    "database_unavailable": DATABASE_UNAVAILABLE,
    "internal_error": "Something went wrong while answering. Try again shortly.",
    "agent_timeout": "The agent ran out of time before answering. Resume the run to continue where it stopped.",
    # Refusals of the web chat socket (chat.consumers); the HTTP API's come from config.errors.
    "not_authenticated": "Sign in to chat.",
    "tenant_not_found": "Tenant not found.",
    "not_found": "Not found.",
    "busy": "An answer is still being written. Stop it or wait for it to finish.",
    "throttled": "Too many questions in a short time. Wait a moment and ask again.",
}
# An agent run that stopped on a failing model can be resumed, and its sentence says so.
AGENT_ERRORS: dict[str, str] = {
    **ERRORS,
    "model_unavailable": "The chat model is unreachable. Try again shortly, or resume the run.",
}
# What the graph_search diagnostic says (chat) and what the graph tools answer when they cannot help (agent).
GRAPH_NOT_BUILT = (
    "This knowledge base has no graph yet (no entities were extracted from its documents): "
    "graph search adds nothing, and answers come from hybrid search alone."
)
GRAPH_UNAVAILABLE = "Graph search joins hybrid search, which needs an embedding model: answers come from keyword search alone."
GRAPH_NOT_KEPT = "This knowledge base keeps no graph: answers come from hybrid search alone."
GRAPH_USED = "Graph search ranked {found} passages through the entities of the question and its top passages; {used} of the passages used came through it."
GRAPH_NO_ENTITY = "No entity of the knowledge graph is called {name!r}. Try a name as the passages write it, or graph_triplet_search."


class Citation(TypedDict):
    document_id: str
    chunk_id: str
    score: Annotated[float, Help(
        "The passage's score in the search of its own store (the knowledge base, or the conversation's attached "
        "files, searched alike): hybrid fusion's, or BM25's without an embedding model. One scale whichever store.")]
    graph_path: NotRequired[Annotated[list[str], Help("Graph search found this passage through these entities, in order.")]]
    file_id: NotRequired[Annotated[str, Help("The passage is from this file attached to the conversation (GET "
                                             "/v1/chat/sessions/{id}/files), not from the knowledge base.")]]
    withheld: NotRequired[Annotated[bool, Help("Set in a stored conversation when you may no longer read the passage "
                                               "(its access changed): its ids are empty and its text is not shown.")]]


class Usage(TypedDict):
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int


class GraphNodeData(TypedDict):
    name: str
    type: str


class GraphRelationData(TypedDict):
    subject: str
    predicate: str
    object: str
    chunk_id: str


class GraphSearchDiagnostics(TypedDict):
    requested: bool
    used: Annotated[bool, Help("Whether the graph leg ran (false: no graph, or no embedding model).")]
    detail: str
    graph_nodes: NotRequired[Annotated[list[GraphNodeData], Help("Entities on the paths that found passages (at most 20).")]]
    graph_relations: NotRequired[Annotated[list[GraphRelationData], Help("Relations among those entities, with the chunk stating each (at most 20).")]]


class Message(TypedDict):
    role: Literal["assistant"]
    content: str


# --- event payloads --------------------------------------------------------------------------


class CitationsData(TypedDict):
    """The stream's first event: the context, before the model writes."""

    session_id: str
    citations: Annotated[list[Citation], Help(
        "The passages given to the model as context, in retrieval order: a marker [n] in the streamed text is the "
        "n-th of them. The completed event lists the ones the answer cites, renumbered.")]
    graph_search: NotRequired[GraphSearchDiagnostics]


class DeltaData(TypedDict):
    text: str


class CompletedData(TypedDict):
    """The ``completed`` event, and the JSON response of ``POST /v1/chat/completions``."""

    id: Annotated[str, Help("The provider's completion id.")]
    model: Annotated[str, Help("The catalog model that answered (config/models.yaml).")]
    provider: Annotated[str, Help("e.g. openai, anthropic, or quarry for the built-in offline model.")]
    provider_model: Annotated[str, Help("The provider's model, e.g. offline-extractive.")]
    message: Annotated[Message, Help("The answer as stored: its markers [n] renumbered in order of first use, "
                                     "so [n] is the n-th of citations (a stream's text_delta frames carry "
                                     "the model's own numbering, that of the citations event).")]
    finish_reason: str
    usage: Usage
    retry_count: Annotated[int, Help("Retries litellm's Router made for this answer.")]
    fallback_count: Annotated[int, Help("Hops to a fallback deployment or model.")]
    session_id: str
    citations: Annotated[list[Citation], Help("The passages the answer cites, in order of first use: its marker [n] is the n-th.")]
    also_retrieved: Annotated[list[Citation], Help("Passages retrieved and given to the model but not cited, in retrieval order.")]
    graph_search: NotRequired[Annotated[GraphSearchDiagnostics, Help("Present when graph search was requested.")]]
    turn_id: Annotated[int, Help("The stored answer's turn id (regenerate, select, feedback: /v1/chat/sessions/{id}/turns/...).")]
    prompt_turn_id: Annotated[int, Help("The question's turn id (edit); a regenerated answer's is the question answered again.")]


class ErrorData(TypedDict):
    """The project's error shape (config/errors.py): a code and a sentence for people."""

    error: str
    detail: str


# --- events ----------------------------------------------------------------------------------


class CitationsEvent(TypedDict):
    event: Literal["citations"]
    data: CitationsData


class TextDeltaEvent(TypedDict):
    event: Literal["text_delta"]
    data: DeltaData


class ReasoningDeltaEvent(TypedDict):
    event: Literal["reasoning_delta"]
    data: DeltaData


class UsageEvent(TypedDict):
    event: Literal["usage"]
    data: Usage


class CompletedEvent(TypedDict):
    event: Literal["completed"]
    data: CompletedData


class ErrorEvent(TypedDict):
    event: Literal["error"]
    data: ErrorData


ChatEvent = CitationsEvent | TextDeltaEvent | ReasoningDeltaEvent | UsageEvent | CompletedEvent | ErrorEvent


# --- JSON responses --------------------------------------------------------------------------


class ChatResponse(CompletedData):
    """The JSON body of ``POST /v1/chat/completions``: exactly the ``completed`` event's data."""


class SessionCreated(TypedDict):
    """The JSON body of ``POST /v1/chat/sessions`` and ``POST /v1/agent/sessions``."""

    session_id: str
    greeting: str


def sse_frame(event: Mapping[str, Any]) -> bytes:
    """One Server-Sent Events frame of a chat or agent event.

    JSON never contains a raw newline, so one ``data:`` line suffices.
    """
    payload = json.dumps(event["data"], ensure_ascii=False, separators=(",", ":"))
    return f"event: {event['event']}\ndata: {payload}\n\n".encode()
