"""Chat completions through litellm's Router, built from the model catalog.

``stream_chat(messages)`` is the one way the product talks to a chat model. It
yields ``TextDelta``, ``ReasoningDelta`` and ``UsageReport`` as the provider
streams, then (when tools were offered) one ``ToolCalls`` with the calls
assembled from their pieces, then one ``Finished`` with who answered and how
many retries and fallbacks it took; any failure is raised as ``ModelUnavailable`` (safe to log,
never carrying provider text). Closing the iterator early (a client that left)
closes the provider stream.

Retry and fallback counts come from what the Router stamps on the response:
``_hidden_params["additional_headers"]`` carries ``x-litellm-attempted-retries``
(retries within the model group that answered) and
``x-litellm-attempted-fallbacks`` (hops to another group, including the next
deployment of a ``priority`` model, which litellm implements with ``order``).
When a fallback answered, the retries spent on the first group are stamped on
the request's own ``metadata`` dict (``attempted_retries``), which we pass in
and read back; ``retry_count`` is the sum of the two.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.signals import setting_changed
from django.dispatch import receiver

from chat.llm.catalog import SIMILARITIES, Catalog, load_catalog, load_litellm

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class TextDelta:
    text: str


@dataclass(frozen=True)
class ReasoningDelta:
    text: str


@dataclass(frozen=True)
class UsageReport:
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int

    def as_dict(self) -> dict[str, int]:
        return {"prompt_tokens": self.prompt_tokens, "completion_tokens": self.completion_tokens, "total_tokens": self.total_tokens}


@dataclass(frozen=True)
class Finished:
    """Who answered, and what it took."""

    id: str
    model: str  # the logical model (catalog name) that answered
    provider: str
    provider_model: str
    finish_reason: str
    usage: UsageReport
    retry_count: int
    fallback_count: int


@dataclass(frozen=True)
class ToolCallRequest:
    """A tool call as the model wrote it. ``arguments`` is raw text (JSON when the model behaved)."""

    id: str
    name: str
    arguments: str


@dataclass(frozen=True)
class ToolCalls:
    """The tool calls of a completion, whole (yielded before ``Finished``, only when tools were offered)."""

    calls: tuple[ToolCallRequest, ...]


ModelEvent = TextDelta | ReasoningDelta | ToolCalls | UsageReport | Finished


class ModelUnavailable(Exception):
    """No deployment could answer. ``str()`` names the failure class and status, never provider text."""

    def __init__(self, summary: str, *, status: int | None = None) -> None:
        super().__init__(summary)
        self.status = status

    @classmethod
    def from_exception(cls, exc: BaseException, *, model: str) -> ModelUnavailable:
        status = getattr(exc, "status_code", None)
        status = status if isinstance(status, int) else None
        provider = getattr(exc, "llm_provider", None)
        parts = [f"model {model!r}: {type(exc).__name__}"]
        if status is not None:
            parts.append(f"status {status}")
        if isinstance(provider, str) and provider:
            parts.append(f"provider {provider}")
        return cls(", ".join(parts), status=status)


# --- the router, one per catalog file version --------------------------------------

_lock = threading.Lock()
_cache: dict[str, Any] = {}


def catalog_path() -> Path:
    return Path(settings.QUARRY_MODEL_CONFIG_PATH)


def _file_version(path: Path) -> tuple[str, int, int]:
    try:
        stat = path.stat()
    except OSError:
        return (str(path), -1, -1)  # load_catalog reports the missing file
    return (str(path), stat.st_mtime_ns, stat.st_size)


def get_router() -> tuple[Any, Catalog]:
    """The Router and catalog for the configured file, rebuilt when the file changes
    (or ``QUARRY_MODEL_CONFIG_PATH`` does: ``setting_changed``).

    One Router per process keeps litellm's per-deployment state (cooldowns,
    client pools) across requests. Raises ``CatalogError`` for a bad catalog.
    """
    version = _file_version(catalog_path())
    with _lock:
        if _cache.get("version") != version:
            catalog = load_catalog(catalog_path())
            _cache.update(version=version, catalog=catalog, router=build_router(catalog))
        return _cache["router"], _cache["catalog"]


@receiver(setting_changed)
def _forget_router(*, setting: str, **kwargs: object) -> None:
    if setting == "QUARRY_MODEL_CONFIG_PATH":
        with _lock:
            _cache.clear()


def build_router(catalog: Catalog) -> Any:
    """A fresh ``litellm.Router`` for ``catalog`` (deployment ids are ``<model>#<index>``)."""
    # Imported here: the offline provider imports litellm, which takes a second; only model calls need it.
    from chat.llm.offline import register_offline_provider

    litellm = load_litellm()

    litellm.suppress_debug_info = True  # no "Give Feedback / Get Help" banners on stdout
    register_offline_provider()
    policy = catalog.router
    model_list: list[dict[str, Any]] = []
    for model in catalog.models.values():
        for index, deployment in enumerate(model.deployments):
            params: dict[str, Any] = {
                "model": deployment.litellm_model,
                "timeout": policy.timeout,
                "stream_timeout": policy.stream_timeout,
                # A provider that lacks an option we send (stream_options) ignores it instead of failing.
                "drop_params": True,
            }
            for key in ("api_base", "api_key", "api_version", "temperature", "max_tokens"):
                value = getattr(deployment, key)
                if value is not None:
                    params[key] = value
            if model.routing == "priority" and len(model.deployments) > 1:
                params["order"] = index + 1  # litellm tries order 1 first and the next ones when it fails
            model_list.append({"model_name": model.name, "litellm_params": params, "model_info": {"id": f"{model.name}#{index}"}})
    fallbacks = [{model.name: list(model.fallbacks)} for model in catalog.models.values() if model.fallbacks]
    return litellm.Router(
        model_list=model_list,
        num_retries=policy.num_retries,
        timeout=policy.timeout,
        stream_timeout=policy.stream_timeout,
        allowed_fails=policy.allowed_fails,
        cooldown_time=policy.cooldown_time,
        fallbacks=fallbacks,
        routing_strategy="simple-shuffle",
    )


# --- one completion --------------------------------------------------------------------


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


async def stream_chat(
    messages: Sequence[Mapping[str, Any]], *, model: str | None = None, tools: Sequence[Mapping[str, Any]] | None = None,
    similarities: Mapping[int, float] | None = None,
) -> AsyncIterator[ModelEvent]:
    """Stream one chat completion of ``messages`` from ``model`` (default: the catalog's).

    ``similarities``: the prompt's passages' cosines to the question by passage number, when the caller
    knows them (the chat pipeline's retrieval). They travel in litellm's call metadata, which stays in
    this process: the offline model reads them (``catalog.SIMILARITIES``) instead of embedding sentences
    again; a hosted model never sees them.
    Raises ``ModelUnavailable`` when no deployment answers, before or during the stream.
    """
    router, catalog = get_router()
    name = model or catalog.default_model
    metadata: dict[str, Any] = {SIMILARITIES: dict(similarities)} if similarities else {}
    params: dict[str, Any] = {"tools": [dict(t) for t in tools]} if tools else {}
    try:
        response = await router.acompletion(
            model=name, messages=list(messages), stream=True, stream_options={"include_usage": True}, metadata=metadata,
            **params,
        )
    except Exception as exc:
        raise ModelUnavailable.from_exception(exc, model=name) from None
    usage: UsageReport | None = None
    finish_reason = ""
    completion_id = ""
    reported_model = ""
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
                reasoning = getattr(delta, "reasoning_content", None) if delta is not None else None
                if reasoning:
                    yield ReasoningDelta(str(reasoning))
                text = getattr(delta, "content", None) if delta is not None else None
                if text:
                    yield TextDelta(str(text))
                if tools and delta is not None:
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
    served_group = str(headers.get("x-litellm-model-group") or name)
    fallbacks = _int(headers.get("x-litellm-attempted-fallbacks"))
    retries = _int(headers.get("x-litellm-attempted-retries"))
    if fallbacks:
        retries += _int(metadata.get("attempted_retries"))
    resolved = catalog.deployment_by_id(str(hidden.get("model_id") or ""))
    provider = resolved[1].provider if resolved else str(hidden.get("custom_llm_provider") or "")
    deployment_model = resolved[1].model if resolved else ""
    if usage is None:
        usage = UsageReport(0, 0, 0)
    yield usage
    tool_calls = calls.result()
    if tools:
        yield ToolCalls(tool_calls)
    yield Finished(
        id=completion_id,
        model=served_group,
        provider=provider,
        provider_model=_provider_model(reported_model, deployment_model, provider),
        finish_reason=finish_reason or ("tool_calls" if tool_calls else "stop"),
        usage=usage,
        retry_count=retries,
        fallback_count=fallbacks,
    )


def _provider_model(reported: str, configured: str, provider: str) -> str:
    """What the provider says it ran (e.g. a dated snapshot), else what the catalog asked for."""
    name = reported or configured
    prefix = f"{provider}/"
    return name[len(prefix):] if provider and name.startswith(prefix) else name


def _int(value: object) -> int:
    try:
        return max(0, int(value))  # type: ignore[call-overload]
    except (TypeError, ValueError):
        return 0


async def _close(response: Any) -> None:
    close = getattr(response, "aclose", None)
    if close is None:
        return
    try:
        await close()
    except Exception:  # closing is best effort; the stream is over either way
        logger.debug("closing the model stream failed", exc_info=True)
