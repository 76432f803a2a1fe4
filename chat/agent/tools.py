"""The agent's tools: read-only retrieval over the caller's tenant, described to the model as JSON schemas.

``keyword_search``, ``semantic_search`` and ``hybrid_search`` (query, limit,
filters) and ``fetch_chunks`` (ids) go through ``rag.tenant_service(tenant.slug)``
and therefore through the RAG API's own validation; ``graph_triplet_search``
(relations about a question, each with the passage stating it) and
``graph_neighbors`` (an entity's related entities and the passages linking
them) exist only when the run asked for graph search. ``Toolbox.run_all`` runs one
step's calls concurrently and never raises for a tool's failure: a bad
argument, a validation error, a slow or failing search becomes a result with
``ok: false`` and a sentence the model can act on.

Every chunk a tool returns gets a *source number*, stable for the whole run
(a resumed run keeps counting). The model cites sources as ``[n]``; only these
chunks can become citations.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypedDict

from django.conf import settings
from django.db import DatabaseError

from accounts.models import Tenant
from chat.agent.model import ToolCallRequest
from chat.events import ERRORS, GRAPH_NO_ENTITY, GRAPH_NOT_KEPT
from chat.retrieval import RetrievalOptions, search, search_mode
from knowledge import rag

logger = logging.getLogger(__name__)

SEARCH_TOOLS: dict[str, rag.SearchMode] = {
    "hybrid_search": rag.SearchMode.HYBRID,
    "keyword_search": rag.SearchMode.KEYWORD,
    "semantic_search": rag.SearchMode.SEMANTIC,
}
FETCH_TOOL = "fetch_chunks"
TRIPLET_TOOL = "graph_triplet_search"
NEIGHBORS_TOOL = "graph_neighbors"
GRAPH_TOOLS: tuple[str, ...] = (TRIPLET_TOOL, NEIGHBORS_TOOL)
# A passage longer than this is cut in the tool result: one huge chunk must not eat the token budget.
MAX_PASSAGE_CHARS = 4_000


class Source(TypedDict):
    source: int
    chunk_id: str
    document_id: str
    score: float  # the score of the search that first returned it (0 for a chunk only fetched)


# --- what the model is told ------------------------------------------------------------------

_FILTERS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": (
        "Optional metadata filters: {field: value} keeps chunks whose metadata field equals the value; "
        "{field: [a, b]} keeps those equal to any of the values. Several fields must all match."
    ),
    "additionalProperties": {
        "anyOf": [
            {"type": ["string", "number", "boolean"]},
            {"type": "array", "items": {"type": ["string", "number", "boolean"]}, "minItems": 1, "maxItems": 100},
        ]
    },
}

_SEARCH_DESCRIPTIONS = {
    "hybrid_search": "Search the knowledge base by meaning and by words together (the best default).",
    "keyword_search": "Search the knowledge base for words (BM25): best for exact names, codes, numbers or phrases.",
    "semantic_search": "Search the knowledge base by meaning (embeddings): best for paraphrases and related ideas.",
}


def _search_schema(name: str, *, graph_search: bool = False) -> dict[str, Any]:
    description = _SEARCH_DESCRIPTIONS[name] + " Returns passages, best first, each with a source number to cite."
    if graph_search and name == "hybrid_search":
        description += " The knowledge graph adds up to a few passages beyond the limit, each saying through which entities."
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {
                "type": "object",
                "properties": {
                    "query": {"type": "string", "description": "What to search for."},
                    "limit": {
                        "type": "integer", "minimum": 1, "maximum": settings.QUARRY_AGENT_TOOL_MAX_RESULTS,
                        "description": f"How many passages (default {settings.QUARRY_AGENT_TOOL_DEFAULT_RESULTS}).",
                    },
                    "filters": _FILTERS_SCHEMA,
                    "rerank": {
                        "type": "string", "enum": list(rag.RERANK_CHOICES),
                        "description": "colbert: re-score the first candidates by late interaction (better order, slower); "
                                       f"none: the search's own order (default {settings.QUARRY_CHAT_RERANK}).",
                    },
                },
                "required": ["query"],
                "additionalProperties": False,
            },
        },
    }


def _fetch_schema() -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": FETCH_TOOL,
            "description": "Read passages by chunk id ('<document id>:<n>'), e.g. the one after a passage found by a search.",
            "parameters": {
                "type": "object",
                "properties": {
                    "ids": {
                        "type": "array", "items": {"type": "string"}, "minItems": 1,
                        "maxItems": settings.QUARRY_AGENT_TOOL_MAX_RESULTS, "description": "Chunk ids, in the order wanted.",
                    },
                },
                "required": ["ids"],
                "additionalProperties": False,
            },
        },
    }


def _graph_schemas() -> list[dict[str, Any]]:
    limit = {
        "type": "integer", "minimum": 1, "maximum": settings.QUARRY_AGENT_TOOL_MAX_RESULTS,
        "description": f"How many (default {settings.QUARRY_AGENT_TOOL_DEFAULT_RESULTS}).",
    }
    return [
        {
            "type": "function",
            "function": {
                "name": TRIPLET_TOOL,
                "description": (
                    "Search the knowledge graph for facts (subject, predicate, object) about the entities a question "
                    "names and those of its best passages. Each triplet gives the source number of the passage "
                    "that states it; the passages are returned too, to cite."
                ),
                "parameters": {
                    "type": "object",
                    "properties": {"query": {"type": "string", "description": "The question or the names to look up."},
                                   "limit": limit},
                    "required": ["query"],
                    "additionalProperties": False,
                },
            },
        },
        {
            "type": "function",
            "function": {
                "name": NEIGHBORS_TOOL,
                "description": (
                    "List the entities related to one entity of the knowledge graph (a person, place, work, "
                    "document title...), how they are related, and the passages that link them, to cite."
                ),
                "parameters": {
                    "type": "object",
                    "properties": {"entity": {"type": "string", "description": "The entity's name, as the passages write it."},
                                   "limit": limit},
                    "required": ["entity"],
                    "additionalProperties": False,
                },
            },
        },
    ]


def tool_specs(*, graph_search: bool) -> list[dict[str, Any]]:
    """The tool surface in OpenAI's ``tools`` format; graph tools only when ``graph_search``."""
    specs = [_search_schema(name, graph_search=graph_search) for name in SEARCH_TOOLS] + [_fetch_schema()]
    return specs + _graph_schemas() if graph_search else specs


def tool_names(*, graph_search: bool) -> list[str]:
    return [spec["function"]["name"] for spec in tool_specs(graph_search=graph_search)]


# --- one call ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class ParsedCall:
    """A tool call with its arguments parsed; ``arguments`` is the raw text when it was not a JSON object."""

    id: str
    name: str
    arguments: dict[str, Any] | str

    @classmethod
    def of(cls, request: ToolCallRequest, *, call_id: str) -> ParsedCall:
        raw = request.arguments.strip()
        if not raw:
            return cls(call_id, request.name, {})  # some models send nothing for "no arguments"
        try:
            parsed = json.loads(raw)
        except ValueError:
            return cls(call_id, request.name, request.arguments)
        return cls(call_id, request.name, parsed if isinstance(parsed, dict) else request.arguments)

    @property
    def signature(self) -> str:
        """Identity for the repeated-call rule: the tool and its arguments, key order ignored."""
        return signature(self.name, self.arguments)


def signature(name: str, arguments: Any) -> str:
    canonical = json.dumps(arguments, sort_keys=True, ensure_ascii=False) if isinstance(arguments, dict) else str(arguments)
    return f"{name}\x1f{canonical}"


class ToolFailure(Exception):
    """A tool could not answer; the message is what the model reads (no provider or database text)."""


@dataclass
class ToolOutcome:
    ok: bool
    content: dict[str, Any]  # the JSON the model reads as the tool's result
    chunk_ids: list[str] = field(default_factory=list)
    error: str | None = None

    @classmethod
    def failure(cls, message: str) -> ToolOutcome:
        return cls(ok=False, content={"ok": False, "error": message}, error=message)

    def message_for(self, call_id: str) -> dict[str, Any]:
        return {"role": "tool", "tool_call_id": call_id, "content": json.dumps(self.content, ensure_ascii=False)}


# What a replayed tool result says in place of the passages (and what it said about them) withheld from it.
WITHHELD_NOTE = ("Some passages this call returned are withheld: the asker may no longer read them. "
                 "Do not cite or repeat them.")


def withhold_passages(messages: Sequence[dict[str, Any]], *, withheld: Collection[str], sources: Sequence[Source]) -> list[dict[str, Any]]:
    """A run's stored conversation with the model (``RunProgress.messages``) as it may be replayed to a reader
    who may not read the chunks ``withheld`` (``chat.retrieval.unreadable_chunks``, read for this invocation).

    In each tool result, every item that names a withheld chunk, by id or by its source number (``sources``:
    the run's numbering), is removed: a passage with its text, and a graph triplet, neighbour or path stated
    by it (an item naming several sources goes when any of them is withheld); the result's other objects (a
    neighbours call's entity) go too, and ``withheld`` counts what went. A note the model wrote beside a
    later tool call may quote what it read, so it is dropped as well (the calls themselves stay: the
    conversation must stay well-formed). Messages are copied, never changed in place.
    """
    if not withheld:
        return list(messages)
    numbers = {s["source"] for s in sources if s["chunk_id"] in withheld}
    out: list[dict[str, Any]] = []
    seen_withheld = False
    for message in messages:
        if message.get("role") == "tool":
            content = _withheld_content(message.get("content"), withheld, numbers)
            if content is not None:
                message, seen_withheld = {**message, "content": content}, True
        elif seen_withheld and message.get("role") == "assistant" and message.get("tool_calls") and message.get("content"):
            message = {**message, "content": None}
        out.append(message)
    return out


def _withheld_content(text: Any, withheld: Collection[str], numbers: Collection[int]) -> str | None:
    """A tool result's JSON without what names a withheld chunk; None when it names none (or is no result of ours)."""
    try:
        content = json.loads(text)
    except (TypeError, ValueError):
        return None
    if not isinstance(content, dict):
        return None

    def names_withheld(item: dict[str, Any]) -> bool:
        chunk, source, several = item.get("chunk_id"), item.get("source"), item.get("sources")
        return ((isinstance(chunk, str) and chunk in withheld) or (isinstance(source, int) and source in numbers)
                or (isinstance(several, list) and any(isinstance(n, int) and n in numbers for n in several)))

    kept: dict[str, Any] = {}
    hidden = 0
    for key, value in content.items():
        if isinstance(value, list) and all(isinstance(item, dict) for item in value):  # passages and graph refs
            shown = [item for item in value if not names_withheld(item)]
            hidden += len(value) - len(shown)
            kept[key] = shown
        else:
            kept[key] = value
    if not hidden:
        return None
    kept = {key: value for key, value in kept.items() if not isinstance(value, dict)}
    return json.dumps({**kept, "withheld": hidden, "withheld_note": WITHHELD_NOTE}, ensure_ascii=False)


@dataclass(frozen=True)
class Found:
    """What a tool found: passages (with the score to show), and more of its result.

    ``refs`` are lists of items that name chunks (``chunk_id`` or ``chunk_ids``); the model
    reads them with source numbers (``source`` / ``sources``) instead, as it cites.
    """

    hits: list[tuple[rag.RAGChunk, float | None]]
    extra: dict[str, Any]
    refs: dict[str, Any] = field(default_factory=dict)
    # A search hit's scores besides ``score`` (rrf_score, semantic_similarity, graph_path...), by chunk id.
    # The model is not shown them; the MCP tools return them.
    details: dict[str, dict[str, Any]] = field(default_factory=dict)


_HIT_DETAILS = ("rrf_score", "rrf_rank", "semantic_similarity", "keyword_score", "keyword_norm", "semantic_norm", "graph_score", "graph_path")


def hit_details(hit: rag.RAGHit) -> dict[str, Any]:
    """The scores a hit carries besides ``score``, those the search mode set (JSON-ready)."""
    out: dict[str, Any] = {}
    for name in _HIT_DETAILS:
        value = getattr(hit, name)
        if value is not None:
            out[name] = list(value) if isinstance(value, tuple) else value
    return out


def _as_int(name: str, value: Any) -> int:
    if isinstance(value, bool):
        raise ToolFailure(f"{name}: must be an integer")
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str) and value.strip().isdigit():
        return int(value.strip())
    raise ToolFailure(f"{name}: must be an integer")


def _with_sources(item: Mapping[str, Any], number: Mapping[str, int]) -> dict[str, Any]:
    """``item`` with its chunk id(s) replaced by the source number(s) the model cites."""
    out = {k: v for k, v in item.items() if k not in ("chunk_id", "chunk_ids")}
    if "chunk_id" in item:
        out["source"] = number[item["chunk_id"]]
    if "chunk_ids" in item:
        out["sources"] = [number[c] for c in item["chunk_ids"]]
    return out


def _check_keys(arguments: Mapping[str, Any], allowed: Sequence[str]) -> None:
    unknown = sorted(set(arguments) - set(allowed))
    if unknown:
        raise ToolFailure(f"unexpected argument(s) {', '.join(unknown)}; this tool takes {', '.join(allowed)}")


class Toolbox:
    """The tools of one run invocation: the tenant's knowledge service and the run's source numbering.

    ``sources`` is the run's list, extended in place as tools return new chunks.
    """

    def __init__(self, *, tenant: Tenant, graph_search: bool, sources: list[Source], reader: rag.Reader | None) -> None:
        """``reader``: whose tools these are (``rag.reader_of(ctx)`` of the request, resolved for it; None only
        for those who read everything): every search, fetch and graph tool reads as them."""
        self.service = rag.tenant_service(tenant.slug, reader=reader)
        self.graph_search = graph_search
        # The service's own fusion, no conversation files.
        self.options = RetrievalOptions(graph=graph_search, reader=reader)
        self.names = frozenset(tool_names(graph_search=graph_search))
        self.sources = sources
        self._by_chunk: dict[str, Source] = {s["chunk_id"]: s for s in sources}

    async def close(self) -> None:
        await self.service.close()

    async def find(self, name: str, arguments: dict[str, Any]) -> Found | ToolFailure:
        """One call's raw result, unnumbered: what another surface (MCP) presents in its own shape.

        The same bounds, validation and failure sentences as the model's calls; never raises
        for a tool's failure.
        """
        return await self._bounded(ParsedCall(id="", name=name, arguments=arguments))

    async def run_all(self, calls: Sequence[ParsedCall]) -> list[ToolOutcome]:
        """Run ``calls`` concurrently; one outcome per call, in call order (and sources numbered in call order)."""
        found = await asyncio.gather(*(self._bounded(call) for call in calls))
        return [self._present(result) for result in found]

    async def _bounded(self, call: ParsedCall) -> Found | ToolFailure:
        timeout = settings.QUARRY_AGENT_TOOL_TIMEOUT_SECONDS
        try:
            return await asyncio.wait_for(self._execute(call), timeout)
        except ToolFailure as failure:
            return failure
        except TimeoutError:
            logger.warning("agent tool %s timed out after %d s", call.name, timeout)
            return ToolFailure(f"The tool took longer than {timeout} seconds and was stopped. Try a narrower request.")
        except (rag.RAGError, DatabaseError, OSError) as exc:
            logger.error("agent tool %s failed: %s", call.name, type(exc).__name__)
            return ToolFailure(ERRORS["retrieval_unavailable"])
        except Exception:
            logger.exception("agent tool %s failed", call.name)
            return ToolFailure("The tool failed unexpectedly. Try another tool or answer from what you have.")

    async def _execute(self, call: ParsedCall) -> Found:
        if call.name not in self.names:
            raise ToolFailure(f"There is no tool called {call.name[:64]!r}. The tools are: {', '.join(sorted(self.names))}.")
        if not isinstance(call.arguments, dict):
            raise ToolFailure("The arguments are not a JSON object; send them as JSON, e.g. {\"query\": \"...\"}.")
        if call.name in SEARCH_TOOLS:
            return await self._search(SEARCH_TOOLS[call.name], call.arguments)
        if call.name == FETCH_TOOL:
            return await self._fetch(call.arguments)
        if not self.service.has_graph:
            raise ToolFailure(GRAPH_NOT_KEPT)
        if call.name == TRIPLET_TOOL:
            return await self._triplets(call.arguments)
        return await self._neighbors(call.arguments)

    def _limit(self, arguments: dict[str, Any]) -> int:
        """The call's ``limit``; one outside 1..QUARRY_AGENT_TOOL_MAX_RESULTS is refused naming the bound, above
        as below (the schema says the range; a silent cap would hand back fewer passages than asked for)."""
        limit = _as_int("limit", arguments.get("limit", settings.QUARRY_AGENT_TOOL_DEFAULT_RESULTS))
        maximum = settings.QUARRY_AGENT_TOOL_MAX_RESULTS
        if not 1 <= limit <= maximum:
            raise ToolFailure(f"limit: must be between 1 and {maximum} (QUARRY_AGENT_TOOL_MAX_RESULTS), got {limit}")
        return limit

    async def _chunks(self, chunk_ids: Sequence[str]) -> list[tuple[rag.RAGChunk, float | None]]:
        ids = list(dict.fromkeys(chunk_ids))[: settings.QUARRY_AGENT_TOOL_MAX_RESULTS]
        return [(chunk, None) for chunk in await self.service.fetch(ids)] if ids else []

    async def _triplets(self, arguments: dict[str, Any]) -> Found:
        _check_keys(arguments, ("query", "limit"))
        query = arguments.get("query")
        if not isinstance(query, str) or not query.strip():
            raise ToolFailure("query: required, a non-empty string")
        extra: dict[str, Any] = {}
        limit = self._limit(arguments)
        try:
            triplets = await self.service.graph_triplets(query, limit=limit)
        except (rag.RAGValidationError, rag.RAGTypeError) as exc:
            raise ToolFailure(str(exc)) from None
        if not triplets:
            extra["note"] = "The knowledge graph holds no relation about this; hybrid_search may still find passages."
        hits = await self._chunks([t.chunk_id for t in triplets])
        found = {chunk.chunk_id for chunk, _ in hits}
        rows = [
            {"subject": t.subject.name, "subject_type": t.subject.type, "predicate": t.predicate, "object": t.object.name,
             "object_type": t.object.type, "chunk_id": t.chunk_id}
            for t in triplets if t.chunk_id in found
        ]
        return Found(hits, extra, {"triplets": rows})

    async def _neighbors(self, arguments: dict[str, Any]) -> Found:
        _check_keys(arguments, ("entity", "limit"))
        entity = arguments.get("entity")
        if not isinstance(entity, str) or not entity.strip():
            raise ToolFailure("entity: required, a non-empty string (an entity's name)")
        extra: dict[str, Any] = {}
        limit = self._limit(arguments)
        try:
            around = await self.service.graph_neighbors(entity, limit=limit)
        except (rag.RAGValidationError, rag.RAGTypeError) as exc:
            raise ToolFailure(str(exc)) from None
        if around.entity is None:
            raise ToolFailure(GRAPH_NO_ENTITY.format(name=entity.strip()[:200]))
        hits = await self._chunks([*around.chunk_ids, *(c for n in around.neighbors for c in n.chunk_ids)])
        found = {chunk.chunk_id for chunk, _ in hits}
        extra["entity"] = {"name": around.entity.name, "type": around.entity.type}
        refs = {
            "about": [{"chunk_id": c} for c in around.chunk_ids if c in found],
            "neighbors": [
                {"entity": n.entity.name, "type": n.entity.type, "predicates": list(n.predicates),
                 "chunk_ids": [c for c in n.chunk_ids if c in found]}
                for n in around.neighbors
            ],
        }
        return Found(hits, extra, refs)

    async def _search(self, mode: rag.SearchMode, arguments: dict[str, Any]) -> Found:
        _check_keys(arguments, ("query", "limit", "filters", "rerank"))
        query = arguments.get("query")
        if not isinstance(query, str) or not query.strip():
            raise ToolFailure("query: required, a non-empty string")
        extra: dict[str, Any] = {}
        limit = self._limit(arguments)
        filters = arguments.get("filters") or {}
        if not isinstance(filters, dict):
            raise ToolFailure("filters: must be an object of field: value or field: [values]")
        options = self.options
        if arguments.get("rerank") is not None:
            try:
                options = dataclasses.replace(options, rerank=rag.parse_rerank(arguments["rerank"]))
            except rag.RAGValidationError as exc:
                raise ToolFailure(str(exc)) from None
        if (searchable := search_mode(self.service, mode)) is not mode:  # no embedding model is configured
            if mode is rag.SearchMode.SEMANTIC:
                raise ToolFailure("Semantic search is unavailable: no embedding model is configured. Use keyword_search.")
            mode, extra["note"] = searchable, "no embedding model is configured: these are keyword results"
        try:
            # With graph search, hybrid search has the graph leg too (a passage says through which entities),
            # its passages kept beyond ``limit`` (chat.retrieval.search); keyword results when the embedder fails.
            found = await search(self.service, query, mode=mode, limit=limit, options=options, filters=filters)
        except rag.EmbedderError as exc:  # semantic search only: hybrid search fell back to keyword search
            logger.warning("agent search: the embedder failed (%s)", type(exc).__name__)
            raise ToolFailure("The embedding model failed; keyword_search still works.") from None
        except (rag.RAGValidationError, rag.RAGTypeError) as exc:
            raise ToolFailure(str(exc)) from None  # names the argument and the bound it broke
        if found.keyword_fallback:
            extra["note"] = "the embedding model failed: these are keyword results"
        if found.rerank is not None and not found.rerank.applied:
            extra["rerank"] = found.rerank.as_json()  # asked for, not done: say why (the order is the search's own)
        hits = found.hits
        via = [{"chunk_id": h.chunk.chunk_id, "via": list(h.graph_path)} for h in hits if h.graph_path]
        return Found([(hit.chunk, hit.score) for hit in hits], extra, {"found_through_graph": via} if via else {},
                     {hit.chunk.chunk_id: hit_details(hit) for hit in hits})

    async def _fetch(self, arguments: dict[str, Any]) -> Found:
        _check_keys(arguments, ("ids",))
        ids = arguments.get("ids")
        if isinstance(ids, str):
            ids = [ids]
        if not isinstance(ids, list) or not ids:
            raise ToolFailure("ids: required, a list of chunk ids like 'guide:0'")
        maximum = settings.QUARRY_AGENT_TOOL_MAX_RESULTS
        if len(ids) > maximum:
            raise ToolFailure(f"ids: at most {maximum} ids per call, got {len(ids)}")
        try:
            chunks = await self.service.fetch(ids)
        except (rag.RAGValidationError, rag.RAGTypeError) as exc:
            raise ToolFailure(str(exc)) from None
        found = {chunk.chunk_id for chunk in chunks}
        missing = [i for i in dict.fromkeys(ids) if i not in found]
        return Found([(chunk, None) for chunk in chunks], {"missing": missing} if missing else {})

    def _present(self, result: Found | ToolFailure) -> ToolOutcome:
        if isinstance(result, ToolFailure):
            return ToolOutcome.failure(str(result))
        passages = []
        for chunk, score in result.hits:
            source = self._source_of(chunk, score)
            passage: dict[str, Any] = {"source": source["source"], "chunk_id": chunk.chunk_id, "document_id": chunk.document_id}
            if chunk.title:
                passage["title"] = chunk.title
            if score is not None:
                passage["score"] = round(score, 6)
            text = chunk.text
            passage["text"] = text if len(text) <= MAX_PASSAGE_CHARS else text[:MAX_PASSAGE_CHARS] + " [...]"
            passages.append(passage)
        content: dict[str, Any] = {"ok": True, "results": passages, **result.extra}
        number = {p["chunk_id"]: p["source"] for p in passages}
        for key, items in result.refs.items():
            content[key] = [_with_sources(item, number) for item in items]
        return ToolOutcome(ok=True, content=content, chunk_ids=[chunk.chunk_id for chunk, _ in result.hits])

    def _source_of(self, chunk: rag.RAGChunk, score: float | None) -> Source:
        known = self._by_chunk.get(chunk.chunk_id)
        if known is None:
            known = {"source": len(self.sources) + 1, "chunk_id": chunk.chunk_id, "document_id": chunk.document_id,
                     "score": float(score or 0.0)}
            self.sources.append(known)
            self._by_chunk[chunk.chunk_id] = known
        elif known["score"] == 0.0 and score is not None:
            known["score"] = float(score)  # first fetched, now found by a search
        return known
