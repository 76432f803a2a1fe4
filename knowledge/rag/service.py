"""``RAGService``: the one entry point for ingesting, searching and fetching chunks.

The service validates every request before an embedder or backend sees it,
chunks and embeds documents (reusing the embeddings of unchanged chunks when the
backend can say which it holds), and re-checks every backend result, so a faulty
backend raises instead of leaking another namespace's data or breaking the
ordering contract.

Providers need only the seed's contracts (``knowledge.rag.types``): an embedder's
``embed(texts)``, a chunker's ``split(document)``, a backend's six methods. What
Quarry's own providers offer beyond that (``model_id``, ``kind=``, whole-document
writes with an audit trail, stored-vector reuse, re-ranking) is looked up and used
when present, never required.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Sequence
from types import TracebackType
from typing import Self, TypedDict, Unpack

from asgiref.sync import async_to_sync

from knowledge.rag import limits
from knowledge.rag.chunking import FixedSizeChunker
from knowledge.rag.checks import (
    check_documents,
    check_ids,
    check_trigger,
    document_store,
    is_sequence,
    plan_documents,
    readable,
    recheck_hits,
)
from knowledge.rag.fusion import FUSION_DEPTH
from knowledge.rag.scripts import reads, scripts_read_by
from knowledge.rag.errors import BackendContractError, ConfigurationError, EmbeddingModelChanged, RAGValidationError
from knowledge.rag.graph_types import Neighborhood, Picture, Triplet
from knowledge.rag.hooks import GraphReads
from knowledge.rag.prepared import PreparedIngest
from knowledge.rag.protocols import Chunker, Embedder, NamespaceResolver, RAGBackend, Reranking, SyncDocumentStore, embedder_model_id
from knowledge.rag.types import (
    DEFAULT_FUSION_WEIGHT,
    Filters,
    Fusion,
    GraphSearchResult,
    RAGChunk,
    RAGDocument,
    RAGHit,
    RAGQuery,
    Reader,
    ResolvedNamespace,
    SearchMode,
    Stored,
    Trigger,
    Vector,
    check_fusion_weight,
    check_identifier,
    check_limit,
    check_text,
)
from knowledge.rag.vectors import ServiceEmbedding

Namespace = str | Callable[[], str]

BACKEND_METHODS = ("start", "close", "replace", "delete", "fetch", "search")

# Writes through a backend of the seed's contract alone (no ``replace_documents``) have no
# audit table of their own: they are recorded here, without their content.
audit_log = logging.getLogger("knowledge.rag.audit")


class IngestOptions(TypedDict, total=False):
    """``ingest``'s keyword options (see ``RAGService.ingest_documents``)."""

    trigger: Trigger
    actor: str | None
    on_progress: Callable[[float], None] | None
    on_counts: Callable[[int, int], None] | None


class RAGService(ServiceEmbedding):
    """Ingest, search, fetch and delete chunks in one namespace.

    ``namespace`` is a fixed string or a zero-argument callable resolved on every
    call (e.g. the current tenant). A backend that can resolve a namespace (its tenant, model and
    size) is asked once per service and namespace (``resolution``), and every query carries the answer
    down (``RAGQuery.resolved``): make one service per request. Use as ``async with service:`` or call
    ``start()``/``close()``.
    """

    def __init__(
        self,
        backend: RAGBackend,
        *,
        embedder: Embedder | None = None,
        chunker: Chunker | None = None,
        namespace: Namespace,
        rrf_k: int = 60,
        rerank: bool = False,
        fusion: Fusion | str = Fusion.RRF,
        fusion_weight: float = DEFAULT_FUSION_WEIGHT,
        embedder_for_model: Callable[[str], Embedder | None] | None = None,
        graph_reads: GraphReads | None = None,
        reader: Reader | None = None,
    ) -> None:
        """``reader``: whose reads these are (issue 34). With one, search, fetch and the graph see only the
        chunks the reader may read, filtered by the backend in SQL; a backend that cannot filter by
        reader (no ``supports_readers``) is refused (``ConfigurationError``) rather than read unfiltered.
        None: trusted code (workers, commands, the write door), which sees every chunk.

        ``graph_reads``: the knowledge graph's reads (``knowledge.rag.hooks.GraphReads``) the graph
        methods delegate to; None, or reads that do not serve ``backend``: no graph (``has_graph``).

        ``embedder_for_model``, when given, makes the service follow the namespace's model: before
        each ingest and search it asks the backend which model the namespace's vectors are in
        (``resolution``: the backend's ``resolve_namespace``, an optional capability) and embeds with
        ``embedder_for_model(model id)``; ``embedder`` then serves a namespace without vectors."""
        missing = [name for name in BACKEND_METHODS if not callable(getattr(backend, name, None))]
        if missing:
            raise ConfigurationError(f"{type(backend).__name__} is not a RAGBackend: it lacks {', '.join(missing)}")
        if isinstance(embedder, str):
            raise ConfigurationError(
                "the embedder is a string: Quarry's PostgreSQL storage takes no DSN, it is Django's database "
                "(rag.postgres(embedder=..., namespace=..., using='<DATABASES alias>'))"
            )
        if embedder is not None and not callable(getattr(embedder, "embed", None)):
            raise ConfigurationError(f"{type(embedder).__name__} is not an Embedder: it has no async embed(texts)")
        if chunker is not None and not callable(getattr(chunker, "split", None)) and not callable(getattr(chunker, "spans", None)):
            raise ConfigurationError(f"{type(chunker).__name__} is not a Chunker: it has no split(document)")
        if reader is not None and not isinstance(reader, Reader):
            raise ConfigurationError(f"reader must be a knowledge.rag.Reader or None, got {type(reader).__name__}")
        if reader is not None and getattr(backend, "supports_readers", False) is not True:
            raise ConfigurationError(f"{type(backend).__name__} cannot filter by reader (no supports_readers): "
                                     "a service with a reader needs a backend that enforces access lists")
        self.reader = reader
        self.backend = backend
        self.embedder = embedder
        self.chunker: Chunker = chunker or FixedSizeChunker()
        self._namespace = namespace
        self._resolved: ResolvedNamespace | None = None  # see resolution(); a write through this service forgets it
        self.rrf_k = rrf_k
        self.rerank = rerank
        # Hybrid search's fusion when a search names none (Fusion; RAGQuery checks them again per query).
        self.fusion = Fusion.parse(fusion)
        self.fusion_weight = check_fusion_weight(fusion_weight)
        self._embedder_for_model = embedder_for_model
        self.graph_reads = graph_reads
        self._default_embedder = embedder
        self._namespace_model: str | None = None  # as last looked up, when following it
        self._started = False
        # Learned from the first vectors of an embedder that declares no dimension: every
        # later vector must match it, and it completes the embedder's derived model id.
        self._dimension_seen: int | None = None
        self._kind_for: tuple[object, bool] | None = None

    # --- lifecycle -------------------------------------------------------------

    async def start(self) -> None:
        if not self._started:
            await self.backend.start()
            self._started = True

    async def close(self) -> None:
        if self._started:
            self._started = False
            await self.backend.close()

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        await self.close()

    @property
    def namespace(self) -> str:
        """The namespace of this operation (a callable is called anew), validated."""
        return check_identifier("namespace", self._resolve_namespace(), limits.NAMESPACE_RE, "namespace")

    def _resolve_namespace(self) -> object:
        return self._namespace() if callable(self._namespace) else self._namespace

    async def resolution(self, *, refresh: bool = False) -> ResolvedNamespace | None:
        """The namespace's tenant, model and size, asked of the backend once per service and namespace
        (``resolve_namespace``, an optional capability), so a search or an ingest finds its tenant once
        and hands it down; ``refresh`` asks again. None when the backend cannot say, or when no tenant
        has the namespace (yet)."""
        namespace = self.namespace
        if self._resolved is not None and self._resolved.slug == namespace and not refresh:
            return self._resolved
        if isinstance(self.backend, NamespaceResolver):
            self._resolved = await self.backend.resolve_namespace(namespace)
        return self._resolved if self._resolved is not None and self._resolved.slug == namespace else None

    async def follow_namespace_model(self, *, refresh: bool = False) -> None:
        """Embed with the namespace's model from now on (see ``embedder_for_model``; searches and ingests
        call it themselves: call it to know ``embedder`` before either). The model is the namespace's as
        resolved (``resolution``); ``refresh`` asks the backend again (an ingest that raced a model switch)."""
        if self._embedder_for_model is None or not isinstance(self.backend, NamespaceResolver):
            return
        resolved = await self.resolution(refresh=refresh)
        model = resolved.model if resolved is not None else ""
        self._namespace_model = model
        current = None if self.embedder is None else embedder_model_id(self.embedder, self._expected_dimension())
        if model and model == current:
            return  # already on it (perhaps wrapped, e.g. with retries: keep the wrapper)
        chosen = self._embedder_for_model(model) if model else self._default_embedder
        if chosen is not self.embedder:
            self.embedder = chosen
            self._dimension_seen = None
            self._kind_for = None

    def _no_embedder(self, what: str) -> str:
        if self._namespace_model:
            return (f"{what} needs the namespace's embedding model {self._namespace_model}, which is not configured here "
                    "(keyword search works; manage.py reembed moves the tenant to a configured model)")
        return f"{what} needs an embedder; this service has none (keyword search works)"

    # --- writes ----------------------------------------------------------------

    async def ingest(self, documents: Sequence[RAGDocument], **options: Unpack[IngestOptions]) -> int:
        """Replace each document's chunks completely; return the number of chunks generated and stored
        (the seed's contract). The options (``trigger``, ``actor``, ``on_progress``, ``on_counts``) are
        ``ingest_documents``'s, which also says what the write left for the background."""
        return (await self.ingest_documents(documents, **options)).chunks

    async def ingest_documents(
        self,
        documents: Sequence[RAGDocument],
        *,
        trigger: Trigger = "user",
        actor: str | None = None,
        on_progress: Callable[[float], None] | None = None,
        on_counts: Callable[[int, int], None] | None = None,
    ) -> Stored:
        """``ingest``, returning what the write stored and left for the background (``Stored``: chunks
        awaiting the indexer, chunks extracted into the graph). Nothing is queued here: the caller
        (``knowledge.services``) queues that work once the write commits.

        ``prepare_ingest`` then the write (``write_ingest``'s, awaited): see them for the checks, the
        callbacks and the embedding cache. If anything fails, nothing is written and previous chunks
        stay as they were. A caller that must write in a transaction of its own (a lease check, a
        status change beside the chunk swap) calls the two steps itself.
        """
        plan = await self.prepare_ingest(documents, trigger=trigger, actor=actor, on_progress=on_progress, on_counts=on_counts)
        try:
            return await self._write(plan)
        except EmbeddingModelChanged as changed:
            return await self._write(await self.embed_again(plan, changed))

    async def prepare_ingest(
        self,
        documents: Sequence[RAGDocument],
        *,
        trigger: Trigger = "user",
        actor: str | None = None,
        on_progress: Callable[[float], None] | None = None,
        on_counts: Callable[[int, int], None] | None = None,
    ) -> PreparedIngest:
        """Validate, chunk and embed ``documents`` for a write (``write_ingest``); writes no chunk.

        Checks run in the order of the seed's list of bounds (documents, characters,
        characters per chunk, chunks per request, identifiers), then everything else
        (chunker output, duplicate ids, trigger). All documents of one call are
        validated, chunked and embedded here, before anything is written.

        ``on_progress``, when given, is called with the fraction (0..1) of the
        texts to embed that are done, after every embedding batch, and with 1.0
        at the end when nothing needed embedding. It runs on the event
        loop, so it must not block; an exception it raises aborts the ingest
        before anything is written (a worker's cancellation point). ``on_counts(done,
        total)``, when given, is called alike with the numbers of distinct texts to embed
        (vectors re-used from stored chunks or an interrupted run count as done).

        A backend with ``cache_embeddings`` receives every batch's vectors as soon as they
        are computed, and ``cached_embeddings`` gives them back to a later attempt: work
        interrupted half-way (here, or between here and the write) resumes instead of starting over.
        """
        docs = check_documents(documents)
        planned = plan_documents(self.chunker, docs)
        namespace = self.namespace
        ids = [d.id for d in docs]
        if len(set(ids)) != len(ids):
            dupes = sorted({i for i in ids if ids.count(i) > 1})[:5]
            raise RAGValidationError("documents", f"document ids must be unique ids within one request; repeated: {', '.join(dupes)}")
        check_trigger(trigger)
        if not self._started:
            await self.start()
        await self.follow_namespace_model()
        vectors, model_id = await self._document_vectors(namespace, planned, on_progress, on_counts)
        return PreparedIngest(namespace, tuple((doc, tuple(pieces)) for doc, pieces in planned), vectors, model_id,
                              self._namespace_model, trigger, actor, on_progress, on_counts)

    async def embed_again(self, plan: PreparedIngest, changed: EmbeddingModelChanged) -> PreparedIngest:
        """``plan`` embedded anew with the namespace's model as it now is, after its write raised ``changed``
        (``manage.py reembed`` switched the namespace's model while ``plan`` was embedded: its vectors must
        not land beside the new model's). Its vectors of the new model may already be staged (the switch
        computes them), so this costs little. Raises ``changed`` for a service that does not follow the
        namespace's model (no ``embedder_for_model``): it has no other model to embed with."""
        if self._embedder_for_model is None:
            raise changed
        await self.follow_namespace_model(refresh=True)
        planned = [(doc, list(pieces)) for doc, pieces in plan.planned]
        vectors, model_id = await self._document_vectors(plan.namespace, planned, plan.on_progress, plan.on_counts)
        return dataclasses.replace(plan, vectors=vectors, model_id=model_id, namespace_model=self._namespace_model)

    def write_ingest(self, plan: PreparedIngest) -> Stored:
        """Write a prepared ingest (``prepare_ingest``): each document's chunks replaced completely, in one
        transaction; returns what it stored and left for the background (the caller queues that on commit).

        Synchronous, for a caller that owns the transaction: a backend that writes through Django's
        connection (``SyncDocumentStore``: ``PostgresBackend``) writes on the calling thread, so its
        statements join the caller's ``transaction.atomic()`` on the backend's database, and a lease check
        before and a status change after commit or roll back with the chunks. Call it from a thread
        without a running event loop. Another backend is written through its async methods (it is not
        on Django's connection: no caller's transaction covers it).

        Raises ``EmbeddingModelChanged`` when the namespace moved to another model since ``plan`` was
        embedded (nothing written; the caller's transaction should roll back): ``embed_again``, then write.
        """
        store = self.backend if isinstance(self.backend, SyncDocumentStore) else None
        if store is None:
            return async_to_sync(self._write)(plan)
        stored = store.replace_documents_sync(plan.namespace, plan.documents(), actor=plan.actor, trigger=plan.trigger)
        return self._written(plan, stored)

    async def _write(self, plan: PreparedIngest) -> Stored:
        """``write_ingest`` through the backend's async methods (``DocumentStore``, else the seed's ``replace``)."""
        if not self._started:
            await self.start()
        store = document_store(self.backend)
        if store is not None:
            stored = await store.replace_documents(plan.namespace, plan.documents(), actor=plan.actor, trigger=plan.trigger)
            return self._written(plan, stored)
        ids = tuple(doc.id for doc, _ in plan.planned)
        await self.backend.replace(plan.namespace, ids, plan.chunks())
        audit_log.info("ingest namespace=%s trigger=%s actor=%s documents=%s chunks=%s",
                       plan.namespace, plan.trigger, plan.actor, list(ids), plan.total_chunks)
        return Stored(plan.total_chunks)  # a backend of the seed's contract alone indexes as it stores

    def _written(self, plan: PreparedIngest, stored: object) -> Stored:
        if not isinstance(stored, Stored) or stored.chunks != plan.total_chunks:
            raise BackendContractError(f"backend stored {stored!r}, expected Stored with {plan.total_chunks} chunks")
        self._resolved = None  # the namespace's size (and perhaps its model) just changed
        return stored

    async def delete(self, document_ids: Sequence[str], *, trigger: Trigger = "user", actor: str | None = None) -> int | None:
        """Delete documents and all their chunks in this namespace.

        Returns how many of the documents existed when the backend reports it (Quarry's
        backends do, through ``delete_documents``); None for a backend of the seed's
        contract alone, whose ``delete`` reports nothing.
        """
        ids = check_ids(document_ids, "document_ids", limits.DOCUMENT_ID_RE, "document id", limits.MAX_DOCUMENTS_PER_INGEST)
        namespace = self.namespace
        check_trigger(trigger)
        if not self._started:
            await self.start()
        store = document_store(self.backend)
        self._resolved = None  # the namespace's size changes
        if store is not None:
            return await store.delete_documents(namespace, ids, actor=actor, trigger=trigger)
        await self.backend.delete(namespace, tuple(ids))
        audit_log.info("delete namespace=%s trigger=%s actor=%s documents=%s", namespace, trigger, actor, ids)
        return None

    # --- reads -----------------------------------------------------------------

    async def search(
        self,
        text: str,
        mode: SearchMode | str = SearchMode.HYBRID,
        limit: int = 8,
        filters: Filters | None = None,
        min_score: float | None = None,
        *,
        rrf_k: int | None = None,
        rerank: bool | None = None,
        graph: bool = False,
        fusion: Fusion | str | None = None,
        fusion_weight: float | None = None,
    ) -> tuple[RAGHit, ...]:
        """Ranked hits, best first, at most ``limit``, all with ``score >= min_score``.

        ``fusion`` / ``fusion_weight`` choose how hybrid mode merges its legs (``Fusion``;
        None: the service's own); other modes ignore them.

        ``rerank`` (cosine re-ordering of the fused candidates) reaches the backend only
        when it declares ``supports_rerank``; other backends rank as they do. ``graph``:
        hybrid search with the knowledge graph's leg (see ``graph_search``).

        Cosines count only where the embedder reads the text (``knowledge.rag.scripts``): a query
        in a script it does not read makes hybrid search keyword search and semantic search empty;
        a hit whose text it does not read loses ``semantic_similarity``, and is left out when only
        its cosine found it.
        """
        chosen_fusion = self.fusion if fusion is None else Fusion.parse(fusion)
        chosen_weight = self.fusion_weight if fusion_weight is None else check_fusion_weight(fusion_weight)
        if graph:
            if SearchMode.parse(mode) is not SearchMode.HYBRID:
                raise RAGValidationError("graph_search", f"graph search joins hybrid search; it cannot be used with mode {SearchMode.parse(mode).value}")
            return tuple((await self.graph_search(text, limit=limit, filters=filters, min_score=min_score, rrf_k=rrf_k,
                                                  fusion=chosen_fusion, fusion_weight=chosen_weight)).hits)
        # Validate everything (as a keyword query, in the seed's order: the namespace is an
        # identifier, checked after limit, text and filters) before the embedder sees the text.
        probe = RAGQuery(
            text, self._resolve_namespace(), mode=SearchMode.KEYWORD, limit=limit, filters=filters or {}, min_score=min_score,
            rrf_k=self.rrf_k if rrf_k is None else rrf_k,
        )
        namespace = probe.namespace
        mode = SearchMode.parse(mode)
        resolved = await self.resolution()  # once: the model to embed with and the tenant the backend searches
        vector: Vector | None = None
        model_id: str | None = None
        if mode is not SearchMode.KEYWORD:
            await self.follow_namespace_model()
            if self.embedder is None:
                raise ConfigurationError(self._no_embedder(f"{mode.value} search"))
            if reads(self.embedder, text):
                vector = (await self._embed_checked([text], kind="query"))[0]
                model_id = embedder_model_id(self.embedder, len(vector))
            elif mode is SearchMode.SEMANTIC:
                return ()  # the model cannot read the query (knowledge.rag.scripts): every cosine would be noise
            else:
                mode = SearchMode.KEYWORD  # likewise: hybrid search is its keyword leg alone
        wants_rerank = self.rerank if rerank is None else bool(rerank)
        query = RAGQuery(
            probe.text, namespace, mode=mode, limit=probe.limit, filters=probe.filters, min_score=probe.min_score,
            vector=vector, rrf_k=probe.rrf_k, rerank=wants_rerank and isinstance(self.backend, Reranking) and self.backend.supports_rerank is True,
            embedding_model=model_id, fusion=chosen_fusion, fusion_weight=chosen_weight, resolved=resolved, reader=self.reader,
        )
        if not self._started:
            await self.start()
        if vector is None or scripts_read_by(self.embedder) is None:
            return recheck_hits(query, await self.backend.search(query))
        # A deeper page has the same order, so read one deep enough to make up for the hits readable
        # leaves out: semantic search ranks by cosine alone, and hybrid search fuses its legs' top
        # FUSION_DEPTH whatever the page's size up to that depth.
        cap = limits.MAX_LIMIT if mode is SearchMode.SEMANTIC else max(query.limit, FUSION_DEPTH)
        deeper = dataclasses.replace(query, limit=min(cap, 2 * query.limit + 8))
        return readable(recheck_hits(deeper, await self.backend.search(deeper)), self.embedder)[: query.limit]

    # --- the knowledge graph (``graph_reads``, over the backend) ---------------------------------

    @property
    def has_graph(self) -> bool:
        """Whether the graph's reads serve the backend (the PostgreSQL backend keeps a graph; the memory one does not)."""
        return self.graph_reads is not None and self.graph_reads.serves(self.backend)

    def _graph_reads(self) -> GraphReads:
        if self.graph_reads is None or not self.has_graph:
            raise ConfigurationError(f"graph search needs a backend with a knowledge graph; {type(self.backend).__name__} has none")
        return self.graph_reads

    async def _query(self, text: str, *, limit: int, filters: Filters | None, min_score: float | None = None,
                     rrf_k: int | None = None, graph: bool = False, fusion: Fusion = Fusion.RRF,
                     fusion_weight: float = DEFAULT_FUSION_WEIGHT) -> RAGQuery:
        """A validated hybrid query (keyword when there is no embedder), its text embedded."""
        namespace = self.namespace
        probe = RAGQuery(text, namespace, mode=SearchMode.KEYWORD, limit=limit, filters=filters or {}, min_score=min_score,
                         rrf_k=self.rrf_k if rrf_k is None else rrf_k)
        await self.follow_namespace_model()
        resolved = await self.resolution()
        vector = (await self._embed_checked([text], kind="query"))[0] if self.embedder is not None else None
        return RAGQuery(
            probe.text, namespace, mode=SearchMode.HYBRID if vector is not None else SearchMode.KEYWORD, limit=probe.limit,
            filters=probe.filters, min_score=probe.min_score, vector=vector, rrf_k=probe.rrf_k,
            embedding_model=embedder_model_id(self.embedder, len(vector)) if vector is not None else None,
            graph=graph and vector is not None, fusion=fusion, fusion_weight=fusion_weight, resolved=resolved, reader=self.reader,
        )

    async def graph_search(
        self, text: str, limit: int = 8, filters: Filters | None = None, min_score: float | None = None, *, rrf_k: int | None = None,
        fusion: Fusion | str | None = None, fusion_weight: float | None = None,
    ) -> GraphSearchResult:
        """Hybrid search whose fusion adds the knowledge graph's ranked chunks as a third list.

        Seeds are the top hybrid hits and the entities the query names; the graph list's best
        take places below hybrid's first hits (``knowledge.graph.search.fuse``), and hits the
        graph leg placed carry ``graph_score`` and ``graph_path`` (the entity names that led to them).
        ``fusion`` / ``fusion_weight``: how the hybrid list itself is fused (None: the service's own);
        every hit the graph did not place keeps that list's order and score.
        The result also says what the leg went through (``leg.nodes``, ``leg.relations``).
        Needs an embedder (hybrid search) and a backend with a graph (``ConfigurationError`` otherwise).
        """
        reads = self._graph_reads()
        if self.embedder is None:
            raise ConfigurationError("graph search joins hybrid search, which needs an embedder; this service has none")
        query = await self._query(text, limit=limit, filters=filters, min_score=min_score, rrf_k=rrf_k, graph=True,
                                  fusion=self.fusion if fusion is None else Fusion.parse(fusion),
                                  fusion_weight=self.fusion_weight if fusion_weight is None else check_fusion_weight(fusion_weight))
        if not self._started:
            await self.start()
        result = await reads.search(self.backend, query)
        if not isinstance(result, GraphSearchResult):
            raise BackendContractError(f"graph search returned {type(result).__name__}, expected GraphSearchResult")
        recheck_hits(query, result.hits)
        return result

    async def graph_triplets(self, text: str, limit: int = 10, filters: Filters | None = None) -> list[Triplet]:
        """Relations the knowledge graph holds about ``text``'s entities and its top hits', best first,
        each with the chunk that states it (``Triplet.chunk_id``)."""
        reads = self._graph_reads()
        query = await self._query(text, limit=limit, filters=filters)
        if not self._started:
            await self.start()
        return list(await reads.triplets(self.backend, query))

    async def graph_neighbors(self, entity: str, limit: int = 10) -> Neighborhood:
        """The entity named ``entity`` (exactly, else the most mentioned whose name starts so), the chunks
        about it, and its neighbours with the chunks that link them."""
        reads = self._graph_reads()
        name = check_text("entity", entity, limits.MAX_QUERY_CHARS)
        check_limit(limit)
        if not self._started:
            await self.start()
        return await reads.neighbors(self.backend, self.namespace, name, limit=limit, reader=self.reader)

    async def graph_picture(self, chunk_ids: Sequence[str], *, expand: bool = False) -> Picture:
        """How these chunks connect through the entities they mention (``expand``: with other documents' chunks)."""
        reads = self._graph_reads()
        ids = check_ids(chunk_ids, "ids", limits.CHUNK_ID_RE, limits.CHUNK_ID_WHAT, limits.MAX_LIMIT)
        if not self._started:
            await self.start()
        return await reads.picture(self.backend, self.namespace, ids, expand=expand, reader=self.reader)

    async def fetch(self, chunk_ids: Sequence[str]) -> tuple[RAGChunk, ...]:
        """The chunks with these ids, in the requested order; unknown ids are omitted, and so are the
        ids of chunks the service's reader may not read (exactly as unknown ones)."""
        ids = check_ids(chunk_ids, "ids", limits.CHUNK_ID_RE, limits.CHUNK_ID_WHAT, limits.MAX_FETCH_IDS)
        namespace = self.namespace
        if not self._started:
            await self.start()
        if self.reader is not None:
            chunks = await self.backend.fetch(namespace, tuple(dict.fromkeys(ids)), reader=self.reader)  # type: ignore[call-arg]
        else:
            chunks = await self.backend.fetch(namespace, tuple(dict.fromkeys(ids)))
        if not is_sequence(chunks):
            raise BackendContractError(f"backend fetch returned {type(chunks).__name__}, expected a sequence of RAGChunk")
        wanted = set(ids)
        by_id: dict[str, RAGChunk] = {}
        for chunk in chunks:
            if not isinstance(chunk, RAGChunk):
                raise BackendContractError(f"backend returned {type(chunk).__name__} from fetch, expected RAGChunk")
            if chunk.namespace != namespace:
                raise BackendContractError(f"backend returned chunk {chunk.chunk_id} of another namespace from fetch")
            if chunk.chunk_id not in wanted:
                raise BackendContractError(f"backend returned chunk {chunk.chunk_id} that was not requested")
            by_id[chunk.chunk_id] = chunk
        return tuple(by_id[i] for i in dict.fromkeys(ids) if i in by_id)
