"""The one retrieval for answers: the chat pipeline, the agent's tools and (through them) MCP.

``RetrievalOptions`` is what a request asks of retrieval (graph leg, fusion, the conversation's
files), resolved once against the settings; ``search`` is one search with the rules every caller
shares (hybrid fusion, the graph leg's placement, the keyword fallback when the embedder fails);
``retrieve`` is the chat's retrieval (the knowledge base and the conversation's files fused, the
similarity floor, one bounded second hop). Nothing here checks access: callers pass a tenant (or a
store) they resolved for the caller.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.db import DatabaseError
from django.db.models import BooleanField, ExpressionWrapper, Q

from chat.events import GRAPH_NOT_BUILT, GRAPH_NOT_KEPT, GRAPH_UNAVAILABLE, GRAPH_USED, GraphSearchDiagnostics
from chat.llm.selection import bridge_query
from knowledge import rag
from knowledge.models import Chunk
from knowledge.rag.fusion import graph_page, rrf, with_graph_placed
from knowledge.rag.reranking import GRAPH_NOT_RERANKED

logger = logging.getLogger(__name__)


class RetrievalFailed(Exception):
    """The knowledge base could not be searched (the message names the error's type only)."""


@dataclass(frozen=True)
class FileScope:
    """Where a conversation's retrieval looks besides (or instead of) the tenant's knowledge base.

    ``store``: the namespace of the session's attached files (None: nothing attached). ``sources``:
    ``all`` (the knowledge base and the files, fused by RRF), ``files`` (the files only) or
    ``knowledge`` (the knowledge base only). ``identifier``: one file's id, narrowing the files to it
    (Parsimony's ``identifier``); with it, only that file is searched.
    """

    store: str | None
    sources: str = "all"
    identifier: str | None = None

    @property
    def searches_files(self) -> bool:
        return self.store is not None and self.sources != "knowledge"

    @property
    def searches_knowledge(self) -> bool:
        return self.sources != "files" and self.identifier is None


@dataclass(frozen=True)
class RetrievalOptions:
    """What one request asks of retrieval, already resolved against the settings (``of``).

    ``graph``: add the knowledge graph's leg to hybrid search. ``fusion`` / ``fusion_weight``: how
    hybrid search merges its legs (None: the tenant's service's default), which is also the list the
    graph places its passages in. ``files``: the conversation's attached files (``FileScope``; no
    store: the knowledge base alone). Preconditions: the values passed the request's validation
    (``chat.api.requests``) or are the server's own.
    """

    graph: bool = False
    fusion: rag.Fusion | str | None = None
    fusion_weight: float | None = None
    files: FileScope = field(default_factory=lambda: FileScope(None))
    rerank: str | None = None
    # Whose retrieval this is (issue 34): the knowledge base is searched as far as they may read.
    # None: trusted code (commands); the pipeline and the agent always set it (``for_reader``).
    reader: rag.Reader | None = None

    @classmethod
    def of(
        cls, *, graph_search: bool | None = None, fusion: rag.Fusion | str | None = None, fusion_weight: float | None = None,
        sources: str = "all", identifier: str | None = None, rerank: str | None = None,
    ) -> RetrievalOptions:
        """A chat request's options (the names of ``POST /v1/chat/completions``); ``graph_search`` None is
        ``QUARRY_CHAT_RETRIEVAL_GRAPH_SEARCH``, ``rerank`` None ``QUARRY_CHAT_RERANK``. The files' store is
        the session's (``with_store``)."""
        graph = settings.QUARRY_CHAT_RETRIEVAL_GRAPH_SEARCH if graph_search is None else graph_search
        return cls(bool(graph), fusion, fusion_weight, FileScope(None, sources, identifier), rerank)

    @property
    def reranks(self) -> bool:
        """Whether searches re-rank their candidates (``rerank``, None: ``QUARRY_CHAT_RERANK``)."""
        return rag.parse_rerank(self.rerank or settings.QUARRY_CHAT_RERANK) == "colbert"

    def for_reader(self, reader: rag.Reader | None) -> RetrievalOptions:
        """These options as ``reader`` retrieves (the request's ``rag.reader_of(ctx)``, resolved for this request)."""
        return dataclasses.replace(self, reader=reader)

    def with_store(self, store: str | None) -> RetrievalOptions:
        """These options over the conversation's attached files ``store`` (None: none attached)."""
        return dataclasses.replace(self, files=dataclasses.replace(self.files, store=store))

    def fusion_for(self, mode: rag.SearchMode) -> dict[str, Any]:
        """``RAGService.search``'s fusion arguments for a search in ``mode``: hybrid search's only."""
        return {"fusion": self.fusion, "fusion_weight": self.fusion_weight} if mode is rag.SearchMode.HYBRID else {}

    def recorded(self, service: rag.RAGService) -> dict[str, Any]:
        """What an answer's retrieval was asked to do, resolved against ``service``'s defaults (kept with
        the answer, and copied into feedback on it). ``service``: the tenant's, its model followed."""
        hybrid = service.embedder is not None
        return {
            "mode": search_mode(service).value,
            "graph_search": self.graph and hybrid,
            "fusion": (rag.Fusion.parse(self.fusion) if self.fusion else service.fusion).value if hybrid else None,
            "fusion_weight": (service.fusion_weight if self.fusion_weight is None else self.fusion_weight) if hybrid else None,
            "top_k": settings.QUARRY_CHAT_RETRIEVAL_TOP_K,
            "min_similarity": similarity_floor(service),
            "embedding_model": rag.types.declared_model_id(service.embedder) if hybrid else None,
            "rerank": "colbert" if self.reranks else "none",
        }


def search_mode(service: rag.RAGService, wanted: rag.SearchMode = rag.SearchMode.HYBRID) -> rag.SearchMode:
    """``wanted``, or keyword search when it needs an embedder and ``service`` has none."""
    return rag.SearchMode.KEYWORD if wanted is not rag.SearchMode.KEYWORD and service.embedder is None else wanted


def similarity_floor(service: rag.RAGService) -> float:
    """The least cosine a semantic-only hit of ``service``'s searches needs: the setting when set,
    else the floor of the embedder the service searched with (the tenant's model, after a search)."""
    configured = settings.QUARRY_CHAT_RETRIEVAL_MIN_SIMILARITY
    return configured if configured is not None else rag.types.relevance_floor(service.embedder)


@dataclass(frozen=True)
class Searched:
    """One search's hits, best first; ``graph``: what the graph leg did (None: it did not run);
    ``keyword_fallback``: the embedder failed, so these are keyword search's hits; ``rerank``: what the
    re-ranking stage did (None: not asked for)."""

    hits: list[rag.RAGHit]
    graph: rag.GraphSearchResult | None = None
    keyword_fallback: bool = False
    rerank: rag.Reranked | None = None


async def search(
    service: rag.RAGService, query: str, *, mode: rag.SearchMode, limit: int, options: RetrievalOptions,
    filters: Mapping[str, Any] | None = None,
) -> Searched:
    """``query`` searched in ``mode`` with ``options``' fusion, the one place of three shared rules.

    The graph leg (``options.graph``, hybrid mode, a backend with a graph) places its passages below
    hybrid search's first hits (after the 6th by default, deeper than an answer reads): a page deep
    enough to hold them is read, and hybrid's first ``limit`` plus every passage the graph placed are
    kept (``with_graph_placed``), so they reach the caller beyond ``limit``. When the embedder fails,
    hybrid search answers from keyword search (``keyword_fallback``); semantic search re-raises the
    ``rag.EmbedderError``, as it has no keyword equivalent. Other errors propagate.

    With ``options.reranks`` the search reads the re-ranker's depth of candidates and re-ranks them
    (``rag.rerank``; ``Searched.rerank`` says whether it ran, and why not) before the page is cut; a
    graph search's page is left as the graph placed its passages (``GRAPH_NOT_RERANKED``).
    """
    fusion = options.fusion_for(mode)
    reranks = options.reranks
    try:
        if options.graph and mode is rag.SearchMode.HYBRID and service.has_graph:
            result = await service.graph_search(query, limit=graph_page(limit), filters=filters, **fusion)
            skipped = rag.Reranked((), applied=False, reason=GRAPH_NOT_RERANKED) if reranks else None
            return Searched(with_graph_placed(result.hits, limit), result, rerank=skipped)
        found = await service.search(query, mode=mode, limit=rag.rerank_depth(limit) if reranks else limit, filters=filters, **fusion)
        fallback = False
    except rag.EmbedderError as exc:
        if mode is rag.SearchMode.SEMANTIC:
            raise
        logger.warning("retrieval: the embedder failed (%s); searching by keyword", type(exc).__name__)
        found = await service.search(query, mode=rag.SearchMode.KEYWORD, limit=rag.rerank_depth(limit) if reranks else limit,
                                     filters=filters)
        fallback = True
    if not reranks:
        return Searched(list(found), keyword_fallback=fallback)
    reranked = await rag.rerank(query, found, limit=limit)
    if not reranked.applied:
        # Chat answers from fusion's order then; the agent's tools also tell the model (chat.agent.tools).
        logger.warning("retrieval: not re-ranked (%s)", reranked.reason)
    return Searched(list(reranked.hits), keyword_fallback=fallback, rerank=reranked)


# --- the chat's retrieval ------------------------------------------------------------------------


@dataclass(frozen=True)
class ScoredHit(rag.RAGHit):
    """A retrieved hit with the relevance floor of the model that scored it (``similarity_floor``)."""

    relevance_floor: float = rag.types.DEFAULT_RELEVANCE_FLOOR

    @property
    def calibrated_similarity(self) -> float | None:
        """``semantic_similarity`` on MiniLM's scale (``rag.types.calibrated_similarity``), what the
        offline model's thresholds were tuned on."""
        if self.semantic_similarity is None:
            return None
        return rag.types.calibrated_similarity(self.semantic_similarity, self.relevance_floor)


@dataclass(frozen=True)
class AttachedHit(ScoredHit):
    """A hit from the conversation's own files (its citation says ``file_id``)."""


def calibrated(hit: rag.RAGHit) -> float | None:
    """A hit's cosine to the question on MiniLM's scale (``ScoredHit``), else as its search gave it."""
    return hit.calibrated_similarity if isinstance(hit, ScoredHit) else hit.semantic_similarity


def similarities(hits: Sequence[rag.RAGHit]) -> dict[int, float]:
    """The hits' cosines to the question by passage number (from 1), those that have one (``calibrated``)."""
    return {n: value for n, hit in enumerate(hits, start=1) if (value := calibrated(hit)) is not None}


def _relevant(hits: Sequence[rag.RAGHit], floor: float, cls: type[ScoredHit] = ScoredHit) -> list[rag.RAGHit]:
    """The hits that count, as ``cls``: a keyword match, a passage the graph found (the entities on its
    path connect it to the question), or a semantic-only hit whose cosine reaches ``floor``. Semantic
    search always returns *something*, and unrelated passages make worse answers."""
    return [
        cls(**{f.name: getattr(h, f.name) for f in dataclasses.fields(rag.RAGHit)}, relevance_floor=floor)
        for h in hits if h.keyword_score is not None or h.graph_path or (h.semantic_similarity or 0.0) >= floor
    ]


def _graph_skipped(options: RetrievalOptions) -> GraphSearchDiagnostics | None:
    return {"requested": True, "used": False, "detail": GRAPH_NOT_KEPT} if options.graph else None


async def retrieve(
    *, tenant: Any, prompt: str, options: RetrievalOptions | None = None,
) -> tuple[list[rag.RAGHit], GraphSearchDiagnostics | None]:
    """The chunks relevant to ``prompt``, best first, at most ``QUARRY_CHAT_RETRIEVAL_TOP_K`` (plus those the
    graph placed and the second hop's), and the graph diagnostic when ``options.graph`` (None otherwise).

    Searched: the tenant's knowledge base, and with ``options.files`` the conversation's attached files
    (``FileScope``). Both lists are ordered together by Reciprocal Rank Fusion (k = 60, as within one
    search), each store keeping its own statistics. Each hit keeps the score its own store's search
    gave it (both searched with the same mode and fusion), never the merge's RRF score: an answer's
    citations then show one scale whichever store they come from, that of an answer from the
    knowledge base alone (a merged 1/61 = 0.0164 read as worse than 2.50 everywhere else).
    Raises ``RetrievalFailed`` when a store cannot be searched.
    """
    options = options or RetrievalOptions()
    files = options.files
    attached = await _retrieve_files(prompt=prompt, options=options) if files.searches_files else []
    if not files.searches_knowledge:
        return attached, _graph_skipped(options)
    known, diagnostic = await _retrieve_tenant(tenant=tenant, prompt=prompt, options=options)
    if not files.searches_files:
        return known, diagnostic
    by_key = {f"k{h.chunk.chunk_id}": h for h in known} | {f"f{h.chunk.chunk_id}": h for h in attached}
    fused = rrf([[f"k{h.chunk.chunk_id}" for h in known], [f"f{h.chunk.chunk_id}" for h in attached]])
    return with_graph_placed([by_key[key] for key, _, _ in fused], settings.QUARRY_CHAT_RETRIEVAL_TOP_K), diagnostic


async def _retrieve_files(*, prompt: str, options: RetrievalOptions) -> list[rag.RAGHit]:
    """The conversation's own passages for ``prompt`` (one file's with ``files.identifier``), as
    ``AttachedHit``; hybrid search fuses its legs as the knowledge base's does (no graph: files have none)."""
    assert options.files.store is not None
    service = rag.tenant_service(options.files.store)
    filters = {"file_id": options.files.identifier} if options.files.identifier else None
    try:
        found = await search(service, prompt, mode=search_mode(service), limit=settings.QUARRY_CHAT_RETRIEVAL_TOP_K,
                             options=dataclasses.replace(options, graph=False), filters=filters)
    except rag.NamespaceNotFound:
        return []  # the files were dropped meanwhile (the conversation expired or was deleted)
    except (rag.RAGError, DatabaseError, OSError) as exc:
        raise RetrievalFailed(type(exc).__name__) from exc
    return _relevant(found.hits, similarity_floor(service), AttachedHit)


async def _retrieve_tenant(
    *, tenant: Any, prompt: str, options: RetrievalOptions,
) -> tuple[list[rag.RAGHit], GraphSearchDiagnostics | None]:
    """The tenant's chunks relevant to ``prompt`` (see ``retrieve``): hybrid search when an embedder is
    configured (keyword search when it is not, or when it fails), with the graph's leg when asked for,
    the relevant hits (``_relevant``), then one second hop."""
    try:
        # A backend that cannot enforce the reader's access is refused here (ConfigurationError): retrieval
        # is then unavailable, never unfiltered.
        service = rag.tenant_service(tenant.slug, reader=options.reader)
    except rag.RAGError as exc:
        raise RetrievalFailed(type(exc).__name__) from exc
    mode = search_mode(service)
    try:
        found = await search(service, prompt, mode=mode, limit=settings.QUARRY_CHAT_RETRIEVAL_TOP_K, options=options)
    except (rag.RAGError, DatabaseError, OSError) as exc:
        raise RetrievalFailed(type(exc).__name__) from exc
    floor = similarity_floor(service)
    kept = _relevant(found.hits, floor)
    kept += await _next_hop(service, prompt=prompt, hits=kept, mode=mode, floor=floor, options=options)
    if not options.graph:
        return kept, None
    if found.graph is None:
        return kept, {"requested": True, "used": False, "detail": GRAPH_NOT_KEPT if not service.has_graph else GRAPH_UNAVAILABLE}
    return kept, graph_diagnostic(found.graph, kept)


async def _next_hop(
    service: rag.RAGService, *, prompt: str, hits: list[rag.RAGHit], mode: rag.SearchMode, floor: float, options: RetrievalOptions,
) -> list[rag.RAGHit]:
    """At most ``QUARRY_CHAT_RETRIEVAL_HOP_K`` more passages: those a search for what the best retrieved
    sentence names finds (``selection.bridge_query``), not already in ``hits``; none when that sentence
    names nothing new. One bounded hop, for every model: a multi-hop question ("the location where the
    26th Chess Olympiad occurred") names its second fact's entity only through its first passage.
    A failing second search costs the hop, never the answer."""
    limit = settings.QUARRY_CHAT_RETRIEVAL_HOP_K
    if not limit or not hits:
        return []
    numbered = [(n, hit.chunk.text) for n, hit in enumerate(hits, start=1)]
    titles = {n: hit.chunk.title for n, hit in enumerate(hits, start=1) if hit.chunk.title}
    query = bridge_query(prompt, numbered, titles=titles, similarity=similarities(hits) or None)  # MiniLM's scale
    if not query:
        return []
    have = {hit.chunk.chunk_id for hit in hits}
    try:
        # No graph leg, and no keyword fallback: a failing embedder has already been met by the first search.
        found = await service.search(query[:16384], mode=mode, limit=min(100, limit + len(hits)), **options.fusion_for(mode))
    except (rag.RAGError, DatabaseError, OSError) as exc:
        logger.warning("chat retrieval: the second hop failed (%s); answering from the first", type(exc).__name__)
        return []
    return _relevant([h for h in found if h.chunk.chunk_id not in have], floor)[:limit]


def graph_diagnostic(result: rag.GraphSearchResult, used: list[rag.RAGHit]) -> GraphSearchDiagnostics:
    """What the graph leg did, for the ``graph_search`` field of the citations and the response."""
    leg = result.leg
    if not leg.entities:
        return {"requested": True, "used": False, "detail": GRAPH_NOT_BUILT}
    return {
        "requested": True, "used": True,
        "detail": GRAPH_USED.format(found=len(leg.candidates), used=sum(1 for h in used if h.graph_path)),
        "graph_nodes": [{"name": n.name, "type": n.type} for n in leg.nodes],
        "graph_relations": [{"subject": r.subject, "predicate": r.predicate, "object": r.object, "chunk_id": r.chunk_id}
                            for r in leg.relations],
    }


# --- What a conversation may still show of what it cited (issue 34) -------------------------------

WITHHELD: dict[str, Any] = {"document_id": "", "chunk_id": "", "score": 0.0, "withheld": True}
# A withheld chunk id in a list of ids (an agent run's ``steps[].calls[].chunk_ids``): empty, as in WITHHELD.
WITHHELD_ID = ""


def unreadable_chunks(*, tenant_id: int, chunk_ids: Iterable[str], reader: rag.Reader | None) -> set[str]:
    """Those of ``chunk_ids`` that ``reader`` may not read now: in one query on the chunks' access column.
    None (who reads everything) may read all; a deleted chunk is in no one's way (nobody reads it, and its
    id is no secret of another's), so it is not among them."""
    wanted = list(dict.fromkeys(chunk_ids))
    if reader is None or not wanted:
        return set()
    found = (Chunk.objects.filter(tenant_id=tenant_id, chunk_id__in=wanted)
             .annotate(readable=ExpressionWrapper(Q(access__overlap=reader.principals), output_field=BooleanField()))
             .values_list("chunk_id", "readable"))
    return {chunk_id for chunk_id, readable in found if not readable}


def withhold_unreadable(transcript: Any, *, tenant_id: int, reader: rag.Reader | None) -> Any:
    """``transcript`` (``chat.selectors.Transcript``, or ``{"turns": [agent run detail]}``) as ``reader`` may see it
    now: every citation and agent source of a knowledge-base passage they may not read (access changed, they left
    the group or the tenant, or the request's token reads below its owner's role) replaced by ``WITHHELD``, and
    such a passage's id in an agent run's steps (``steps[].calls[].chunk_ids``) by ``WITHHELD_ID``. The
    conversation keeps its numbering, but neither the passage nor its document's id. ``reader``: the request's
    (``rag.reader_of(ctx)``), read for this request. Passages of the conversation's own files are the owner's
    and stay. Changed in place, and returned."""
    if reader is None:
        return transcript
    turns = transcript["turns"]
    cited = {c["chunk_id"] for turn in turns for key in ("citations", "sources") for c in turn.get(key) or []
             if isinstance(c, dict) and isinstance(c.get("chunk_id"), str) and "file_id" not in c}
    cited |= {chunk_id for turn in turns for step in turn.get("steps") or [] for call in step.get("calls") or []
              for chunk_id in call.get("chunk_ids") or [] if isinstance(chunk_id, str)}
    unreadable = unreadable_chunks(tenant_id=tenant_id, chunk_ids=cited, reader=reader)
    if not unreadable:
        return transcript

    def shown(item: Any) -> Any:
        if not isinstance(item, dict) or "file_id" in item or not isinstance(item.get("chunk_id"), str) or item["chunk_id"] not in unreadable:
            return item
        return {**WITHHELD, **({"source": item["source"]} if "source" in item else {})}

    for turn in turns:
        for key in ("citations", "sources"):
            if turn.get(key):
                turn[key] = [shown(c) for c in turn[key]]
        for step in turn.get("steps") or []:
            for call in step.get("calls") or []:
                call["chunk_ids"] = [WITHHELD_ID if isinstance(c, str) and c in unreadable else c for c in call.get("chunk_ids") or []]
    return transcript
