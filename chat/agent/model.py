"""One model turn of the agent, through the chat catalog's litellm Router, with tools.

``stream_turn(messages, tools=...)`` yields ``TextDelta`` and ``ReasoningDelta``
as the provider streams, then one ``TurnResult``: the text, the tool calls
(assembled by ``chat.llm.stream_chat`` from their streamed pieces) and the usual
``Finished`` record (who answered, usage, retries, fallbacks). Failures raise
``ModelUnavailable`` (safe to log, never carrying provider text) or ``CatalogError``,
as ``stream_chat`` does; closing the iterator early closes the provider stream.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import aclosing
from dataclasses import dataclass
from typing import Any

from django.conf import settings

from chat.llm import CatalogError, Finished, ReasoningDelta, TextDelta, ToolCallRequest, ToolCalls, get_router, stream_chat

__all__ = ["ToolCallRequest", "TurnEvent", "TurnResult", "agent_model_name", "stream_turn"]


@dataclass(frozen=True)
class TurnResult:
    text: str
    tool_calls: tuple[ToolCallRequest, ...]
    finished: Finished


TurnEvent = TextDelta | ReasoningDelta | TurnResult


def agent_model_name(catalog: Any) -> str:
    """The logical model the agent asks: ``QUARRY_AGENT_MODEL`` or the catalog's default."""
    name = settings.QUARRY_AGENT_MODEL or catalog.default_model
    if name not in catalog.models:
        raise CatalogError(f"QUARRY_AGENT_MODEL: {name!r} is not one of the catalog's models ({', '.join(catalog.models)})")
    return name


async def stream_turn(
    messages: Sequence[Mapping[str, Any]], *, tools: Sequence[Mapping[str, Any]] | None
) -> AsyncIterator[TurnEvent]:
    """Stream one completion of ``messages``; ``tools`` None (or empty) offers the model none."""
    _, catalog = get_router()
    text: list[str] = []
    tool_calls: tuple[ToolCallRequest, ...] = ()
    async with aclosing(stream_chat(messages, model=agent_model_name(catalog), tools=tools)) as events:
        async for event in events:
            if isinstance(event, TextDelta):
                text.append(event.text)
                yield event
            elif isinstance(event, ReasoningDelta):
                yield event
            elif isinstance(event, ToolCalls):
                tool_calls = event.calls
            elif isinstance(event, Finished):
                yield TurnResult(text="".join(text), tool_calls=tool_calls, finished=event)
