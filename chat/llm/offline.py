"""The built-in offline chat model: ``quarry/offline-extractive`` (DESIGN 6).

A litellm ``CustomLLM`` provider, so it is routed, retried, streamed and
reported exactly like a hosted model. It does not generate: it reads the
numbered ``<passage>`` blocks that ``chat.prompting`` puts into the system
message, picks the sentences that answer the user's last message
(``chat.llm.selection``: BM25 and the local embedder's cosine similarity, a
relevance floor, no near-duplicates, no page furniture, list items and code
blocks whole, a table row with its header, Chinese and Japanese sentences too)
and quotes them with their citation markers, so only the
passages it quoted are cited. When no sentence reaches the floor, it says the
knowledge base does not seem to answer and names the closest documents. Usage
is counted in words and punctuation marks, which is what "tokens" means for
this model.

It also drives the retrieval agent (``chat.agent``), so the agent works with
no key: offered tools that include ``hybrid_search`` and holding no tool result
for the latest question yet, it calls ``hybrid_search`` with that question;
after that first round, once more for what the best sentence found names when
the question does not (a multi-hop question's next fact, ``selection.bridge_query``);
then (or when no tools are offered) it answers extractively from the passages
in the tool results, citing their source numbers.
"""

from __future__ import annotations

import asyncio
import dataclasses
import html
import json
import logging
import math
import re
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from chat.llm.catalog import OFFLINE_MODEL, OFFLINE_PROVIDER, SIMILARITIES, load_litellm
from chat.llm.selection import (
    DEFAULT_TUNING, Selection, Tuning, Vectors, bridge_query, embedding_texts, select,
)
from knowledge import rag
from knowledge.rag import factory

litellm = load_litellm()

from litellm.llms.custom_llm import CustomLLM  # noqa: E402  (after load_litellm quietened its loggers)
from litellm.types.utils import GenericStreamingChunk, ModelResponse  # noqa: E402

logger = logging.getLogger(__name__)

NOT_FOUND = "I could not find an answer to that in the knowledge base."
CANNOT_ANSWER = "The knowledge base does not seem to answer this question."
# Where the quoted passages come from, as the answer names it: passages marked as the conversation's
# attached files (``chat.prompting``: source="attached file") are not the knowledge base's.
KNOWLEDGE_BASE, ATTACHED_FILES, BOTH = "the knowledge base", "the attached files", "the knowledge base and the attached files"
CANNOT_ANSWER_FROM = {
    KNOWLEDGE_BASE: CANNOT_ANSWER,
    ATTACHED_FILES: "The attached files do not seem to answer this question.",
    BOTH: "Neither the knowledge base nor the attached files seem to answer this question.",
}
INTRO = "From {where}:"
SUMMARY_INTRO = "In short, from {where}:"

_PASSAGE = re.compile(r'<passage n="(\d+)"([^>]*)>\n?(.*?)\n?</passage>', re.DOTALL)
_ATTRIBUTE = re.compile(r'(\w+)="([^"]*)"')
_TOKEN = re.compile(r"\w+|[^\w\s]", re.UNICODE)


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


@dataclass(frozen=True)
class Passage:
    number: int
    text: str
    title: str  # the document's title, else its id; "" when the prompt names neither
    attached: bool = False  # from a file attached to the conversation, not from the knowledge base


def _unescape(value: str) -> str:
    return html.unescape(value)


def passages_of(messages: Sequence[Any]) -> list[Passage]:
    """The numbered passages of the system messages, in prompt order, with their document's name."""
    found: list[Passage] = []
    for message in messages:
        if _role(message) == "system":
            for n, attributes, text in _PASSAGE.findall(_content(message)):
                named = dict(_ATTRIBUTE.findall(attributes))
                found.append(Passage(int(n), text, _unescape(named.get("title") or named.get("document") or ""),
                                     attached=named.get("source") == "attached file"))
    return found


def passages_in(messages: Sequence[Any]) -> list[tuple[int, str]]:
    """The numbered passages of the system messages, in prompt order."""
    return [(p.number, p.text) for p in passages_of(messages)]


def _question_and_passages(
    messages: Sequence[Any], similarity: Mapping[int, float] | None,
) -> tuple[str, list[Passage], dict[int, float] | None]:
    """The question, the passages to answer from, and their similarities to the question when the
    caller knows them (``similarity``: the chat pipeline's retrieval, by passage number)."""
    question = next((_content(m) for m in reversed(messages) if _role(m) == "user"), "")
    if any(_role(m) == "tool" for m in messages):
        return question, tool_passages_of(messages), None  # the agent's sources are numbered by its tools
    return question, passages_of(messages), dict(similarity) if similarity else None


def similarities_of(kwargs: Mapping[str, Any]) -> dict[int, float] | None:
    """The passage similarities ``chat.llm.stream_chat`` put in the call's metadata (litellm hands a
    provider its ``litellm_params``), or None."""
    params = kwargs.get("litellm_params") or {}
    metadata = (params.get("metadata") if isinstance(params, Mapping) else getattr(params, "metadata", None)) or {}
    found = metadata.get(SIMILARITIES) if isinstance(metadata, Mapping) else None
    return {int(n): float(v) for n, v in found.items()} if isinstance(found, Mapping) and found else None


def _sync_vectors(texts: list[str]) -> list[list[float]] | None:
    """The local embedder's vectors, when it can run here (no event loop in this thread)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(_embed(texts))
    return None


class VectorCache:
    """The last ``size`` texts' vectors, per embedder model: a knowledge base is asked about the same
    passages again and again (and a follow-up repeats the question), and a sentence embedded once
    need not pay the embedder's ~5-30 ms a sentence on CPU again. Thread-safe (the sync path embeds
    from worker threads)."""

    def __init__(self, size: int = 4096) -> None:
        self.size = size
        self._vectors: OrderedDict[tuple[str, str], list[float]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, model: str, texts: Sequence[str]) -> list[list[float] | None]:
        with self._lock:
            found: list[list[float] | None] = []
            for text in texts:
                vector = self._vectors.get((model, text))
                if vector is not None:
                    self._vectors.move_to_end((model, text))
                found.append(vector)
            return found

    def put(self, model: str, texts: Sequence[str], vectors: Sequence[list[float]]) -> None:
        with self._lock:
            for text, vector in zip(texts, vectors, strict=True):
                self._vectors[(model, text)] = vector
                self._vectors.move_to_end((model, text))
            while len(self._vectors) > self.size:
                self._vectors.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._vectors.clear()

    async def embed(self, embedder: rag.Embedder | None, texts: list[str]) -> list[list[float]] | None:
        """The vectors of ``texts`` (cached ones reused, the others embedded in one call), or None
        when there is no embedder, it cannot read the question (``texts[0]``, as ``select`` asks;
        ``knowledge.rag.scripts``) or it failed: the selection then uses BM25 alone."""
        if embedder is None or not texts:
            return None
        if not rag.reads(embedder, texts[0]):
            # An English model's cosines to a Chinese question are noise that the relevance floor would
            # take for meaning (declining every CJK question): the question's terms decide instead.
            return None
        # Keyed by the embedder instance too: the process builds one (knowledge.rag.factory), and a new
        # one (a settings change, a test's fake) must not be answered with another's vectors.
        model = f"{getattr(embedder, 'model_id', None) or type(embedder).__qualname__}@{id(embedder)}"
        found = self.get(model, texts)
        missing = list(dict.fromkeys(t for t, v in zip(texts, found, strict=True) if v is None))
        if missing:
            try:
                computed = await embedder.embed(missing, kind="query")
            except (rag.RAGError, OSError, ValueError) as exc:
                logger.warning("offline model: the embedder failed (%s); choosing sentences by BM25 alone", type(exc).__name__)
                return None
            self.put(model, missing, computed)
            fresh = dict(zip(missing, computed, strict=True))
            found = [v if v is not None else fresh[t] for t, v in zip(texts, found, strict=True)]
        return found  # type: ignore[return-value]  # every slot is filled


_vector_cache = VectorCache()


def _sentence_embedder() -> rag.Embedder | None:
    """What scores sentences when the passages' similarities are not known (the agent's tool results):
    all-MiniLM-L6-v2 whatever the tenants' model, because ``Tuning``'s cosine thresholds were measured
    with it (bge-small, the default for retrieval, spreads cosines higher); None when the deployment
    turned embeddings off. The chat pipeline's similarities arrive on MiniLM's scale alike
    (``chat.pipeline.ScoredHit.calibrated_similarity``)."""
    configured = rag.default_embedder()
    if configured is None:
        return None
    if getattr(configured, "model_id", None) == rag.LocalEmbedder.model_id or not isinstance(configured, rag.BgeSmallEmbedder):
        return configured  # MiniLM itself, or a model of the deployment's choosing (a provider, a test's)
    return factory.embedder_named("local")


async def _embed(texts: list[str]) -> list[list[float]] | None:
    """The vectors of ``texts`` by the sentence embedder, through the process's cache (``VectorCache.embed``)."""
    return await _vector_cache.embed(_sentence_embedder(), texts)


def extractive_answer(
    messages: Sequence[Any], *, similarity: Mapping[int, float] | None = None, tuning: Tuning = DEFAULT_TUNING,
) -> str:
    """The offline model's whole answer to ``messages``: from tool results when there are any, else the system
    passages. ``similarity``: the passages' cosines to the question by number, when the caller knows them."""
    question, passages, similarity = _question_and_passages(messages, similarity)
    return answer_from(question, passages, vectors=_sync_vectors, similarity=similarity, tuning=tuning)


async def extractive_answer_async(
    messages: Sequence[Any], *, similarity: Mapping[int, float] | None = None, tuning: Tuning = DEFAULT_TUNING,
) -> str:
    """``extractive_answer`` with the embedder awaited (the streaming path). With the passages'
    similarities known, nothing is embedded unless no unit passes on them (``answer_from``): the
    answer costs a few milliseconds of BM25."""
    question, passages, similarity = _question_and_passages(messages, similarity)
    numbered, titles = _numbered(passages)
    if similarity is not None and question.strip() and numbered:
        chosen = select(question, numbered, titles=titles, similarity=similarity, tuning=tuning)
        if not chosen.units:
            vectors = await _embed(embedding_texts(question, numbered, titles=titles, tuning=tuning))
            chosen = _recheck(question, numbered, titles, lambda _texts: vectors, tuning) or chosen
        return _reply(chosen, titles, _attached(passages))
    vectors = await _embed(embedding_texts(question, numbered, titles=titles, tuning=tuning))
    return answer_from(question, passages, vectors=lambda _texts: vectors, tuning=tuning)


def answer_from(
    question: str,
    passages: Sequence[Passage] | Sequence[tuple[int, str]],
    *,
    vectors: Vectors | None = None,
    similarity: dict[int, float] | None = None,
    tuning: Tuning = DEFAULT_TUNING,
) -> str:
    """Quote the units of ``passages`` that answer ``question`` with their passage numbers (``selection.select``);
    when none does, say so and name the closest documents.

    With ``similarity`` (each passage's cosine to the question, from retrieval) the passages'
    similarities stand for their units' and nothing is embedded. Only when no unit passes that way
    and ``vectors`` can embed are the best units embedded and judged by their own similarity
    (``Tuning.recheck_floor``): a long passage whose one relevant sentence sits among unrelated ones
    (a memo in a ledger) has a low similarity as a whole, and would otherwise never be quoted however
    well its sentence matches. That recheck costs an embedding of the question and a few units, paid
    only by answers that would otherwise decline.
    """
    numbered, titles = _numbered(passages)
    if not question.strip() or not numbered:
        return NOT_FOUND
    chosen = select(question, numbered, titles=titles, vectors=None if similarity is not None else vectors,
                    similarity=similarity, tuning=tuning)
    if not chosen.units and similarity is not None and vectors is not None:
        chosen = _recheck(question, numbered, titles, vectors, tuning) or chosen
    return _reply(chosen, titles, _attached(passages))


def _numbered(passages: Sequence[Passage] | Sequence[tuple[int, str]]) -> tuple[list[tuple[int, str]], dict[int, str]]:
    """Each passage as ``(number, text)``, and the titles by number (a bare ``(number, text)`` has none)."""
    numbered = [(p.number, p.text) if isinstance(p, Passage) else (p[0], p[1]) for p in passages]
    return numbered, {p.number: p.title for p in passages if isinstance(p, Passage) and p.title}


def _attached(passages: Sequence[Passage] | Sequence[tuple[int, str]]) -> tuple[set[int], set[int]]:
    """The numbers of the passages from attached files, and of all passages."""
    numbers = {p.number if isinstance(p, Passage) else p[0] for p in passages}
    return {p.number for p in passages if isinstance(p, Passage) and p.attached}, numbers


def _where(numbers: set[int], attached: set[int]) -> str:
    """How an answer names the origin of the passages numbered ``numbers``."""
    if not numbers & attached:
        return KNOWLEDGE_BASE
    return ATTACHED_FILES if numbers <= attached else BOTH


def _recheck(question: str, numbered: list[tuple[int, str]], titles: dict[int, str], vectors: Vectors,
             tuning: Tuning) -> Selection | None:
    """The units judged by their own similarity, at ``Tuning.recheck_floor``; None when ``vectors`` could
    not embed (``select`` would then fall back to BM25 alone, a weaker floor than the one that just failed)."""
    embedded: list[bool] = []

    def recorded(texts: list[str]) -> list[list[float]] | None:
        found = vectors(texts)
        embedded.append(found is not None)
        return found

    again = select(question, numbered, titles=titles, vectors=recorded, tuning=dataclasses.replace(tuning, floor=tuning.recheck_floor))
    return again if any(embedded) else None


def _reply(chosen: Selection, titles: dict[int, str], origins: tuple[set[int], set[int]] | None = None) -> str:
    """``chosen`` rendered; when it holds nothing, the sentence that says so, naming the closest documents.
    ``origins``: the attached files' passage numbers and all of them (``_attached``), so the answer
    names where its quotes come from, or where it looked."""
    attached, offered = origins or (set(), set())
    if not chosen.units:
        cannot = CANNOT_ANSWER_FROM[_where(offered, attached)]
        names = list(dict.fromkeys(titles[n] for n in chosen.closest if n in titles))[:3]
        if not names:
            return cannot
        quoted = [f"\u201c{name}\u201d" for name in names]
        listed = quoted[0] if len(quoted) == 1 else ", ".join(quoted[:-1]) + " and " + quoted[-1]
        return f"{cannot} The closest documents are {listed}." if len(quoted) > 1 else f"{cannot} The closest document is {listed}."
    return render(chosen, where=_where({u.passage for u in chosen.units}, attached))


def render(chosen: Selection, *, where: str = KNOWLEDGE_BASE) -> str:
    """The answer text: sentences quoted as bullets (or as one paragraph for a summary), items and table
    rows (after their header) as bullets, code blocks verbatim on their own lines; every unit followed
    by its marker. ``where``: the quotes' origin as the introduction names it."""
    shape = chosen.instruction.shape
    if shape == "summary" and all(u.kind == "sentence" for u in chosen.units):
        return SUMMARY_INTRO.format(where=where) + "\n\n" + " ".join(f"{u.text} [{u.passage}]" for u in chosen.units)
    lines: list[str] = []
    for unit in chosen.units:
        if unit.kind == "code":
            lines.append(f"\n{unit.text}\n\n[{unit.passage}]\n")
        elif unit.kind in ("item", "row") or shape == "list":
            lines.append(f"- {unit.text} [{unit.passage}]")
        else:
            lines.append(f"- \u201c{unit.text}\u201d [{unit.passage}]")
    return INTRO.format(where=where) + "\n\n" + "\n".join(lines).strip("\n")


def tool_passages(messages: Sequence[Any]) -> list[tuple[int, str]]:
    """The passages of the agent's tool results (``{"results": [{"source": n, "text": ...}]}``), by first appearance."""
    return [(p.number, p.text) for p in tool_passages_of(messages)]


def tool_passages_of(messages: Sequence[Any]) -> list[Passage]:
    """``tool_passages`` with each result's ``title`` (or ``document_id``) as the document's name."""
    found: dict[int, Passage] = {}
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
                name = item.get("title") or item.get("document_id") or ""
                found.setdefault(item["source"], Passage(item["source"], item["text"], str(name)))
    return list(found.values())


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


def _tool_rounds(messages: Sequence[Any]) -> int:
    """How many assistant turns with tool calls the messages hold."""
    def calls(message: Any) -> Any:
        return message.get("tool_calls") if isinstance(message, dict) else getattr(message, "tool_calls", None)
    return sum(1 for m in messages if _role(m) == "assistant" and calls(m))


def agent_plan(messages: Sequence[Any], tools: Any) -> ToolCallPlan | None:
    """The tool call to make instead of answering: ``hybrid_search`` of the latest question, then at
    most one more, for what the best sentence it found names (``selection.bridge_query``: a multi-hop
    question's next fact), the way the chat pipeline's retrieval takes its second hop.

    Only when ``hybrid_search`` is offered: the question itself when no tool result follows the
    latest user message; the bridge query after exactly one round of tool calls, when the best
    sentence of its results names something the question does not; else None (answer now).
    """
    if not _offers(tools, AGENT_SEARCH_TOOL):
        return None
    last_user = max((i for i, m in enumerate(messages) if _role(m) == "user"), default=None)
    if last_user is None:
        return None
    question = _content(messages[last_user]).strip()
    if not question:
        return None
    after = messages[last_user + 1:]
    if not any(_role(m) == "tool" for m in after):
        return ToolCallPlan(AGENT_SEARCH_TOOL, json.dumps({"query": question}, ensure_ascii=False))
    if _tool_rounds(after) != 1:
        return None
    found = tool_passages_of(after)
    query = bridge_query(question, [(p.number, p.text) for p in found], titles={p.number: p.title for p in found if p.title})
    if not query or query == question:
        return None
    return ToolCallPlan(AGENT_SEARCH_TOOL, json.dumps({"query": query}, ensure_ascii=False))


def deltas(text: str, most: int = 24) -> Iterator[str]:
    """Small pieces, as a hosted model streams: a word and its trailing space at a time, or a few
    words when that would make more than ``most`` pieces. Every delta pays litellm's stream wrapper
    and an event-loop turn, which made streaming a 400-character answer word by word cost more
    than choosing its sentences."""
    pieces = re.findall(r"\s*\S+\s*", text)
    size = max(1, math.ceil(len(pieces) / most))
    for start in range(0, len(pieces), size):
        yield "".join(pieces[start:start + size])


def _usage(messages: Sequence[Any], answer: str) -> dict[str, int]:
    prompt_tokens = sum(count_tokens(_content(m)) for m in messages)
    completion_tokens = count_tokens(answer)
    return {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens, "total_tokens": prompt_tokens + completion_tokens}


class OfflineExtractiveLLM(CustomLLM):
    """litellm provider ``quarry``; its one model is ``offline-extractive``."""

    def completion(self, model: str, messages: list, *args: Any, model_response: ModelResponse, **kwargs: Any) -> ModelResponse:  # type: ignore[override]
        tools = _tools(kwargs)
        answer = None if agent_plan(messages, tools) else extractive_answer(messages, similarity=similarities_of(kwargs))
        return self._response(model, messages, model_response, tools, answer)

    async def acompletion(self, model: str, messages: list, *args: Any, model_response: ModelResponse, **kwargs: Any) -> ModelResponse:  # type: ignore[override]
        tools = _tools(kwargs)
        answer = None if agent_plan(messages, tools) else await extractive_answer_async(messages, similarity=similarities_of(kwargs))
        return self._response(model, messages, model_response, tools, answer)

    def streaming(self, model: str, messages: list, *args: Any, **kwargs: Any) -> Iterator[GenericStreamingChunk]:  # type: ignore[override]
        plan = agent_plan(messages, _tools(kwargs))
        if plan is not None:
            yield from _plan_chunks(messages, plan)
            return
        yield from _answer_chunks(messages, extractive_answer(messages, similarity=similarities_of(kwargs)))

    async def astreaming(self, model: str, messages: list, *args: Any, **kwargs: Any) -> AsyncIterator[GenericStreamingChunk]:  # type: ignore[override]
        plan = agent_plan(messages, _tools(kwargs))
        answer = None if plan is not None else await extractive_answer_async(messages, similarity=similarities_of(kwargs))
        chunks = _plan_chunks(messages, plan) if plan is not None else _answer_chunks(messages, answer or "")
        for chunk in chunks:
            yield chunk
            await asyncio.sleep(0)  # a cancellation point per delta, so a client that leaves stops it

    def _response(self, model: str, messages: list, model_response: ModelResponse, tools: Any, answer: str | None) -> ModelResponse:
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
        answer = answer if answer is not None else extractive_answer(messages)
        model_response.choices[0].message.content = answer  # type: ignore[union-attr]
        model_response.choices[0].finish_reason = "stop"
        model_response.usage = litellm.Usage(**_usage(messages, answer))  # type: ignore[attr-defined]
        return model_response


def _plan_chunks(messages: Sequence[Any], plan: ToolCallPlan) -> Iterator[GenericStreamingChunk]:
    yield _tool_chunk(plan)
    yield _chunk("", finished=True, usage=_usage(messages, plan.arguments), finish_reason="tool_calls")


def _answer_chunks(messages: Sequence[Any], answer: str) -> Iterator[GenericStreamingChunk]:
    for piece in deltas(answer):
        yield _chunk(piece)
    yield _chunk("", finished=True, usage=_usage(messages, answer))


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
