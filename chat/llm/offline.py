"""The built-in offline chat model: ``quarry/offline-extractive`` (DESIGN 6).

A litellm ``CustomLLM`` provider, so it is routed, retried, streamed and
reported exactly like a hosted model. It does not generate: it reads the
numbered ``<passage>`` blocks that ``chat.prompting`` puts into the system
message, picks the sentences that share the most (IDF-weighted) words with the
user's last message, and quotes them with their citation markers. When no
sentence shares a content word with the question, it says the knowledge base
does not answer it. Usage is counted in words and punctuation marks, which is
what "tokens" means for this model.

It also drives the retrieval agent (``chat.agent``), so the agent works with
no key: offered tools that include ``hybrid_search`` and holding no tool result
for the latest question yet, it calls ``hybrid_search`` with that question;
once tool results are there (or when no tools are offered), it answers
extractively from the passages in them, citing their source numbers.
"""

from __future__ import annotations

import asyncio
import json
import math
import re
import time
import uuid
from collections.abc import AsyncIterator, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from chat.llm.catalog import OFFLINE_MODEL, OFFLINE_PROVIDER, load_litellm

litellm = load_litellm()

from litellm.llms.custom_llm import CustomLLM  # noqa: E402  (after load_litellm quietened its loggers)
from litellm.types.utils import GenericStreamingChunk, ModelResponse  # noqa: E402

MAX_SENTENCES = 3
NOT_FOUND = "I could not find an answer to that in the knowledge base."
INTRO = "From the knowledge base:"

_PASSAGE = re.compile(r'<passage n="(\d+)"[^>]*>\n?(.*?)\n?</passage>', re.DOTALL)
_WORD = re.compile(r"\w+", re.UNICODE)
_TOKEN = re.compile(r"\w+|[^\w\s]", re.UNICODE)
_SENTENCE_END = re.compile(r"(?<=[.!?])[\"'\u201d)]*\s+")
_BLOCK_START = re.compile(r"^\s*(?:#{1,6}\s|>|[*+-]\s|\d+[.)]\s|\|)")
_MARKUP = re.compile(r"^\s*(?:#{1,6}\s+|>\s*|[*+-]\s+|\d+[.)]\s+|\|)+")
_STOPWORDS = frozenset(
    """a about above after again against all am an and any are as at be because been before being below between
    both but by can could did do does doing down during each few for from further had has have having he her here
    hers herself him himself his how i if in into is it its itself just me more most my myself no nor not now of
    off on once only or other our ours ourselves out over own same she should so some such than that the their
    theirs them themselves then there these they this those through to too under until up very was we were what
    when where which while who whom why will with would you your yours yourself yourselves tell please give show
    explain describe know want need get""".split()
)


@dataclass(frozen=True)
class Sentence:
    passage: int
    position: int
    text: str
    terms: frozenset[str]


def _stem(word: str) -> str:
    """A light English stemmer: enough to match "uploads" with "uploading" and "upload"."""
    for suffix in ("ing", "ed", "es", "s"):
        if len(word) > len(suffix) + 2 and word.endswith(suffix):
            return word[: -len(suffix)]
    return word


def terms(text: str) -> frozenset[str]:
    return frozenset(_stem(w) for w in (m.lower() for m in _WORD.findall(text)) if w not in _STOPWORDS and len(w) > 1)


def count_tokens(text: str) -> int:
    return len(_TOKEN.findall(text))


def _content(message: Any) -> str:
    content = message.get("content") if isinstance(message, dict) else getattr(message, "content", None)
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(part.get("text", "") for part in content if isinstance(part, dict))
    return ""


def _role(message: Any) -> str:
    return str(message.get("role") if isinstance(message, dict) else getattr(message, "role", ""))


def passages_in(messages: Sequence[Any]) -> list[tuple[int, str]]:
    """The numbered passages of the system messages, in prompt order."""
    found: list[tuple[int, str]] = []
    for message in messages:
        if _role(message) == "system":
            found.extend((int(n), text) for n, text in _PASSAGE.findall(_content(message)))
    return found


def _blocks(text: str) -> Iterator[str]:
    """Paragraphs, list items and table rows; headings are dropped (titles, not statements)."""
    current: list[str] = []
    for line in text.splitlines():
        if not line.strip() or _BLOCK_START.match(line):
            if current:
                yield " ".join(current)
            heading = line.lstrip().startswith("#")
            current = [_MARKUP.sub("", line).strip()] if line.strip() and not heading else []
        else:
            current.append(line.strip())
    if current:
        yield " ".join(current)


def sentences_of(passages: Sequence[tuple[int, str]]) -> list[Sentence]:
    out: list[Sentence] = []
    for number, text in passages:
        position = 0
        for block in _blocks(text):
            for piece in _SENTENCE_END.split(block):
                cleaned = piece.strip().strip("|").strip()
                if len(cleaned.split()) < 4:  # headings and fragments quote badly
                    continue
                out.append(Sentence(number, position, cleaned, terms(cleaned)))
                position += 1
    return out


def extractive_answer(messages: Sequence[Any], *, max_sentences: int = MAX_SENTENCES) -> str:
    """The offline model's whole answer to ``messages``: from tool results when there are any, else the system passages."""
    question = next((_content(m) for m in reversed(messages) if _role(m) == "user"), "")
    passages = tool_passages(messages) if any(_role(m) == "tool" for m in messages) else passages_in(messages)
    return answer_from(question, passages, max_sentences=max_sentences)


def answer_from(question: str, passages: Sequence[tuple[int, str]], *, max_sentences: int = MAX_SENTENCES) -> str:
    """Quote the sentences of ``passages`` (numbered) that best match ``question``, with their numbers."""
    wanted = terms(question)
    candidates = sentences_of(passages)
    if not wanted or not candidates:
        return NOT_FOUND
    frequency: dict[str, int] = {}
    for sentence in candidates:
        for term in sentence.terms & wanted:
            frequency[term] = frequency.get(term, 0) + 1
    total = len(candidates)

    def score(sentence: Sentence) -> float:
        shared = sentence.terms & wanted
        weight = sum(math.log(1 + total / frequency[t]) for t in shared)
        # Earlier passages ranked higher in retrieval; break near-ties in their favour.
        return weight * (1 + 0.05 / sentence.passage)

    ranked = sorted((s for s in candidates if s.terms & wanted), key=lambda s: (-score(s), s.passage, s.position))
    chosen: list[Sentence] = []
    seen: set[str] = set()
    for sentence in ranked:
        if sentence.text not in seen:
            chosen.append(sentence)
            seen.add(sentence.text)
        if len(chosen) == max_sentences:
            break
    if not chosen:
        return NOT_FOUND
    lines = [f"- \u201c{s.text}\u201d [{s.passage}]" for s in chosen]
    return INTRO + "\n\n" + "\n".join(lines)


def tool_passages(messages: Sequence[Any]) -> list[tuple[int, str]]:
    """The passages of the agent's tool results (``{"results": [{"source": n, "text": ...}]}``), by first appearance."""
    found: dict[int, str] = {}
    for message in messages:
        if _role(message) != "tool":
            continue
        try:
            payload = json.loads(_content(message))
        except ValueError:
            continue
        results = payload.get("results") if isinstance(payload, dict) else None
        for item in results if isinstance(results, list) else ():
            if isinstance(item, dict) and isinstance(item.get("source"), int) and isinstance(item.get("text"), str):
                found.setdefault(item["source"], item["text"])
    return list(found.items())


AGENT_SEARCH_TOOL = "hybrid_search"


@dataclass(frozen=True)
class ToolCallPlan:
    name: str
    arguments: str  # JSON


def _offers(tools: Any, name: str) -> bool:
    for tool in tools if isinstance(tools, list) else ():
        function = tool.get("function") if isinstance(tool, dict) else None
        if isinstance(function, dict) and function.get("name") == name:
            return True
    return False


def agent_plan(messages: Sequence[Any], tools: Any) -> ToolCallPlan | None:
    """The tool call to make instead of answering: ``hybrid_search`` of the latest question, once.

    Only when ``hybrid_search`` is offered and no tool result follows the
    latest user message (the question has not been searched yet).
    """
    if not _offers(tools, AGENT_SEARCH_TOOL):
        return None
    last_user = max((i for i, m in enumerate(messages) if _role(m) == "user"), default=None)
    if last_user is None or any(_role(m) == "tool" for m in messages[last_user + 1:]):
        return None
    question = _content(messages[last_user]).strip()
    if not question:
        return None
    return ToolCallPlan(AGENT_SEARCH_TOOL, json.dumps({"query": question}, ensure_ascii=False))


def deltas(text: str) -> Iterator[str]:
    """Small pieces, a word and its trailing space at a time, like a hosted model streams."""
    yield from re.findall(r"\s*\S+\s*", text)


def _usage(messages: Sequence[Any], answer: str) -> dict[str, int]:
    prompt_tokens = sum(count_tokens(_content(m)) for m in messages)
    completion_tokens = count_tokens(answer)
    return {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens, "total_tokens": prompt_tokens + completion_tokens}


class OfflineExtractiveLLM(CustomLLM):
    """litellm provider ``quarry``; its one model is ``offline-extractive``."""

    def completion(self, model: str, messages: list, *args: Any, model_response: ModelResponse, **kwargs: Any) -> ModelResponse:  # type: ignore[override]
        return self._response(model, messages, model_response, _tools(kwargs))

    async def acompletion(self, model: str, messages: list, *args: Any, model_response: ModelResponse, **kwargs: Any) -> ModelResponse:  # type: ignore[override]
        return self._response(model, messages, model_response, _tools(kwargs))

    def streaming(self, model: str, messages: list, *args: Any, **kwargs: Any) -> Iterator[GenericStreamingChunk]:  # type: ignore[override]
        plan = agent_plan(messages, _tools(kwargs))
        if plan is not None:
            yield _tool_chunk(plan)
            yield _chunk("", finished=True, usage=_usage(messages, plan.arguments), finish_reason="tool_calls")
            return
        answer = extractive_answer(messages)
        for piece in deltas(answer):
            yield _chunk(piece)
        yield _chunk("", finished=True, usage=_usage(messages, answer))

    async def astreaming(self, model: str, messages: list, *args: Any, **kwargs: Any) -> AsyncIterator[GenericStreamingChunk]:  # type: ignore[override]
        for chunk in self.streaming(model, messages, *args, **kwargs):
            yield chunk
            await asyncio.sleep(0)  # a cancellation point per delta, so a client that leaves stops it

    def _response(self, model: str, messages: list, model_response: ModelResponse, tools: Any = None) -> ModelResponse:
        model_response.id = f"chatcmpl-offline-{uuid.uuid4().hex[:24]}"
        model_response.created = int(time.time())
        model_response.model = f"{OFFLINE_PROVIDER}/{model.split('/')[-1] or OFFLINE_MODEL}"
        plan = agent_plan(messages, tools)
        if plan is not None:
            model_response.choices[0].message = litellm.Message(  # type: ignore[union-attr,attr-defined]
                role="assistant", content=None, tool_calls=[_tool_call(plan)],
            )
            model_response.choices[0].finish_reason = "tool_calls"
            model_response.usage = litellm.Usage(**_usage(messages, plan.arguments))  # type: ignore[attr-defined]
            return model_response
        answer = extractive_answer(messages)
        model_response.choices[0].message.content = answer  # type: ignore[union-attr]
        model_response.choices[0].finish_reason = "stop"
        model_response.usage = litellm.Usage(**_usage(messages, answer))  # type: ignore[attr-defined]
        return model_response


def _tools(kwargs: dict[str, Any]) -> Any:
    """The ``tools`` of the request: litellm hands a custom provider its ``optional_params``."""
    optional = kwargs.get("optional_params")
    return optional.get("tools") if isinstance(optional, dict) else None


def _tool_call(plan: ToolCallPlan, index: int = 0) -> dict[str, Any]:
    return {"id": f"call_offline_{uuid.uuid4().hex[:16]}", "type": "function",
            "function": {"name": plan.name, "arguments": plan.arguments}, "index": index}


def _tool_chunk(plan: ToolCallPlan) -> GenericStreamingChunk:
    return {"text": "", "is_finished": False, "finish_reason": "", "usage": None, "index": 0,
            "tool_use": _tool_call(plan)}  # type: ignore[typeddict-item]


def _chunk(text: str, *, finished: bool = False, usage: dict[str, int] | None = None, finish_reason: str = "stop") -> GenericStreamingChunk:
    return {
        "text": text,
        "is_finished": finished,
        "finish_reason": finish_reason if finished else "",
        "usage": usage,  # type: ignore[typeddict-item]
        "index": 0,
        "tool_use": None,
    }


_handler = OfflineExtractiveLLM()


def register_offline_provider() -> None:
    """Make ``quarry/...`` models resolvable by litellm (idempotent)."""
    entries = [e for e in litellm.custom_provider_map if e.get("provider") != OFFLINE_PROVIDER]
    litellm.custom_provider_map = [*entries, {"provider": OFFLINE_PROVIDER, "custom_handler": _handler}]
    litellm.utils.custom_llm_setup()
