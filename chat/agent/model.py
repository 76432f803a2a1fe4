"""One model turn of the agent, through the chat catalog's litellm Router, with tools.

``stream_turn(messages, tools=...)`` yields ``TextDelta`` and ``ReasoningDelta``
as the provider streams, then one ``TurnResult``: the text, the tool calls
(assembled from their streamed pieces) and the usual ``Finished`` record (who
answered, usage, retries, fallbacks). Failures raise ``ModelUnavailable``
(safe to log, never carrying provider text) or ``CatalogError``, exactly as
``chat.llm.stream_chat`` does; closing the iterator early closes the provider
stream.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from django.conf import settings

from chat.llm import CatalogError, Finished, ModelUnavailable, ReasoningDelta, TextDelta, UsageReport, get_router

# The Router's response bookkeeping is read exactly as chat.llm.stream_chat reads it; these helpers
# are private to the router module, which has no tool-calling entry point of its own yet.
from chat.llm.router import _close, _int, _provider_model


@dataclass(frozen=True)
class ToolCallRequest:
    """A tool call as the model wrote it. ``arguments`` is raw text (JSON when the model behaved)."""

    id: str
    name: str
    arguments: str


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


class _ToolCallAssembler:
    """Tool calls arrive in pieces keyed by ``index``: the first piece names the call, the rest append arguments."""

    def __init__(self) -> None:
        self.calls: list[dict[str, str]] = []
        self._by_index: dict[int, dict[str, str]] = {}

    def add(self, piece: Any) -> None:
        index = getattr(piece, "index", None)
        index = index if isinstance(index, int) else len(self.calls)
        piece_id = getattr(piece, "id", None) or ""
        current = self._by_index.get(index)
        # Some providers number every complete call 0: a new id at a known index is a new call.
        if current is None or (piece_id and current["id"] and piece_id != current["id"]):
            current = {"id": "", "name": "", "arguments": ""}
            self.calls.append(current)
            self._by_index[index] = current
        if piece_id and not current["id"]:
            current["id"] = str(piece_id)
        function = getattr(piece, "function", None)
        name = getattr(function, "name", None) if function is not None else None
        if name and not current["name"]:
            current["name"] = str(name)
        arguments = getattr(function, "arguments", None) if function is not None else None
        if isinstance(arguments, str):
            current["arguments"] += arguments
        elif isinstance(arguments, Mapping):  # a provider that hands over parsed arguments
            current["arguments"] += json.dumps(arguments)

    def result(self) -> tuple[ToolCallRequest, ...]:
        return tuple(ToolCallRequest(c["id"], c["name"], c["arguments"]) for c in self.calls if c["name"] or c["arguments"])


async def stream_turn(
    messages: Sequence[Mapping[str, Any]], *, tools: Sequence[Mapping[str, Any]] | None
) -> AsyncIterator[TurnEvent]:
    """Stream one completion of ``messages``; ``tools`` None (or empty) offers the model none."""
    router, catalog = get_router()
    name = agent_model_name(catalog)
    metadata: dict[str, Any] = {}
    params: dict[str, Any] = {}
    if tools:
        params["tools"] = [dict(t) for t in tools]
    try:
        response = await router.acompletion(
            model=name, messages=list(messages), stream=True, stream_options={"include_usage": True},
            metadata=metadata, **params,
        )
    except Exception as exc:
        raise ModelUnavailable.from_exception(exc, model=name) from None
    usage: UsageReport | None = None
    finish_reason = ""
    completion_id = ""
    reported_model = ""
    text: list[str] = []
    calls = _ToolCallAssembler()
    try:
        async for chunk in response:
            completion_id = completion_id or str(getattr(chunk, "id", "") or "")
            reported_model = str(getattr(chunk, "model", "") or reported_model)
            raw_usage = getattr(chunk, "usage", None)
            if raw_usage is not None and getattr(raw_usage, "total_tokens", None) is not None:
                usage = UsageReport(
                    int(raw_usage.prompt_tokens or 0), int(raw_usage.completion_tokens or 0), int(raw_usage.total_tokens or 0)
                )
            for choice in getattr(chunk, "choices", None) or ():
                delta = getattr(choice, "delta", None)
                if delta is not None:
                    reasoning = getattr(delta, "reasoning_content", None)
                    if reasoning:
                        yield ReasoningDelta(str(reasoning))
                    content = getattr(delta, "content", None)
                    if content:
                        text.append(str(content))
                        yield TextDelta(str(content))
                    for piece in getattr(delta, "tool_calls", None) or ():
                        calls.add(piece)
                if getattr(choice, "finish_reason", None):
                    finish_reason = str(choice.finish_reason)
    except Exception as exc:
        raise ModelUnavailable.from_exception(exc, model=name) from None
    finally:
        await _close(response)

    hidden = getattr(response, "_hidden_params", None) or {}
    headers = hidden.get("additional_headers") or {}
    fallbacks = _int(headers.get("x-litellm-attempted-fallbacks"))
    retries = _int(headers.get("x-litellm-attempted-retries"))
    if fallbacks:
        retries += _int(metadata.get("attempted_retries"))
    resolved = catalog.deployment_by_id(str(hidden.get("model_id") or ""))
    provider = resolved[1].provider if resolved else str(hidden.get("custom_llm_provider") or "")
    tool_calls = calls.result()
    finished = Finished(
        id=completion_id,
        model=str(headers.get("x-litellm-model-group") or name),
        provider=provider,
        provider_model=_provider_model(reported_model, resolved[1].model if resolved else "", provider),
        finish_reason=finish_reason or ("tool_calls" if tool_calls else "stop"),
        usage=usage or UsageReport(0, 0, 0),
        retry_count=retries,
        fallback_count=fallbacks,
    )
    yield TurnResult(text="".join(text), tool_calls=tool_calls, finished=finished)
